//! The node agent end to end on one machine: the real `gputopo` binary and the real nvml-wrapper
//! code path, loading the workspace's fake libnvidia-ml.so (crates/fake-nvml) driven by the
//! fixtures in tests/fixtures/nvml/.
//!
//! The fake is a dev-dependency, so cargo builds it next to this test (target/*/deps); if it is
//! not there (e.g. a test binary copied elsewhere), `FAKE_NVML_LIB` names it, and as a last resort
//! the test builds it with `cargo build -p fake-nvml`.

mod common;

use common::{Node, fixture, s};
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;

#[test]
fn dgx1v_reports_exactly_the_planted_faults() {
    let n = Node::new("dgx1v", "dgx1v-faults", "", None);
    let (rc, gpus) = n.health();
    assert_eq!(gpus.len(), 8);
    for (i, status, reasons, _) in &gpus {
        match i {
            5 => {
                assert_eq!(status, "faulty");
                assert_eq!(reasons, &s(&["ecc_uncorrectable", "retired_pages_pending"]));
            }
            6 => {
                assert_eq!(status, "faulty");
                assert_eq!(reasons, &s(&["gpu_lost"]));
            }
            _ => assert_eq!((status.as_str(), reasons.len()), ("ok", 0), "GPU {i}"),
        }
    }
    assert_eq!(rc, 4, "exit code 4: some GPU faulty, all read");
    // The human table says the same.
    let (_, table, _, _) = n.run(&["health"]);
    assert!(
        table
            .lines()
            .nth(6)
            .is_some_and(|l| l.starts_with("5 ") && l.contains("faulty"))
    );
}

#[test]
fn nvswitch_board_is_nv18_everywhere_with_correct_gres_links() {
    let n = Node::new("nvswitch", "nvswitch8", "", None);
    let (rc, out, _, _) = n.run(&["topology", "--format", "matrix"]);
    assert_eq!(out.matches("NV18").count(), 8 * 7, "{out}");
    assert_eq!(rc, 4);
    let (_, gres, _, _) = n.run(&["gres-conf", "--node", "node1"]);
    let lines: Vec<&str> = gres.lines().collect();
    assert_eq!(lines.len(), 8);
    assert!(lines[0].starts_with(
        "NodeName=node1 Name=gpu Type=nvidia_h100_80gb_hbm3 File=/dev/nvidia0 Cores=0-15 "
    ));
    assert!(
        lines[0].ends_with("Links=-1,18,18,18,18,18,18,18"),
        "{}",
        lines[0]
    );
    assert!(lines[7].ends_with("Links=18,18,18,18,18,18,18,-1"));
    let (_, gpus) = n.health();
    let bad: Vec<_> = gpus
        .iter()
        .filter(|g| g.1 != "ok")
        .map(|g| (g.0, g.1.as_str(), g.2.clone()))
        .collect();
    assert_eq!(
        bad,
        vec![
            (3, "faulty", s(&["xid_79"])),
            (4, "degraded", s(&["row_remap_pending"])),
            (7, "degraded", s(&["ecc_correctable"])),
        ]
    );
    // The published JSON carries the NV18 matrix for the select plugin.
    let (rc, extra, _, _) = n.run(&["publish", "--dry-run", "--current-extra", ""]);
    assert_eq!(rc, 0);
    let h = gputopo_core::health::parse_extra(extra.trim())
        .expect("valid")
        .expect("ours");
    let links = h.links.expect("links");
    assert_eq!(
        (links.get(0, 7), links.get(3, 4), links.get(2, 2)),
        (Some(18), Some(18), Some(0))
    );
}

#[test]
fn dgx1v_topology_matches_the_cube_mesh_where_known() {
    let n = Node::new("dgx1v-topo", "dgx1v-faults", "", None);
    let (rc, out, err, _) = n.run(&["topology"]);
    assert_eq!(rc, 4);
    assert!(err.contains("incomplete"), "GPU 6 is lost: {err}");
    let t = gputopo_core::topology::fixture::parse(&out).expect("fixture output parses");
    let want = gputopo_core::topology::fixture::parse(include_str!(
        "../../../contrib/topologies/dgx1v.topo"
    ))
    .expect("dgx1v");
    for a in 0..8 {
        for b in 0..8 {
            if a != b && a != 6 && b != 6 {
                assert_eq!(t.link(a, b), want.link(a, b), "pair {a},{b}");
            }
        }
    }
}

