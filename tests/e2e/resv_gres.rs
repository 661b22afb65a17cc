//! GRES reservations (issue 14 item 1), one cluster of two nodes, each with `TRES=gres/gpu=4`
//! reserved: n1 has topology records (`Cores=` lines) and shards, n2 plain `File=` lines.
//!
//! - n1 (the reservation holds four GPUs): with one reserved GPU faulty, four one-GPU jobs in
//!   the reservation: select/gputopo runs three at once, on the three healthy reserved GPUs,
//!   and the fourth waits; a job outside the reservation gets none of the reserved GPUs. Stock
//!   cons_tres (`GPUTOPO_SELECT=cons_tres`) runs all four on the reserved GPUs, the faulty one
//!   included (printed, not asserted).
//! - n2 (cons_tres reads a count of the reservation on a node without topology records), GPU 0
//!   faulty (the first free GPU, which the commit takes first): four one-GPU jobs inside all
//!   run, each on its own GPU; with select/gputopo never on GPU 0 (stock: printed).
//! - shards (`Name=shard Count=32`) on n1 once the GPUs outside the reservation are held
//!   whole: a shard job outside the reservation runs on a reserved GPU (cons_tres does not
//!   match a `gres/gpu` reservation to shard requests), with select/gputopo not on the faulty
//!   GPU; one inside runs too up to 24.11 and waits from 25.05 (Slurm's change).
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
    Cluster, Opts, Slurmdbd, WAIT, e2e_enabled, parse_index_list, release, release_at_least,
    release_in, select, skip,
};
use super::select::extra_with_faulty;
use super::shared::gpus_of as share_gpus;

/// n1: topology records from `Cores=`, and shards; n2: plain `File=` lines only (a node with
/// shards always has topology records: src/interfaces/gres.c:3930, 24.11.5).
const GRES_CONF: &str = "NodeName=n1 Name=gpu File=@DEV@/nvidia[0-3] Cores=0-15\n\
                         NodeName=n1 Name=gpu File=@DEV@/nvidia[4-7] Cores=16-31\n\
                         NodeName=n2 Name=gpu File=@DEV@/nvidia[0-7]\n\
                         NodeName=n1 Name=shard Count=32\n";

/// The GPUs reservation `name` holds on `node` (slurmctld node index `index`), read from
/// slurmctld's GRES debug lines logged while it is created (`gres_job_state_log` of its
/// `gres_list_alloc`: `gres_bit_alloc[0]:4-7 of 8`), so the test knows them independently of
/// the plugin; empty where Slurm holds a count only.
fn create_reservation(c: &Cluster, name: &str, node: &str, index: usize) -> BTreeSet<usize> {
    // 23.11 and 24.05 give a reservation of `Nodes=` and `TRES=gres/gpu=N` one core (23.11.4
    // logs "Created reservation=r1 ... cores=1 ... tres=cpu=1,gres/gpu=4", with stock cons_tres
    // too; 24.05.8 likewise runs one job of four), so only one `-c1` job fits in it: there
    // the reservation asks for a core per GPU.
    let tres = if release_in((23, 11), (24, 11)) {
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
            &format!("Nodes={node}"),
            tres,
        ],
    );
    c.ok("scontrol", &["setdebugflags", "-Gres"]);
    let log = c.slurmctld_log();
    let key = format!("gres_bit_alloc[{index}]:");
    let held = log[before..]
        .lines()
        .filter_map(|l| l.split_once(key.as_str()).map(|(_, r)| r))
        .filter_map(|r| r.split_once(" of ").map(|(set, _)| set.to_string()))
        .next_back()
        .unwrap_or_default();
    parse_index_list(&held).into_iter().collect()
}

/// Submits a one-task, one-CPU batch job with `args` that sleeps; its id.
fn sleeper(c: &Cluster, args: &[&str]) -> u32 {
    c.sbatch(&[&["-n1", "-c1"][..], args, &["--wrap", "sleep 3000"]].concat())
}

