//! Per-GPU drain and resume (issue 28 items 1 and 4): `gputopo drain` takes one GPU of a node
//! out of service while a job runs on it (the job keeps it), a waiting job that needs it says
//! why in its placement note, other jobs never get it, the drain survives slurmctld and slurmd
//! restarts and a reconfigure, a resume lets the waiting job start, draining every GPU drains
//! the node in Slurm (`sinfo -R`), and each change is one info line in slurmctld.log and an
//! entry of `gputopo nodes --history`.
//!
//! One DGX-1V node whose agent publishes a healthy fixture (so every GPU is ok and only the
//! drain keeps jobs off GPU 3).

use super::agent::{extra, health, start};
use super::harness::{Cluster, WAIT, gputopo_only};

/// Runs the `gputopo` command against the cluster (asserting success); its stdout.
pub(super) fn gputopo(c: &Cluster, args: &[&str]) -> String {
    let bin = super::harness::gputopo_bin();
    let out = c.run(bin.to_str().expect("a UTF-8 path"), args);
    assert!(
        out.status.success(),
        "gputopo {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The job no longer holds its GPUs (gone, or CANCELLED and no longer COMPLETING).
fn ended(c: &Cluster, job: u32) -> bool {
    !matches!(
        c.job_state(job).as_deref(),
        Some("RUNNING" | "COMPLETING" | "PENDING")
    )
}

fn drained(c: &Cluster) -> Vec<usize> {
    health(c, "n1").map_or_else(Vec::new, |h| h.drained.iter().map(|d| d.index).collect())
}

#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn a_drained_gpu_stays_out_of_new_jobs_until_resumed() {
    if !gputopo_only() {
        return;
    }
    let Some((_rig, c)) = start("drain", "dgx1v", &[("n1", "dgx1v-healthy")], "") else {
        return;
    };
    c.wait_until("n1 to publish its GPU health", WAIT, || {
        health(&c, "n1").is_some()
    });

    // A job holds every GPU; draining GPU 3 under it leaves it running.
    let all = c.sbatch(&["--gres=gpu:8", "--wrap", "sleep 600"]);
    c.wait_state(all, "RUNNING", WAIT);
    let out = gputopo(
        &c,
        &["drain", "n1", "--gpu", "3", "--reason", "e2e RMA 1234"],
    );
    assert!(out.contains("GPU 3 drained"), "{out}");
    assert_eq!(drained(&c), [3]);
    let e = extra(&c, "n1");
    assert!(e.starts_with(r#"{"gpu_drained":"3","gpu_ok":7,"#), "{e}");
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert_eq!(
        c.job_state(all).as_deref(),
        Some("RUNNING"),
        "running jobs keep it"
    );
    let table = gputopo(&c, &["nodes", "n1", "--problems"]);
    let row = table
        .lines()
        .find(|l| l.starts_with("n1 "))
        .unwrap_or_default()
        .to_string();
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(&cols[..3], ["n1", "3", "ok+drained"], "{table}");
    assert_eq!(cols[4], all.to_string(), "the job still holds it: {table}");
    assert!(
        row.contains("drained by root") && row.ends_with("e2e RMA 1234"),
        "{table}"
    );
    c.ok("scancel", &[&all.to_string()]);
    c.wait_until("the job to end", WAIT, || ended(&c, all));

    // An 8-GPU job waits and says why; a 7-GPU job runs without GPU 3.
    let eight = c.sbatch(&["--gres=gpu:8", "--wrap", "sleep 600"]);
    c.wait_until("the 8-GPU job's pending note", WAIT, || {
        c.show_job(&eight.to_string()).contains(
            "SystemComment=gputopo: pending, nodes withheld for faulty or drained GPUs: n1[3]",
        )
    });
    let seven = c.sbatch(&["--gres=gpu:7", "--wrap", "sleep 600"]);
    c.wait_state(seven, "RUNNING", WAIT);
    assert_eq!(
        c.gres_idx(seven),
        [("n1".to_string(), vec![0, 1, 2, 4, 5, 6, 7])]
    );
    c.ok("scancel", &[&seven.to_string()]);
    c.wait_until("the 7-GPU job to end", WAIT, || ended(&c, seven));

    // The drain survives restarts, a reconfigure and the agent's publishes.
    c.restart_slurmctld();
    c.reconfigure();
    c.restart_slurmd("n1");
    std::thread::sleep(std::time::Duration::from_secs(6)); // a health check or more
    assert_eq!(drained(&c), [3], "{}", extra(&c, "n1"));
    assert_eq!(c.job_state(eight).as_deref(), Some("PENDING"));

    // Resume: the waiting job starts, with all eight.
    let out = gputopo(&c, &["resume", "n1", "--gpu", "3"]);
    assert!(out.contains("GPU 3 returned to service"), "{out}");
    c.wait_state(eight, "RUNNING", WAIT);
    assert_eq!(
        c.gres_idx(eight),
        [("n1".to_string(), (0..8).collect::<Vec<_>>())]
    );
    let hist = gputopo(&c, &["nodes", "n1", "--history"]);
    for want in [
        "ok->drained",
        "drained->resumed",
        "e2e RMA 1234",
        "administrator root",
    ] {
        assert!(hist.contains(want), "{want} missing:\n{hist}");
    }

    // Draining every GPU drains the node in Slurm (sinfo -R), and a resume undoes it.
    let out = gputopo(
        &c,
        &["drain", "n1", "--gpu", "0-7", "--reason", "e2e maintenance"],
    );
    assert!(out.contains("node drained"), "{out}");
    let reasons = c.ok("sinfo", &["-R", "-h", "-o", "%N %E"]);
    assert!(
        reasons.contains("n1 gputopo: every GPU is drained or faulty (drained 0-7)"),
        "{reasons}"
    );
    assert_eq!(
        c.job_state(eight).as_deref(),
        Some("RUNNING"),
        "it keeps its GPUs"
    );
    let out = gputopo(&c, &["resume", "n1", "--gpu", "0-7"]);
    assert!(out.contains("node resumed"), "{out}");
    assert!(c.ok("sinfo", &["-R", "-h", "-o", "%N"]).trim().is_empty());

    // One line per change at Slurm's info level, with the GPU's bus id: `select/gputopo:
    // node n1 GPU 3 (0a:00.0): ok -> drained by administrator root (e2e RMA 1234)`.
    c.wait_until("slurmctld to log the drain", WAIT, || {
        c.slurmctld_log().lines().any(|l| {
            l.contains("select/gputopo: node n1 GPU 3 (")
                && l.contains("): ok -> drained by administrator root (e2e RMA 1234)")
        })
    });
    let log = c.slurmctld_log();
    assert!(
        log.contains("drained by administrator root (e2e RMA 1234)"),
        "no drain line"
    );
    assert!(
        log.contains("drained -> resumed by administrator"),
        "no resume line"
    );
    // The history keeps the newest 16 changes of the node: the maintenance drain and resume
    // of eight GPUs are the last ones.
    let hist = gputopo(&c, &["nodes", "n1", "--history"]);
    assert_eq!(hist.lines().count(), 1 + 16, "{hist}");
    assert_eq!(hist.matches("e2e maintenance").count(), 8, "{hist}");
}
