//! Shared GRES with health (issue 15 item 4) on a real slurmctld: one DGX-1V-like node whose
//! gres.conf has `Name=shard Count=32` (4 shards per GPU), or in a second test
//! `Name=mps Count=800` (100 per GPU), next to its 8 GPUs, GPU 3 published faulty in the
//! node's `Extra`.
//!
//! - MPS: with every healthy GPU allocated whole, an MPS job waits (stock: it runs on GPU 3),
//!   and runs on a healthy GPU once one frees up.
//! - Eight jobs of 4 shards each: with select/gputopo seven run, none on GPU 3, and the
//!   eighth waits (only the faulty GPU's shards are left); with stock cons_tres
//!   (`GPUTOPO_SELECT=cons_tres`, contrib/test-all.sh's stock run) all eight run and one of
//!   them holds GPU 3's shards, the violation issue 15 found.
//! - A whole-GPU job then never gets a GPU whose shares are in use: two of the jobs end and a
//!   2-GPU job gets exactly their two GPUs (both plugins).
//! - MIG emulated with `MultipleFiles=` lines: instances are GRES indices, a faulty one is
//!   never allocated (stock allocates it).

use std::collections::BTreeSet;

use super::harness::{Cluster, Opts, WAIT, e2e_enabled, release_in, select};
use super::select::extra_with_faulty;

/// 8 V100s on two sockets (Slurm topology records: `Type=` and `Cores=`); the shared GRES
/// line is added per test (Slurm spreads its count evenly over the GPUs).
pub(super) const GPU_LINES: &str = "Name=gpu Type=v100 File=@DEV@/nvidia[0-3] Cores=0-15\n\
                         Name=gpu Type=v100 File=@DEV@/nvidia[4-7] Cores=16-31\n";

/// The GPU published faulty.
const BAD: usize = 3;

/// One node with `name` (`shard` or `mps`) configured at `per_gpu` shares per GPU.
fn shared_cluster(name: &str, per_gpu: u32) -> Cluster {
    let total = 8 * per_gpu;
    Cluster::up(Opts {
        nodes: 1,
        extra_conf: Some(format!("GresTypes=gpu,{name}\n")),
        gputopo_conf: Some("LogDecisions=yes\n".into()),
        gres_conf: Some((
            format!("{GPU_LINES}Name={name} Count={total}\n"),
            format!("gpu:v100:8,{name}:{total}"),
        )),
        ..Opts::default()
    })
}

/// The job's GPU indices on its one node: `GRES=gpu:v100:2(IDX:0-1)`, `shard:4(IDX:5)`
/// (22.05), or 24.11's per-GPU shares `shard:4(0/4,4/4,0/4,...)`.
pub(super) fn gpus_of(c: &Cluster, job: u32) -> Vec<usize> {
    let a = c.gres_idx(job);
    assert_eq!(a.len(), 1, "job {job} on one node: {a:?}");
    let idx = a.into_iter().next().map(|(_, idx)| idx).unwrap_or_default();
    if !idx.is_empty() {
        return idx;
    }
    let record = c.job_record(job);
    let line = record
        .lines()
        .find(|l| l.trim().starts_with("Nodes="))
        .unwrap_or("");
    per_gpu_shares(line)
}

/// The GPUs holding shares in `...GRES=shard:4(0/4,4/4,...)`.
fn per_gpu_shares(line: &str) -> Vec<usize> {
    let Some(list) = line.split("GRES=").nth(1).and_then(|g| g.split_once('(')) else {
        return Vec::new();
    };
    let list = list.1.split(')').next().unwrap_or("");
    list.split(',')
        .enumerate()
        .filter(|(_, p)| {
            p.split('/')
                .next()
                .is_some_and(|n| n.parse::<u64>().is_ok_and(|n| n > 0))
        })
        .map(|(i, _)| i)
        .collect()
}

#[test]
fn reads_24_11_per_gpu_shares() {
    assert_eq!(
        per_gpu_shares("Nodes=n1 CPU_IDs=16 Mem=0 GRES=shard:3(0/4,0/4,0/4,0/4,3/4,0/4,0/4,0/4)"),
        vec![4]
    );
    assert!(per_gpu_shares("Nodes=n1 GRES=shard:4(IDX:5)").is_empty());
}

