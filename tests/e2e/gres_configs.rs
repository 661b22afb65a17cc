//! select/gputopo on the GRES configurations sites write (issue 14 item 1), not only on the
//! harness's own `Type=`/`Cores=`/`Links=` lines:
//!
//! - plain `File=` lines (no `Type=`, no `Cores=`: Slurm keeps no GPU topology records):
//!   GPU jobs without `-w` run at once, as with cons_tres, and a GPU published faulty is
//!   still never allocated (its index is Slurm's `File=` order), even after the node's
//!   `Extra` turns bad (health fails closed);
//! - several GPU types on one node, one line `Type=` only, one `Type=` and `Cores=`: typed
//!   jobs get GPUs of their type, untyped ones any, the faulty one never;
//! - Slurm's GPU list from `fake_gpus.conf` in PCI order (not device-minor order);
//! - nodes of 72 GPUs (`Cores=` only, untyped) and 40 GPUs (plain `File=`), more than the
//!   topology model holds: cons_tres places jobs there, and a GPU published faulty at an
//!   index beyond 31 is still never allocated;
//! - state follows Slurm: slurmctld killed (-9) and restarted while a node is stopped, a job
//!   considered meanwhile, then the node resumes: its model is rebuilt from what it
//!   registers (jobs run on both nodes; no decision there treats it as topology-less); and a
//!   node whose gres.conf gains `Cores=` is modelled from the new records after a reconfigure.
//!
//! Each test runs with `GPUTOPO_SELECT=cons_tres` too (contrib/test-all.sh's stock run): the
//! scheduling checks hold for both; the health checks only with gputopo.

use std::collections::BTreeSet;

use super::harness::{Cluster, Opts, WAIT, e2e_enabled, select};
use super::select::extra_with_faulty;

fn gputopo() -> bool {
    select() == "gputopo"
}

fn cluster(nodes: u32, gres_conf: &str, node_gres: &str) -> Cluster {
    Cluster::up(Opts {
        nodes,
        gputopo_conf: Some("LogDecisions=yes\n".into()),
        gres_conf: Some((gres_conf.into(), node_gres.into())),
        ..Opts::default()
    })
}

/// Submits a one-node job with `gres` (no `-w`) that sleeps.
fn submit(c: &Cluster, gres: &str) -> u32 {
    let gres = format!("--gres={gres}");
    c.sbatch(&["-N1", "-n1", "-c1", &gres, "--wrap", "sleep 3000"])
}

/// Waits until every job runs; returns each job's (node, GPUs).
fn all_running(c: &Cluster, jobs: &[u32]) -> Vec<(u32, String, Vec<usize>)> {
    for &j in jobs {
        c.wait_state(j, "RUNNING", WAIT);
    }
    let got: Vec<_> = jobs
        .iter()
        .map(|&j| {
            let a = c.gres_idx(j);
            assert_eq!(a.len(), 1, "job {j} on one node: {a:?}");
            let (node, idx) = a.into_iter().next().expect("one node");
            (j, node, idx)
        })
        .collect();
    c.assert_no_gpu_shared();
    got
}

pub(super) fn cancel_all(c: &Cluster) {
    c.ok("scancel", &["--user=root"]);
    c.wait_until("every job to end", WAIT, || {
        c.ok("squeue", &["-h", "-o", "%A"]).trim().is_empty()
    });
}

