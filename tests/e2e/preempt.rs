//! Topology-aware preemption victims (issue 15 item 1) on a real slurmctld: two DGX-1V nodes,
//! `PreemptType=preempt/partition_prio`, `PreemptMode=REQUEUE`, a low-tier partition `gpu`
//! and a high-tier partition `high` on the same nodes.
//!
//! - Both nodes filled with 16 one-GPU jobs in `gpu`; a 4-GPU job in `high` preempts four
//!   of them (the minimum, as stock) and, with select/gputopo, runs on a best quad ({0-3} or
//!   {4-7}: every pair NVLinked). The stock run (`GPUTOPO_SELECT=cons_tres`) prints what
//!   cons_tres chose beside it.
//! - The same with `PreemptMode=CANCEL`.
//! - With GPU 3 of one node published faulty (15 jobs fill the other GPUs), gputopo again
//!   preempts exactly four jobs and the preemptor gets a best quad without the faulty GPU:
//!   the fault does not make cons_tres plan on a node where only three victims seem enough.

use super::gres_configs::cancel_all;
use super::harness::{Cluster, Opts, WAIT, e2e_enabled, field, select};
use super::select::extra_with_faulty;

/// slurm.conf lines: partition_prio preemption in `mode` and the high-tier partition.
fn extra(mode: &str) -> String {
    format!(
        "PreemptType=preempt/partition_prio\nPreemptMode={mode}\n\
         PartitionName=high Nodes=ALL PriorityTier=10 MaxTime=INFINITE State=UP\n"
    )
}

pub(super) const CONF: &str =
    "HealthAware=yes\nTopologyAware=yes\nNodeRanking=yes\nLogDecisions=yes\n";

/// Submits a one-node job of `gpus` GPUs in the high-tier partition, sleeping `secs`.
pub(super) fn submit_high(c: &Cluster, gpus: u32, secs: u32) -> u32 {
    let gres = format!("--gres=gpu:{gpus}");
    let wrap = format!("sleep {secs}");
    c.sbatch(&["-p", "high", "-N1", "-n1", "-c1", &gres, "--wrap", &wrap])
}

pub(super) fn best_quad(g: &[usize]) -> bool {
    g == [0, 1, 2, 3] || g == [4, 5, 6, 7]
}

/// Fills the GPUs with `n` one-GPU jobs in `gpu`, then runs a 4-GPU job in `high`; returns
/// (victims, the preemptor's node and GPUs).
fn preempt_once(c: &Cluster, n: usize) -> (Vec<u32>, String, Vec<usize>) {
    preempt_once_with(c, n, &["-p", "gpu"], &["-p", "high"])
}

/// Fills the GPUs with `n` one-GPU jobs submitted with `low` (sbatch options), then runs a
/// 4-GPU job submitted with `high`; returns (victims, the preemptor's node and GPUs).
pub(super) fn preempt_once_with(
    c: &Cluster,
    n: usize,
    low: &[&str],
    high: &[&str],
) -> (Vec<u32>, String, Vec<usize>) {
    let job = |opts: &[&str], gres: &str| {
        let mut args = opts.to_vec();
        args.extend(["-N1", "-n1", "-c1", gres, "--wrap", "sleep 3000"]);
        c.sbatch(&args)
    };
    let fill: Vec<u32> = (0..n).map(|_| job(low, "--gres=gpu:1")).collect();
    for &j in &fill {
        c.wait_state(j, "RUNNING", WAIT);
    }
    let high = job(high, "--gres=gpu:4");
    c.wait_state(high, "RUNNING", WAIT);
    let victims: Vec<u32> = fill
        .iter()
        .copied()
        .filter(|&j| {
            let rec = c.job_record(j);
            field(&rec, "Restarts").is_some_and(|r| r != "0")
                || field(&rec, "JobState").is_some_and(|s| s != "RUNNING")
        })
        .collect();
    let a = c.gres_idx(high);
    assert_eq!(a.len(), 1, "{a:?}");
    let (node, gpus) = a.into_iter().next().unwrap_or_default();
    c.assert_no_gpu_shared();
    (victims, node, gpus)
}

#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn a_preemptor_gets_a_best_quad_at_stock_cost() {
    if e2e_enabled() {
        scenario("REQUEUE", true);
    }
}

/// The same with `PreemptMode=CANCEL` (the fault-free half).
#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn a_preemptor_gets_a_best_quad_at_stock_cost_with_cancel() {
    if e2e_enabled() {
        scenario("CANCEL", false);
    }
}

/// The module's scenario in preemption `mode`; `with_fault` adds the faulty-GPU half.
fn scenario(mode: &str, with_fault: bool) {
    let gputopo = select() == "gputopo";
    let c = Cluster::up(Opts {
        nodes: 2,
        extra_conf: Some(extra(mode)),
        gputopo_conf: Some(CONF.into()),
        debug: true,
        ..Opts::default()
    });
    let (victims, node, gpus) = preempt_once(&c, 16);
    println!(
        "select/{}, PreemptMode={mode}: 4-GPU preemptor on {node} GPUs {gpus:?}, {} victims",
        select(),
        victims.len()
    );
    assert_eq!(victims.len(), 4, "the minimum: {victims:?}");
    if !gputopo {
        return;
    }
    assert!(best_quad(&gpus), "not a best quad: {gpus:?}");
    if !with_fault {
        return;
    }
    cancel_all(&c);
    let extra = format!("Extra={}", extra_with_faulty(8, 3));
    c.ok("scontrol", &["update", "NodeName=n1", &extra]);
    let (victims, node, gpus) = preempt_once(&c, 15);
    println!(
        "select/gputopo, GPU 3 of n1 faulty: preemptor on {node} GPUs {gpus:?}, {} victims",
        victims.len()
    );
    assert_eq!(victims.len(), 4, "as without the fault: {victims:?}");
    assert!(best_quad(&gpus), "not a best quad: {gpus:?}");
    assert!(!(node == "n1" && gpus.contains(&3)), "the faulty GPU");
}
