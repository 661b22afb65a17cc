//! GRES reservations (issue 14 item 1): `TRES=gres/gpu=4` on one DGX-1V node holds four of
//! its GPUs. With one reserved GPU faulty, four one-GPU jobs in the reservation: select/gputopo
//! runs three at once, on the three healthy reserved GPUs, and the fourth waits; a job outside
//! the reservation gets none of the reserved GPUs. Stock cons_tres (`GPUTOPO_SELECT=cons_tres`)
//! runs all four on the reserved GPUs, the faulty one included (printed, not asserted).
//!
//! GRES in reservations needs `AccountingStorageTRES=gres/gpu`, which slurmctld refuses
//! without slurmdbd: the test starts one beside the harness's cluster directory
//! (`DIR-resv.dbd`, ports from `DIR-resv`), so it runs while other shards' clusters do.
//! 22.05 has no GRES reservations (its `select_p_job_test` gets a core bitmap only): the test
//! says so and returns; node reservations are covered by
//! `e2e::gres_configs::reservation_on_a_node_with_a_faulty_gpu` on both releases.

use std::collections::BTreeSet;

use super::gres_configs::{assert_one_waits, running_of};
use super::harness::{
    Cluster, Opts, WAIT, e2e_enabled, parse_index_list, release, release_at_least, select,
};
use super::preempt_qos::Dbd;
use super::select::extra_with_faulty;

/// The GPUs reservation `name` holds on n1, read from slurmctld's GRES debug lines logged
/// while it is created (`gres_job_state_log` of its `gres_list_alloc`: `gres_bit_alloc[0]:4-7
/// of 8`), so the test knows them independently of the plugin.
fn create_reservation(c: &Cluster, name: &str) -> BTreeSet<usize> {
    // 23.11 and 24.05 give a reservation of `Nodes=` and `TRES=gres/gpu=N` one core (23.11.4
    // logs "Created reservation=r1 ... cores=1 ... tres=cpu=1,gres/gpu=4", with stock cons_tres
    // too; 24.05.8 likewise runs one job of four), so only one `-c1` job fits in it: there
    // the reservation asks for a core per GPU.
    let tres = if release_at_least(23, 11) && !release_at_least(24, 11) {
        "TRES=cpu=4,gres/gpu=4"
    } else {
        "TRES=gres/gpu=4"
    };
    c.ok("scontrol", &["setdebugflags", "+Gres"]);
    let before = c.slurmctld_log().len();
    c.ok(
        "scontrol",
        &[
            "create",
            "reservation",
            &format!("ReservationName={name}"),
            "StartTime=now",
            "Duration=60",
            "Users=root",
            "Nodes=n1",
            tres,
        ],
    );
    c.ok("scontrol", &["setdebugflags", "-Gres"]);
    let log = c.slurmctld_log();
    let held = log[before..]
        .lines()
        .filter_map(|l| l.split_once("gres_bit_alloc[0]:").map(|(_, r)| r))
        .filter_map(|r| r.split_once(" of ").map(|(set, _)| set.to_string()))
        .next_back()
        .unwrap_or_default();
    parse_index_list(&held).into_iter().collect()
}

/// The GPUs job `job` holds on n1, once it runs.
fn gpus_of(c: &Cluster, job: u32) -> BTreeSet<usize> {
    c.wait_state(job, "RUNNING", WAIT);
    c.gres_idx(job)
        .into_iter()
        .flat_map(|(_, idx)| idx)
        .collect()
}

#[test]
#[ignore = "needs root, Slurm, MariaDB and slurmdbd; run by contrib/test-all.sh"]
fn gres_reservation_with_a_faulty_gpu_uses_its_healthy_gpus() {
    if !e2e_enabled() {
        return;
    }
    if release().starts_with("22.05") {
        eprintln!("skipped: Slurm 22.05 has no GRES reservations (TRES=gres/gpu=N)");
        return;
    }
    let dbd = Dbd::beside("gtresv", "resv");
    let c = Cluster::up(Opts {
        nodes: 1,
        extra_conf: Some(format!("AccountingStorageTRES=gres/gpu\n{}", dbd.conf)),
        gputopo_conf: Some("LogDecisions=yes\n".into()),
        // The decision lines (info in the plugin: Slurm's verbose) reach the log at debug.
        debug: true,
        ..Opts::default()
    });
    let held = create_reservation(&c, "r1");
    assert_eq!(held.len(), 4, "reserved GPUs from the GRES log: {held:?}");
    // A reserved GPU other than the lowest one cons_tres would hand out first.
    let bad = *held.iter().nth(1).expect("four reserved GPUs");
    let extra = format!("Extra={}", extra_with_faulty(8, bad));
    c.ok("scontrol", &["update", "NodeName=n1", &extra]);

    let outside = c.sbatch(&["-n1", "-c1", "--gres=gpu:2", "--wrap", "sleep 3000"]);
    let out_gpus = gpus_of(&c, outside);
    let args = ["-n1", "-c1", "--reservation=r1", "--gres=gpu:1"];
    let jobs: Vec<u32> = (0..4)
        .map(|_| c.sbatch(&[&args[..], &["--wrap", "sleep 3000"]].concat()))
        .collect();
    let want = if select() == "gputopo" { 3 } else { 4 };
    c.wait_until(&format!("{want} reservation jobs to run"), WAIT, || {
        running_of(&c, &jobs).len() == want
    });
    let inside: Vec<BTreeSet<usize>> = running_of(&c, &jobs)
        .iter()
        .map(|&j| gpus_of(&c, j))
        .collect();
    println!(
        "select/{}: reserved {held:?}, GPU {bad} faulty; outside job got {out_gpus:?}, \
         reservation jobs got {inside:?}",
        select()
    );
    assert!(out_gpus.is_disjoint(&held), "outside job on reserved GPUs");
    let used: BTreeSet<usize> = inside.iter().flatten().copied().collect();
    assert_eq!(used.len(), want, "one GPU per job, none shared: {inside:?}");
    assert!(
        used.is_subset(&held),
        "reservation jobs outside it: {inside:?}"
    );
    if select() == "gputopo" {
        for l in c
            .slurmctld_log()
            .lines()
            .filter(|l| l.contains("decision JobId="))
        {
            println!("  {l}");
        }
        assert!(
            !used.contains(&bad),
            "faulty GPU {bad} allocated: {inside:?}"
        );
        assert_one_waits(&c, &jobs);
    }
    drop(c);
    drop(dbd);
}
