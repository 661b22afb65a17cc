//! Jobs whose GPUs are tied to their sockets (issue 25 item 4): with `--gpus-per-socket`
//! cons_tres gives one GPU per allocated socket, and gputopo's re-pick stands down for such a
//! job (core `repick::keep_pinned`) where it would otherwise take the best-connected pair,
//! both on one socket of the DGX-1V (before the fix, 24.11.5: "chose 0,3 ... instead of 0,5";
//! 22.05.8 keeps no GPU bitmap for such a job at job_test, so nothing was re-picked there).
//! The stock run (`GPUTOPO_SELECT=cons_tres`) asserts the same.
//!
//! With `RestrictedCoresPerGPU` (24.11+) cons_tres reserves cores for the GPUs it picks, so
//! gputopo keeps cons_tres's GPUs on such a node (core `Snapshot::restricted`): a node of four
//! 2-GPU jobs and a CPU-only job that needs every unrestricted core then runs all five at
//! once, as stock does. A GPU set swapped after the cores were reserved would hold cores
//! reserved for GPUs the job does not have, and the later jobs would wait.

use std::collections::BTreeSet;

use super::harness::{Cluster, Opts, WAIT, e2e_enabled, release_at_least, skip};

#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn gpus_per_socket_keeps_one_gpu_on_each_socket() {
    if !e2e_enabled() {
        return;
    }
    let c = Cluster::up(Opts {
        gputopo_conf: Some("TopologyAware=yes\nLogDecisions=yes\n".into()),
        debug: true,
        ..Opts::default()
    });
    let job = c.sbatch(&[
        "-N1",
        "-n2",
        "--sockets-per-node=2",
        "--gpus-per-socket=1",
        "--wrap",
        "sleep 60",
    ]);
    c.wait_state(job, "RUNNING", WAIT);
    let got = c.gres_idx(job);
    let gpus = &got[0].1;
    assert_eq!(gpus.len(), 2, "{got:?}");
    // DGX-1V: GPUs 0-3 on socket 0, 4-7 on socket 1 (Cores= of the generated gres.conf).
    assert!(
        gpus.iter().filter(|&&g| g < 4).count() == 1,
        "one GPU on each socket: {got:?}"
    );
}

#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn restricted_cores_per_gpu_fill_the_node_as_stock_does() {
    if !e2e_enabled() {
        return;
    }
    if !release_at_least(24, 11) {
        skip("RestrictedCoresPerGPU is a 24.11 node key");
        return;
    }
    let c = Cluster::up(Opts {
        gputopo_conf: Some("TopologyAware=yes\nLogDecisions=yes\n".into()),
        node_keys: Some("RestrictedCoresPerGPU=2".into()),
        debug: true,
        ..Opts::default()
    });
    // 8 GPUs × 2 restricted cores: 16 of the node's 32 cores are for GPU jobs only. Submitted
    // as users do (no -N), in both request forms: per node (--gres) and per job (--gpus).
    let gpu_jobs: Vec<u32> = ["--gres=gpu:2", "--gpus=2", "--gres=gpu:2", "--gpus=2"]
        .iter()
        .map(|gpus| c.sbatch(&["-n4", gpus, "--wrap", "sleep 300"]))
        .collect();
    let cpu_job = c.sbatch(&["-n16", "--wrap", "sleep 300"]);
    let mut gpus = BTreeSet::new();
    for &job in &gpu_jobs {
        c.wait_state(job, "RUNNING", WAIT);
        let got = c.gres_idx(job);
        assert_eq!(got.len(), 1, "job {job}: {got:?}");
        assert_eq!(got[0].1.len(), 2, "job {job}: {got:?}");
        gpus.extend(got[0].1.iter().copied());
    }
    assert_eq!(gpus.len(), 8, "the four jobs hold disjoint GPUs: {gpus:?}");
    c.wait_state(cpu_job, "RUNNING", WAIT);
}
