//! Memory safety of priority/gputopo (issue 10, item 1) under the load that broke it.
//!
//! slurmctld splits a job array each time one of its tasks starts and copies the pending
//! record's `priority_array` with `list_count(part_ptr_list)` entries, while multifactor's
//! layout has one more (22.05) or one per partition × QOS (24.11). A plugin that trusts the
//! length it expects writes or reads past the copy. Here multi-partition arrays run with at
//! most a few tasks at a time, so the pending records are split over and over across many
//! recalculation passes; one array changes partitions while pending (slurmctld frees its array
//! there), finished records are purged (MinJobAge=2: every 10 s; slurmctld frees their arrays,
//! which is where glibc's check sees an overflow), and slurmctld runs under glibc's heap
//! checking. glibc 2.34+ only checks with
//! `libc_malloc_debug.so` preloaded; with `glibc.malloc.check=3` a detected corruption aborts
//! slurmctld, which the test sees as a controller that stopped answering or jobs that never
//! finish.

use super::harness::{Cluster, Opts, WAIT, e2e_enabled, release_at_least, release_in};
use std::time::Duration;

/// Partitions p1..p3 and priority weights, shared with contrib/valgrind-priority.sh.
const EXTRA: &str = include_str!("../../contrib/priority-array-load.conf");

/// slurmctld under glibc's heap checker (aborts on a detected corruption).
pub const HEAP_CHECK_PREFIX: &str = "env GLIBC_TUNABLES=glibc.malloc.check=3 \
     LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libc_malloc_debug.so.0";

/// Array tasks (and records) left in the queue; MAX while slurmctld does not answer.
fn tasks_left(c: &Cluster) -> usize {
    let out = c.run("squeue", &["-h", "-r", "-o", "%i"]);
    if out.status.success() {
        String::from_utf8_lossy(&out.stdout).lines().count()
    } else {
        usize::MAX
    }
}

fn alive(c: &Cluster) -> bool {
    let out = c.run("scontrol", &["ping"]);
    out.status.success() && String::from_utf8_lossy(&out.stdout).contains("UP")
}

#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn multi_partition_arrays_keep_the_heap_intact() {
    if !e2e_enabled() {
        return;
    }
    let c = Cluster::up(Opts {
        nodes: 2,
        priority: "gputopo".into(),
        extra_conf: Some(EXTRA.into()),
        slurmctld_prefix: Some(HEAP_CHECK_PREFIX.into()),
        ..Opts::default()
    });
    let arrays = [
        c.sbatch(&["-p", "p1,p2", "--array=0-30%3", "-n1", "--wrap", "sleep 1"]),
        c.sbatch(&[
            "-p",
            "p3,p2,p1",
            "--array=0-30%3",
            "-n1",
            "--wrap",
            "sleep 1",
        ]),
        c.sbatch(&["-p", "p2,p3", "--array=0-20%2", "-n1", "--wrap", "sleep 1"]),
    ];
    // Let a few tasks split off and several passes run, then move the third array's pending
    // record to other partitions (slurmctld frees its priority_array; glibc checks it).
    let left = || tasks_left(&c);
    c.wait_until("the first tasks to finish", WAIT, || {
        left() <= 31 + 31 + 21 - 4
    });
    // PriorityCalcPeriod cannot go below a minute; every restart adds two passes (the final
    // one of the orderly stop and the one at start), with jobs split in between.
    for _ in 0..2 {
        c.restart_slurmctld();
        assert!(alive(&c), "slurmctld restarted under the heap checker");
    }
    // Tasks that already started refuse the update; the pending record takes it.
    let upd = c.run(
        "scontrol",
        &["update", &format!("jobid={}", arrays[2]), "partition=p1,p3"],
    );
    eprintln!("{}", String::from_utf8_lossy(&upd.stderr));
    // 23.11 and 24.05 start these multi-partition array tasks from backfill only (every
    // bf_interval, 30 s; stock cons_tres with priority/multifactor too, seen on 23.11.4): at
    // 8 tasks a cycle the 83 tasks need about 320 s there.
    let budget = if release_in((23, 11), (24, 11)) {
        480
    } else {
        150
    };
    c.wait_until(
        "every array task to finish (slurmctld aborts on heap corruption)",
        Duration::from_secs(budget),
        || !alive(&c) || left() == 0,
    );
    assert!(alive(&c), "slurmctld died under the heap checker");
    // Wait for the purge of the finished records: their arrays are freed (and checked) there.
    c.wait_until("the finished array records to be purged", WAIT, || {
        !alive(&c)
            || arrays.iter().all(|j| {
                !c.run("scontrol", &["show", "job", &j.to_string()])
                    .status
                    .success()
            })
    });
    assert!(
        alive(&c),
        "slurmctld died under the heap checker while purging jobs"
    );
    let log = c.slurmctld_log();
    for bad in ["malloc()", "free()", "corrupted", "double free"] {
        assert!(!log.contains(bad), "slurmctld.log mentions {bad:?}");
    }
    let conf = c.ok("scontrol", &["show", "config"]);
    assert!(
        conf.lines()
            .any(|l| l.starts_with("PriorityType") && l.contains("priority/gputopo")),
        "priority/gputopo is the priority plugin"
    );
}

