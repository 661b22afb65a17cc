//! The event loop: replays a workload on a cluster under one placement policy.
//!
//! Kept apart from the model types so that the loop reads top to bottom: advance the clock to
//! the next event, account the time-averaged metrics over the gap, apply every event at that
//! instant (ends, then faults, then submissions), then start queue-head jobs while they fit.

use super::cluster::{ClusterSpec, State};
use super::comm::{CommCache, slowdown};
use super::metrics::{Acc, Summary};
use super::{Config, Fault, Health, Job};
use gputopo_core::gpuset::{GpuSet, MAX_GPUS};
use gputopo_core::placement::Score;
use gputopo_core::placement::engine::{Gputopo, score};
use gputopo_core::placement::rank::rank_nodes;
use gputopo_core::placement::tables::{TopoHandle, TopoTables};
use gputopo_core::placement::{Policy, Request};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::time::Instant;

/// How jobs are placed.
#[derive(Clone, Copy)]
pub enum Placement<'a> {
    /// `gputopo`: the engine's node ranking and GPU choice (always health-aware).
    Gputopo,
    /// A baseline GPU policy on the lowest-index nodes that fit.
    Baseline(&'a dyn Policy<Score = Score>),
}

impl Placement<'_> {
    /// The policy's name.
    pub fn name(&self) -> &'static str {
        match self {
            Placement::Gputopo => "gputopo",
            Placement::Baseline(p) => p.name(),
        }
    }
}

impl std::fmt::Debug for Placement<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Replays `jobs` with `faults` on `spec` under `placement`. `engine` is the shared engine
/// instance (also the reference for the optimal-set metric).
///
/// # Errors
/// When a topology is too large for the engine's tables (more than 16 GPUs per node).
pub fn simulate(
    spec: &ClusterSpec,
    jobs: &[Job],
    faults: &[Fault],
    placement: Placement<'_>,
    engine: &Gputopo,
    cfg: &Config,
) -> Result<Summary, String> {
    let wall = Instant::now();
    let handles = spec
        .groups
        .iter()
        .map(|(_, t)| {
            engine
                .handle(t)
                .ok_or_else(|| format!("topology {} has too many GPUs for the engine", t.name))
        })
        .collect::<Result<Vec<TopoHandle>, String>>()?;
    let aware = matches!(placement, Placement::Gputopo) || cfg.health == Health::Aware;
    let mut sim = Sim {
        spec,
        handles,
        placement,
        comm_fraction: cfg.comm_fraction,
        state: State::new(spec, aware),
        comm: CommCache::default(),
        best: HashMap::new(),
        acc: Acc::default(),
        queue: VecDeque::new(),
        waiting: [0; MAX_GPUS + 1],
        running: vec![Vec::new(); jobs.len()],
        ends: BinaryHeap::new(),
        busy: 0,
        faulty: 0,
    };
    let (order, rejected) = sim.admissible(jobs);
    let mut fault_order: Vec<&Fault> = faults
        .iter()
        .filter(|f| {
            (f.node as usize) < sim.state.nodes()
                && usize::from(f.gpu) < sim.topo(f.node as usize).len()
        })
        .collect();
    fault_order.sort_by(|a, b| a.time.total_cmp(&b.time));

    let (mut si, mut fi, mut now) = (0usize, 0usize, 0.0f64);
    loop {
        let next_end = sim.ends.peek().map(|Reverse((t, _))| f64::from_bits(*t));
        let next_fault = fault_order.get(fi).map(|f| f.time);
        let next_submit = order.get(si).map(|&j| jobs[j].submit);
        let Some(t) = [next_end, next_fault, next_submit]
            .into_iter()
            .flatten()
            .min_by(f64::total_cmp)
        else {
            break;
        };
        let t = t.max(now);
        sim.account(t - now);
        now = t;
        while let Some(&Reverse((te, j))) = sim.ends.peek() {
            if f64::from_bits(te) > now {
                break;
            }
            sim.ends.pop();
            sim.release(j as usize);
        }
        while fault_order.get(fi).is_some_and(|f| f.time <= now) {
            sim.fault(fault_order[fi]);
            fi += 1;
        }
        while order.get(si).is_some_and(|&j| jobs[j].submit <= now) {
            let j = order[si];
            sim.queue.push_back(j);
            sim.waiting[usize::from(jobs[j].gpus_per_node)] += 1;
            si += 1;
        }
        sim.schedule(jobs, now);
    }
    let jobs_n = order.len() as u64;
    Ok(sim.acc.finish(
        placement.name(),
        jobs_n,
        rejected,
        wall.elapsed().as_secs_f64(),
    ))
}