/// The textbook gres.conf: the worst case of issue 14 (every GPU job pending forever).
#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn plain_file_lines_run_like_cons_tres_and_keep_health() {
    if !e2e_enabled() {
        return;
    }
    let c = cluster(2, "Name=gpu File=@DEV@/nvidia[0-7]\n", "gpu:8");
    // Every GPU of both nodes fills up, with no -w: nothing waits on idle GPUs.
    let jobs: Vec<u32> = [2, 2, 4, 1, 3, 4]
        .iter()
        .map(|k| submit(&c, &format!("gpu:{k}")))
        .collect();
    let got = all_running(&c, &jobs);
    let used: usize = got.iter().map(|(_, _, idx)| idx.len()).sum();
    assert_eq!(used, 16, "all 16 GPUs in use: {got:?}");
    eprintln!("select/{}: plain gres.conf picks {got:?}", select());
    cancel_all(&c);
    if !gputopo() {
        return;
    }
    // Health still applies: GPU 3 of n1 faulty; 15 one-GPU jobs take the other 15 GPUs.
    // It fails closed: once the plugin has seen the fault, a truncated Extra (a publisher
    // cut off mid-write) keeps it.
    let extra = format!("Extra={}", extra_with_faulty(8, 3));
    c.ok("scontrol", &["update", "NodeName=n1", &extra]);
    let mut jobs = vec![submit(&c, "gpu:1")];
    c.wait_state(jobs[0], "RUNNING", WAIT);
    let cut = &extra[..extra.len() - 20];
    c.ok("scontrol", &["update", "NodeName=n1", cut]);
    jobs.extend((1..15).map(|_| submit(&c, "gpu:1")));
    let got = all_running(&c, &jobs);
    let log = c.slurmctld_log();
    assert_eq!(
        log.matches("keeping its last good health (faulty GPUs: 3)")
            .count(),
        1,
        "the truncated Extra is reported once"
    );
    for (j, node, idx) in &got {
        assert!(
            !(node == "n1" && idx.contains(&3)),
            "job {j} got faulty GPU 3 of n1"
        );
    }
    let n1: BTreeSet<usize> = got
        .iter()
        .filter(|(_, n, _)| n == "n1")
        .flat_map(|(_, _, i)| i.iter().copied())
        .collect();
    assert_eq!(
        n1,
        [0, 1, 2, 4, 5, 6, 7].into(),
        "n1's 7 healthy GPUs in use"
    );
    // The 16th one-GPU job would need the faulty GPU: it waits while the others run.
    let last = submit(&c, "gpu:1");
    c.wait_until(&format!("job {last} to be considered"), WAIT, || {
        c.job_reason(last).is_some_and(|r| r != "None")
    });
    assert_eq!(c.job_state(last).as_deref(), Some("PENDING"));
}

/// Two GPU types on one node: `Type=` and `Cores=` on one line, `Type=` only on the other.
#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn several_types_on_one_node() {
    if !e2e_enabled() {
        return;
    }
    let conf = "Name=gpu Type=a100 File=@DEV@/nvidia[0-3] Cores=0-15\n\
                Name=gpu Type=v100 File=@DEV@/nvidia[4-7]\n";
    let c = cluster(1, conf, "gpu:a100:4,gpu:v100:4");
    if gputopo() {
        let extra = format!("Extra={}", extra_with_faulty(8, 4));
        c.ok("scontrol", &["update", "NodeName=n1", &extra]);
    }
    let v100 = submit(&c, "gpu:v100:3");
    let a100 = submit(&c, "gpu:a100:2");
    let any = submit(&c, "gpu:2");
    let got = all_running(&c, &[v100, a100, any]);
    eprintln!("select/{}: two types picks {got:?}", select());
    let idx = |j: u32| got.iter().find(|g| g.0 == j).expect("job").2.clone();
    assert!(
        idx(a100).iter().all(|&g| g < 4),
        "a100 job on a100 GPUs: {:?}",
        idx(a100)
    );
    assert!(
        idx(v100).iter().all(|&g| g >= 4),
        "v100 job on v100 GPUs: {:?}",
        idx(v100)
    );
    if gputopo() {
        assert_eq!(idx(v100), vec![5, 6, 7], "the faulty v100 (4) is avoided");
        for (j, _, i) in &got {
            assert!(!i.contains(&4), "job {j} got faulty GPU 4");
        }
    }
}

