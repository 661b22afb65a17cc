//! Fair share without slurmdbd that users cannot dodge (issue 10, item 4).
//!
//! - A short job that starts and ends between two recalculation passes is charged in full,
//!   from its own start and end times (Slurm calls `priority_p_job_end` only with enforced
//!   limits and associations, so the pass has to do it).
//! - `--account` is free text without slurmdbd, so it is not recognised: a user's jobs under
//!   20 fresh account names get exactly the FAIRSHARE of the user's own jobs.
//! - Jobs purged before the next pass are charged; shard and MPS jobs as the part of a GPU
//!   they hold (issue 24 item 2).

use super::harness::{Cluster, Opts, WAIT, e2e_enabled};
use super::priority_ledger::{EXTRA, job_time, ledger, one_node};
use super::shared::GPU_LINES;
use gputopo_core::priority::ledger::UNVERIFIED_ACCOUNT;

#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn short_jobs_are_charged_and_fresh_accounts_gain_nothing() {
    if !e2e_enabled() {
        return;
    }
    let c = one_node(EXTRA, false);
    // A 5-second job with 1 GPU, inside one PriorityCalcPeriod (one minute, the least Slurm
    // accepts) after the pass slurmctld ran at start. The next pass is the final one of an
    // orderly stop; it charges the job from its own start and end times.
    let short = c.sbatch(&["--gres=gpu:1", "-n1", "--wrap", "sleep 5"]);
    c.wait_until("the short job to complete", WAIT, || {
        c.job_state(short).as_deref() == Some("COMPLETED")
    });
    let (start, end) = (
        job_time(&c, short, "StartTime"),
        job_time(&c, short, "EndTime"),
    );
    assert!(end - start >= 5, "ran {start}..{end}");
    let expect = (end - start) as f64;
    c.stop_slurmctld();
    let u = ledger(&c)
        .and_then(|l| l.usage(UNVERIFIED_ACCOUNT, "0"))
        .expect("root's entry");
    assert_eq!(u.gpu_secs, expect, "charged exactly its run time, once");
    c.restart_slurmctld();

    // Keep the node busy so everything below stays pending, then submit under the user's
    // own account and under 20 fresh names.
    let blocker = c.sbatch(&["--exclusive", "--wrap", "sleep 300"]);
    c.wait_state(blocker, "RUNNING", WAIT);
    let own = c.sbatch(&["-n1", "--wrap", "true"]);
    let fresh: Vec<u32> = (0..20)
        .map(|i| c.sbatch(&["-A", &format!("fresh{i}"), "-n1", "--wrap", "true"]))
        .collect();
    let fairshare = |job: u32| -> Option<f64> {
        let out = c.ok("sprio", &["-h", "-j", &job.to_string(), "-o", "%F"]);
        out.trim().parse().ok()
    };
    c.wait_until("sprio rows for the pending jobs", WAIT, || {
        fairshare(own).is_some() && fresh.iter().all(|&j| fairshare(j).is_some())
    });
    let mine = fairshare(own).expect("own FAIRSHARE");
    for &j in &fresh {
        assert_eq!(
            fairshare(j),
            Some(mine),
            "job {j} under a fresh account vs the user's own"
        );
    }
    let l = ledger(&c).expect("ledger");
    assert_eq!(l.len(), 1, "one entry per user, whatever the account text");
}

/// `PriorityUsageResetPeriod=NOW` clears usage when the decay loop starts, as multifactor's
/// decay thread does: a job's usage, charged and saved at an orderly stop, is gone after the
/// next start. (The calendar periods are unit-tested in `core::priority::reset`.)
#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn usage_reset_period_now_clears_the_ledger_at_start() {
    if !e2e_enabled() {
        return;
    }
    let c = one_node(
        &EXTRA.replace(
            "PriorityUsageResetPeriod=YEARLY",
            "PriorityUsageResetPeriod=NOW",
        ),
        true, // debug: the reset line is at verbose level
    );
    let job = c.sbatch(&["--gres=gpu:1", "-n1", "--wrap", "sleep 3"]);
    c.wait_until("the job to complete", WAIT, || {
        c.job_state(job).as_deref() == Some("COMPLETED")
    });
    c.stop_slurmctld();
    let before = ledger(&c).and_then(|l| l.usage(UNVERIFIED_ACCOUNT, "0"));
    assert!(
        before.is_some_and(|u| u.gpu_secs >= 3.0),
        "charged before the reset: {before:?}"
    );
    c.restart_slurmctld();
    c.wait_until("the ledger to be cleared at start", WAIT, || {
        ledger(&c).is_some_and(|l| l.usage(UNVERIFIED_ACCOUNT, "0").is_none())
    });
    assert!(
        c.slurmctld_log().contains("usage ledger cleared"),
        "the reset is logged"
    );
}

/// Without slurmdbd (issue 24 item 2): a job whose record slurmctld purges before the next
/// pass (`MinJobAge=2`, far below `PriorityCalcPeriod`) is still charged, from the note the
/// select role took when it ended (`select_p_job_fini`); and a job of shared GRES is charged
/// the part of a GPU its shares are: 2 of a GPU's 4 shards half a GPU, 25 of its 100 MPS
/// shares a quarter. Nothing decays (`EXTRA`), so the ledger must hold exactly
/// `1 · t(whole) + part · t(shared)` GPU-seconds after the final pass of an orderly stop, the
/// first pass after both records were purged.
#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn purged_and_shared_jobs_are_charged() {
    if !e2e_enabled() {
        return;
    }
    for (name, per_gpu, ask, part) in [("shard", 4, "shard:2", 0.5), ("mps", 100, "mps:25", 0.25)] {
        let total = 8 * per_gpu;
        let c = Cluster::up(Opts {
            nodes: 1,
            priority: "gputopo".into(),
            extra_conf: Some(format!("{EXTRA}MinJobAge=2\nGresTypes=gpu,{name}\n")),
            gres_conf: Some((
                format!("{GPU_LINES}Name={name} Count={total}\n"),
                format!("gpu:v100:8,{name}:{total}"),
            )),
            ..Opts::default()
        });
        let whole = c.sbatch(&["--gres=gpu:1", "-n1", "--wrap", "sleep 3"]);
        let shared = c.sbatch(&[&format!("--gres={ask}"), "-n1", "--wrap", "sleep 3"]);
        let mut secs = Vec::new();
        for job in [whole, shared] {
            c.wait_until("the job to complete", WAIT, || {
                c.job_state(job).as_deref() == Some("COMPLETED")
            });
            secs.push((job_time(&c, job, "EndTime") - job_time(&c, job, "StartTime")) as f64);
        }
        // slurmctld purges finished records every max(10, MinJobAge) s; the next pass is a
        // minute after the start's.
        c.wait_until("both records to be purged", WAIT, || {
            c.job_state(whole).is_none() && c.job_state(shared).is_none()
        });
        c.stop_slurmctld();
        let u = ledger(&c)
            .and_then(|l| l.usage(UNVERIFIED_ACCOUNT, "0"))
            .expect("root's entry");
        assert_eq!(
            u.gpu_secs,
            secs[0] + part * secs[1],
            "{name}: 1 GPU × {} s + {part} GPU × {} s",
            secs[0],
            secs[1]
        );
        // Tear down with a slurmctld (without one, cluster.sh's teardown waits out its
        // timeouts).
        c.restart_slurmctld();
    }
}
