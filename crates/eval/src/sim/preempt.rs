//! Preemption scenario (issue 15 item 5): two priority classes, the high class multi-GPU.
//!
//! Each trial fills `nodes` nodes with low-class jobs of 1 or 2 GPUs (placed by stock's GPU
//! pick, the same fill for every policy) and then lets one high-class job of `sizes` GPUs
//! preempt. Slurm offers the low-class jobs as candidates in its own order (all of one rank:
//! one class; the order among equals is an accident, drawn at random here), and cons_tres
//! plans the preemption as `_run_now` does: it removes candidates in list order until the job
//! fits on some node, takes the lowest-index node where it fits, and preempts the removed
//! jobs on that node.
//!
//! - **stock**: that plan on Slurm's order; the GPUs are cons_tres's pick
//!   ([`SlurmGreedy`]) among the node's free ones.
//! - **gputopo**: the plugin's rule: [`victims::choose`] and [`victims::order`] reorder the
//!   candidates, cons_tres plans on that order, and the engine picks the GPUs among the node's
//!   free ones.
//!
//! Reported per policy: victims per preemption, the share of preemptors that got a best set
//! of their size on the node's topology (the engine's score equal to the best k-set's), and
//! the mean ring bandwidth of their sets ([`comm::ring_gbps`]). Deterministic for a seed.

use crate::baseline::slurm_greedy::SlurmGreedy;
use crate::sim::comm;
use crate::sim::rng::Rng;
use gputopo_core::gpuset::GpuSet;
use gputopo_core::placement::engine::{Gputopo, score};
use gputopo_core::placement::objective::best_subset_score;
use gputopo_core::placement::{Policy, Request};
use gputopo_core::steer::HealthMasks;
use gputopo_core::steer::victims::{self, Candidate, VictimNode};
use gputopo_core::topology::NodeTopology;

/// One scenario.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Nodes per trial (all of `topo`).
    pub nodes: usize,
    /// Preemptions (one trial each).
    pub trials: usize,
    /// High-class job sizes, drawn uniformly.
    pub sizes: Vec<usize>,
    /// Share of low-class jobs that want 2 GPUs (the rest 1).
    pub two_gpu_share: f64,
    /// RNG seed.
    pub seed: u64,
}

/// Results of one policy.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// Preemptions planned.
    pub preemptions: usize,
    /// Jobs preempted in all.
    pub victims: usize,
    /// Preemptors that got a best set of their size.
    pub best_sets: usize,
    /// Sum of the preemptors' ring bandwidth (GB/s).
    pub ring_gbps: u64,
}

impl Outcome {
    /// Mean victims per preemption.
    pub fn victims_per_preemption(&self) -> f64 {
        self.victims as f64 / self.preemptions.max(1) as f64
    }
    /// Share of preemptors on a best set.
    pub fn best_share(&self) -> f64 {
        self.best_sets as f64 / self.preemptions.max(1) as f64
    }
    /// Mean ring bandwidth of the preemptors' sets (GB/s).
    pub fn mean_ring_gbps(&self) -> f64 {
        self.ring_gbps as f64 / self.preemptions.max(1) as f64
    }
}

/// (stock, gputopo) over the scenario's trials on `topo`.
pub fn run(topo: &NodeTopology, s: &Scenario) -> (Outcome, Outcome) {
    let engine = Gputopo::new();
    let (mut stock, mut ours) = (Outcome::default(), Outcome::default());
    for t in 0..s.trials {
        let mut rng = Rng::derive(s.seed, t as u64);
        let cands = fill(topo, s, &mut rng);
        let k = s.sizes[rng.below(s.sizes.len() as u64) as usize];
        let greedy = |free| SlurmGreedy::V24_11.choose(topo, free, &Request::new(k));
        record(&mut stock, topo, plan(s.nodes, &cands, k, greedy));
        let vnodes: Vec<VictimNode<'_>> = (0..s.nodes)
            .map(|i| VictimNode {
                index: i,
                topo,
                pinned: GpuSet::EMPTY,
                idle: GpuSet::EMPTY,
                health: HealthMasks::ALL_OK,
            })
            .collect();
        let reordered: Vec<Candidate> = match victims::choose(&engine, &vnodes, &cands, k) {
            Some(p) => victims::order(&cands, &p)
                .into_iter()
                .map(|i| cands[i])
                .collect(),
            None => cands.clone(),
        };
        let pick = |free| Policy::choose(&engine, topo, free, &Request::new(k));
        record(&mut ours, topo, plan(s.nodes, &reordered, k, pick));
    }
    (stock, ours)
}

fn record(o: &mut Outcome, topo: &NodeTopology, p: Option<(usize, GpuSet)>) {
    let Some((victims, set)) = p else { return };
    o.preemptions += 1;
    o.victims += victims;
    o.best_sets += usize::from(is_best(topo, set));
    let ring = comm::ring_gbps(topo, set);
    o.ring_gbps += u64::from(if ring == u32::MAX { 0 } else { ring });
}

/// True when no set of the same size on the node scores better by the engine's objective.
fn is_best(topo: &NodeTopology, set: GpuSet) -> bool {
    score(topo, set) >= best_subset_score(topo, topo.all(), set.len())
}

/// Low-class jobs filling every GPU of every node, stock-placed, in a random Slurm order.
fn fill(topo: &NodeTopology, s: &Scenario, rng: &mut Rng) -> Vec<Candidate> {
    let mut out = Vec::new();
    for node in 0..s.nodes {
        let mut free = topo.all();
        while !free.is_empty() {
            let want = if free.len() >= 2 && rng.f64() < s.two_gpu_share {
                2
            } else {
                1
            };
            let Some(gpus) = SlurmGreedy::V24_11.choose(topo, free, &Request::new(want)) else {
                break;
            };
            free = free.difference(gpus);
            out.push(Candidate {
                job: out.len() as u32 + 1,
                rank: 0,
                node,
                gpus,
            });
        }
    }
    for i in (1..out.len()).rev() {
        out.swap(i, rng.below(i as u64 + 1) as usize);
    }
    out
}

/// cons_tres's plan on `order`: (victims, the preemptor's GPUs by `pick`), or `None`.
fn plan(
    nodes: usize,
    order: &[Candidate],
    k: usize,
    pick: impl Fn(GpuSet) -> Option<GpuSet>,
) -> Option<(usize, GpuSet)> {
    let mut free = vec![GpuSet::EMPTY; nodes];
    for (n, c) in order.iter().enumerate() {
        free[c.node] = free[c.node].union(c.gpus);
        if let Some(node) = (0..nodes).find(|&i| free[i].len() >= k) {
            let victims = order[..=n].iter().filter(|c| c.node == node).count();
            return pick(free[node]).map(|g| (victims, g));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use gputopo_core::fixtures::dgx1v;

    #[test]
    fn gputopo_preempts_no_more_and_gets_better_sets() {
        let s = Scenario {
            nodes: 4,
            trials: 200,
            sizes: vec![2, 4],
            two_gpu_share: 0.3,
            seed: 7,
        };
        let (stock, ours) = run(&dgx1v(), &s);
        assert_eq!(stock.preemptions, 200);
        assert_eq!(ours.preemptions, 200);
        assert!(ours.victims <= stock.victims, "{ours:?} vs {stock:?}");
        assert!(ours.best_sets > stock.best_sets, "{ours:?} vs {stock:?}");
        assert_eq!(run(&dgx1v(), &s), (stock, ours), "deterministic");
    }
}
