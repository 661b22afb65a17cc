//! Select end-to-end tests (issue 4) on a real slurmctld with DGX-1V emulated nodes:
//!
//! - (a) a stream of 2- and 4-GPU jobs, with random cancellations in between, gets an optimal
//!   GPU set for the GPUs free at each job's start (checked with the core engine on the
//!   topology Slurm sees: gres.conf `Links=` and `Cores=`). With `GPUTOPO_SELECT=cons_tres`
//!   the same stream runs on stock Slurm and only the counts are printed, so both runs can be
//!   compared;
//! - (b) a GPU published as ECC-faulty in the node's `Extra` (the agent's JSON format) is
//!   never allocated over 200 random jobs, the node's other 7 GPUs stay in use, and clearing
//!   the fault returns it to service;
//! - (c) a slurmctld restart and `scontrol reconfigure` in mid-stream: no GPU is allocated
//!   twice and the faulty GPU never;
//! - (d) is the foundation suite (`tests/e2e/foundation.rs`) run with the plugin loaded.

use std::collections::{BTreeMap, BTreeSet};

use gputopo_core::GpuSet;
use gputopo_core::placement::engine::{self, Gputopo};
use gputopo_core::placement::{Policy, Request};
use gputopo_core::topology::{NodeTopology, PcieLevel, fixture};

use super::harness::{Cluster, Opts, WAIT, e2e_enabled, gputopo_only, select};

/// gputopo.conf for these tests: every behaviour on, decisions logged.
const CONF: &str = "HealthAware=yes\nTopologyAware=yes\nNodeRanking=yes\nLogDecisions=yes\n";

/// The agent's Extra JSON with GPU `bad` faulty (uncorrectable ECC) and the others ok.
fn faulty_extra(bad: usize) -> String {
    extra_with_faulty(8, bad)
}