/// Waits until slurmctld has considered `job`: it runs, or it waits with a reason.
///
/// Slurm 23.11 and 24.05 without slurmdbd give no such reason: their main scheduler gets no
/// association list (`assoc_mgr_validate_assoc_id` fails when `assoc_mgr_refresh_lists` does,
/// 24.05.8 src/common/assoc_mgr.c:5465-5467, 23.11.4 :5456-5458), so it marks every job
/// `InvalidAccount` for a moment and starts none (src/slurmctld/job_scheduler.c:1762-1772 in
/// both); backfill then starts the job, or leaves it pending at `None` (seen with stock
/// cons_tres on 24.05.8: None, InvalidAccount, RUNNING). There a job is considered once it
/// runs, or once two backfill cycles have passed since the call.
fn considered(c: &Cluster, job: u32) -> String {
    let backfill_only = release_in((23, 11), (24, 11));
    let cycles = if backfill_only {
        c.sdiag_backfill("Total cycles")
    } else {
        0
    };
    let mut state = String::new();
    c.wait_until(
        &format!("job {job} to be scheduled or given a reason"),
        WAIT,
        || {
            state = c.job_state(job).unwrap_or_default();
            state == "RUNNING"
                || (state == "PENDING"
                    && if backfill_only {
                        c.sdiag_backfill("Total cycles") >= cycles + 2
                    } else {
                        c.job_reason(job).is_some_and(|r| r != "None")
                    })
        },
    );
    state
}

#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn shards_never_land_on_a_faulty_gpu() {
    if e2e_enabled() {
        never_on_the_faulty_gpu("shard", 4);
    }
}

/// MPS: whole-GPU jobs take every GPU but the faulty one, then an MPS job asks for a quarter
/// GPU: stock cons_tres runs it on GPU 3; gputopo keeps it waiting until a healthy GPU frees
/// up, and then runs it there.
#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn mps_never_lands_on_a_faulty_gpu() {
    if !e2e_enabled() {
        return;
    }
    let c = shared_cluster("mps", 100);
    let extra = format!("Extra={}", extra_with_faulty(8, BAD));
    c.ok("scontrol", &["update", "NodeName=n1", &extra]);
    let mut taken = BTreeSet::new();
    let mut whole = Vec::new();
    for n in [3, 4] {
        let gres = format!("--gres=gpu:{n}");
        let j = c.sbatch(&["-N1", "-n1", "-c1", &gres, "--wrap", "sleep 3000"]);
        c.wait_state(j, "RUNNING", WAIT);
        taken.extend(gpus_of(&c, j));
        whole.push(j);
    }
    let left: Vec<usize> = (0..8).filter(|g| !taken.contains(g)).collect();
    let mps = c.sbatch(&["-N1", "-n1", "-c1", "--gres=mps:25", "--wrap", "sleep 3000"]);
    let state = considered(&c, mps);
    let on = if state == "RUNNING" {
        gpus_of(&c, mps)
    } else {
        Vec::new()
    };
    println!(
        "select/{}: GPU(s) {left:?} left by whole-GPU jobs; the mps job is {state} on {on:?} (GPU {BAD} faulty)",
        select()
    );
    if select() == "gputopo" {
        assert_eq!(left, vec![BAD], "whole-GPU jobs never get the faulty GPU");
        assert_eq!(
            state, "PENDING",
            "only the faulty GPU's shares are left: {on:?}"
        );
        // A healthy GPU frees up: the MPS job runs there.
        c.ok("scancel", &[&whole[0].to_string()]);
        c.wait_state(mps, "RUNNING", WAIT);
        let on = gpus_of(&c, mps);
        assert_eq!(on.len(), 1, "{on:?}");
        assert_ne!(on[0], BAD, "MPS on the faulty GPU");
    } else if left == [BAD] {
        assert_eq!(on, vec![BAD], "stock puts MPS on GPU {BAD}");
    }
}

