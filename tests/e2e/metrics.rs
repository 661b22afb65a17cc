//! `gputopo metrics` scraped by a real Prometheus (Debian's package) on a harness cluster, and
//! the Grafana dashboard's queries run against it (issue 28 items 2 and 3).
//!
//! Three DGX-1V nodes publish health through the agent (n1 dgx1v-faults: GPUs 5 and 6 faulty;
//! n2 dgx1v-telemetry: degraded and warm GPUs; n3 xid-storm: XID 79 on GPU 1), an administrator
//! drains n2's GPU 4 with `gputopo drain`, two 2-GPU jobs run and an 8-GPU job waits. Then
//! `gputopo metrics --listen` serves, Prometheus scrapes it every second with the project's
//! alert rules loaded, and PromQL must report the faulty, drained and optimal counts the
//! cluster really has (read from the nodes' Extra and the jobs' notes), every query of
//! contrib/grafana/gputopo-fleet.json must return data, and the GpuFaulty alert must fire.

use super::agent::{extra, health, start};
use super::harness::{Cluster, WAIT, gputopo_only, repo, skip};
use gputopo_core::health::{Status, parse_extra};
use std::process::{Child, Command, Stdio};

/// A process this test started; killed when the test ends, whatever happens.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The cluster's base port (`cluster.sh port`); BASE+150..199 are free for helpers.
fn base_port(c: &Cluster) -> u16 {
    let out = Command::new(repo().join("contrib/cluster.sh"))
        .args(["port", "--dir"])
        .arg(c.dir())
        .output()
        .expect("cluster.sh port");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("a port number")
}