/// The agent's Extra JSON for `n` GPUs with GPU `bad` faulty and the others ok.
pub(super) fn extra_with_faulty(n: usize, bad: usize) -> String {
    let gpus: Vec<String> = (0..n)
        .map(|i| {
            if i == bad {
                format!(r#"{{"i":{i},"s":"faulty","r":["ecc_uncorrectable"]}}"#)
            } else {
                format!(r#"{{"i":{i},"s":"ok"}}"#)
            }
        })
        .collect();
    format!(r#"{{"gputopo":{{"v":1,"gpus":[{}]}}}}"#, gpus.join(","))
}

/// Publishes GPU `bad` of `node` as faulty, as the agent would (root may update Extra).
fn plant_fault(c: &Cluster, node: &str, bad: usize) {
    let node = format!("NodeName={node}");
    let extra = format!("Extra={}", faulty_extra(bad));
    c.ok("scontrol", &["update", &node, &extra]);
}

/// Runs the node agent's `gputopo publish` for `node` (as root, like HealthCheckProgram)
/// against the fake NVML library driven by `tests/fixtures/nvml/<fixture>`.
fn publish_with_agent(c: &Cluster, node: &str, fixture: &str) {
    let out = c
        .cmd(&super::harness::gputopo_bin().display().to_string())
        .args(["publish", "--node", node])
        .env("GPUTOPO_NVML_LIB", super::agent::fake_lib())
        .env(
            "FAKE_NVML_FIXTURE",
            super::harness::repo()
                .join("tests/fixtures/nvml")
                .join(fixture),
        )
        .output()
        .expect("run gputopo publish");
    assert!(
        out.status.success(),
        "gputopo publish --node {node} ({fixture}) failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// DGX-1V as Slurm sees it: NVLinks from `Links=`, sockets from `Cores=`, no PCIe switch
/// detail (PHB within a socket), which is also what the plugin models without the agent.
fn slurm_view_dgx1v() -> NodeTopology {
    let text =
        std::fs::read_to_string(super::harness::repo().join("contrib/topologies/dgx1v.topo"))
            .expect("read dgx1v.topo");
    let mut t = fixture::parse(&text).expect("dgx1v.topo parses");
    for a in 0..t.len() {
        for b in a + 1..t.len() {
            if t.gpus()[a].socket == t.gpus()[b].socket {
                t.set_pcie(a, b, PcieLevel::Phb).expect("valid pair");
            }
        }
    }
    t
}

/// A small deterministic generator, so both select plugins see the same stream.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

fn cluster(nodes: u32) -> Cluster {
    Cluster::up(Opts {
        nodes,
        gputopo_conf: Some(CONF.into()),
        // Decision lines are at Slurm's verbose level (like log_flag()); debug shows them.
        debug: true,
        ..Opts::default()
    })
}

fn start(c: &Cluster, k: usize) -> (u32, String, GpuSet) {
    let gres = format!("--gres=gpu:{k}");
    let job = c.sbatch(&["-N1", "-n1", "-c1", &gres, "--wrap", "sleep 3000"]);
    c.wait_state(job, "RUNNING", WAIT);
    let alloc = c.gres_idx(job);
    assert_eq!(alloc.len(), 1, "job {job}: {alloc:?}");
    let (node, idx) = alloc.into_iter().next().expect("one node");
    (job, node, idx.into_iter().collect())
}

fn cancel(c: &Cluster, job: u32) {
    c.ok("scancel", &[&job.to_string()]);
    c.wait_until(&format!("job {job} to end"), WAIT, || {
        !matches!(
            c.job_state(job).as_deref(),
            Some("RUNNING" | "COMPLETING" | "PENDING")
        )
    });
}

/// (a): every job of a 2-/4-GPU stream gets an optimal set for the GPUs free at its start.
#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn stream_gets_optimal_sets() {
    if !e2e_enabled() {
        return;
    }
    let c = cluster(2);
    let topo = slurm_view_dgx1v();
    let engine = Gputopo::new();
    let mut rng = Lcg(4);
    let mut running: Vec<(u32, String, GpuSet)> = Vec::new();
    let (mut jobs, mut optimal) = (0, 0);
    let mut misses = Vec::new();
    for _ in 0..60 {
        let used = |node: &str| {
            running
                .iter()
                .filter(|(_, n, _)| n == node)
                .fold(GpuSet::EMPTY, |a, (_, _, s)| a.union(*s))
        };
        let k = if rng.next(3) == 0 { 4 } else { 2 };
        let fits = c.nodes().iter().any(|n| 8 - used(n).len() >= k);
        if !fits || (running.len() > 3 && rng.next(2) == 0) {
            let victim = running.remove(rng.next(running.len() as u64) as usize);
            cancel(&c, victim.0);
            continue;
        }
        let (job, node, set) = start(&c, k);
        let free = topo.all().difference(used(&node));
        assert!(
            set.is_subset(free),
            "job {job} got busy GPUs {set} (free {free})"
        );
        let best = engine
            .choose(
                &topo,
                free,
                &Request {
                    count: k,
                    ..Request::default()
                },
            )
            .expect("a set fits");
        jobs += 1;
        if engine::score(&topo, set) == engine::score(&topo, best) {
            optimal += 1;
        } else {
            misses.push(format!(
                "job {job} on {node}: free {free} got {set}, best {best}"
            ));
        }
        running.push((job, node, set));
        c.assert_no_gpu_shared();
    }
    eprintln!(
        "select/{} on Slurm {}: {optimal} of {jobs} jobs got an optimal GPU set",
        select(),
        c.opts.release
    );
    for m in &misses {
        eprintln!("  not optimal: {m}");
    }
    if select() == "gputopo" {
        assert_eq!(optimal, jobs, "non-optimal picks: {misses:#?}");
    }
}

/// All GPUs that jobs of `ids` were given on `node`, per job.
fn allocations(c: &Cluster, ids: &[u32], node: &str) -> BTreeMap<u32, Vec<usize>> {
    let mut out = BTreeMap::new();
    for &job in ids {
        for (n, idx) in c.gres_idx(job) {
            if n == node {
                out.insert(job, idx);
            }
        }
    }
    out
}

/// Submits `n` random 1-4 GPU jobs of 1-3 s on `node`, polls every running job's IDX while
/// they run, and returns what each job got there.
fn burst(c: &Cluster, n: usize, node: &str, rng: &mut Lcg) -> BTreeMap<u32, Vec<usize>> {
    let mut ids = Vec::new();
    for _ in 0..n {
        let gres = format!("--gres=gpu:{}", 1 + rng.next(4));
        let secs = format!("sleep {}", 1 + rng.next(3));
        ids.push(c.sbatch(&["-N1", "-n1", "-c1", "-w", node, &gres, "--wrap", &secs]));
    }
    let mut seen: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    c.wait_until(
        "the burst to finish",
        std::time::Duration::from_secs(900),
        || {
            for job in c.running_jobs() {
                seen.entry(job).or_insert_with(|| {
                    c.gres_idx(job)
                        .into_iter()
                        .find(|(n, _)| n == node)
                        .map(|(_, i)| i)
                        .unwrap_or_default()
                });
            }
            c.ok("squeue", &["-h", "-o", "%A"]).trim().is_empty()
        },
    );
    // Jobs too short to be seen running still show their allocation while Slurm keeps them.
    for (job, idx) in allocations(c, &ids, node) {
        seen.entry(job).or_insert(idx);
    }
    seen.retain(|j, _| ids.contains(j));
    seen
}

/// (b): a planted ECC-faulty GPU is never allocated, the other 7 stay in use, and clearing
/// the fault returns it to service.
#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn faulty_gpu_is_never_allocated_and_returns_when_cleared() {
    if !e2e_enabled() || !gputopo_only() {
        return;
    }
    let c = cluster(1);
    let bad = 3;
    // The node agent publishes the fault: `gputopo publish` over the real nvml-wrapper code
    // path, against the fake NVML fixture whose GPU 3 has uncorrectable ECC errors.
    publish_with_agent(&c, "n1", "dgx1v-ecc3.fx");
    c.wait_until("the agent's verdict in n1's Extra", WAIT, || {
        c.show_node("n1").contains(r#""s":"faulty""#)
    });
    let mut rng = Lcg(9);
    let got = burst(&c, 200, "n1", &mut rng);
    assert!(
        got.len() >= 190,
        "only {} of 200 jobs were observed",
        got.len()
    );
    let used: BTreeSet<usize> = got.values().flatten().copied().collect();
    for (job, idx) in &got {
        assert!(
            !idx.contains(&bad),
            "job {job} got faulty GPU {bad}: {idx:?}"
        );
    }
    assert_eq!(
        used,
        (0..8).filter(|&i| i != bad).collect(),
        "the 7 healthy GPUs stay in service"
    );
    // An 8-GPU job cannot run while GPU 3 is faulty...
    let all8 = c.sbatch(&["-N1", "-w", "n1", "--gres=gpu:8", "--wrap", "sleep 30"]);
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert_eq!(c.job_state(all8).as_deref(), Some("PENDING"));
    // ...and runs once the agent sees the GPU healthy again (the card was replaced).
    publish_with_agent(&c, "n1", "dgx1v-healthy.fx");
    c.wait_state(all8, "RUNNING", WAIT);
    assert_eq!(c.gres_idx(all8)[0].1, (0..8).collect::<Vec<_>>());
    assert!(
        c.slurmctld_log().contains("decision JobId="),
        "LogDecisions=yes logs each decision"
    );
}

/// (c): slurmctld restart and reconfigure in mid-stream: no GPU allocated twice, the faulty
/// GPU never.
#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn restart_and_reconfigure_mid_stream() {
    if !e2e_enabled() || !gputopo_only() {
        return;
    }
    let c = cluster(2);
    let bad = 5;
    plant_fault(&c, "n2", bad);
    let mut rng = Lcg(21);
    let mut ids = Vec::new();
    let check = |c: &Cluster| {
        for (job, node, idx) in c.assert_no_gpu_shared() {
            assert!(
                !(node == "n2" && idx.contains(&bad)),
                "job {job} got faulty n2:{bad}"
            );
        }
    };
    for round in 0..3 {
        for _ in 0..12 {
            let gres = format!("--gres=gpu:{}", 1 + rng.next(4));
            let secs = format!("sleep {}", 5 + rng.next(20));
            ids.push(c.sbatch(&["-N1", "-n1", "-c1", &gres, "--wrap", &secs]));
        }
        std::thread::sleep(std::time::Duration::from_secs(3));
        check(&c);
        match round {
            0 => c.restart_slurmctld(),
            1 => c.reconfigure(),
            _ => {}
        }
        std::thread::sleep(std::time::Duration::from_secs(2));
        check(&c);
    }
    c.wait_until(
        "the stream to finish",
        std::time::Duration::from_secs(600),
        || {
            check(&c);
            c.ok("squeue", &["-h", "-o", "%A"]).trim().is_empty()
        },
    );
    for (job, idx) in allocations(&c, &ids, "n2") {
        assert!(
            !idx.contains(&bad),
            "job {job} got faulty n2:{bad}: {idx:?}"
        );
    }
    // Slurm 23.11.4's cons_tres gives a job no GPU on a node not yet re-registered after the
    // restart and the job would start holding none (gres_ctld.c "no resources selected"):
    // gputopo excludes the node instead (JobGres::commit_would_take_none).
    assert!(
        !c.slurmctld_log().contains("no resources selected"),
        "a job started without its GPUs being recorded"
    );
}

/// A bad gputopo.conf is reported in slurmctld.log and the defaults apply (jobs still get
/// optimal, healthy GPUs); `scontrol reconfigure` rereads a fixed file, and a file broken
/// again on a later reconfigure keeps the last good settings.
#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn bad_config_is_reported_and_defaults_apply() {
    if !e2e_enabled() || !gputopo_only() {
        return;
    }
    let c = Cluster::up(Opts {
        gputopo_conf: Some("HealthAware=perhaps\n".into()),
        debug: true,
        ..Opts::default()
    });
    let (_, _, set) = start(&c, 2);
    assert_eq!(set.len(), 2);
    let log = c.slurmctld_log();
    assert!(
        log.contains("HealthAware") && log.contains("using the default select settings"),
        "no clear config error in slurmctld.log"
    );
    std::fs::write(c.etc().join("gputopo.conf"), "LogDecisions=yes\n").expect("fix the config");
    c.reconfigure();
    let (job, _, _) = start(&c, 2);
    c.wait_until("a decision line after reconfigure", WAIT, || {
        c.slurmctld_log()
            .contains(&format!("decision JobId={job} "))
    });
    // A typo on a later reconfigure keeps the settings in force (LogDecisions=yes), not
    // the defaults (LogDecisions=no).
    std::fs::write(
        c.etc().join("gputopo.conf"),
        "LogDecisions=yes
HealthAware=perhaps
",
    )
    .expect("break the config");
    c.reconfigure();
    let (job, _, _) = start(&c, 2);
    c.wait_until("a decision line after a bad reconfigure", WAIT, || {
        c.slurmctld_log()
            .contains(&format!("decision JobId={job} "))
    });
    assert!(
        c.slurmctld_log()
            .contains("keeping the last good select settings"),
        "the bad reconfigure is reported"
    );
}