/// Eight jobs of one GPU's worth of `name` shares each (`per_gpu`), then a 2-GPU job after two
/// of them end.
fn never_on_the_faulty_gpu(name: &str, per_gpu: u32) {
    let gputopo = select() == "gputopo";
    let c = shared_cluster(name, per_gpu);
    let gres = format!("--gres={name}:{per_gpu}");
    let extra = format!("Extra={}", extra_with_faulty(8, BAD));
    c.ok("scontrol", &["update", "NodeName=n1", &extra]);
    let jobs: Vec<u32> = (0..8)
        .map(|_| c.sbatch(&["-N1", "-n1", "-c1", &gres, "--wrap", "sleep 3000"]))
        .collect();
    let states: Vec<String> = jobs.iter().map(|&j| considered(&c, j)).collect();
    let mut on: Vec<(u32, Vec<usize>)> = Vec::new();
    for (&j, s) in jobs.iter().zip(&states) {
        if s == "RUNNING" {
            on.push((j, gpus_of(&c, j)));
        }
    }
    let used: BTreeSet<usize> = on.iter().flat_map(|(_, g)| g.iter().copied()).collect();
    println!(
        "select/{}: {} of 8 {name} jobs run, on GPUs {used:?} (GPU {BAD} faulty)",
        select(),
        on.len()
    );
    for (j, g) in &on {
        assert_eq!(g.len(), 1, "job {j}'s shares come from one GPU: {g:?}");
    }
    if gputopo {
        assert_eq!(
            on.len(),
            7,
            "seven healthy GPUs of {per_gpu} shares: {on:?}"
        );
        assert!(!used.contains(&BAD), "{name} on the faulty GPU: {on:?}");
        let waiting = jobs[states.iter().position(|s| s != "RUNNING").unwrap_or(0)];
        assert_eq!(c.job_state(waiting).as_deref(), Some("PENDING"));
        c.ok("scancel", &[&waiting.to_string()]);
    } else {
        assert_eq!(on.len(), 8, "stock uses every share: {on:?}");
        assert!(
            used.contains(&BAD),
            "stock puts {name} on GPU {BAD}: {on:?}"
        );
    }
    // Two jobs end (those on GPUs 0 and 1); a 2-GPU job gets exactly those two.
    let freed: Vec<u32> = on
        .iter()
        .filter(|(_, g)| g[0] < 2)
        .map(|(j, _)| *j)
        .collect();
    assert_eq!(freed.len(), 2, "{on:?}");
    for j in &freed {
        c.ok("scancel", &[&j.to_string()]);
    }
    c.wait_until("the two jobs to end", WAIT, || {
        freed
            .iter()
            .all(|&j| !matches!(c.job_state(j).as_deref(), Some("RUNNING" | "COMPLETING")))
    });
    let whole = c.sbatch(&["-N1", "-n1", "-c1", "--gres=gpu:2", "--wrap", "sleep 3000"]);
    c.wait_state(whole, "RUNNING", WAIT);
    assert_eq!(
        gpus_of(&c, whole),
        vec![0, 1],
        "the only GPUs without shards in use (and not faulty)"
    );
}

/// MIG as Slurm lets it be emulated without a GPU: gres.conf lines with `MultipleFiles=` (the
/// parent's device plus a capability device per instance; here fake devices), one GRES index
/// per instance, typed by profile. Slurm schedules instances as GPUs; the health Extra is read
/// by GRES index, so a published faulty instance (the agent publishes a faulty parent as its
/// instances) is never allocated: three 1-instance jobs run on instances 0, 2, 3 and a fourth
/// waits (stock: four run, one on instance 1).
#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn mig_instances_pass_through_with_health() {
    if !e2e_enabled() {
        return;
    }
    let lines = "Name=gpu Type=1g.10gb MultipleFiles=@DEV@/nvidia0,@DEV@/nvidia2\n\
                 Name=gpu Type=1g.10gb MultipleFiles=@DEV@/nvidia0,@DEV@/nvidia3\n\
                 Name=gpu Type=1g.10gb MultipleFiles=@DEV@/nvidia1,@DEV@/nvidia2\n\
                 Name=gpu Type=1g.10gb MultipleFiles=@DEV@/nvidia1,@DEV@/nvidia3\n";
    let c = Cluster::up(Opts {
        nodes: 1,
        gputopo_conf: Some("LogDecisions=yes\n".into()),
        gres_conf: Some((lines.into(), "gpu:1g.10gb:4".into())),
        ..Opts::default()
    });
    let extra = format!("Extra={}", extra_with_faulty(4, 1));
    c.ok("scontrol", &["update", "NodeName=n1", &extra]);
    let jobs: Vec<u32> = (0..4)
        .map(|_| c.sbatch(&["-N1", "-n1", "-c1", "--gres=gpu:1", "--wrap", "sleep 3000"]))
        .collect();
    let states: Vec<String> = jobs.iter().map(|&j| considered(&c, j)).collect();
    let used: BTreeSet<usize> = jobs
        .iter()
        .zip(&states)
        .filter(|(_, s)| *s == "RUNNING")
        .flat_map(|(&j, _)| gpus_of(&c, j))
        .collect();
    println!(
        "select/{}: MIG instances in use {used:?} (instance 1 faulty)",
        select()
    );
    c.assert_no_gpu_shared();
    if select() == "gputopo" {
        assert_eq!(used, BTreeSet::from([0, 2, 3]), "{states:?}");
    } else {
        assert_eq!(used, BTreeSet::from([0, 1, 2, 3]), "{states:?}");
    }
}