/// A 72-GPU node (two `Cores=`-only lines, no type): beyond gputopo's topology model, so
/// cons_tres places jobs there alone, but published health still applies beyond index 31:
/// with GPU 70 faulty, jobs of 40 and 31 GPUs run side by side without it (cons_tres alone
/// takes 40-70 for the second), and a further 1-GPU job waits for GPU 70.
#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn node_of_72_gpus_runs_jobs_of_40_and_31_without_its_faulty_gpu() {
    if !e2e_enabled() {
        return;
    }
    let conf = "Name=gpu File=@DEV@/nvidia[0-35] Cores=0-15\n\
                Name=gpu File=@DEV@/nvidia[36-71] Cores=16-31\n";
    let c = cluster(1, conf, "gpu:72");
    keeps_health(&c, 72, 70, &["gpu:40", "gpu:31"]);
    if gputopo() {
        assert!(
            c.slurmctld_log()
                .contains("72 GPUs, more than the 32 gputopo models"),
            "the unmodelled node is reported"
        );
    }
}

/// A 40-GPU node with plain `File=` lines (no topology records: cons_tres selects a count
/// and Slurm's commit takes the first free GPUs): GPU 35 faulty, jobs of 20 and 19 GPUs run
/// without it (cons_tres alone would take 20-38), a further 1-GPU job waits.
#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn node_of_40_plain_gpus_never_gets_its_faulty_gpu_35() {
    if !e2e_enabled() {
        return;
    }
    let c = cluster(1, "Name=gpu File=@DEV@/nvidia[0-39]\n", "gpu:40");
    keeps_health(&c, 40, 35, &["gpu:20", "gpu:19"]);
}

/// On n1 of `gpus` GPUs, GPU `bad` published faulty (gputopo only): jobs asking `gres`
/// (together one short of the node) all run, none gets `bad`; then a 1-GPU job waits
/// (gputopo) or takes `bad` (stock cons_tres, printed for comparison).
fn keeps_health(c: &Cluster, gpus: usize, bad: usize, gres: &[&str]) {
    if gputopo() {
        let extra = format!("Extra={}", extra_with_faulty(gpus, bad));
        c.ok("scontrol", &["update", "NodeName=n1", &extra]);
    }
    let jobs: Vec<u32> = gres.iter().map(|g| submit(c, g)).collect();
    let got = all_running(c, &jobs);
    let used: BTreeSet<usize> = got.iter().flat_map(|g| g.2.iter().copied()).collect();
    eprintln!("select/{}: {gpus}-GPU node picks {got:?}", select());
    assert_eq!(used.len(), gpus - 1, "all but one GPU in use: {got:?}");
    let last = submit(c, "gpu:1");
    if gputopo() {
        assert!(!used.contains(&bad), "faulty GPU {bad} allocated: {got:?}");
        c.wait_until(&format!("job {last} to be considered"), WAIT, || {
            c.job_reason(last).is_some_and(|r| r != "None")
        });
        assert_eq!(c.job_state(last).as_deref(), Some("PENDING"));
    } else {
        c.wait_state(last, "RUNNING", WAIT);
        eprintln!("select/cons_tres: the last GPU is {:?}", c.gres_idx(last));
    }
}

/// The kill -9 restart case of issue 14: a node stopped over a slurmctld restart is modelled
/// from what it registers when it comes back, not from what slurmctld had before.
#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn model_follows_a_node_that_registers_after_a_restart() {
    if !e2e_enabled() {
        return;
    }
    let c = Cluster::up(Opts {
        nodes: 2,
        gputopo_conf: Some("LogDecisions=yes\n".into()),
        // Decision lines are at Slurm's verbose level.
        debug: true,
        ..Opts::default()
    });
    c.stop_slurmd("n2");
    c.kill_and_restart_slurmctld();
    c.wait_until("n1 to register its GPUs", WAIT, || {
        super::harness::field(&c.show_node("n1"), "GresUsed").is_some_and(|g| g.contains("(IDX:"))
    });
    // Considered while n2 is still away (n2 may look idle from the saved state).
    let early = c.sbatch(&["-N1", "-w", "n1", "--gres=gpu:2", "--wrap", "sleep 3000"]);
    c.wait_state(early, "RUNNING", WAIT);
    let mark = c.slurmctld_log().len();
    c.restart_slurmd("n2");
    c.wait_gres_registered();
    let mut jobs = vec![early];
    jobs.extend((0..7).map(|_| submit(&c, "gpu:2")));
    let got = all_running(&c, &jobs);
    let on_n2 = got.iter().filter(|g| g.1 == "n2").count();
    assert_eq!(on_n2, 4, "n2 takes its share: {got:?}");
    if gputopo() {
        let log = c.slurmctld_log();
        let after = &log[mark..];
        assert!(
            after.contains("node=n2 ") && !after.contains("no topology"),
            "n2 is modelled with the topology it registered"
        );
    }
}