/// GET `url` (curl, bounded), the body when it answered 200.
fn get(url: &str) -> Option<String> {
    let out = Command::new("curl")
        .args(["-sf", "--max-time", "5", url])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// An instant PromQL query: the result's samples as (labels, value).
fn query(prom: u16, q: &str) -> Option<Vec<(serde_json::Value, f64)>> {
    let enc: String = q
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect();
    let body = get(&format!("http://127.0.0.1:{prom}/api/v1/query?query={enc}"))?;
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    let result = v["data"]["result"].as_array()?;
    Some(
        result
            .iter()
            .filter_map(|r| {
                let value = r["value"][1].as_str()?.parse().ok()?;
                Some((r["metric"].clone(), value))
            })
            .collect(),
    )
}

/// The one value of a query that aggregates to one sample.
fn scalar(prom: u16, q: &str) -> Option<f64> {
    query(prom, q).and_then(|r| (r.len() == 1).then(|| r[0].1))
}

fn prometheus_missing() -> bool {
    Command::new("prometheus")
        .arg("--version")
        .output()
        .map_or(true, |o| !o.status.success())
}

#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn prometheus_sees_the_clusters_faulty_drained_and_optimal_gpus() {
    if !gputopo_only() {
        return;
    }
    if prometheus_missing() {
        skip("no prometheus command (contrib/install-deps.sh installs Debian's)");
        return;
    }
    let Some((_rig, c)) = start(
        "metrics",
        "dgx1v",
        &[
            ("n1", "dgx1v-faults"),
            ("n2", "dgx1v-telemetry"),
            ("n3", "xid-storm"),
        ],
        "",
    ) else {
        return;
    };
    c.wait_until("every node to publish its GPU health", WAIT, || {
        c.nodes().iter().all(|n| health(&c, n).is_some())
    });
    let bin = super::harness::gputopo_bin();
    let bin = bin.to_str().expect("a UTF-8 path");

    // An administrator drains n2's GPU 4.
    let out = c.run(
        bin,
        &["drain", "n2", "--gpu", "4", "--reason", "e2e RMA 1234"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        extra(&c, "n2").contains(r#""gpu_drained":"4""#),
        "{}",
        extra(&c, "n2")
    );

    // Two 2-GPU jobs run, an 8-GPU job waits (every node has an excluded or busy GPU).
    let running: Vec<u32> = (0..2)
        .map(|_| c.sbatch(&["--gres=gpu:2", "--wrap", "sleep 600"]))
        .collect();
    for &j in &running {
        c.wait_state(j, "RUNNING", WAIT);
    }
    let waiting = c.sbatch(&["--gres=gpu:8", "--wrap", "sleep 600"]);
    c.wait_until("the 8-GPU job's pending note", WAIT, || {
        c.show_job(&waiting.to_string())
            .contains("SystemComment=gputopo: pending")
    });

    // What the cluster really has.
    let healths: Vec<_> = c
        .nodes()
        .iter()
        .map(|n| parse_extra(&extra(&c, n)).ok().flatten().expect("health"))
        .collect();
    let faulty: usize = healths
        .iter()
        .map(|h| h.with_status_wide(Status::Faulty).len())
        .sum();
    let drained: usize = healths.iter().map(|h| h.drained.len()).sum();
    let optimal: usize = running
        .iter()
        .map(|j| c.show_job(&j.to_string()).matches("optimal=yes").count())
        .sum();
    // At least n1's GPUs 5 and 6 and n3's GPU 1 (n3's GPUs without an NVML device count as
    // faulty or unknown, as the agent's policy says); n2's GPU 4 drained.
    assert!(
        faulty >= 3 && drained == 1,
        "the fixtures' faults and the drain: {faulty} faulty, {drained} drained"
    );

    // The exporter, checked by promtool's own linter first.
    let port = base_port(&c);
    let (mport, pport) = (port + 160, port + 161);
    let once = c.run(bin, &["metrics", "--format", "prometheus"]);
    assert!(
        once.status.success(),
        "{}",
        String::from_utf8_lossy(&once.stderr)
    );
    let mut lint = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool");
    {
        use std::io::Write as _;
        let mut stdin = lint.stdin.take().expect("promtool's stdin");
        stdin.write_all(&once.stdout).expect("feed promtool");
    }
    let lint = lint.wait_with_output().expect("promtool");
    assert!(
        lint.status.success() && lint.stdout.is_empty() && lint.stderr.is_empty(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&lint.stdout),
        String::from_utf8_lossy(&lint.stderr)
    );
    let _metrics = Daemon(
        c.cmd(bin)
            .args(["metrics", "--listen", &format!("127.0.0.1:{mport}")])
            .stdout(Stdio::null())
            .spawn()
            .expect("gputopo metrics --listen"),
    );

    // Prometheus, scraping every second, with the alert rules.
    let pdir = c.dir().join("prometheus");
    std::fs::create_dir_all(&pdir).expect("prometheus dir");
    let rules = repo().join("contrib/prometheus/gputopo-alerts.yml");
    std::fs::write(
        pdir.join("prometheus.yml"),
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {}\nscrape_configs:\n  - job_name: gputopo\n    static_configs:\n      - targets: ['127.0.0.1:{mport}']\n",
            rules.display()
        ),
    )
    .expect("prometheus.yml");
    let _prom = Daemon(
        Command::new("prometheus")
            .arg(format!(
                "--config.file={}",
                pdir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                pdir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{pport}"))
            .arg("--log.level=warn")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(pdir.join("prometheus.log")).expect("log"))
            .spawn()
            .expect("prometheus"),
    );
    c.wait_until("Prometheus to scrape gputopo metrics", WAIT, || {
        scalar(pport, r#"up{job="gputopo"}"#) == Some(1.0)
            && scalar(pport, "gputopo_up") == Some(1.0)
    });

    // The counts the cluster really has.
    for (q, want) in [
        (r#"sum(gputopo_gpu_health{state="faulty"})"#, faulty),
        ("sum(gputopo_gpu_drained)", drained),
        (
            r#"count(gputopo_job_placement_gpus{optimal="yes"})"#,
            optimal,
        ),
        ("count(gputopo_job_pending_withheld_nodes)", 1),
    ] {
        c.wait_until(&format!("{q} = {want}"), WAIT, || {
            scalar(pport, q) == Some(want as f64)
        });
    }
    let info = query(pport, "gputopo_gpu_drain_info").expect("drain info");
    assert_eq!(info.len(), 1);
    assert_eq!(
        (&info[0].0["node"], &info[0].0["gpu"], &info[0].0["reason"]),
        (
            &serde_json::json!("n2"),
            &serde_json::json!("4"),
            &serde_json::json!("e2e RMA 1234")
        )
    );

    // Every query of the dashboard returns data.
    let dash: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("contrib/grafana/gputopo-fleet.json"))
            .expect("the dashboard"),
    )
    .expect("JSON");
    let mut checked = 0;
    for p in dash["panels"].as_array().expect("panels") {
        for t in p["targets"].as_array().into_iter().flatten() {
            let q = t["expr"].as_str().expect("expr").replace("$node", ".*");
            let title = p["title"].as_str().unwrap_or("");
            c.wait_until(&format!("data for panel {title:?}: {q}"), WAIT, || {
                query(pport, &q).is_some_and(|r| !r.is_empty())
            });
            checked += 1;
        }
    }
    assert!(checked >= 15, "{checked} queries");

    // The alert rules load, and a faulty GPU fires GpuFaulty.
    c.wait_until("GpuFaulty to fire", WAIT, || {
        get(&format!("http://127.0.0.1:{pport}/api/v1/alerts")).is_some_and(|b| {
            b.contains(r#""alertname":"GpuFaulty""#) && b.contains(r#""state":"firing""#)
        })
    });
}
