//! Foundation end-to-end tests (issue 2): with `select/gputopo` loaded in a real Slurm
//! cluster, every GPU request form, multi-node jobs, arrays, steps, backfill, reservations,
//! reconfigure, a slurmctld restart and every client command behave as with stock Slurm.
//! `GPUTOPO_SELECT=cons_tres` runs the same tests on stock `select/cons_tres`, so any
//! difference shows up as a failure in one of the two runs.
//!
//! The harness declares no device cgroup (TaskPlugin=task/none), so `CUDA_VISIBLE_DEVICES`
//! in a step holds the absolute GPU indices of that node, the same as `IDX` in
//! `scontrol show job -d` and `SLURM_STEP_GPUS`. (`SLURM_JOB_GPUS` is exported from the batch
//! host to every node, so only there it equals the node's IDX.)

use super::harness::{Cluster, Opts, WAIT, e2e_enabled, parse_index_list};
use std::collections::BTreeMap;

fn two_nodes() -> Cluster {
    Cluster::up(Opts {
        nodes: 2,
        debug: true,
        ..Opts::default()
    })
}

fn total(alloc: &[(String, Vec<usize>)]) -> usize {
    alloc.iter().map(|(_, i)| i.len()).sum()
}

/// sdiag's "Total backfilled jobs (since last slurm start)" (the same line in 22.05 to 26.05).
fn backfilled(c: &Cluster) -> u64 {
    c.sdiag_backfill("Total backfilled jobs (since last slurm start)")
}

/// Runs a job to RUNNING and returns its allocation.
fn start(c: &Cluster, args: &[&str]) -> (u32, Vec<(String, Vec<usize>)>) {
    let mut all = args.to_vec();
    all.extend(["--wrap", "sleep 600"]);
    let job = c.sbatch(&all);
    c.wait_state(job, "RUNNING", WAIT);
    (job, c.gres_idx(job))
}

#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn gpu_request_forms_get_the_gpus_they_ask_for() {
    if !e2e_enabled() {
        return;
    }
    let c = two_nodes();
    // --gres=gpu:N and --gres=gpu:TYPE:N: one node, N distinct GPUs.
    let (_, a) = start(&c, &["-N1", "--gres=gpu:2"]);
    assert_eq!(a.len(), 1, "{a:?}");
    assert_eq!(a[0].1.len(), 2, "{a:?}");
    let (_, a) = start(&c, &["-N1", "--gres=gpu:v100:3"]);
    assert_eq!(a.len(), 1, "{a:?}");
    assert_eq!(a[0].1.len(), 3, "{a:?}");
    // --gpus=N
    let (_, a) = start(&c, &["--gpus=1"]);
    assert_eq!(total(&a), 1, "{a:?}");
    // --gpus-per-node on two nodes
    let (_, a) = start(&c, &["-N2", "--gpus-per-node=1"]);
    assert_eq!(a.len(), 2, "{a:?}");
    assert!(a.iter().all(|(_, i)| i.len() == 1), "{a:?}");
    // --gpus-per-task: 2 tasks x 2 GPUs
    let (_, a) = start(&c, &["-n2", "--gpus-per-task=2"]);
    assert_eq!(total(&a), 4, "{a:?}");
    // 2+3+1+2+4 = 12 of 16 GPUs are taken, none twice.
    let all = c.assert_no_gpu_shared();
    assert_eq!(
        all.iter().map(|(_, _, i)| i.len()).sum::<usize>(),
        12,
        "{all:?}"
    );
    // GresUsed on each node is the union of the jobs' IDX there.
    for node in c.nodes() {
        let mut used: Vec<usize> = all
            .iter()
            .filter(|(_, n, _)| *n == node)
            .flat_map(|(_, _, i)| i.iter().copied())
            .collect();
        used.sort_unstable();
        assert_eq!(c.gres_used(&node), used, "GresUsed on {node}");
    }
    // The plugin's per-call debug line (select/gputopo only).
    if c.opts.select == "gputopo" {
        assert!(
            c.slurmctld_log().contains("job_test JobId="),
            "no select/gputopo job_test line in slurmctld.log"
        );
    }
}