/// A node's gres.conf gains `Cores=` (so Slurm now keeps topology records) and slurmctld is
/// reconfigured: the node is modelled from the new records.
#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn model_follows_a_gres_conf_change_on_reconfigure() {
    if !e2e_enabled() {
        return;
    }
    let c = Cluster::up(Opts {
        gputopo_conf: Some("LogDecisions=yes\n".into()),
        gres_conf: Some(("Name=gpu File=@DEV@/nvidia[0-7]\n".into(), "gpu:8".into())),
        // Decision lines are at Slurm's verbose level.
        debug: true,
        ..Opts::default()
    });
    let before = submit(&c, "gpu:2");
    all_running(&c, &[before]);
    if gputopo() {
        assert!(c.slurmctld_log().contains("(first free, no topology)"));
    }
    let dev = c.dir().join("dev/n1");
    let conf = format!(
        "NodeName=n1 Name=gpu File={d}/nvidia[0-3] Cores=0-15\n\
         NodeName=n1 Name=gpu File={d}/nvidia[4-7] Cores=16-31\n",
        d = dev.display()
    );
    std::fs::write(c.etc().join("gres.conf"), conf).expect("rewrite gres.conf");
    if super::harness::release() == "22.05.8" {
        // Not `Cluster::reconfigure`: it waits for GPU indices in GresUsed, which 22.05
        // does not show for this node (below).
        c.ok("scontrol", &["reconfigure"]);
        c.wait_until("slurmctld to answer after reconfigure", WAIT, || {
            let out = c.run("scontrol", &["ping"]);
            out.status.success() && String::from_utf8_lossy(&out.stdout).contains("UP")
        });
    } else {
        c.reconfigure();
    }
    let decided = |job: u32, mark: usize| {
        let log = c.slurmctld_log();
        let new = log[mark.min(log.len())..].to_string();
        assert!(
            new.contains(&format!("decision JobId={job} node=n1 ")),
            "{job}"
        );
        !new.contains("no topology")
    };
    let mark = c.slurmctld_log().len();
    let after = submit(&c, "gpu:2");
    all_running(&c, &[before, after]);
    if super::harness::release() == "22.05.8" {
        // 22.05's gres.c `_node_config_validate` rebuilds a node's topology records only
        // when its GPU count changed since slurmctld first saw it (`gres_cnt_found !=
        // gres_cnt`, else `if (!updated_config) return rc`), and an in-process reconfigure
        // keeps the old GRES state (slurmctld/read_config.c `_restore_node_state`:
        // `node_ptr->gres_list = old_node_ptr->gres_list`). Same count here, so Slurm keeps the
        // node's record-less state, and gputopo follows Slurm: still no topology.
        if gputopo() {
            assert!(!decided(after, mark), "22.05 kept the record-less state");
        }
    } else if gputopo() {
        // 24.11 re-executes slurmctld on reconfigure: the node registers afresh.
        assert!(
            decided(after, mark),
            "n1 is modelled with the Cores= it registered after the reconfigure"
        );
    }
}