#[test]
fn pcie_box_maps_slurm_order_to_nvml_devices_by_minor() {
    // NVML index i has minor 7-i. Without gres.conf the order is NVML's (Slurm's
    // AutoDetect=nvml order): GPU 0 is bus 1A, /dev/nvidia7.
    let n = Node::new("pcie", "pcie8", "", None);
    let (rc, gpus) = n.health();
    assert_eq!(rc, 0);
    assert!(gpus.iter().all(|g| g.1 == "ok"));
    assert_eq!(gpus[0].3.as_deref(), Some("00000000:1A:00.0"));
    assert_eq!(gpus[7].3.as_deref(), Some("00000000:BE:00.0"));
    // gres-conf writes that order with -1 at the NVML index, which is what Slurm's merge with
    // NVML (or fake_gpus.conf) compares Links= against: line 2 is /dev/nvidia5.
    let (_, gres, _, _) = n.run(&["gres-conf", "--type", "l40s"]);
    let lines: Vec<&str> = gres.lines().collect();
    assert_eq!(lines.len(), 8, "{gres}");
    assert!(
        lines[2]
            .starts_with("Name=gpu Type=l40s File=/dev/nvidia5 Cores=0-15 Links=0,0,-1,0,0,0,0,0"),
        "{gres}"
    );
    // With a gres.conf, its File= order wins (here: /dev/nvidia3 first).
    let n = Node::new(
        "pcie-gres",
        "pcie8",
        "",
        Some(
            "NodeName=other Name=gpu File=/dev/nvidia[0-7]\nNodeName=node[1-2] Name=gpu File=/dev/nvidia3\nNodeName=node1 Name=gpu File=/dev/nvidia[0-2,4-7]\n",
        ),
    );
    let (_, gpus) = n.health();
    assert_eq!(
        gpus[0].3.as_deref(),
        Some("00000000:9C:00.0"),
        "minor 3 = NVML 4"
    );
    assert_eq!(
        gpus[1].3.as_deref(),
        Some("00000000:BE:00.0"),
        "minor 0 = NVML 7"
    );
    // fake_gpus.conf next to gres.conf: Slurm merges and sorts by Links= (NVML order), so
    // /dev/nvidia5 is Slurm's GPU 2 although gres.conf lists it sixth.
    let n = Node::new(
        "pcie-fake",
        "pcie8",
        "",
        Some("Name=gpu File=/dev/nvidia[0-7]\n"),
    );
    let fake: String = (0..8)
        .map(|i| {
            let links: Vec<String> = (0..8)
                .map(|j| if i == j { "-1".into() } else { "0".to_string() })
                .collect();
            format!("l40s|32|0-31|{}|/dev/nvidia{}\n", links.join(","), 7 - i)
        })
        .collect();
    std::fs::write(n.dir.join("fake_gpus.conf"), fake).expect("fake_gpus.conf");
    let (_, gpus) = n.health();
    assert_eq!(
        gpus[2].3.as_deref(),
        Some("00000000:3D:00.0"),
        "nvidia5 = NVML 2"
    );
    // A GPU Slurm cannot identify: no publishing, exit 7, and the reason.
    let n = Node::new("pcie-count", "pcie8", "", Some("Name=gpu Count=8\n"));
    let (rc, out, err, _) = n.run(&["publish", "--dry-run", "--current-extra", ""]);
    assert_eq!(rc, 7, "{out}{err}");
    assert!(out.is_empty(), "{out}");
    assert!(err.contains("names no device minor"), "{err}");
}