/// The slurmdbd half of item 1, run on the gputopo cluster of
/// `priority::with_slurmdbd_every_factor_matches_multifactor` (slurmctld under
/// [`HEAP_CHECK_PREFIX`], MinJobAge=2) once its parity checks are done: a job array over two
/// QOS (24.11: one priority per partition × QOS; slurmctld's split copies of the pending record
/// hold only one per partition, which the recalculation used to read past) and two
/// partitions, at most two tasks at a time, a slurmctld restart while it is split (a final
/// pass and a start pass over the copies), then the purge of the finished records. Before 24.11
/// there are no multi-QOS jobs: the same array over the two partitions.
///
/// 24.11.5 holds the pending rest of a multi-QOS array (priority 0, JobHeldAdmin) whenever it
/// splits a task off, with stock multifactor too; the test releases it while it waits, so the
/// array is split over and over as the multi-partition ones are.
pub fn multi_qos_arrays_keep_the_heap_intact(c: &Cluster) {
    let _ = c.run("scancel", &["--user=root"]);
    // Multi-QOS jobs (`job_record_t.qos_list`) exist from 24.11 (24.11.5 job_record.h:411;
    // 23.11.4 and 24.05.8 have none).
    let multi_qos = release_at_least(24, 11);
    let mut args = vec!["-A", "acct_b", "-p", "hi,lo", "--array=0-9%2", "-n1"];
    if multi_qos {
        args.extend(["--qos=high,low"]);
    }
    args.extend(["--wrap", "sleep 1"]);
    let array = c.sbatch(&args);
    let id = array.to_string();
    let left = || {
        if multi_qos {
            let _ = c.run("scontrol", &["release", &id]);
        }
        tasks_left(c)
    };
    c.wait_until("the first array tasks to finish", WAIT, || left() <= 8);
    c.restart_slurmctld();
    assert!(alive(c), "slurmctld restarted under the heap checker");
    c.wait_until(
        "every array task to finish (slurmctld aborts on heap corruption)",
        Duration::from_secs(90),
        || !alive(c) || left() == 0,
    );
    c.wait_until("the finished array records to be purged", WAIT, || {
        !alive(c) || !c.run("scontrol", &["show", "job", &id]).status.success()
    });
    assert!(alive(c), "slurmctld died under the heap checker");
    let log = c.slurmctld_log();
    for bad in ["malloc()", "free()", "corrupted", "double free"] {
        assert!(!log.contains(bad), "slurmctld.log mentions {bad:?}");
    }
}
