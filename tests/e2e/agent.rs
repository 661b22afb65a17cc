//! Node-agent end-to-end tests (issue 3): every emulated node runs `contrib/healthcheck.sh`
//! (`gputopo publish`) as slurmd's HealthCheckProgram against its own fake-NVML fixture, and
//! the per-GPU health shows up in the node's `Extra`, is protected from ordinary users, never
//! overwrites an administrator's plain value, and survives a slurmctld restart.
//!
//! n1 runs tests/fixtures/nvml/dgx1v-faults.fx (GPU 5 ECC-faulty, GPU 6 lost), n2 has no NVML
//! at all (no-nvml.fx). slurmd gives a health check only SLURMD_NODENAME, so a wrapper script
//! (written here) sets the fixture directory and the gputopo command and execs healthcheck.sh,
//! which finds slurm.conf and scontrol through its parent slurmd. It also logs each run, so the
//! restart test can tell a persisted Extra from a freshly published one.

use super::harness::{Cluster, Opts, WAIT, e2e_enabled, field, release, repo};
use gputopo_core::health::{NodeHealth, Reason, Status, parse_extra};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// A built file: `$env` (made absolute: slurmd runs what names it from its own directory),
/// else the first of `names` under this test binary's target/{release,debug}. Not `deps/`:
/// a test build leaves a `libfake_nvml.so` there without the fake-nvml-tree that
/// contrib/nvml-node.sh looks for beside it (CI's clean checkout failed on exactly that).
fn target_file(env: &str, names: &[&str]) -> Option<PathBuf> {
    if let Ok(p) = std::env::var(env) {
        return Some(super::harness::absolute(p));
    }
    let exe = std::env::current_exe().ok()?;
    let target = exe.parent()?.parent()?.parent()?.to_path_buf();
    ["release", "debug"]
        .iter()
        .flat_map(|p| {
            names
                .iter()
                .map(|n| target.join(p).join(n))
                .collect::<Vec<_>>()
        })
        .find(|p| p.is_file())
}

/// The fake NVML library (`FAKE_NVML_LIB`, else built by cargo into this target directory).
pub(super) fn fake_lib() -> PathBuf {
    if let Some(p) = target_file("FAKE_NVML_LIB", &["libfake_nvml.so"]) {
        return p;
    }
    let exe = std::env::current_exe().expect("test binary path");
    build_fake(exe.ancestors().nth(3).expect("target dir"));
    target_file("FAKE_NVML_LIB", &["libfake_nvml.so"]).expect("libfake_nvml.so after building it")
}

/// `cargo build -p fake-nvml` into `target` (the library and its fake-nvml-tree).
fn build_fake(target: &std::path::Path) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let st = Command::new(cargo)
        .args(["build", "-p", "fake-nvml"])
        .env("CARGO_TARGET_DIR", target)
        .current_dir(repo())
        .status()
        .expect("cargo build -p fake-nvml");
    assert!(st.success(), "cargo build -p fake-nvml failed");
}

/// The fake NVML's driver-tree writer (`FAKE_NVML_TREE`, else `fake-nvml-tree` next to
/// [`fake_lib`], built by cargo when missing): contrib/nvml-node.sh needs both.
pub(super) fn fake_tree() -> PathBuf {
    if let Some(p) = target_file("FAKE_NVML_TREE", &["fake-nvml-tree"]) {
        return p;
    }
    let lib = fake_lib();
    let beside = lib.with_file_name("fake-nvml-tree");
    if !beside.is_file() {
        // lib is target/<profile>/libfake_nvml.so: its grandparent is the target directory.
        build_fake(lib.ancestors().nth(2).expect("target dir"));
    }
    beside
}

/// Scratch files of one test: the wrapper, the per-node fixtures, the run log.
pub(super) struct Rig {
    dir: PathBuf,
}

