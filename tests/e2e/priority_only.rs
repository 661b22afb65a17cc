//! A priority-only install (issue 25 item 4): `SelectType=select/cons_tres` with
//! `PriorityType=priority/gputopo`. The live select plugin is Slurm's own cons_tres, and
//! gputopo's select role must never touch it: slurmctld initialises it once (cons_tres logs
//! "select/cons_tres loaded"), and 24.11, which calls the priority plugin's `fini` before
//! every re-exec reconfigure and its `init` again after a failed one, must not see it shut
//! down ("select/cons_tres shutting down") while it keeps scheduling with it.

use super::harness::{Cluster, Opts, WAIT, e2e_enabled, release_at_least, skip};

const LOADED: &str = "select/cons_tres loaded";
const SHUT_DOWN: &str = "select/cons_tres shutting down";

/// A cluster with the live cons_tres and gputopo's priority role, one 2-GPU job running.
fn priority_only_cluster() -> Cluster {
    let c = Cluster::up(Opts {
        select: "cons_tres".into(),
        priority: "gputopo".into(),
        debug: true, // cons_tres's own lines are at verbose level
        ..Opts::default()
    });
    let first = c.sbatch(&["--gres=gpu:2", "--wrap", "sleep 300"]);
    c.wait_state(first, "RUNNING", WAIT);
    c
}

/// slurmctld initialises cons_tres once; the select role loaded with the priority role does
/// not (failed before the fix on both releases: "select/cons_tres loaded" twice).
#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn the_priority_role_alone_never_initialises_cons_tres_again() {
    if !e2e_enabled() {
        return;
    }
    let c = priority_only_cluster();
    assert_eq!(
        c.slurmctld_log().matches(LOADED).count(),
        1,
        "cons_tres is initialised once, by slurmctld"
    );
}

/// 24.11+: a failed re-exec reconfigure ends and restarts the priority plugin; the live
/// cons_tres must not be shut down on the way (failed before the fix on 24.11.5).
#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn a_failed_reconfigure_never_shuts_the_live_cons_tres_down() {
    if !e2e_enabled() {
        return;
    }
    if !release_at_least(24, 11) {
        skip("before 24.11 a reconfigure runs in the process and does not end the priority plugin");
        return;
    }
    let c = priority_only_cluster();
    // A reconfigure that fails: the re-executed slurmctld cannot read slurm.conf, and this
    // one resumes (having ended and restarted its priority plugin on the way). SIGHUP asks
    // for it (scontrol would refuse the broken slurm.conf itself).
    let conf = c.etc().join("slurm.conf");
    let good = std::fs::read_to_string(&conf).expect("slurm.conf");
    std::fs::write(&conf, format!("{good}NoSuchOption=1\n")).expect("break slurm.conf");
    let pid = c.slurmctld_pid().expect("slurmctld's pid");
    let hup = std::process::Command::new("kill")
        .args(["-HUP", &pid.to_string()])
        .status()
        .expect("kill -HUP");
    assert!(hup.success());
    c.wait_until("the reconfigure to fail", WAIT, || {
        c.slurmctld_log()
            .contains("Resuming operation, reconfigure failed")
    });
    std::fs::write(&conf, good).expect("restore slurm.conf");
    let log = c.slurmctld_log();
    assert!(
        !log.contains(SHUT_DOWN),
        "the live cons_tres was shut down by gputopo's fini"
    );
    // cons_tres still schedules with its own state: the second job gets the other GPUs.
    let second = c.sbatch(&["--gres=gpu:2", "--wrap", "sleep 300"]);
    c.wait_state(second, "RUNNING", WAIT);
    c.assert_no_gpu_shared();
}
