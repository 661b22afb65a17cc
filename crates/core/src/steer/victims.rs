//! Topology-aware preemption victims (issue 15 item 1), as a pure choice.
//!
//! When slurmctld plans a preemption through the select plugin, cons_tres removes the
//! offered candidates one by one, in the order slurmctld sorted them (the preempt plugin's
//! priority: partition tier, QOS, ...), until the preemptor fits, and the victims are the
//! removed jobs on the nodes it chose. Which GPUs that frees is an accident of that order: in
//! the run a 4-GPU preemptor on DGX-1V nodes full of 1-GPU jobs got {1,2,5,6}, not a
//! best quad, although preempting the four jobs on {0,1,2,3} cost the same.
//!
//! [`choose`] finds, over every node and every GPU set the preemptor could get there, the
//! victims that free it; among the cheapest (fewest jobs, then the lowest preemption ranks:
//! the jobs Slurm would preempt first) it takes the set the engine scores best. Faulty GPUs
//! are planned as if they did not exist, so a fault never makes a preemption smaller on paper
//! and larger in fact; a plan where cons_tres, removing the victims one by one, would find
//! enough GPUs (an idle faulty one among them) before the last victim is dropped too. [`order`] then reorders the candidates *within each group of equal
//! rank* so that the chosen victims come first: Slurm's order across ranks is untouched, so
//! no job is preempted that Slurm would not have preempted at that cost.

use std::cmp::Reverse;

use crate::gpuset::GpuSet;
use crate::steer::{HealthMasks, Placer};
use crate::topology::NodeTopology;

/// Largest node whose subsets are enumerated (16 choose 8 = 12,870 sets).
pub const MAX_ENUMERATED_GPUS: usize = 16;

/// A running job slurmctld offers as a preemption candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// Its job id (for the caller's bookkeeping).
    pub job: u32,
    /// Its place in Slurm's preemption order: equal ranks are interchangeable, a lower rank
    /// is preempted first.
    pub rank: u64,
    /// The node it runs on (one-node jobs; others are never chosen).
    pub node: usize,
    /// Its GPUs there.
    pub gpus: GpuSet,
}

/// One node the preemptor may run on.
#[derive(Clone, Copy, Debug)]
pub struct VictimNode<'a> {
    /// Node index.
    pub index: usize,
    /// Its interconnect.
    pub topo: &'a NodeTopology,
    /// GPUs held by jobs that are not candidates (never freed).
    pub pinned: GpuSet,
    /// GPUs no job holds (cons_tres counts them free, faulty ones included).
    pub idle: GpuSet,
    /// Health: faulty GPUs are planned as absent.
    pub health: HealthMasks,
}

/// The chosen plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The node.
    pub node: usize,
    /// The GPUs the preemptor gets there.
    pub gpus: GpuSet,
    /// The victims (candidate positions, in Slurm's order).
    pub victims: Vec<usize>,
}

/// Every `k`-subset of `pool`.
fn subsets(pool: GpuSet, k: usize) -> Vec<GpuSet> {
    let items = pool.to_vec();
    let mut out = Vec::new();
    let mut pick = Vec::with_capacity(k);
    fn rec(items: &[usize], k: usize, from: usize, pick: &mut Vec<usize>, out: &mut Vec<GpuSet>) {
        if pick.len() == k {
            out.push(pick.iter().copied().collect());
            return;
        }
        for i in from..items.len() {
            if items.len() - i < k - pick.len() {
                break;
            }
            pick.push(items[i]);
            rec(items, k, i + 1, pick, out);
            pick.pop();
        }
    }
    rec(&items, k, 0, &mut pick, &mut out);
    out
}

/// The cheapest victims for `need` GPUs on one node, best set first. See the module docs.
pub fn choose<P: Placer>(
    placer: &P,
    nodes: &[VictimNode<'_>],
    candidates: &[Candidate],
    need: usize,
) -> Option<Plan> {
    let mut best: Option<(Cost<P::Score>, Plan)> = None;
    for n in nodes {
        let all = n.topo.all();
        if all.len() > MAX_ENUMERATED_GPUS {
            continue;
        }
        let usable = all.difference(n.health.faulty).difference(n.pinned);
        for set in subsets(usable, need) {
            let victims: Vec<usize> = candidates
                .iter()
                .enumerate()
                .filter(|(_, c)| c.node == n.index && !c.gpus.intersection(set).is_empty())
                .map(|(i, _)| i)
                .collect();
            if premature(n, candidates, &victims, need) {
                continue;
            }
            let mut ranks: Vec<u64> = victims.iter().map(|&i| candidates[i].rank).collect();
            ranks.sort_unstable_by(|a, b| b.cmp(a));
            let cost = Cost {
                count: victims.len(),
                ranks,
                score: Reverse(placer.score(n.topo, set)),
                node: n.index,
            };
            if best.as_ref().is_none_or(|(b, _)| cost < *b) {
                let plan = Plan {
                    node: n.index,
                    gpus: set,
                    victims,
                };
                best = Some((cost, plan));
            }
        }
    }
    best.map(|(_, plan)| plan)
}

/// True when cons_tres, removing the victims in order, would find `need` GPUs on the node
/// before the last one (counting idle faulty GPUs, or idle GPUs outside the set): it would
/// stop there and plan on GPUs gputopo refuses or did not choose.
fn premature(n: &VictimNode<'_>, candidates: &[Candidate], victims: &[usize], need: usize) -> bool {
    let Some((_, before)) = victims.split_last() else {
        return false;
    };
    let seen = before
        .iter()
        .fold(n.idle, |a, &i| a.union(candidates[i].gpus));
    seen.len() >= need
}

/// What a plan costs, smaller first: fewer victims, then lower ranks (highest first), then
/// the better set, then the lower node index.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Cost<S> {
    count: usize,
    ranks: Vec<u64>,
    score: Reverse<S>,
    node: usize,
}

/// The candidates' new order (positions into `candidates`): Slurm's order, except that within
/// each run of equal rank the plan's victims come first (in their own order). No candidate
/// crosses into another rank's run.
pub fn order(candidates: &[Candidate], plan: &Plan) -> Vec<usize> {
    let mut out = Vec::with_capacity(candidates.len());
    let mut start = 0;
    while start < candidates.len() {
        let rank = candidates[start].rank;
        let end = candidates[start..]
            .iter()
            .position(|c| c.rank != rank)
            .map_or(candidates.len(), |p| start + p);
        let (first, rest): (Vec<usize>, Vec<usize>) =
            (start..end).partition(|i| plan.victims.contains(i));
        out.extend(first);
        out.extend(rest);
        start = end;
    }
    out
}

pub mod mode;

#[cfg(test)]
mod tests;
