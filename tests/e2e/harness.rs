//! The Rust side of the local-cluster harness: every end-to-end test starts a real Slurm
//! cluster through `contrib/cluster.sh` with [`Cluster::up`] and talks to it through the real
//! Slurm commands, so no test duplicates how a cluster is set up or torn down.
//!
//! ```ignore
//! #[test]
//! #[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
//! fn two_gpus() {
//!     if !e2e_enabled() { return; }
//!     let c = Cluster::up(Opts { nodes: 2, ..Opts::default() });
//!     let job = c.sbatch(&["--gres=gpu:2", "--wrap", "sleep 60"]);
//!     c.wait_state(job, "RUNNING", WAIT);
//!     assert_eq!(c.gres_idx(job)[0].1.len(), 2);
//! }   // Drop: contrib/cluster.sh down (no job processes left behind)
//! ```
//!
//! A test that does not apply here (the release lacks the feature, stock cons_tres runs) calls
//! [`skip`] with the reason and returns, so the run counts it as skipped (`tests/skip.rs`).
//!
//! Environment: `GPUTOPO_E2E=1` enables the tests (they are also `#[ignore]`d);
//! `GPUTOPO_SLURM_RELEASE` (default: the release table's first CI release) and `GPUTOPO_SELECT` (default `gputopo`;
//! `cons_tres` runs the same tests on stock Slurm) choose the cluster; `GPUTOPO_PLUGIN_SO`
//! names the built plugin (else cluster.sh runs contrib/build-plugin.sh); `GPUTOPO_BIN` the
//! `gputopo` command (else it is looked up next to this test binary's target directory).
//! One cluster runs at a time per test process (a global lock, held by [`Cluster`]), so the
//! tests need no `--test-threads=1`; under cargo-nextest (`.config/nextest.toml`) each test
//! is its own process, and its cluster directory comes from its slot ([`cluster_dir`]).
//! All waits are bounded polls; a timeout panics with what the cluster showed last.

#![allow(dead_code)] // a shared API: each test module uses a different part of it

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

mod backup;
mod daemons;
mod dbd;
mod dirs;
mod opts;
mod parse;
mod run_mode;

pub use dirs::cluster_dir;
pub use run_mode::{
    e2e_enabled, gputopo_only, long_enabled, release, release_at_least, release_in, select, skip,
};

pub use dbd::Slurmdbd;
pub use opts::Opts;

/// A generous default for waits on job states and daemons.
pub const WAIT: Duration = Duration::from_secs(60);

static ONE_CLUSTER: Mutex<()> = Mutex::new(());

/// A running cluster; dropping it tears it down (`contrib/cluster.sh down`).
pub struct Cluster {
    pub opts: Opts,
    dir: PathBuf,
    conf: PathBuf,
    path: String,
    /// When `up` started: batch output in the checkout since then is this run's.
    started: SystemTime,
    _one: MutexGuard<'static, ()>,
}

/// The repository root (where Cargo.toml of the root package is).
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// This test binary's cargo target directory (…/target/<profile>/deps/main-… → …/target).
pub fn target_dir() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    Some(exe.parent()?.parent()?.parent()?.to_path_buf())
}

/// `path` made absolute against this process's directory: paths from the environment end up
/// in scripts that slurmd runs from its own directory.
pub fn absolute(path: impl Into<PathBuf>) -> PathBuf {
    let path = path.into();
    std::path::absolute(&path).unwrap_or(path)
}

/// The `gputopo` command: `GPUTOPO_BIN` (made absolute), else target/{release,debug}/gputopo.
pub fn gputopo_bin() -> PathBuf {
    if let Ok(b) = std::env::var("GPUTOPO_BIN") {
        return absolute(b);
    }
    let t = target_dir().expect("cannot locate the target directory");
    ["release", "debug"]
        .iter()
        .map(|p| t.join(p).join("gputopo"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "no gputopo command under {}: run `cargo build --release -p gputopo-agent` or set GPUTOPO_BIN",
                t.display()
            )
        })
}

