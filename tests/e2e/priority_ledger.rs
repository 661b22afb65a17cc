//! The usage ledger on disk (issue 10, items 2 and 5): usage survives every way slurmctld
//! stops, the file is private, a corrupt file is set aside and a future clock is clamped.
//! PriorityCalcPeriod cannot go below one minute (read_config.c), so the test relies on the
//! pass that every slurmctld start runs at once, and on the final pass of an orderly stop.
//!
//! With `PriorityDecayHalfLife=0` nothing decays, so a job with 2 GPUs that has run since S has
//! been charged exactly `2 · (last_decay − S)` GPU-seconds whenever no usage was lost or
//! counted twice: the ledger charges running jobs from `max(start, last_decay)` and stores
//! `last_decay` with the usage. The test checks that equality after an orderly stop (whose
//! final pass must charge up to the stop itself), after kill -9 (the file of the last pass),
//! after a restart and after `scontrol reconfigure` (24.11 re-executes slurmctld).

use super::harness::{Cluster, Opts, WAIT, e2e_enabled};
use gputopo_core::priority::ledger::{LEDGER_FILE, Ledger};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::Command;

/// Nothing decays (PriorityDecayHalfLife=0 needs a reset period; YEARLY is never reached here).
pub(super) const EXTRA: &str = "\
PriorityWeightAge=1000
PriorityWeightFairshare=10000
PriorityMaxAge=7-0
PriorityCalcPeriod=1
PriorityDecayHalfLife=0
PriorityUsageResetPeriod=YEARLY
";

fn epoch() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

fn ledger_path(c: &Cluster) -> PathBuf {
    c.dir().join("state").join(LEDGER_FILE)
}

/// One node under priority/gputopo with `extra` slurm.conf lines.
pub(super) fn one_node(extra: &str, debug: bool) -> Cluster {
    Cluster::up(Opts {
        nodes: 1,
        priority: "gputopo".into(),
        extra_conf: Some(extra.into()),
        debug,
        ..Opts::default()
    })
}

/// The ledger file as it is now (None while missing or unreadable).
pub(super) fn ledger(c: &Cluster) -> Option<Ledger> {
    let p = ledger_path(c);
    let text = std::fs::read_to_string(&p).ok()?;
    Ledger::from_json(&text, 0, &p).ok()
}

/// A job time field of `scontrol show job` (StartTime, EndTime; local time) in seconds since
/// the epoch.
pub(super) fn job_time(c: &Cluster, job: u32, key: &str) -> i64 {
    let rec = c.show_job(&job.to_string());
    let t = super::harness::field(&rec, key).unwrap_or_else(|| panic!("{key} in {rec}"));
    let out = Command::new("date")
        .args(["-d", t, "+%s"])
        .output()
        .expect("date");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{key}={t}"))
}

/// (last_decay, GPU-seconds of root's entry) from the file.
fn charged(c: &Cluster) -> (i64, f64) {
    let l = ledger(c).expect("a readable ledger");
    let gpu = l.usage("", "0").map_or(0.0, |u| u.gpu_secs);
    (l.last_decay(), gpu)
}

/// Nothing lost, nothing twice: GPU-seconds == 2 · (last_decay − start).
fn assert_exact(c: &Cluster, start: i64, when: &str) -> i64 {
    assert_exact_with(c, start, 0.0, when)
}

/// Nothing lost, nothing twice, with `short` GPU-seconds of finished short jobs on top:
/// GPU-seconds == 2 · (last_decay − start) + short. Returns last_decay.
pub(super) fn assert_exact_with(c: &Cluster, start: i64, short: f64, when: &str) -> i64 {
    let (last, gpu) = charged(c);
    assert_eq!(
        gpu,
        2.0 * (last - start) as f64 + short,
        "{when}: ledger charged {gpu} GPU-s for a 2-GPU job running since {start} (last decay \
         {last}) and {short} GPU-s of short jobs"
    );
    last
}

/// Waits until a pass after `after` has written the ledger.
fn wait_pass(c: &Cluster, after: i64) -> i64 {
    c.wait_until("a recalculation pass to write the ledger", WAIT, || {
        ledger(c).is_some_and(|l| l.last_decay() > after)
    });
    charged(c).0
}