#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn multi_node_jobs_span_nodes() {
    if !e2e_enabled() {
        return;
    }
    let c = two_nodes();
    // All 8 GPUs on both nodes.
    let (job, a) = start(&c, &["-N2", "--gres=gpu:8"]);
    assert_eq!(a.len(), 2, "{a:?}");
    for (_, idx) in &a {
        assert_eq!(idx, &(0..8).collect::<Vec<_>>(), "{a:?}");
    }
    c.ok("scancel", &[&job.to_string()]);
    c.wait_until("GPUs to be free", WAIT, || c.running_jobs().is_empty());
    // --gpus=12 does not fit one node: 8 + 4.
    let (_, a) = start(&c, &["-N2", "--gpus=12"]);
    let mut sizes: Vec<usize> = a.iter().map(|(_, i)| i.len()).collect();
    sizes.sort_unstable();
    assert_eq!(sizes, vec![4, 8], "{a:?}");
}

#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn job_array_tasks_get_disjoint_gpus() {
    if !e2e_enabled() {
        return;
    }
    let c = Cluster::up(Opts::default());
    let job = c.sbatch(&["--array=0-3", "--gres=gpu:2", "--wrap", "sleep 600"]);
    c.wait_until("4 array tasks running", WAIT, || {
        c.running_jobs().len() == 4
    });
    let all = c.assert_no_gpu_shared();
    assert_eq!(all.len(), 4, "{all:?}");
    assert!(
        all.iter().all(|(_, n, i)| n == "n1" && i.len() == 2),
        "{all:?}"
    );
    // A fifth task would not fit: the array's tasks account for all 8 GPUs.
    let ids = c.ok("squeue", &["-h", "-r", "-j", &job.to_string(), "-o", "%i"]);
    assert_eq!(ids.lines().count(), 4, "{ids}");
}

/// Parses lines `STEP <node> <CUDA_VISIBLE_DEVICES> <SLURM_STEP_GPUS>` from a job's output.
fn step_lines(out: &str) -> BTreeMap<String, (Vec<usize>, Vec<usize>)> {
    out.lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let at = w.iter().position(|x| *x == "STEP")?;
            let node = w.get(at + 1)?.to_string();
            let cvd = parse_index_list(w.get(at + 2)?);
            let step = parse_index_list(w.get(at + 3)?);
            Some((node, (cvd, step)))
        })
        .collect()
}

#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn srun_steps_see_the_allocated_gpus() {
    if !e2e_enabled() {
        return;
    }
    let c = two_nodes();
    // Take GPUs first so that the job under test does not simply get 0..n.
    start(&c, &["-N2", "--gpus-per-node=3"]);
    let script = "srun -l bash -c 'echo STEP $SLURMD_NODENAME $CUDA_VISIBLE_DEVICES $SLURM_STEP_GPUS'; sleep 600";
    let job = c.sbatch(&[
        "-N2",
        "--ntasks-per-node=1",
        "--gpus-per-node=2",
        "--wrap",
        script,
    ]);
    c.wait_state(job, "RUNNING", WAIT);
    c.wait_until("both steps to report", WAIT, || {
        step_lines(&c.job_output(job)).len() == 2
    });
    let steps = step_lines(&c.job_output(job));
    let alloc = c.gres_idx(job);
    assert_eq!(alloc.len(), 2, "{alloc:?}");
    for (node, idx) in &alloc {
        let (cvd, step_gpus) = steps
            .get(node)
            .unwrap_or_else(|| panic!("no step output from {node}: {steps:?}"));
        assert_eq!(idx.len(), 2, "{alloc:?}");
        assert_eq!(cvd, idx, "CUDA_VISIBLE_DEVICES on {node} vs IDX");
        assert_eq!(step_gpus, idx, "SLURM_STEP_GPUS on {node} vs IDX");
    }
    c.assert_no_gpu_shared();
    // srun creating its own allocation.
    let out = c.ok(
        "srun",
        &["--gpus=2", "bash", "-c", "echo $CUDA_VISIBLE_DEVICES"],
    );
    assert_eq!(parse_index_list(out.trim()).len(), 2, "{out}");
}

