//! Jobs whose GPUs are tied to their sockets (issue 25 item 4): with `--gpus-per-socket`
//! cons_tres gives one GPU per allocated socket, and gputopo's re-pick stands down for such a
//! job (core `repick::keep_pinned`) where it would otherwise take the best-connected pair,
//! both on one socket of the DGX-1V (before the fix, 24.11.5: "chose 0,3 ... instead of 0,5";
//! 22.05.8 keeps no GPU bitmap for such a job at job_test, so nothing was re-picked there).
//! The stock run (`GPUTOPO_SELECT=cons_tres`) asserts the same.

use super::harness::{Cluster, Opts, WAIT, e2e_enabled};

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
