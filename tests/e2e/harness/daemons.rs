//! Starting, stopping and killing the cluster's daemons, and the waits that go with them.

use super::{Cluster, WAIT, field, repo};
use std::path::Path;
use std::process::{Command, Stdio};

impl Cluster {
    /// Restarts slurmctld (SIGTERM, start again, wait until it answers and every node has
    /// re-registered its GPUs); jobs keep running.
    pub fn restart_slurmctld(&self) {
        self.cluster_sh(&["restart", "slurmctld"]);
        self.wait_gres_registered();
    }

    /// Waits until every node reports its GPU bitmaps again (`GresUsed=gpu:..(IDX:..)`).
    /// Right after slurmctld starts, GresUsed has counts only (`gpu:v100:2`) until the
    /// node's slurmd registers, a few seconds later.
    pub fn wait_gres_registered(&self) {
        for node in self.nodes() {
            self.wait_until(&format!("{node} to register its GPUs"), WAIT, || {
                field(&self.show_node(&node), "GresUsed").is_some_and(|g| g.contains("(IDX:"))
            });
        }
    }

    /// Stops one node's slurmd (SIGTERM, bounded wait); [`Cluster::restart_slurmd`] starts it.
    pub fn stop_slurmd(&self, node: &str) {
        self.kill_daemon(&format!("slurmd-{node}.pid"), "-TERM");
    }

    /// Kills slurmctld with SIGKILL (no state saved on the way out) and starts it again,
    /// without waiting for the nodes to register (some may be stopped).
    pub fn kill_and_restart_slurmctld(&self) {
        self.kill_daemon("slurmctld.pid", "-KILL");
        self.cluster_sh(&["restart", "slurmctld"]);
    }

    fn kill_daemon(&self, pidfile: &str, signal: &str) {
        let pid = self
            .daemon_pid(pidfile)
            .unwrap_or_else(|| panic!("{pidfile} names no live daemon of this cluster"))
            .to_string();
        let _ = Command::new("kill").args([signal, &pid]).status();
        self.wait_until(&format!("{pidfile} ({pid}) to exit"), WAIT, || {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map_or(true, |s| s.split_whitespace().nth(2) == Some("Z"))
        });
    }

    /// Restarts one node's slurmd.
    pub fn restart_slurmd(&self, node: &str) {
        self.cluster_sh(&["restart", node]);
        self.wait_until(&format!("{node} to respond"), WAIT, || {
            !self.show_node(node).contains("NOT_RESPONDING")
        });
    }

    /// `scontrol reconfigure`, then waits until slurmctld answers again (24.11 re-executes
    /// itself on reconfigure).
    pub fn reconfigure(&self) {
        self.ok("scontrol", &["reconfigure"]);
        self.wait_until("slurmctld to answer after reconfigure", WAIT, || {
            let out = self.run("scontrol", &["ping"]);
            out.status.success() && String::from_utf8_lossy(&out.stdout).contains("UP")
        });
        self.wait_gres_registered();
    }

    /// The whole slurmctld.log so far.
    pub fn slurmctld_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("log/slurmctld.log")).unwrap_or_default()
    }

    /// The whole slurmd log of `node` so far.
    pub fn slurmd_log(&self, node: &str) -> String {
        std::fs::read_to_string(self.dir.join(format!("log/slurmd-{node}.log"))).unwrap_or_default()
    }

    /// slurmctld's pid (from its pid file) if that process is alive.
    pub fn slurmctld_pid(&self) -> Option<u32> {
        self.daemon_pid("slurmctld.pid")
    }

    /// The pid in `pidfile` while it is this cluster's daemon: alive, and its command line or
    /// environment names the directory. A pid file outlives a SIGKILLed daemon, and its number
    /// then soon belongs to another process. The rule is contrib/lib.sh's `daemon_pid`, asked
    /// through `cluster.sh pid`, so it exists once.
    fn daemon_pid(&self, pidfile: &str) -> Option<u32> {
        let out = Command::new(repo().join("contrib/cluster.sh"))
            .args(["pid", pidfile, "--dir"])
            .arg(&self.dir)
            .stdin(Stdio::null())
            .output()
            .ok()?;
        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
    }

    /// Stops slurmctld alone by its orderly path (`scontrol shutdown slurmctld`) and waits
    /// until the process is gone; [`Cluster::restart_slurmctld`] starts it again.
    pub fn stop_slurmctld(&self) {
        let pid = self.slurmctld_pid();
        self.ok("scontrol", &["shutdown", "slurmctld"]);
        self.wait_until("slurmctld to exit", WAIT, || {
            pid.is_none_or(|p| !Path::new(&format!("/proc/{p}")).exists())
        });
    }

    /// SIGKILLs slurmctld and waits until the process is gone.
    pub fn kill_slurmctld(&self) {
        let pid = self.slurmctld_pid().expect("slurmctld runs");
        let ok = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill -KILL {pid}");
        self.wait_until("slurmctld to die", WAIT, || {
            !Path::new(&format!("/proc/{pid}")).exists()
        });
    }

    pub(super) fn cluster_sh(&self, args: &[&str]) {
        let out = Command::new(repo().join("contrib/cluster.sh"))
            .args(args)
            .arg("--dir")
            .arg(&self.dir)
            .env(
                "GPUTOPO_SLURMCTLD_PREFIX",
                self.opts.slurmctld_prefix.as_deref().unwrap_or(""),
            )
            .stdin(Stdio::null())
            .output()
            .expect("run contrib/cluster.sh");
        assert!(
            out.status.success(),
            "contrib/cluster.sh {args:?} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
