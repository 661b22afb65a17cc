//! Gang scheduling and suspension with GPUs (issue 15 item 3) on a real slurmctld: two DGX-1V
//! nodes, `PreemptType=preempt/partition_prio`, `PreemptMode=SUSPEND,GANG`, a low-tier and a
//! high-tier partition on the same nodes, both `OverSubscribe=FORCE:1` (Slurm requires FORCE
//! where jobs are suspended; `:1` preempts instead of time-slicing).
//!
//! What Slurm does with GRES on suspension (22.05.8 and 24.11.5 alike): a suspended job keeps
//! its GPUs. cons_tres plans a suspension by removing only the victim's cores
//! (`JOB_RES_ACTION_RESUME` in `_run_now`'s preemptee loop and in `select_p_job_suspend`:
//! "only subtract cores"; memory and GRES stay), and under GANG `select_p_job_suspend` is
//! not even called, so nothing is released; slurm.conf(5): "Suspended jobs will not release
//! GRES. Higher priority jobs will not be able to preempt to gain access to GRES." So the
//! indices cannot change across suspend/resume, and a preemptor only gets GPUs nobody holds.
//! The test asserts exactly that, with stock (`GPUTOPO_SELECT=cons_tres`) beside it:
//!
//! - Multi-node jobs start all at once: a 2-node job of 4 GPUs per node waits while one node
//!   has only 3 free, holding nothing on either node, then starts on both together (each
//!   node's step sees its own 4 GPUs). With GPU 3 of n2 published faulty, gputopo's set on
//!   n2 leaves it out.
//! - A high-tier job that needs cores suspends the low-tier job; the suspended job keeps its
//!   GPU indices (`scontrol show job -d` IDX before, during and after; its own
//!   `CUDA_VISIBLE_DEVICES` lines before and after), the preemptor gets the other GPUs.
//! - No GPU is handed to two jobs: a high-tier job wanting a GPU the suspended job holds
//!   waits; one wanting more GPUs than a running low-tier job leaves free waits too, and the
//!   low-tier job is not suspended for it.

use super::gres_configs::cancel_all;
use super::harness::{
    Cluster, Opts, WAIT, e2e_enabled, field, parse_index_list, release_in, select,
};
use super::select::extra_with_faulty;

const EXTRA: &str = "PreemptType=preempt/partition_prio\n\
                     PreemptMode=SUSPEND,GANG\n\
                     SchedulerTimeSlice=5\n\
                     PartitionName=low Nodes=ALL PriorityTier=1 OverSubscribe=FORCE:1 MaxTime=INFINITE State=UP\n\
                     PartitionName=high Nodes=ALL PriorityTier=10 OverSubscribe=FORCE:1 MaxTime=INFINITE State=UP\n";

/// A job script printing its `CUDA_VISIBLE_DEVICES` once a second (stopped while suspended).
const TICKS: &str = "i=0; while :; do i=$((i+1)); echo \"tick $i CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES\"; sleep 1; done";

/// The `CUDA_VISIBLE_DEVICES` of each tick line of a [`TICKS`] job's output.
fn ticks(out: &str) -> Vec<Vec<usize>> {
    out.lines()
        .filter(|l| l.starts_with("tick "))
        .filter_map(|l| l.split_once("CUDA_VISIBLE_DEVICES="))
        .map(|(_, v)| parse_index_list(v.trim()))
        .collect()
}

/// `sbatch -p PART -w NODE -n1 -c CORES --gres=gpu:GPUS --wrap WRAP`.
fn submit(c: &Cluster, part: &str, node: &str, cores: u32, gpus: u32, wrap: &str) -> u32 {
    let cores = cores.to_string();
    let gres = format!("--gres=gpu:{gpus}");
    c.sbatch(&[
        "-p", part, "-w", node, "-N1", "-n1", "-c", &cores, &gres, "--wrap", wrap,
    ])
}

/// Waits until `job` is pending for `Resources` (a scheduling pass has looked at it).
///
/// Slurm 23.11 and 24.05 leave such a job's reason at `None` under gang scheduling, with
/// stock cons_tres as with gputopo (seen on 23.11.4 and 24.05.8; 22.05 and 24.11 onwards set
/// `Resources`): there, pending is all the test can wait for, and the checks that follow
/// (no GPU held while pending, both nodes at once) still hold.
fn wait_pending_for_resources(c: &Cluster, job: u32) {
    let none_too = release_in((23, 11), (24, 11));
    c.wait_until(&format!("job {job} to wait for resources"), WAIT, || {
        c.job_state(job).as_deref() == Some("PENDING")
            && match c.job_reason(job).as_deref() {
                Some("Resources") => true,
                Some("None") => none_too,
                _ => false,
            }
    });
}

#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn gang_jobs_start_together_and_suspended_jobs_keep_their_gpus() {
    if !e2e_enabled() {
        return;
    }
    let c = Cluster::up(Opts {
        nodes: 2,
        extra_conf: Some(EXTRA.into()),
        gputopo_conf: Some("HealthAware=yes\nTopologyAware=yes\nLogDecisions=yes\n".into()),
        ..Opts::default()
    });
    all_or_nothing(&c);
    cancel_all(&c);
    suspend_keeps_gpus(&c);
}