#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn backfill_starts_short_jobs_around_a_reservation() {
    if !e2e_enabled() {
        return;
    }
    let c = Cluster::up(Opts::default());
    // The whole node is reserved from now+15 min.
    c.ok(
        "scontrol",
        &[
            "create",
            "reservation",
            "ReservationName=maint",
            "StartTime=now+900",
            "Duration=10",
            "Nodes=n1",
            "Users=root",
            "Flags=MAINT,IGNORE_JOBS",
        ],
    );
    // A: 4 GPUs for 5 min (ends before the reservation): runs.
    let (a, _) = start(&c, &["--gres=gpu:4", "--time=5"]);
    // B: all 8 GPUs, waits for A (expected start in 5 min, done before the reservation).
    let b = c.sbatch(&["--gres=gpu:8", "--time=2", "--wrap", "sleep 600"]);
    // C: 2 GPUs for 1 min, lower priority than B: only backfill can start it, and it may,
    // because it ends before B's expected start (for the next 4 minutes: room for a slow
    // backfill cycle on a loaded machine).
    let before = backfilled(&c);
    let cj = c.sbatch(&["--gres=gpu:2", "--time=1", "--wrap", "sleep 600"]);
    c.wait_state(cj, "RUNNING", WAIT);
    // sdiag's counter, not backfill's "Started JobId=... in" line: from 26.05 that line is
    // logged only with DebugFlags=HetJob (26.05.3 backfill.c:3934). B waits for A, so the
    // only job backfill can have started since `before` is C.
    assert!(
        backfilled(&c) > before,
        "job {cj} was not started by sched/backfill (sdiag: {before} backfilled before it, as many after)"
    );
    // D: 1 GPU for 10 min would delay B (it would hold a GPU past A's end): stays pending.
    let d = c.sbatch(&["--gres=gpu:1", "--time=10", "--wrap", "sleep 600"]);
    c.wait_until("D to be considered by backfill", WAIT, || {
        c.job_reason(d).is_some_and(|r| r != "None")
    });
    assert_eq!(c.job_state(b).as_deref(), Some("PENDING"));
    assert_eq!(c.job_state(d).as_deref(), Some("PENDING"));
    assert_eq!(c.job_state(a).as_deref(), Some("RUNNING"));
    c.assert_no_gpu_shared();
    // A job inside the reservation waits for it.
    let r = c.sbatch(&["--reservation=maint", "--gres=gpu:1", "--wrap", "sleep 600"]);
    c.wait_until(
        "the reservation job to be pending on the reservation",
        WAIT,
        || c.job_reason(r).is_some_and(|r| r != "None"),
    );
    assert_eq!(c.job_state(r).as_deref(), Some("PENDING"));
}

#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn corecnt_reservation_is_accepted() {
    if !e2e_enabled() {
        return;
    }
    // scontrol allows CoreCnt only when the select plugin id is cons_res/cons_tres (109):
    // this proves the id and deployment choice.
    let c = Cluster::up(Opts::default());
    c.ok(
        "scontrol",
        &[
            "create",
            "reservation",
            "ReservationName=cores",
            "StartTime=now",
            "Duration=60",
            "Nodes=n1",
            "CoreCnt=2",
            "Users=root",
        ],
    );
    let res = c.ok("scontrol", &["show", "reservation", "cores"]);
    assert!(res.contains("CoreCnt=2"), "{res}");
    let (job, a) = start(&c, &["--reservation=cores", "-n1", "--gres=gpu:1"]);
    assert_eq!(total(&a), 1, "{a:?}");
    let s = c.job_record(job);
    assert_eq!(
        super::harness::field(&s, "Reservation"),
        Some("cores"),
        "{s}"
    );
}