impl Cluster {
    /// Starts a cluster (tearing down a leftover one in the same directory) and waits until
    /// every node is idle. Panics with cluster.sh's error (log tails included) on failure.
    pub fn up(opts: Opts) -> Cluster {
        let one = ONE_CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
        let started = SystemTime::now();
        let dir = cluster_dir();
        std::fs::create_dir_all(&dir).expect("create the cluster directory");
        let mut args: Vec<String> = vec![
            "up".into(),
            "--release".into(),
            opts.release.clone(),
            "--nodes".into(),
            opts.nodes.to_string(),
            "--topology".into(),
            opts.topology.clone(),
            "--select".into(),
            opts.select.clone(),
            "--priority".into(),
            opts.priority.clone(),
            "--dir".into(),
            dir.display().to_string(),
        ];
        let mut file_arg = |flag: &str, name: &str, text: &Option<String>| {
            if let Some(text) = text {
                let f = dir.join(name);
                std::fs::write(&f, text).expect("write a config file for cluster.sh");
                args.push(flag.into());
                args.push(f.display().to_string());
            }
        };
        file_arg("--extra-conf", "extra.conf", &opts.extra_conf);
        file_arg("--gputopo-conf", "gputopo.conf.in", &opts.gputopo_conf);
        file_arg("--fake-gpus", "fake_gpus.conf.in", &opts.fake_gpus);
        if opts.plain_gres {
            args.push("--plain-gres".into());
        }
        if opts.backup {
            args.push("--backup".into());
        }
        if let Some(p) = &opts.health_program {
            args.extend([
                "--health-program".into(),
                p.display().to_string(),
                "--health-interval".into(),
                opts.health_interval.to_string(),
            ]);
        }
        if opts.debug {
            args.push("--debug".into());
        }
        if let Some((conf, node_gres)) = &opts.gres_conf {
            let f = dir.join("gres.conf.in");
            std::fs::write(&f, conf).expect("write gres.conf for cluster.sh");
            args.extend([
                "--gres-conf".into(),
                f.display().to_string(),
                "--node-gres".into(),
                node_gres.clone(),
            ]);
        }
        for (flag, v) in [
            ("--node-topology", &opts.node_topology),
            ("--node-weight", &opts.node_weight),
            ("--node-gres-of", &opts.node_gres_of),
            ("--node-keys", &opts.node_keys),
            ("--nvml", &opts.nvml),
        ] {
            if let Some(v) = v {
                args.extend([flag.into(), v.clone()]);
            }
        }
        let mut cmd = Command::new(repo().join("contrib/cluster.sh"));
        if opts.nvml.is_some() {
            cmd.env("FAKE_NVML_LIB", super::agent::fake_lib())
                .env("FAKE_NVML_TREE", super::agent::fake_tree());
        }
        if let Some(so) = &opts.plugin_so {
            cmd.env("GPUTOPO_PLUGIN_SO", so);
        }
        let out = cmd
            .args(&args)
            .env("GPUTOPO_BIN", gputopo_bin())
            .env(
                "GPUTOPO_SLURMCTLD_PREFIX",
                opts.slurmctld_prefix.as_deref().unwrap_or(""),
            )
            .stdin(Stdio::null())
            .output()
            .expect("run contrib/cluster.sh");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "contrib/cluster.sh {} failed:\n{stderr}",
            args.join(" ")
        );
        eprint!("{stderr}");
        let env = std::fs::read_to_string(dir.join("cluster.env")).expect("read cluster.env");
        let get = |k: &str| {
            env.lines()
                .find_map(|l| l.strip_prefix(&format!("{k}=")))
                .unwrap_or_else(|| panic!("{k} missing in cluster.env"))
                .to_string()
        };
        let path = format!(
            "{}:{}:{}",
            get("GPUTOPO_SLURM_BIN"),
            get("GPUTOPO_SLURM_SBIN"),
            std::env::var("PATH").unwrap_or_default()
        );
        let conf = PathBuf::from(get("SLURM_CONF"));
        std::fs::create_dir_all(dir.join("jobs")).expect("create the jobs directory");
        Cluster {
            opts,
            dir,
            conf,
            path,
            started,
            _one: one,
        }
    }

    /// The cluster directory (etc/, log/, state/, jobs/ ...).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The directory of slurm.conf, gres.conf and gputopo.conf.
    pub fn etc(&self) -> PathBuf {
        self.dir.join("etc")
    }

    /// Node names n1..nN.
    pub fn nodes(&self) -> Vec<String> {
        (1..=self.opts.nodes).map(|i| format!("n{i}")).collect()
    }

    /// A command with this cluster's SLURM_CONF and the release's binaries first on PATH.
    pub fn cmd(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env("SLURM_CONF", &self.conf)
            .env("PATH", &self.path)
            .current_dir(self.dir.join("jobs"))
            .stdin(Stdio::null());
        c
    }

    /// Runs `program args` with the cluster environment and returns its output, whatever
    /// the exit status.
    pub fn run(&self, program: &str, args: &[&str]) -> Output {
        self.cmd(program)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {program}: {e}"))
    }

    /// Runs `program args`, asserts success, and returns stdout.
    pub fn ok(&self, program: &str, args: &[&str]) -> String {
        let out = self.run(program, args);
        assert!(
            out.status.success(),
            "{program} {args:?} failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `sbatch --parsable args` (working directory and output in DIR/jobs); returns the job
    /// id (of an array: the array's job id).
    pub fn sbatch(&self, args: &[&str]) -> u32 {
        let mut all = vec!["--parsable"];
        all.extend_from_slice(args);
        let out = self.ok("sbatch", &all);
        let id = out.trim().split([';', '_']).next().unwrap_or("");
        id.parse()
            .unwrap_or_else(|_| panic!("sbatch {args:?} printed no job id: {out:?}"))
    }

    /// A counter of sdiag's "Backfilling stats" section (`label` without its colon, e.g.
    /// "Total cycles" or "Total backfilled jobs (since last slurm start)"; the main
    /// scheduler's section has a "Total cycles" line of its own, so the section is matched).
    pub fn sdiag_backfill(&self, label: &str) -> u64 {
        let out = self.ok("sdiag", &[]);
        out.split("Backfilling stats")
            .nth(1)
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.trim().strip_prefix(label)?.strip_prefix(':'))
            })
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no backfill counter {label:?} in sdiag's output:\n{out}"))
    }

    /// The batch output file of a job (`slurm-<id>.out` in DIR/jobs), empty if none yet.
    pub fn job_output(&self, job: u32) -> String {
        std::fs::read_to_string(self.dir.join(format!("jobs/slurm-{job}.out"))).unwrap_or_default()
    }

    /// `scontrol show job -d <job>` (one record per array task for an array).
    pub fn show_job(&self, job: &str) -> String {
        let out = self.run("scontrol", &["show", "job", "-d", job]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The `scontrol show job -d` record of exactly this job id (an array's other tasks,
    /// which scontrol prints too, are left out); empty once Slurm no longer knows the job.
    pub fn job_record(&self, job: u32) -> String {
        let text = self.show_job(&job.to_string());
        let head = format!("JobId={job} ");
        text.split("\n\n")
            .find(|r| r.trim_start().starts_with(&head))
            .unwrap_or("")
            .to_string()
    }

    /// The job's JobState, or None once Slurm no longer knows the job.
    pub fn job_state(&self, job: u32) -> Option<String> {
        field(&self.job_record(job), "JobState").map(str::to_string)
    }

    /// The job's Reason (e.g. "None", "Resources", "Priority").
    pub fn job_reason(&self, job: u32) -> Option<String> {
        field(&self.job_record(job), "Reason").map(str::to_string)
    }

    /// Polls until `cond` holds (every 100 ms); panics after `timeout` with `what` and the
    /// queue as last seen.
    pub fn wait_until(&self, what: &str, timeout: Duration, cond: impl FnMut() -> bool) {
        if !poll(timeout, cond) {
            panic!("{}", self.timed_out(what, timeout));
        }
    }

    /// Waits until the job is in `state` (e.g. "RUNNING", "COMPLETED", "PENDING"); on a
    /// timeout the message holds the job's record and its slurmctld log lines too, so a
    /// job that ended (and left squeue) says how.
    pub fn wait_state(&self, job: u32, state: &str, timeout: Duration) {
        if poll(timeout, || self.job_state(job).as_deref() == Some(state)) {
            return;
        }
        // "JobId=7" followed by a space or at the line's end (not JobId=70).
        let id = format!("JobId={job}");
        let spaced = format!("{id} ");
        let log: Vec<String> = self
            .slurmctld_log()
            .lines()
            .filter(|l| l.contains(&spaced) || l.ends_with(&id))
            .map(str::to_string)
            .collect();
        panic!(
            "{}job {job}:\n{}\nits slurmctld log lines (last 40):\n{}",
            self.timed_out(&format!("job {job} to be {state}"), timeout),
            self.job_record(job),
            log[log.len().saturating_sub(40)..].join("\n")
        );
    }

    /// The message of a timed-out wait: what was awaited, and the queue as it is now.
    fn timed_out(&self, what: &str, timeout: Duration) -> String {
        let q = self.run("squeue", &["-o", "%.8i %.9T %.20R %b"]);
        format!(
            "timed out after {timeout:?} waiting for {what}\nsqueue:\n{}",
            String::from_utf8_lossy(&q.stdout)
        )
    }

    /// The GPUs allocated to a job, per node, from `scontrol show job -d`
    /// (`Nodes=n1 CPU_IDs=.. GRES=gpu:v100:2(IDX:0,3)`), nodes in Slurm's order.
    pub fn gres_idx(&self, job: u32) -> Vec<(String, Vec<usize>)> {
        let text = self.job_record(job);
        let mut out = Vec::new();
        for line in text.lines().map(str::trim) {
            if !line.starts_with("Nodes=") {
                continue;
            }
            let Some(nodes) = field(line, "Nodes") else {
                continue;
            };
            let idx = parse_idx(line);
            for node in self.hostnames(nodes) {
                out.push((node, idx.clone()));
            }
        }
        out
    }

    /// Expands a Slurm host list (`n[1-3]`).
    pub fn hostnames(&self, list: &str) -> Vec<String> {
        if !list.contains('[') {
            return list.split(',').map(str::to_string).collect();
        }
        self.ok("scontrol", &["show", "hostnames", list])
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// Job ids of all running jobs.
    pub fn running_jobs(&self) -> Vec<u32> {
        self.ok("squeue", &["-h", "-t", "RUNNING", "-o", "%A"])
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    /// Asserts that no GPU is allocated to two running jobs on the same node; returns the
    /// allocation per (job, node).
    pub fn assert_no_gpu_shared(&self) -> Vec<(u32, String, Vec<usize>)> {
        let mut all = Vec::new();
        let mut used: std::collections::HashMap<(String, usize), u32> = Default::default();
        for job in self.running_jobs() {
            for (node, idx) in self.gres_idx(job) {
                for &i in &idx {
                    if let Some(other) = used.insert((node.clone(), i), job) {
                        panic!("GPU {i} on {node} is allocated to jobs {other} and {job}");
                    }
                }
                all.push((job, node, idx));
            }
        }
        all
    }

    /// `scontrol show node -d <node>` (with GresUsed=gpu:..(IDX:..)).
    pub fn show_node(&self, node: &str) -> String {
        self.ok("scontrol", &["show", "node", "-d", node])
    }

    /// The GPU indices in use on a node according to its GresUsed.
    pub fn gres_used(&self, node: &str) -> Vec<usize> {
        parse_idx(field(&self.show_node(node), "GresUsed").unwrap_or(""))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let out = Command::new(repo().join("contrib/cluster.sh"))
            .args(["down", "--dir"])
            .arg(&self.dir)
            .stdin(Stdio::null())
            .output();
        match out {
            Ok(o) if o.status.success() => {}
            Ok(o) => eprintln!(
                "contrib/cluster.sh down failed:\n{}",
                String::from_utf8_lossy(&o.stderr)
            ),
            Err(e) => eprintln!("cannot run contrib/cluster.sh down: {e}"),
        }
        if std::thread::panicking() {
            eprintln!("cluster logs kept in {}/log", self.dir.display());
            return;
        }
        let strays = dirs::stray_batch_output(self.started);
        assert!(
            strays.is_empty(),
            "batch output written in the checkout, not under the cluster directory (a job \
             submitted elsewhere, by this test or one running beside it): {strays:?}"
        );
    }
}

pub use parse::{field, parse_idx, parse_index_list};

/// Calls `cond` every 100 ms until it holds (true) or `timeout` has passed (false).
fn poll(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if cond() {
            return true;
        }
        if start.elapsed() > timeout {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