/// Slurm's GPU list from `fake_gpus.conf` (what slurmd reads without any GPU, as with
/// `AutoDetect=nvml`), listed in NVML/PCI order, not device-minor order: jobs run, and the GPU
/// published faulty by Slurm's index is never allocated.
#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn fake_gpus_conf_in_pci_order() {
    if !e2e_enabled() {
        return;
    }
    let fake: String = [4, 5, 6, 7, 0, 1, 2, 3]
        .iter()
        .enumerate()
        .map(|(i, minor)| {
            let cores = if i < 4 { "0-15" } else { "16-31" };
            format!("tesla|32|{cores}|(null)|@DEV@/nvidia{minor}\n")
        })
        .collect();
    let c = Cluster::up(Opts {
        gres_conf: Some((
            "# the GPUs come from fake_gpus.conf\n".into(),
            "gpu:tesla:8".into(),
        )),
        fake_gpus: Some(fake),
        ..Opts::default()
    });
    if gputopo() {
        let extra = format!("Extra={}", extra_with_faulty(8, 2));
        c.ok("scontrol", &["update", "NodeName=n1", &extra]);
    }
    let jobs: Vec<u32> = (0..7).map(|_| submit(&c, "gpu:1")).collect();
    let got = all_running(&c, &jobs);
    eprintln!("select/{}: fake_gpus.conf picks {got:?}", select());
    if gputopo() {
        let used: BTreeSet<usize> = got.iter().flat_map(|g| g.2.iter().copied()).collect();
        assert_eq!(
            used,
            [0, 1, 3, 4, 5, 6, 7].into(),
            "every GPU but the faulty 2"
        );
    }
}

/// A reservation on a node with a faulty GPU (issue 14 item 1): jobs inside it run as with
/// cons_tres, and none gets the faulty GPU: with GPU 2 of n1 faulty, 8 one-GPU jobs in the
/// reservation leave exactly one waiting (stock cons_tres runs all 8, printed for
/// comparison). GRES reservations (`TRES=gres/gpu=N`, 23.11+) need slurmdbd (slurmctld
/// refuses `AccountingStorageTRES=gres/gpu` without it): `e2e::resv_gres`.
#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn reservation_on_a_node_with_a_faulty_gpu() {
    if !e2e_enabled() {
        return;
    }
    let c = Cluster::up(Opts {
        nodes: 1,
        gputopo_conf: Some("LogDecisions=yes\n".into()),
        ..Opts::default()
    });
    if gputopo() {
        let extra = format!("Extra={}", extra_with_faulty(8, 2));
        c.ok("scontrol", &["update", "NodeName=n1", &extra]);
    }
    c.ok(
        "scontrol",
        &[
            "create",
            "reservation",
            "ReservationName=r1",
            "StartTime=now",
            "Duration=60",
            "Users=root",
            "Nodes=n1",
        ],
    );
    let jobs: Vec<u32> = (0..8)
        .map(|_| {
            let args = ["-N1", "-n1", "-c1", "--reservation=r1", "--gres=gpu:1"];
            c.sbatch(&[&args[..], &["--wrap", "sleep 3000"]].concat())
        })
        .collect();
    check_one_waits(&c, &jobs);
}

/// The jobs of `jobs` that run now.
pub(super) fn running_of(c: &Cluster, jobs: &[u32]) -> Vec<u32> {
    jobs.iter()
        .copied()
        .filter(|j| c.job_state(*j).as_deref() == Some("RUNNING"))
        .collect()
}

/// The one job of `jobs` that does not run: once Slurm has considered it (a reason is set),
/// it is still PENDING.
pub(super) fn assert_one_waits(c: &Cluster, jobs: &[u32]) {
    let running = running_of(c, jobs);
    let last = *jobs
        .iter()
        .find(|j| !running.contains(j))
        .expect("one waits");
    c.wait_until(&format!("job {last} to be considered"), WAIT, || {
        c.job_reason(last).is_some_and(|r| r != "None")
    });
    assert_eq!(c.job_state(last).as_deref(), Some("PENDING"));
}

/// Of `jobs` (8 one-GPU jobs on n1), gputopo runs 7 and never GPU 2; stock runs all 8.
fn check_one_waits(c: &Cluster, jobs: &[u32]) {
    if !gputopo() {
        let all = all_running(c, jobs);
        eprintln!("select/cons_tres: reservation picks {all:?}");
        return;
    }
    c.wait_until("7 jobs to run", WAIT, || running_of(c, jobs).len() == 7);
    assert_one_waits(c, jobs);
    let got = all_running(c, &running_of(c, jobs));
    eprintln!("select/gputopo: reservation picks {got:?}");
    assert_eq!(got.len(), 7, "all but the faulty GPU in use: {got:?}");
    assert!(
        got.iter().all(|g| !g.2.contains(&2)),
        "GPU 2 allocated: {got:?}"
    );
}
