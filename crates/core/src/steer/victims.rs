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
use crate::placement::Policy;
use crate::steer::HealthMasks;
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
pub(crate) fn subsets(pool: GpuSet, k: usize) -> Vec<GpuSet> {
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

/// Most GPU sets [`choose`] examines in one call. A node whose sets would take the call past
/// it ends the search with no plan (Slurm's order then stands, as without gputopo), so the
/// cost of a call is bounded whatever the cluster: 7 distinct 16-GPU node states for an
/// 8-GPU job, 1,428 distinct 8-GPU ones for a 4-GPU job (docs/perf-log.md, "Victim search
/// cost").
pub const MAX_SETS_PER_CALL: usize = 100_000;

/// The cheapest victims for `need` GPUs on one node, best set first. See the module docs.
///
/// Cost is kept down without changing the answer: nodes are searched in order of a lower
/// bound on their victim count and skipped once it exceeds the best plan's; a node whose
/// state (topology, masks, its candidates in order) repeats an earlier one's is skipped (its
/// best plan is the same, and loses on the node index); within a node a set is scored only
/// when its victims cost no more than the best plan's.
pub fn choose<P: Policy>(
    policy: &P,
    nodes: &[VictimNode<'_>],
    candidates: &[Candidate],
    need: usize,
) -> Option<Plan> {
    let mut best: Option<(Cost<P::Score>, Plan)> = None;
    let mut budget = MAX_SETS_PER_CALL;
    let mut searched: Vec<(&VictimNode<'_>, Vec<usize>)> = Vec::new();
    let mut order: Vec<(usize, &VictimNode<'_>, Vec<usize>)> = nodes
        .iter()
        .filter(|n| n.topo.all().len() <= MAX_ENUMERATED_GPUS)
        .filter_map(|n| {
            let on: Vec<usize> = (0..candidates.len())
                .filter(|&i| candidates[i].node == n.index)
                .collect();
            Some((lower_bound(n, candidates, &on, need)?, n, on))
        })
        .collect();
    order.sort_by_key(|(lb, n, _)| (*lb, n.index));
    for (lb, n, on) in order {
        if best.as_ref().is_some_and(|(b, _)| lb > b.count) {
            break; // sorted: every later node needs more victims too
        }
        if searched
            .iter()
            .any(|(m, o)| same_state(m, n, o, &on, candidates))
        {
            continue;
        }
        let usable = n
            .topo
            .all()
            .difference(n.health.faulty)
            .difference(n.pinned);
        let sets = subsets(usable, need);
        if sets.len() > budget {
            return None;
        }
        budget -= sets.len();
        for set in sets {
            let hit = |i: &&usize| !candidates[**i].gpus.intersection(set).is_empty();
            let count = on.iter().filter(hit).count();
            if best.as_ref().is_some_and(|(b, _)| count > b.count) {
                continue;
            }
            let victims: Vec<usize> = on.iter().filter(hit).copied().collect();
            if premature(n, candidates, &victims, need) {
                continue;
            }
            let mut ranks: Vec<u64> = victims.iter().map(|&i| candidates[i].rank).collect();
            ranks.sort_unstable_by(|a, b| b.cmp(a));
            if best
                .as_ref()
                .is_some_and(|(b, _)| (count, &ranks) > (b.count, &b.ranks))
            {
                continue;
            }
            let cost = Cost {
                count,
                ranks,
                score: Reverse(policy.score(n.topo, set)),
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
        searched.push((n, on));
    }
    best.map(|(_, plan)| plan)
}

/// Fewest victims any plan on `n` can have (the largest candidates first, idle GPUs free),
/// or `None` when even every candidate there does not free `need` GPUs.
fn lower_bound(
    n: &VictimNode<'_>,
    candidates: &[Candidate],
    on: &[usize],
    need: usize,
) -> Option<usize> {
    let usable = n
        .topo
        .all()
        .difference(n.health.faulty)
        .difference(n.pinned);
    let mut have = n.idle.intersection(usable).len();
    let mut sizes: Vec<usize> = on
        .iter()
        .map(|&i| candidates[i].gpus.intersection(usable).len())
        .collect();
    sizes.sort_unstable_by(|a, b| b.cmp(a));
    let mut count = 0;
    for s in sizes {
        if have >= need {
            break;
        }
        have += s;
        count += 1;
    }
    (have >= need).then_some(count)
}

/// True when nodes `a` and `b` (candidates `ao`, `bo` on them, in Slurm's order) offer the
/// same plans: same topology and masks, the same candidates' GPUs and ranks in the same order.
fn same_state(
    a: &VictimNode<'_>,
    b: &VictimNode<'_>,
    ao: &[usize],
    bo: &[usize],
    candidates: &[Candidate],
) -> bool {
    let key = |i: &usize| (candidates[*i].gpus, candidates[*i].rank);
    (a.pinned, a.idle, a.health) == (b.pinned, b.idle, b.health)
        && ao.len() == bo.len()
        && ao.iter().map(key).eq(bo.iter().map(key))
        && (std::ptr::eq(a.topo, b.topo) || a.topo == b.topo)
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
#[cfg(test)]
mod tests_cost;