/// State of one run.
struct Sim<'a> {
    spec: &'a ClusterSpec,
    handles: Vec<TopoHandle>,
    placement: Placement<'a>,
    comm_fraction: f64,
    state: State,
    comm: CommCache,
    /// Best achievable quality per (group, usable free mask, k).
    best: HashMap<(u16, u32, u8), Score>,
    acc: Acc,
    queue: VecDeque<usize>,
    /// Waiting jobs per GPUs-per-node.
    waiting: [u64; MAX_GPUS + 1],
    /// Allocations of running jobs: (node, GPU mask).
    running: Vec<Vec<(u32, u32)>>,
    /// Job ends: (time bits, job).
    ends: BinaryHeap<Reverse<(u64, u64)>>,
    busy: u64,
    faulty: u64,
}

impl Sim<'_> {
    fn topo(&self, node: usize) -> &gputopo_core::topology::NodeTopology {
        &self.spec.groups[self.state.topo_of[node] as usize].1
    }

    /// Job indices in submission order, without those that can never fit; and their count.
    fn admissible(&self, jobs: &[Job]) -> (Vec<usize>, u64) {
        let fits = |j: &Job| {
            let k = usize::from(j.gpus_per_node);
            let hosts: u32 = self
                .spec
                .groups
                .iter()
                .filter(|(_, t)| t.len() >= k)
                .map(|g| g.0)
                .sum();
            k >= 1 && j.nodes >= 1 && j.nodes <= hosts && j.duration >= 0.0
        };
        let mut order: Vec<usize> = (0..jobs.len()).filter(|&j| fits(&jobs[j])).collect();
        order.sort_by(|&a, &b| jobs[a].submit.total_cmp(&jobs[b].submit));
        let rejected = (jobs.len() - order.len()) as u64;
        (order, rejected)
    }

    /// Adds `dt` seconds of the current state to the time-averaged metrics.
    fn account(&mut self, dt: f64) {
        if dt <= 0.0 {
            return;
        }
        let total = self.spec.gpu_count();
        self.acc.busy_area += self.busy as f64 * dt;
        self.acc.healthy_area += (total - self.faulty) as f64 * dt;
        let waiting: u64 = self.waiting.iter().sum();
        if waiting == 0 {
            return;
        }
        // Waiting jobs that want more than f GPUs per node, for each f.
        let mut above = [0u64; MAX_GPUS + 2];
        for f in (0..=MAX_GPUS).rev() {
            above[f] = above[f + 1] + self.waiting.get(f + 1).copied().unwrap_or(0);
        }
        let hist = self.state.usable_hist();
        let stranded: f64 = (1..=MAX_GPUS)
            .map(|f| f64::from(hist[f]) * f as f64 * above[f] as f64 / waiting as f64)
            .sum();
        self.acc.stranded_area += stranded * dt;
    }

    fn release(&mut self, j: usize) {
        for (node, set) in std::mem::take(&mut self.running[j]) {
            let node = node as usize;
            let (a, f) = (self.state.alloc[node], self.state.faulty[node]);
            self.state.update(node, a & !set, f);
            self.busy -= u64::from(set.count_ones());
        }
    }

    fn fault(&mut self, fault: &Fault) {
        let node = fault.node as usize;
        let bit = 1u32 << fault.gpu;
        let (a, f) = (self.state.alloc[node], self.state.faulty[node]);
        if f & bit == 0 {
            self.state.update(node, a, f | bit);
            self.faulty += 1;
            self.acc.faults += 1;
        }
    }

    fn schedule(&mut self, jobs: &[Job], now: f64) {
        while let Some(&j) = self.queue.front() {
            let (k, m) = (usize::from(jobs[j].gpus_per_node), jobs[j].nodes);
            if self.state.nodes_able(k) < m {
                self.queue.pop_front();
                self.waiting[k] -= 1;
                self.acc.unrunnable += 1;
                continue;
            }
            let t0 = Instant::now();
            let placed = self.place(&jobs[j]);
            self.acc.decision_ns += t0.elapsed().as_nanos();
            self.acc.decisions += 1;
            let Some(allocs) = placed else { break };
            self.queue.pop_front();
            self.waiting[usize::from(jobs[j].gpus_per_node)] -= 1;
            self.start(j, &jobs[j], &allocs, now);
        }
    }

    /// Chooses nodes and GPUs for `job`, or `None` when it does not fit now.
    fn place(&self, job: &Job) -> Option<Vec<(usize, GpuSet)>> {
        let k = usize::from(job.gpus_per_node);
        let m = job.nodes as usize;
        if (self.state.nodes_with_at_least(k) as usize) < m {
            return None;
        }
        let req = Request::new(k);
        let mut out = Vec::with_capacity(m);
        match self.placement {
            Placement::Baseline(policy) => {
                let mut from = 0;
                while out.len() < m {
                    let node = self.state.first_fit(from, k)?;
                    let free = GpuSet::from_bits(self.state.visible(node));
                    if let Some(set) = policy.choose(self.topo(node), free, &req) {
                        out.push((node, set));
                    }
                    from = node + 1;
                }
            }
            Placement::Gputopo => {
                let states = self.state.states_with_at_least(k);
                let cands: Vec<(&TopoTables, GpuSet)> = states
                    .iter()
                    .map(|(g, mask, _)| {
                        (self.handles[*g as usize].as_ref(), GpuSet::from_bits(*mask))
                    })
                    .collect();
                for i in rank_nodes(&cands, k) {
                    let (g, mask, nodes) = &states[i];
                    let tables = &self.handles[*g as usize];
                    let Some(set) = Gputopo::pick_on(tables, GpuSet::from_bits(*mask), &req) else {
                        continue;
                    };
                    for &node in nodes.iter().take(m - out.len()) {
                        out.push((node as usize, set));
                    }
                    if out.len() == m {
                        break;
                    }
                }
            }
        }
        (out.len() == m).then_some(out)
    }

    fn start(&mut self, j: usize, job: &Job, allocs: &[(usize, GpuSet)], now: f64) {
        let k = usize::from(job.gpus_per_node);
        let mut touched_faulty = false;
        let mut factor = 1.0f64;
        for &(node, set) in allocs {
            let g = self.state.topo_of[node];
            let topo = &self.spec.groups[g as usize].1;
            touched_faulty |= self.state.faulty[node] & set.bits() != 0;
            if k >= 2 {
                let usable = self.state.usable(node);
                let handle = &self.handles[g as usize];
                let best = *self.best.entry((g, usable, k as u8)).or_insert_with(|| {
                    Gputopo::pick_on(handle, GpuSet::from_bits(usable), &Request::new(k))
                        .map_or(Score::NONE, |set| score(topo, set))
                });
                let got = score(topo, set);
                self.acc.allocation(got.bottleneck, got >= best);
                let ring = self.comm.ring(g, topo, set);
                let ideal = self.comm.ideal(g, topo, k, || {
                    Gputopo::pick_on(handle, topo.all(), &Request::new(k)).unwrap_or(topo.all())
                });
                factor = factor.max(slowdown(self.comm_fraction, ideal, ring));
            }
            let (a, f) = (self.state.alloc[node], self.state.faulty[node]);
            self.state.update(node, a | set.bits(), f);
            self.busy += set.len() as u64;
            self.running[j].push((node as u32, set.bits()));
        }
        self.acc.faulty_allocs += u64::from(touched_faulty);
        let run = job.duration * factor;
        let end = now + run;
        self.acc.waits.push(now - job.submit);
        if k >= 4 {
            self.acc.large_waits.push(now - job.submit);
        }
        self.acc.jcts.push(end - job.submit);
        if k >= 2 {
            self.acc.slowdowns.push(factor);
        }
        self.acc.makespan = self.acc.makespan.max(end);
        self.ends.push(Reverse((end.to_bits(), j as u64)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::baseline::best_effort::BestEffort;
    use crate::baseline::first_fit::FirstFit;
    use crate::baseline::slurm_greedy::SlurmGreedy;
    use crate::sim::generator::Synthetic;
    use crate::sim::rng::Rng;
    use gputopo_core::fixtures;

    fn cluster() -> ClusterSpec {
        ClusterSpec {
            groups: vec![(6, fixtures::dgx1v()), (2, fixtures::hgx_h100())],
        }
    }

    fn faults(spec: &ClusterSpec, n: usize, horizon: f64) -> Vec<Fault> {
        let mut r = Rng::new(9);
        (0..n)
            .map(|_| Fault {
                time: r.f64() * horizon,
                node: r.below(u64::from(spec.node_count())) as u32,
                gpu: r.below(8) as u8,
            })
            .collect()
    }

    /// Strips the wall-clock fields, which differ between runs.
    fn logical(mut s: Summary) -> Summary {
        s.wall_s = 0.0;
        s.decisions_per_s = 0.0;
        s
    }

    #[test]
    fn small_cluster_all_policies() {
        let spec = cluster();
        let mut jobs = Synthetic::new(400, 3).generate(spec.gpu_count());
        jobs.push(Job {
            submit: 1.0,
            duration: 1.0,
            gpus_per_node: 16,
            nodes: 1,
            user: 0,
        });
        let horizon = jobs.iter().map(|j| j.submit).fold(0.0, f64::max);
        let faults = faults(&spec, 6, horizon);
        let engine = Gputopo::new();
        let unaware = Config {
            health: Health::Unaware,
            ..Config::default()
        };
        let (sg, be) = (SlurmGreedy::V24_11, BestEffort);
        let placements = [
            Placement::Gputopo,
            Placement::Baseline(&sg),
            Placement::Baseline(&be),
            Placement::Baseline(&FirstFit),
        ];
        let mut unaware_faulty = 0;
        for p in placements {
            let s = simulate(&spec, &jobs, &faults, p, &engine, &unaware).unwrap();
            assert_eq!((s.jobs, s.rejected), (400, 1), "{}", s.policy);
            assert_eq!(s.started + s.unrunnable, 400, "{s:?}");
            assert!(s.started >= 380, "{s:?}");
            assert!(
                s.multi_gpu_allocs > 100 && s.decisions >= s.started,
                "{s:?}"
            );
            assert!(s.slowdown_mean >= 1.0 && s.slowdown_max >= s.slowdown_p75);
            assert!(s.utilization > 0.2 && s.utilization <= 1.0, "{s:?}");
            assert!((1..=6).contains(&s.faults), "duplicates count once");
            if p.name() == "gputopo" {
                assert_eq!(s.faulty_allocs, 0);
                assert_eq!(s.optimal_share, 1.0);
            } else {
                unaware_faulty += s.faulty_allocs;
            }
            let again = simulate(&spec, &jobs, &faults, p, &engine, &unaware).unwrap();
            assert_eq!(logical(again), logical(s.clone()), "deterministic");
            let aware = simulate(&spec, &jobs, &faults, p, &engine, &Config::default()).unwrap();
            assert_eq!(aware.faulty_allocs, 0, "{}", s.policy);
            assert_eq!(aware.started + aware.unrunnable, 400, "{}", s.policy);
        }
        assert!(
            unaware_faulty > 0,
            "health-unaware baselines hit faulty GPUs"
        );
    }

    #[test]
    fn fifo_head_blocks_and_multi_node_jobs_span_nodes() {
        let spec = ClusterSpec {
            groups: vec![(2, fixtures::dgx1v())],
        };
        let job = |submit, gpus_per_node, nodes| Job {
            submit,
            duration: 100.0,
            gpus_per_node,
            nodes,
            user: 0,
        };
        // 8 GPUs on node 0 until t=100; the 2-node job waits; the 1-GPU job behind it waits too.
        let jobs = vec![job(0.0, 8, 1), job(1.0, 8, 2), job(2.0, 1, 1)];
        let engine = Gputopo::new();
        for p in [Placement::Gputopo, Placement::Baseline(&FirstFit)] {
            let s = simulate(&spec, &jobs, &[], p, &engine, &Config::default()).unwrap();
            assert_eq!(s.started, 3);
            assert_eq!(s.makespan_s, 300.0, "{}", p.name());
            // waits: 0, 99 (until t=100), 198 (until the 2-node job ends at 200)
            assert!((s.wait_mean_s - 99.0).abs() < 1e-9, "{s:?}");
        }
    }
}