/// The GPUs job `job` holds on its node, once it runs.
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
        skip("Slurm 22.05 has no GRES reservations (TRES=gres/gpu=N)");
        return;
    }
    let dbd = Slurmdbd::beside("resv", &["gtresv"]);
    let c = Cluster::up(Opts {
        nodes: 2,
        extra_conf: Some(format!(
            "GresTypes=gpu,shard\nAccountingStorageTRES=gres/gpu\n{}",
            dbd.conf("gtresv")
        )),
        gputopo_conf: Some("LogDecisions=yes\n".into()),
        gres_conf: Some((GRES_CONF.into(), "gpu:8,shard:32".into())),
        node_gres_of: Some("n2=gpu:8".into()),
        // The decision lines (info in the plugin: Slurm's verbose) reach the log at debug.
        debug: true,
        ..Opts::default()
    });
    let held = create_reservation(&c, "r1", "n1", 0);
    assert_eq!(held.len(), 4, "reserved GPUs from the GRES log: {held:?}");
    // 23.11.4's slurmctld crashes when a job is tested against two GRES reservations one of
    // which holds a count only (a plain node's: no `gres_bit_alloc` array):
    // `_combine_gres_list_exc` reads `gres_js_in->gres_bit_alloc[i]` without checking the
    // array (src/slurmctld/reservation.c:5270, with stock cons_tres too; 24.05.8 checks it).
    // There the plain node gets no reservation and its case is left out (the rest runs).
    let plain = !release_in((23, 11), (24, 5));
    let held2 = if plain {
        create_reservation(&c, "r2", "n2", 1)
    } else {
        eprintln!(
            "plain-node case not checked: Slurm 23.11 crashes on a second, count-only GRES \
             reservation (reservation.c:5270)"
        );
        BTreeSet::new()
    };
    // A reserved GPU other than the lowest one cons_tres would hand out first.
    let bad = *held.iter().nth(1).expect("four reserved GPUs");
    let extra = format!("Extra={}", extra_with_faulty(8, bad));
    c.ok("scontrol", &["update", "NodeName=n1", &extra]);
    let extra2 = format!("Extra={}", extra_with_faulty(8, 0));
    c.ok("scontrol", &["update", "NodeName=n2", &extra2]);
    let gputopo = select() == "gputopo";

    let outside = sleeper(&c, &["-w", "n1", "--gres=gpu:2"]);
    let out_gpus = gpus_of(&c, outside);
    let jobs: Vec<u32> = (0..4)
        .map(|_| sleeper(&c, &["--reservation=r1", "--gres=gpu:1"]))
        .collect();
    let want = if gputopo { 3 } else { 4 };
    c.wait_until(&format!("{want} reservation jobs to run"), WAIT, || {
        running_of(&c, &jobs).len() == want
    });
    let inside: Vec<BTreeSet<usize>> = running_of(&c, &jobs)
        .iter()
        .map(|&j| gpus_of(&c, j))
        .collect();
    println!(
        "select/{}: n1 reserved {held:?}, GPU {bad} faulty; outside job got {out_gpus:?}, \
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
    if gputopo {
        assert!(
            !used.contains(&bad),
            "faulty GPU {bad} allocated: {inside:?}"
        );
        assert_one_waits(&c, &jobs);
    }

    if plain {
        plain_node(&c, &held2);
    }
    shards_on_reserved_gpus(&c, &held, bad, outside, &jobs);
    if gputopo {
        for l in c
            .slurmctld_log()
            .lines()
            .filter(|l| l.contains("decision JobId="))
        {
            println!("  {l}");
        }
    }
    drop(c);
    drop(dbd);
}