/// A 2-node job waits, holding nothing, until both nodes have its GPUs, then starts on both.
fn all_or_nothing(c: &Cluster) {
    let extra = format!("Extra={}", extra_with_faulty(8, 3));
    c.ok("scontrol", &["update", "NodeName=n2", &extra]);
    let fill: Vec<u32> = (0..5)
        .map(|_| submit(c, "low", "n1", 1, 1, "sleep 3000"))
        .collect();
    for &j in &fill {
        c.wait_state(j, "RUNNING", WAIT);
    }
    let script = "srun -l bash -c 'echo STEP $SLURMD_NODENAME $CUDA_VISIBLE_DEVICES'; sleep 3000";
    let gang = c.sbatch(&[
        "-p",
        "low",
        "-N2",
        "--ntasks-per-node=1",
        "-c1",
        "--gres=gpu:4",
        "--wrap",
        script,
    ]);
    wait_pending_for_resources(c, gang);
    assert!(c.gres_idx(gang).is_empty(), "a pending job holds GPUs");
    assert!(c.gres_used("n2").is_empty(), "n2 held while n1 is short");
    assert_eq!(c.gres_used("n1").len(), 5, "{}", c.show_node("n1"));
    c.ok("scancel", &[&fill[0].to_string()]);
    c.wait_state(gang, "RUNNING", WAIT);
    let alloc = c.gres_idx(gang);
    c.wait_until("a step on each node", WAIT, || {
        c.job_output(gang).matches("STEP ").count() == 2
    });
    let out = c.job_output(gang);
    println!("select/{}: 2-node job {alloc:?}\n{out}", select());
    assert_eq!(alloc.len(), 2, "{alloc:?}");
    for (node, idx) in &alloc {
        assert_eq!(idx.len(), 4, "{alloc:?}");
        let line = out
            .lines()
            .find(|l| l.contains(&format!("STEP {node} ")))
            .unwrap_or_else(|| panic!("no step on {node}: {out}"));
        let cvd = parse_index_list(line.rsplit(' ').next().unwrap_or(""));
        assert_eq!(&cvd, idx, "CUDA_VISIBLE_DEVICES on {node} vs IDX");
        if node == "n2" && select() == "gputopo" {
            assert!(!idx.contains(&3), "the faulty GPU of n2: {idx:?}");
        }
    }
    c.assert_no_gpu_shared();
}

/// A high-tier job suspends a low-tier one for its cores; the suspended job keeps its GPUs.
fn suspend_keeps_gpus(c: &Cluster) {
    // 28 of n1's 32 cores and 4 GPUs.
    let low = submit(c, "low", "n1", 28, 4, TICKS);
    c.wait_state(low, "RUNNING", WAIT);
    let before = c.gres_idx(low);
    c.wait_until("the low job's first tick", WAIT, || {
        !ticks(&c.job_output(low)).is_empty()
    });
    // 8 cores: only with the low job's cores; its GPUs stay with it.
    let high = submit(c, "high", "n1", 8, 4, "sleep 3000");
    c.wait_state(high, "RUNNING", WAIT);
    c.wait_state(low, "SUSPENDED", WAIT);
    let during = c.gres_idx(low);
    let preemptor = c.gres_idx(high);
    let ticks_suspended = ticks(&c.job_output(low)).len();
    println!(
        "select/{}: low job {before:?} suspended as {during:?}; preemptor {preemptor:?}",
        select()
    );
    assert_eq!(before, during, "the suspended job's GPUs");
    let (held, got) = (&before[0].1, &preemptor[0].1);
    assert!(held.iter().all(|g| !got.contains(g)), "{held:?} vs {got:?}");
    assert_eq!(c.gres_used("n1").len(), 8, "{}", c.show_node("n1"));
    // A high-tier GPU job that fits the free cores but no free GPU: the suspended job's GPUs
    // are not handed out.
    let wants_held = submit(c, "high", "n1", 1, 1, "sleep 3000");
    wait_pending_for_resources(c, wants_held);
    assert_eq!(c.job_state(low).as_deref(), Some("SUSPENDED"));
    c.assert_no_gpu_shared();
    // The preemptor ends: gang resumes the job on the same GPUs, and the waiting job gets a
    // GPU the preemptor freed, from the free cores, without suspending the low job again.
    c.ok("scancel", &[&high.to_string()]);
    c.wait_state(low, "RUNNING", WAIT);
    c.wait_state(wants_held, "RUNNING", WAIT);
    c.wait_until("the resumed job to tick again", WAIT, || {
        ticks(&c.job_output(low)).len() > ticks_suspended + 1
    });
    let after = c.gres_idx(low);
    assert_eq!(before, after, "the resumed job's GPUs");
    let seen = ticks(&c.job_output(low));
    assert!(seen.iter().all(|t| t == held), "{seen:?} vs IDX {held:?}");
    // More GPUs than the running low-tier job leaves free (3): suspending it would free cores
    // only, so Slurm does not, and the job waits.
    let wants_more = submit(c, "high", "n1", 1, 4, "sleep 3000");
    wait_pending_for_resources(c, wants_more);
    assert_eq!(c.job_state(low).as_deref(), Some("RUNNING"));
    let used = c.assert_no_gpu_shared();
    println!(
        "select/{}: after resume {after:?}, {} ticks; running {used:?}",
        select(),
        seen.len()
    );
    assert!(field(&c.job_record(wants_more), "JobState") == Some("PENDING"));
}