impl Rig {
    pub(super) fn new(test: &str, nodes: &[(&str, &str)]) -> Rig {
        let dir =
            std::env::temp_dir().join(format!("gputopo-agent-e2e-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("fx")).expect("scratch dir");
        for (node, fixture) in nodes {
            let src = repo()
                .join("tests/fixtures/nvml")
                .join(format!("{fixture}.fx"));
            std::fs::copy(&src, dir.join("fx").join(format!("{node}.fx"))).expect("copy fixture");
        }
        let bin = super::harness::gputopo_bin();
        let script = format!(
            "#!/bin/sh\nGPUTOPO_FAKE_NVML_DIR={fx}\nGPUTOPO_BIN={bin}\nexport GPUTOPO_FAKE_NVML_DIR GPUTOPO_BIN\n\
             echo \"$SLURMD_NODENAME\" >> {log}\nexec {hc}\n",
            fx = dir.join("fx").display(),
            bin = bin.display(),
            log = dir.join("runs.log").display(),
            hc = repo().join("contrib/healthcheck.sh").display(),
        );
        let hc = dir.join("hc.sh");
        std::fs::write(&hc, script).expect("wrapper");
        let _ = Command::new("chmod").args(["755"]).arg(&hc).status();
        // slurmd runs the wrapper as root; make the path traversable.
        let _ = Command::new("chmod").args(["755"]).arg(&dir).status();
        Rig { dir }
    }

    /// The fixture file `node`'s agent reads (a copy; a test may overwrite it to change what
    /// the node's NVML says from now on).
    pub(super) fn fixture(&self, node: &str) -> PathBuf {
        self.dir.join("fx").join(format!("{node}.fx"))
    }

    pub(super) fn wrapper(&self) -> PathBuf {
        self.dir.join("hc.sh")
    }

    /// The agent's `StateDir` for this test (sticky XIDs stay out of the host's
    /// /var/lib/gputopo, which other clusters' n1 would share).
    pub(super) fn state_dir(&self) -> PathBuf {
        self.dir.join("state")
    }

    /// gputopo.conf for a one-node test on the fake NVML (short waits, this rig's state),
    /// then `extra` lines.
    pub(super) fn conf(&self, extra: &str) -> String {
        format!(
            "NvmlLibrary={}\nXidWaitMs=50\nNvmlTimeoutMs=5000\nPublishTimeoutSec=20\nStateDir={}\n{extra}",
            fake_lib().display(),
            self.state_dir().display()
        )
    }

    pub(super) fn runs(&self) -> usize {
        std::fs::read_to_string(self.dir.join("runs.log")).map_or(0, |s| s.lines().count())
    }

    /// Health checks `node` has started (slurmd runs them one at a time, so when a second one
    /// has started since, the first has finished).
    pub(super) fn runs_of(&self, node: &str) -> usize {
        std::fs::read_to_string(self.dir.join("runs.log"))
            .map_or(0, |s| s.lines().filter(|l| *l == node).count())
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The node's Extra (everything after `Extra=` on its line; empty when unset).
pub(super) fn extra(c: &Cluster, node: &str) -> String {
    c.show_node(node)
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("Extra=").map(str::to_string))
        .unwrap_or_default()
}

pub(super) fn health(c: &Cluster, node: &str) -> Option<NodeHealth> {
    parse_extra(&extra(c, node)).ok().flatten()
}

fn verdicts(h: &NodeHealth) -> Vec<(usize, Status, Vec<Reason>)> {
    h.gpus
        .iter()
        .map(|g| (g.index, g.status, g.reasons.clone()))
        .collect()
}

/// Starts a cluster of `topology` with one node per fixture, with `conf` added
/// to the test's gputopo.conf; `None` when end-to-end tests are disabled.
pub(super) fn start(
    test: &str,
    topology: &str,
    nodes: &[(&str, &str)],
    conf: &str,
) -> Option<(Rig, Cluster)> {
    start_with(test, topology, nodes, conf, None)
}

/// [`start`] with `extra_conf` lines added to slurm.conf.
pub(super) fn start_with(
    test: &str,
    topology: &str,
    nodes: &[(&str, &str)],
    conf: &str,
    extra_conf: Option<String>,
) -> Option<(Rig, Cluster)> {
    if !e2e_enabled() {
        return None;
    }
    let rig = Rig::new(test, nodes);
    let c = Cluster::up(Opts {
        nodes: nodes.len() as u32,
        topology: topology.into(),
        gputopo_conf: Some(format!(
            "# agent keys for the test; the select keys keep their defaults\nNvmlLibrary={}\nXidWaitMs=100\nNvmlTimeoutMs=5000\nPublishTimeoutSec=20\nStateDir={}\n{conf}",
            fake_lib().display(),
            rig.state_dir().display()
        )),
        health_program: Some(rig.wrapper()),
        health_interval: 5,
        extra_conf,
        ..Opts::default()
    });
    Some((rig, c))
}

#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn health_check_publishes_per_gpu_health_in_extra() {
    // Slurm 24.11+ can route jobs on Extra's flat keys (--extra); 22.05 has no such option.
    let extra_constraints = !release().starts_with("22.");
    let Some((rig, c)) = start_with(
        "publish",
        "dgx1v",
        &[("n1", "dgx1v-faults"), ("n2", "no-nvml")],
        "",
        extra_constraints.then(|| "SchedulerParameters=bf_interval=1,extra_constraints\n".into()),
    ) else {
        return;
    };
    c.wait_until(
        "both nodes to publish their GPU health in Extra",
        WAIT,
        || health(&c, "n1").is_some() && health(&c, "n2").is_some(),
    );

    // n1: exactly the planted faults, in Slurm's index order, plus nothing else.
    let h1 = health(&c, "n1").expect("n1 health");
    let want: Vec<(usize, Status, Vec<Reason>)> = (0..8)
        .map(|i| match i {
            5 => (
                5,
                Status::Faulty,
                vec![Reason::EccUncorrectable, Reason::RetiredPagesPending],
            ),
            6 => (6, Status::Faulty, vec![Reason::GpuLost]),
            _ => (i, Status::Ok, vec![]),
        })
        .collect();
    assert_eq!(verdicts(&h1), want, "n1 Extra: {}", extra(&c, "n1"));
    assert!(
        h1.links.is_none(),
        "GPU 6 is lost, so its links are unknown and no matrix is published"
    );
    // n2: no NVML at all → every gres.conf GPU unknown, node-level reason, no crash.
    let h2 = health(&c, "n2").expect("n2 health");
    assert_eq!(h2.gpus.len(), 8);
    assert!(h2.gpus.iter().all(|g| g.status == Status::Unknown));
    assert_eq!(h2.errors, vec![Reason::NvmlUnavailable]);
    // One bad GPU never drains a node.
    for n in ["n1", "n2"] {
        let state = c.show_node(n);
        assert!(
            !state.contains("DRAIN"),
            "{n} must not be drained:\n{state}"
        );
    }
    summary_keys_find_the_nodes_with_excluded_gpus(&c, extra_constraints);
    // Publishing only writes on change: the value stays byte-identical across runs.
    let before = extra(&c, "n1");
    let runs = rig.runs();
    c.wait_until("two more health checks", WAIT, || rig.runs() >= runs + 4);
    assert_eq!(extra(&c, "n1"), before);
}

/// Issue 14 item 7: the flat summary keys ahead of the `gputopo` object make the nodes with
/// excluded GPUs readable in `sinfo` and `scontrol show node`, and (24.11+) `--extra` routes
/// on the always-present count of healthy GPUs.
fn summary_keys_find_the_nodes_with_excluded_gpus(c: &Cluster, extra_constraints: bool) {
    let sinfo = c.ok("sinfo", &["-N", "-h", "-O", "NodeList:6,Extra:64"]);
    let row = |n: &str| {
        sinfo
            .lines()
            .find(|l| l.starts_with(n))
            .unwrap_or_else(|| panic!("no sinfo row for {n}:\n{sinfo}"))
            .to_string()
    };
    assert!(
        row("n1").contains(r#"{"gpu_faulty":"5-6","gpu_ok":6,"gpu_model":"V100""#),
        "n1's faulty GPUs lead its Extra:\n{sinfo}"
    );
    assert!(
        row("n2").contains(r#"{"gpu_ok":0,"gpu_unknown":"0-7","gpu"#),
        "{sinfo}"
    );
    assert!(
        extra(c, "n1").starts_with(r#"{"gpu_faulty":"5-6","gpu_ok":6,"#),
        "scontrol show node: {}",
        extra(c, "n1")
    );
    if !extra_constraints {
        return;
    }
    for (want, node) in [("gpu_ok>=6", "n1"), ("gpu_ok=0", "n2")] {
        let extra = format!("--extra={want}");
        let job = c.sbatch(&[&extra, "--gres=gpu:1", "--wrap", "true"]);
        c.wait_state(job, "COMPLETED", WAIT);
        let rec = c.job_record(job);
        assert_eq!(
            field(&rec, "NodeList"),
            Some(node),
            "--extra={want} must run on {node}:\n{rec}"
        );
    }
}

#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn only_root_or_slurmuser_may_change_extra_and_admin_values_are_kept() {
    let Some((rig, c)) = start(
        "access",
        "dgx1v",
        &[("n1", "dgx1v-faults"), ("n2", "no-nvml")],
        "",
    ) else {
        return;
    };
    c.wait_until("n1 to publish", WAIT, || health(&c, "n1").is_some());
    let published = extra(&c, "n1");

    // An ordinary user (created if needed) is refused by slurmctld.
    let user = "gputopo-e2e";
    if !Command::new("id")
        .arg(user)
        .output()
        .is_ok_and(|o| o.status.success())
    {
        let st = Command::new("useradd")
            .args(["-M", "-r", "-s", "/usr/sbin/nologin", user])
            .status()
            .expect("useradd");
        assert!(st.success(), "useradd {user} failed");
    }
    let id = |flag: &str| {
        let o = Command::new("id").args([flag, user]).output().expect("id");
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    let (uid, gid) = (id("-u"), id("-g"));
    for value in ["Extra={\"gputopo\":{\"v\":1,\"gpus\":[]}}", "Extra="] {
        let out = c
            .cmd("setpriv")
            .args([
                "--reuid",
                &uid,
                "--regid",
                &gid,
                "--clear-groups",
                "scontrol",
                "update",
                "NodeName=n1",
                value,
            ])
            .output()
            .expect("setpriv scontrol");
        assert!(
            !out.status.success(),
            "user {user} changed Extra with {value}"
        );
        assert_eq!(
            extra(&c, "n1"),
            published,
            "Extra changed after a refused update"
        );
    }

    // An administrator's plain (non-JSON) note is never overwritten...
    c.ok(
        "scontrol",
        &["update", "NodeName=n2", "Extra=rack 12 (ops)"],
    );
    let runs = rig.runs();
    c.wait_until("two more health checks", WAIT, || rig.runs() >= runs + 4);
    assert_eq!(extra(&c, "n2"), "rack 12 (ops)");
    assert!(
        c.slurmd_log("n2").contains("health_check failed: rc:5"),
        "publish must exit 5"
    );
    // ...while a JSON object is merged with.
    c.ok(
        "scontrol",
        &["update", "NodeName=n2", "Extra={\"owner\":\"ops\"}"],
    );
    c.wait_until("n2 to publish next to the admin key", WAIT, || {
        health(&c, "n2").is_some()
    });
    assert!(
        extra(&c, "n2").ends_with(",\"owner\":\"ops\"}"),
        "{}",
        extra(&c, "n2")
    );
}

#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn health_survives_a_slurmctld_restart() {
    let Some((rig, c)) = start(
        "restart",
        "dgx1v",
        &[("n1", "dgx1v-faults"), ("n2", "dgx1v-faults")],
        "",
    ) else {
        return;
    };
    c.wait_until("n1 to publish", WAIT, || health(&c, "n1").is_some());
    let before = health(&c, "n1");
    // Persisted, not re-published: no health check may run between the restart and the read.
    for attempt in 1..=3 {
        let runs = rig.runs();
        c.restart_slurmctld();
        let after = health(&c, "n1");
        if rig.runs() == runs {
            assert_eq!(after, before, "Extra after the restart");
            return;
        }
        eprintln!("attempt {attempt}: a health check ran during the restart; again");
        std::thread::sleep(Duration::from_millis(500));
    }
    panic!("a health check ran during every restart; cannot tell persistence from republishing");
}

#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn nvswitch_links_are_published_and_only_an_all_faulty_node_is_drained() {
    let Some((_rig, c)) = start(
        "nvswitch",
        "hgx-h100",
        &[("n1", "nvswitch8"), ("n2", "all-lost")],
        "DrainWhenAllFaulty=yes\n",
    ) else {
        return;
    };
    c.wait_until("both nodes to publish", WAIT, || {
        health(&c, "n1").is_some() && health(&c, "n2").is_some()
    });
    // n1: the measured NVSwitch matrix (NV18 for every pair), which Slurm's autodetection
    // would write as Links=0, and its planted faults; one faulty GPU does not drain it.
    let h1 = health(&c, "n1").expect("n1");
    let links = h1
        .links
        .as_ref()
        .expect("complete topology → links published");
    for a in 0..8 {
        for b in 0..8 {
            assert_eq!(
                links.get(a, b),
                Some(if a == b { 0 } else { 18 }),
                "pair {a},{b}"
            );
        }
    }
    assert_eq!(h1.with_status(Status::Faulty).to_vec(), vec![3]);
    assert!(!c.show_node("n1").contains("DRAIN"));
    // n2: every GPU lost → faulty everywhere → drained, with gputopo's reason.
    let h2 = health(&c, "n2").expect("n2");
    assert_eq!(h2.with_status(Status::Faulty).len(), 8);
    c.wait_until("n2 to be drained", WAIT, || {
        c.show_node("n2").contains("DRAIN")
    });
    assert!(
        c.show_node("n2").contains("gputopo: every GPU is faulty"),
        "{}",
        c.show_node("n2")
    );
}