#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn usage_survives_shutdown_kill_and_reconfigure() {
    if !e2e_enabled() {
        return;
    }
    let c = one_node(EXTRA, true); // debug: the stop line is at verbose level
    let job = c.sbatch(&["--gres=gpu:2", "-n1", "--wrap", "sleep 900"]);
    c.wait_state(job, "RUNNING", WAIT);
    let start = job_time(&c, job, "StartTime");
    std::thread::sleep(std::time::Duration::from_secs(2));

    // Orderly stop: the final pass charges up to the stop itself.
    let before_stop = epoch();
    c.stop_slurmctld();
    let stopped = assert_exact(&c, start, "after scontrol shutdown slurmctld");
    assert!(
        stopped >= before_stop && stopped > start,
        "final pass at the stop ({stopped}), not before it ({before_stop})"
    );
    assert!(
        c.slurmctld_log()
            .contains("priority role stopped; usage ledger saved"),
        "the priority role stopped by its own fini"
    );
    let meta = std::fs::metadata(ledger_path(&c)).expect("ledger file");
    assert_eq!(meta.mode() & 0o777, 0o600, "ledger is private");
    assert_eq!(meta.uid(), 0, "ledger is owned by SlurmUser (root here)");

    // Every start runs a pass right away.
    c.restart_slurmctld();
    let last = wait_pass(&c, stopped);
    assert_exact(&c, start, "after restart");

    // kill -9: the file of the last pass stays valid and the next process continues from it.
    c.kill_slurmctld();
    let killed = assert_exact(&c, start, "after kill -9");
    assert!(killed >= last);
    c.restart_slurmctld();
    let last = wait_pass(&c, killed);
    assert_exact(&c, start, "after restart from kill -9");

    // 24.11 re-executes slurmctld on reconfigure (priority_g_fini, then a new process).
    c.reconfigure();
    if c.opts.release != "22.05.8" {
        wait_pass(&c, last);
    }
    assert_exact(&c, start, "after scontrol reconfigure");
    assert!(
        !c.slurmctld_log().contains("priority ledger"),
        "no ledger I/O errors logged"
    );
}

#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn corrupt_ledger_is_set_aside_and_future_clock_clamped() {
    if !e2e_enabled() {
        return;
    }
    let c = one_node(EXTRA, false);
    wait_pass(&c, 0);
    c.stop_slurmctld();
    std::fs::write(ledger_path(&c), "{ not a ledger").expect("corrupt the ledger");
    c.restart_slurmctld();
    let state = c.dir().join("state");
    let aside: Vec<PathBuf> = std::fs::read_dir(&state)
        .expect("state dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name().is_some_and(|n| {
                n.to_string_lossy()
                    .starts_with(&format!("{LEDGER_FILE}.corrupt-"))
            })
        })
        .collect();
    assert_eq!(aside.len(), 1, "the corrupt file is set aside: {aside:?}");
    assert_eq!(
        std::fs::read_to_string(&aside[0]).expect("kept"),
        "{ not a ledger",
        "set aside unchanged"
    );
    assert!(
        c.slurmctld_log().contains("usage ledger is corrupt"),
        "logged at error"
    );
    let now = wait_pass(&c, 0);

    // A last_decay a day ahead is clamped to the load time, so passes go on.
    c.stop_slurmctld();
    let mut l = ledger(&c).expect("ledger");
    let ahead = epoch() + 86_400;
    let text = l.to_json().replace(
        &format!("\"last_decay\": {}", l.last_decay()),
        &format!("\"last_decay\": {ahead}"),
    );
    std::fs::write(ledger_path(&c), text).expect("write a future ledger");
    l = ledger(&c).expect("future ledger parses");
    assert_eq!(l.last_decay(), ahead);
    c.restart_slurmctld();
    c.wait_until("a pass after the clamped load", WAIT, || {
        ledger(&c).is_some_and(|l| l.last_decay() >= now && l.last_decay() < ahead)
    });
    assert!(
        c.slurmctld_log().contains("is in the future"),
        "the clamp is logged"
    );
}