#[test]
fn no_nvml_library_is_unknown_not_a_crash() {
    let mut n = Node::new(
        "nolib",
        "no-nvml",
        "",
        Some("Name=gpu File=/dev/nvidia[0-1]\n"),
    );
    n.lib = Some(PathBuf::from("/nonexistent/libnvidia-ml.so.1"));
    let (rc, gpus) = n.health();
    assert_eq!(rc, 2);
    assert_eq!(gpus.len(), 2);
    assert!(
        gpus.iter()
            .all(|g| g.1 == "unknown" && g.2 == s(&["nvml_unavailable"]))
    );
    let (rc, extra, _, _) = n.run(&["publish", "--dry-run", "--current-extra", "{\"rack\":7}"]);
    assert_eq!(rc, 0);
    // The first record names the GPUs that are not ok in the node's history (times vary).
    let (extra, hist) = extra
        .trim()
        .split_once(r#","gputopo_hist":"#)
        .expect("a history");
    assert_eq!(
        hist.matches(r#""s":"unknown","src":"agent""#).count(),
        2,
        "{hist}"
    );
    let extra = format!(
        "{extra},{}",
        hist.split_once("],").expect("after the history").1
    );
    // The publish time ("t") is the only field that varies.
    let (head, tail) = extra.split_once(r#","t":"#).expect("a publish time");
    let tail = tail.trim_start_matches(|c: char| c.is_ascii_digit());
    assert_eq!(
        format!("{head}{tail}"),
        r#"{"gpu_ok":0,"gpu_unknown":"0-1","gputopo":{"v":1,"gpus":[{"i":0,"s":"unknown","r":["nvml_unavailable"],"m":0},{"i":1,"s":"unknown","r":["nvml_unavailable"],"m":1}],"e":["nvml_unavailable"]},"rack":7}"#
    );
    let (rc, _, _, _) = n.run(&["topology"]);
    assert_eq!(rc, 2);
}

#[test]
fn driver_not_loaded_is_reported() {
    let n = Node::new("nodriver", "driver-not-loaded", "", None);
    let (rc, out, err, _) = n.run(&["health"]);
    assert_eq!(rc, 2);
    assert!(
        out.contains("node: driver_not_loaded") && err.contains("driver"),
        "{out} {err}"
    );
}

#[test]
fn a_hanging_call_times_out_and_a_gpu_lost_mid_query_is_reported() {
    let n = Node::new(
        "flaky",
        "flaky",
        "NvmlTimeoutMs=1500\nXidWaitMs=100\n",
        None,
    );
    let (rc, out, err, took) = n.run(&["health", "--json"]);
    assert!(
        took < Duration::from_secs(8),
        "took {took:?}: the deadline must fire"
    );
    assert_eq!(rc, 3, "{out} {err}");
    let (_, gpus) = n.health();
    assert_eq!(gpus[0].1, "ok");
    assert_eq!(
        (gpus[1].1.as_str(), gpus[1].2.clone()),
        ("faulty", s(&["gpu_lost"]))
    );
    assert_eq!(
        (gpus[2].1.as_str(), gpus[2].2.clone()),
        ("unknown", s(&["nvml_timeout"]))
    );
    assert_eq!(gpus[3].1, "ok");
}

#[test]
fn publish_merges_and_refuses_admin_strings() {
    let n = Node::new("publish", "dgx1v-faults", "", None);
    let (rc, out, _, _) = n.run(&[
        "publish",
        "--dry-run",
        "--current-extra",
        "{\"rack\":\"b12\"}",
    ]);
    assert_eq!(rc, 0);
    assert!(out.trim().ends_with(",\"rack\":\"b12\"}"));
    let h = gputopo_core::health::parse_extra(out.trim())
        .expect("valid")
        .expect("ours");
    assert_eq!(
        h.with_status(gputopo_core::health::Status::Faulty).to_vec(),
        vec![5, 6]
    );
    assert!(
        h.links.is_none(),
        "the lost GPU's links are unknown, so no matrix is published"
    );
    let (rc, _, err, _) = n.run(&["publish", "--dry-run", "--current-extra", "rack b12"]);
    assert_eq!(rc, 5);
    assert!(err.contains("refusing to overwrite"), "{err}");
    let (rc, _, err, _) = n.run(&["publish", "--scontrol", "/nonexistent/scontrol"]);
    assert_eq!(rc, 6, "{err}");
    // Our own record, truncated: repaired, and said so (issue 25 item 1).
    let truncated = &out.trim()[..out.trim().len() / 2];
    let (rc, fixed, err, _) = n.run(&["publish", "--dry-run", "--current-extra", truncated]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        err.contains("replacing gputopo's own unusable record"),
        "{err}"
    );
    assert!(gputopo_core::health::parse_extra(fixed.trim()).is_ok_and(|h| h.is_some()));
}

#[test]
fn a_bad_config_is_a_clear_error() {
    let n = Node::new(
        "badconf",
        "pcie8",
        "EccUncorrectableLimit=1\nNvmlTimeout=5\n",
        None,
    );
    let (rc, _, err, _) = n.run(&["health"]);
    assert_eq!(rc, 1);
    assert!(err.contains("line 2: NvmlTimeout: unknown key"), "{err}");
}

#[test]
fn thresholds_come_from_gputopo_conf() {
    // Raising the limit above GPU 5's 7 aggregate errors and ignoring nothing else: only the
    // pending retirement (degraded) and the lost GPU remain.
    let n = Node::new(
        "limits",
        "dgx1v-faults",
        "EccUncorrectableLimit=10\nEccCorrectableDegraded=5\n",
        None,
    );
    let (_, gpus) = n.health();
    assert_eq!(
        (gpus[5].1.as_str(), gpus[5].2.clone()),
        ("degraded", s(&["ecc_correctable", "retired_pages_pending"]))
    );
    assert_eq!(
        (gpus[1].1.as_str(), gpus[1].2.clone()),
        ("degraded", s(&["ecc_correctable"]))
    );
    let n = Node::new(
        "xids",
        "nvswitch8",
        "CriticalXids=48\nIgnoredXids=79\n",
        None,
    );
    let (_, gpus) = n.health();
    assert_eq!(gpus[3].1, "ok");
}

#[test]
fn xids_stick_across_health_checks_until_the_policy_clears_them() {
    let mut n = Node::new("sticky", "nvswitch8", "", None);
    let state = n.dir.join("state");
    std::fs::write(
        n.dir.join("gputopo.conf"),
        format!(
            "XidStickySec=0\nXidClearChecks=2\nNvmlTimeoutMs=30000\nStateDir={}\n",
            state.display()
        ),
    )
    .expect("gputopo.conf");
    let xid79 = |n: &Node| {
        let (rc, out, err, _) = n.run(&["health", "--json"]);
        let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out} {err}"));
        let gpus = v.as_array().expect("array");
        assert_eq!(gpus.len(), 8, "rc {rc}: {out}\n{err}");
        gpus[3]["reasons"]
            .as_array()
            .expect("reasons")
            .iter()
            .any(|r| r == "xid_79")
    };
    let publish = |n: &Node| {
        let (rc, out, err, _) =
            n.run(&["publish", "--scontrol", "/bin/true", "--current-extra", ""]);
        assert_eq!(rc, 0, "{out}{err}");
    };
    // The check that saw XID 79 remembers it, by the GPU's UUID.
    publish(&n);
    let file = std::fs::read_to_string(state.join("xid-node1.json")).expect("state file");
    assert!(
        file.contains("GPU-4100a001-0000-4000-8000-000000000003"),
        "{file}"
    );
    // The event is gone (NVML delivers it once): GPU 3 stays faulty for two clean checks.
    let quiet = n.dir.join("quiet.fx");
    let text = std::fs::read_to_string(fixture("nvswitch8")).expect("fixture");
    let text: String = text
        .lines()
        .filter(|l| !l.starts_with("Xid "))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&quiet, text).expect("quiet fixture");
    n.fixture = quiet.display().to_string();
    assert!(xid79(&n), "health shows the remembered XID");
    publish(&n);
    assert!(xid79(&n), "one clean check is not enough");
    publish(&n);
    assert!(!xid79(&n), "two clean checks and XidStickySec=0 clear it");
    // A corrupt state file: a warning, a fresh start, and the check still publishes.
    std::fs::write(state.join("xid-node1.json"), b"{\"v\":1,\"gp").expect("corrupt");
    let (rc, _, err, _) = n.run(&["publish", "--scontrol", "/bin/true", "--current-extra", ""]);
    assert_eq!(rc, 0, "{err}");
    assert!(err.contains("corrupt"), "{err}");
}

#[test]
fn an_unchanged_report_keeps_its_time_until_it_is_stale() {
    let n = Node::new("refresh", "pcie8", "PublishRefreshSec=600\n", None);
    let dry = |current: &str| {
        let (rc, out, err, _) = n.run(&["publish", "--dry-run", "--current-extra", current]);
        assert_eq!(rc, 0, "{err}");
        out.trim().to_string()
    };
    let first = dry("");
    assert!(first.contains(r#","t":"#), "{first}");
    // Published a moment ago and unchanged: byte-identical, so publish would not write.
    assert_eq!(dry(&first), first);
    // Older than PublishRefreshSec: rewritten with a new time.
    let (head, tail) = first.split_once(r#","t":"#).expect("t");
    let tail = tail.trim_start_matches(|c: char| c.is_ascii_digit());
    let stale = format!(r#"{head},"t":1000{tail}"#);
    let again = dry(&stale);
    assert_ne!(again, stale);
    assert!(!again.contains(r#","t":1000"#), "{again}");
}
