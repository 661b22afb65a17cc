//! A backup controller and the usage ledger (issue 10, item 3): only the controller in
//! control reads and writes the ledger, a takeover starts from the primary's latest ledger,
//! a failback hands it back, and no usage is lost or counted twice on the way.
//!
//! The cluster has two `SlurmctldHost`s (`cluster.sh --backup`: the backup in its own network
//! and UTS namespaces, one StateSaveLocation). As in [`super::priority_ledger`] nothing decays,
//! so with a 2-GPU job running since S and short jobs that started and ended between passes,
//! every ledger written must hold exactly `2 · (last_decay − S) + Σ gpus · (end − start)`
//! GPU-seconds for root. The short jobs run while each controller is in control; the one run
//! under the primary after the failback is in the ledger only if the backup's second takeover
//! reads the file again instead of reusing what it held when it relinquished control.

use std::time::Duration;

use super::harness::{Cluster, Opts, WAIT, e2e_enabled, release_in, skip};
use super::priority_ledger::{EXTRA, assert_exact_with, job_time};

/// Waits until the controller whose log `log` returns has, after the first `from` bytes of
/// that log (its length before the control change), loaded the ledger and finished a
/// recalculation pass (which writes the ledger).
fn wait_pass_in_control(c: &Cluster, who: &str, from: usize, log: impl Fn() -> String) {
    c.wait_until(&format!("a ledger pass by the {who}"), WAIT, || {
        let text = log();
        let since = text.get(from..).unwrap_or("");
        since
            .find("usage ledger recovered")
            .is_some_and(|r| since[r..].contains("recalculation took"))
    });
}

/// Runs a 1-GPU job of about three seconds to completion within `wait`; returns its
/// GPU-seconds.
fn short_job(c: &Cluster, wait: Duration) -> f64 {
    let job = c.sbatch(&["--gres=gpu:1", "-n1", "--wrap", "sleep 3"]);
    c.wait_state(job, "COMPLETED", wait);
    (job_time(c, job, "EndTime") - job_time(c, job, "StartTime")) as f64
}

#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn backup_controller_takes_over_and_hands_back_the_ledger() {
    if !e2e_enabled() {
        return;
    }
    // Slurm 24.05.8 itself does not hand control back: after a failback its backup logs
    // "REQUEST_CONTROL reply but backup not completely done relinquishing control" and keeps
    // running as a controller (stock cons_tres with priority/basic too, on this harness), so
    // the hand-back cannot be checked there.
    if release_in((24, 5), (24, 11)) {
        skip("Slurm 24.05's backup does not return to standby on failback");
        return;
    }
    let c = Cluster::up(Opts {
        nodes: 1,
        priority: "gputopo".into(),
        extra_conf: Some(EXTRA.into()),
        debug: true, // the ledger lines are at verbose level
        backup: true,
        ..Opts::default()
    });
    let job = c.sbatch(&["--gres=gpu:2", "-n1", "--wrap", "sleep 900"]);
    c.wait_state(job, "RUNNING", WAIT);
    let start = job_time(&c, job, "StartTime");
    let mut short = short_job(&c, WAIT);

    // Takeover: the primary's last pass saves, the backup continues from that file.
    let from = c.backup_log().len();
    c.takeover();
    wait_pass_in_control(&c, "backup", from, || c.backup_log());
    assert_exact_with(&c, start, short, "after the takeover");
    // The backup schedules GPU jobs through select/gputopo too.
    short += short_job(&c, WAIT);
    assert!(
        c.backup_log().contains("select/gputopo"),
        "select/gputopo decided on the backup"
    );

    // Failback: the backup's last pass saves, the primary continues from that file.
    let from = c.slurmctld_log().len();
    c.failback();
    wait_pass_in_control(&c, "primary", from, || c.slurmctld_log());
    assert_exact_with(&c, start, short, "after the failback");
    assert_eq!(
        c.backup_log()
            .matches("priority role stopped; usage ledger saved")
            .count(),
        1,
        "the backup's priority role stopped when it handed control back"
    );
    // Right after the failback, n1 may not have registered with the primary again: 23.11's
    // cons_tres then selects no GPU on it and gputopo leaves the node out for that try
    // (`JobGres::commit_would_take_none`; stock starts the job holding no GPU, 23.11.4
    // gres_ctld.c:374). Nothing wakes backfill after that, so the job starts with the next
    // full scheduling pass, `sched_interval` (60 s) after the primary took control (23.11.4
    // controller.c:190 and :2314; seen: excluded twice, started 60 s after the failback).
    short += short_job(&c, 2 * WAIT);

    // A second takeover reads the primary's ledger again (with the job run since the failback).
    let from = c.backup_log().len();
    c.takeover();
    wait_pass_in_control(&c, "backup", from, || c.backup_log());
    assert_exact_with(&c, start, short, "after the second takeover");
    assert!(
        !c.slurmctld_log().contains("priority ledger")
            && !c.backup_log().contains("priority ledger"),
        "no ledger I/O errors logged"
    );
}