/// n2 (no topology records, reservation r2 of 4 GPUs over all its cores, GPU 0 faulty):
/// four one-GPU jobs in r2 all run on distinct GPUs (cons_tres counts the reservation, the
/// commit takes free GPUs); with select/gputopo none on GPU 0. (A job outside r2 cannot use
/// n2: the reservation holds every core of a node whose GPUs have no core affinity.)
fn plain_node(c: &Cluster, held: &BTreeSet<usize>) {
    let jobs: Vec<u32> = (0..4)
        .map(|_| sleeper(c, &["--reservation=r2", "--gres=gpu:1"]))
        .collect();
    c.wait_until("4 jobs of reservation r2 to run", WAIT, || {
        running_of(c, &jobs).len() == 4
    });
    let inside: Vec<BTreeSet<usize>> = jobs.iter().map(|&j| gpus_of(c, j)).collect();
    println!(
        "select/{}: n2 (plain File=) reservation r2 logged GPUs {held:?} (cons_tres reads its \
         count only), GPU 0 faulty; reservation jobs got {inside:?}",
        select()
    );
    let used: BTreeSet<usize> = inside.iter().flatten().copied().collect();
    assert_eq!(used.len(), 4, "one GPU per job, none shared: {inside:?}");
    if select() == "gputopo" {
        assert!(!used.contains(&0), "faulty GPU 0 allocated: {inside:?}");
    }
}

/// Shards on n1 once its GPUs outside reservation r1 are all held whole (`outside` holds two
/// of them, a second job the other two) and r1's jobs (`inside`) are cancelled: a shard job
/// outside r1 runs on a reserved GPU, as cons_tres allows (with select/gputopo not on the
/// faulty GPU `bad`). A shard job in r1 runs there too up to 24.11; from 25.05 cons_tres gives
/// a job in a reservation no GRES the reservation does not hold
/// (src/plugins/select/cons_tres/gres_sock_list.c:83, 25.05.8 to 26.05.3), so it waits.
fn shards_on_reserved_gpus(
    c: &Cluster,
    held: &BTreeSet<usize>,
    bad: usize,
    outside: u32,
    inside: &[u32],
) {
    let ids: Vec<String> = inside.iter().map(u32::to_string).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    c.ok("scancel", &ids);
    c.wait_until("r1's jobs to end", WAIT, || {
        inside.iter().all(|&j| {
            c.job_state(j)
                .is_none_or(|s| s != "RUNNING" && s != "PENDING" && s != "COMPLETING")
        })
    });
    let second = sleeper(c, &["-w", "n1", "--gres=gpu:2"]);
    let whole: BTreeSet<usize> = gpus_of(c, outside)
        .union(&gpus_of(c, second))
        .copied()
        .collect();
    assert_eq!(whole.len(), 4, "{whole:?}");
    assert!(whole.is_disjoint(held), "{whole:?} {held:?}");
    let shard = |extra: &[&str]| sleeper(c, &[&["-w", "n1", "--gres=shard:2"][..], extra].concat());
    let out_job = shard(&[]);
    c.wait_state(out_job, "RUNNING", WAIT);
    let out_shards = share_gpus(c, out_job);
    let in_job = shard(&["--reservation=r1"]);
    let in_shards = if release_at_least(25, 5) {
        assert_one_waits(c, &[out_job, in_job]);
        Vec::new()
    } else {
        c.wait_state(in_job, "RUNNING", WAIT);
        share_gpus(c, in_job)
    };
    let in_r1 = if in_shards.is_empty() {
        "pending".to_string()
    } else {
        format!("on {in_shards:?}")
    };
    println!(
        "select/{}: n1 GPUs {whole:?} held whole outside r1; shard job outside r1 on GPUs \
         {out_shards:?}, shard job in r1 {in_r1}",
        select()
    );
    let ran: &[&Vec<usize>] = if in_shards.is_empty() {
        &[&out_shards]
    } else {
        &[&out_shards, &in_shards]
    };
    for got in ran {
        assert!(!got.is_empty(), "shards on no GPU");
        assert!(
            got.iter().all(|g| held.contains(g)),
            "only reserved GPUs were free: {got:?}"
        );
        if select() == "gputopo" {
            assert!(!got.contains(&bad), "faulty GPU {bad} shared: {got:?}");
        }
    }
}
