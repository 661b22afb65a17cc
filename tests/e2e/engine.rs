//! Engine end-to-end test (issue 12) on a real slurmctld with a mixed fleet: n1 an NVSwitch
//! board (HGX H100), n2 a PCIe-only box (8× L40S), listed NVSwitch first so that Slurm's own
//! order would send small jobs there.
//!
//! Eight 1-GPU jobs, one after the other, must fill the PCIe node (breaking it costs later jobs
//! a SYS-class 8-GPU set; breaking the HGX node costs an NV18 board), and an 8-GPU job must then
//! get the whole NVSwitch node. With `GPUTOPO_SELECT=cons_tres` the same jobs run on stock
//! Slurm and the test prints where they went beside the assertion-free run, for comparison
//! (stock sends the 1-GPU jobs to n1, the first node, and the 8-GPU job to the PCIe box).
//! A second test gives the nodes different `Weight=`: the administrator's order comes first.

use super::harness::{Cluster, Opts, WAIT, e2e_enabled, select};

/// gputopo.conf: node ranking on, decisions logged.
const CONF: &str = "HealthAware=yes\nTopologyAware=yes\nNodeRanking=yes\nLogDecisions=yes\n";

/// The node a running job got.
fn node_of(c: &Cluster, job: u32) -> String {
    c.wait_state(job, "RUNNING", WAIT);
    let alloc = c.gres_idx(job);
    assert_eq!(alloc.len(), 1, "job {job}: {alloc:?}");
    alloc[0].0.clone()
}

/// n1 an HGX H100 board, n2 an 8× L40S PCIe box, with these `Weight=` (none: equal).
fn mixed_fleet(node_weight: Option<&str>) -> Cluster {
    Cluster::up(Opts {
        nodes: 2,
        topology: "hgx-h100".into(),
        node_topology: Some("n2=l40s-pcie8".into()),
        node_weight: node_weight.map(Into::into),
        gputopo_conf: Some(CONF.into()),
        ..Opts::default()
    })
}

/// Submits `n` 1-GPU jobs one after the other; the node each got.
fn one_gpu_jobs(c: &Cluster, n: usize) -> Vec<String> {
    (0..n)
        .map(|_| {
            let job = c.sbatch(&["-N1", "-n1", "-c1", "--gres=gpu:1", "--wrap", "sleep 300"]);
            node_of(c, job)
        })
        .collect()
}

#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn one_gpu_jobs_fill_pcie_nodes_and_an_8_gpu_job_gets_the_nvswitch_node() {
    if !e2e_enabled() {
        return;
    }
    let c = mixed_fleet(None);
    let small = one_gpu_jobs(&c, 8);
    let big = c.sbatch(&["-N1", "-n1", "-c1", "--gres=gpu:8", "--wrap", "sleep 300"]);
    let big_node = node_of(&c, big);
    let big_gpus = c.gres_idx(big)[0].1.clone();
    eprintln!(
        "select/{}: 1-GPU jobs on {small:?}, 8-GPU job on {big_node} {big_gpus:?}",
        select()
    );
    assert_eq!(big_gpus, (0..8).collect::<Vec<_>>());
    c.assert_no_gpu_shared();
    if select() == "gputopo" {
        assert!(small.iter().all(|n| n == "n2"), "1-GPU jobs: {small:?}");
        assert_eq!(big_node, "n1");
    }
}

/// slurm.conf `Weight=` keeps its meaning: with the NVSwitch node given the lower weight, the
/// administrator's order wins over gputopo's preference for the PCIe box, for 1-GPU jobs as
/// for stock Slurm; gputopo orders only nodes of equal weight (the test above).
#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn node_weight_comes_before_gputopos_node_order() {
    if !e2e_enabled() {
        return;
    }
    let c = mixed_fleet(Some("n1=1,n2=10"));
    let placed = one_gpu_jobs(&c, 3);
    eprintln!(
        "select/{}: 1-GPU jobs on {placed:?} (n1 Weight=1, n2 Weight=10)",
        select()
    );
    assert!(placed.iter().all(|n| n == "n1"), "1-GPU jobs: {placed:?}");
    c.assert_no_gpu_shared();
}