#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn reconfigure_and_restart_keep_allocations() {
    if !e2e_enabled() {
        return;
    }
    let c = two_nodes();
    let mut before = Vec::new();
    for args in [
        &["--gres=gpu:2"][..],
        &["--gres=gpu:3"],
        &["-N2", "--gpus-per-node=1"],
    ] {
        before.push(start(&c, args));
    }
    c.reconfigure();
    for (job, a) in &before {
        assert_eq!(c.job_state(*job).as_deref(), Some("RUNNING"));
        assert_eq!(&c.gres_idx(*job), a, "job {job} after reconfigure");
    }
    before.push(start(&c, &["--gres=gpu:2"]));
    c.assert_no_gpu_shared();

    c.restart_slurmctld();
    c.wait_until("nodes to respond after restart", WAIT, || {
        c.ok("sinfo", &["-h", "-N", "-o", "%t"])
            .lines()
            .all(|s| !s.ends_with('*'))
    });
    for (job, a) in &before {
        assert_eq!(c.job_state(*job).as_deref(), Some("RUNNING"));
        assert_eq!(&c.gres_idx(*job), a, "job {job} after slurmctld restart");
    }
    // Fill what is left on each node and check nothing is given twice.
    for node in c.nodes() {
        let free = 8 - c.gres_used(&node).len();
        if free > 0 {
            start(&c, &["-w", &node, &format!("--gres=gpu:{free}")]);
        }
    }
    let all = c.assert_no_gpu_shared();
    assert_eq!(
        all.iter().map(|(_, _, i)| i.len()).sum::<usize>(),
        16,
        "{all:?}"
    );
    // Now the cluster is full: one more GPU job waits.
    let extra = c.sbatch(&["--gres=gpu:1", "--wrap", "sleep 600"]);
    c.wait_until("the extra job to wait for resources", WAIT, || {
        c.job_reason(extra).is_some_and(|r| r != "None")
    });
    assert_eq!(c.job_state(extra).as_deref(), Some("PENDING"));
}

#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn every_client_command_works_with_the_plugin_installed() {
    if !e2e_enabled() {
        return;
    }
    let c = two_nodes();
    let job = c.sbatch(&["--gres=gpu:1", "--wrap", "sleep 600"]);
    c.wait_state(job, "RUNNING", WAIT);
    let sinfo = c.ok("sinfo", &["-N", "-o", "%N %t %G"]);
    assert!(sinfo.contains("n1") && sinfo.contains("gpu:"), "{sinfo}");
    let squeue = c.ok("squeue", &["-o", "%i %T %b"]);
    assert!(squeue.contains(&job.to_string()), "{squeue}");
    for args in [
        &["show", "config"][..],
        &["show", "nodes"],
        &["show", "partitions"],
        &["show", "jobs"],
    ] {
        c.ok("scontrol", args);
    }
    let config = c.ok("scontrol", &["show", "config"]);
    let select_type = format!("select/{}", c.opts.select);
    assert!(
        config.contains(&select_type),
        "SelectType is not {select_type}"
    );
    let out = c.ok("srun", &["-N2", "hostname"]);
    assert_eq!(out.lines().count(), 2, "{out}");
    // sshare: without accounting it may answer with an error, but it must load all plugins
    // in PluginDir and exit normally.
    let out = c.run("sshare", &["-a"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code().is_some(),
        "sshare died: {:?} {err}",
        out.status
    );
    assert!(
        !err.contains("plugin") && !err.contains("fatal"),
        "sshare: {err}"
    );
    c.ok("scancel", &[&job.to_string()]);
    c.wait_until("the cancelled job to end", WAIT, || {
        c.job_state(job).as_deref() != Some("RUNNING")
    });
    // slurmd and slurmstepd loaded the select plugins without complaint.
    for node in c.nodes() {
        let log = c.slurmd_log(&node);
        assert!(!log.contains("fatal"), "slurmd {node}: {log}");
    }
}
