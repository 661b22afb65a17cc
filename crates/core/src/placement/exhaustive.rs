//! `exhaustive`: the reference policy, the test oracle for the `gputopo` engine.
//!
//! It enumerates every admissible set and evaluates the objective of
//! [`super::objective`] directly from the topology (no tables, no pruning), keeping the best
//! key and, among equal keys, the lexicographically smallest set. Exponential: fine for tests
//! and for benches' brute-force reference columns, never for slurmctld.

use super::objective::{self, Objective};
use super::{Policy, Request};
use crate::gpuset::GpuSet;
use crate::topology::NodeTopology;

/// The exhaustive reference policy.
#[derive(Debug, Default, Clone, Copy)]
pub struct Exhaustive;

impl Exhaustive {
    /// The best set and its objective value, by brute force; `None` when impossible.
    pub fn choose_detailed(
        topo: &NodeTopology,
        free: GpuSet,
        req: &Request,
    ) -> Option<(GpuSet, Objective)> {
        let free = free.intersection(topo.all());
        if !req.required.is_subset(free) || req.required.len() > req.count || free.len() < req.count
        {
            return None;
        }
        let mut best: Option<(Objective, GpuSet)> = None;
        let mut eval = objective::Evaluator::new(topo);
        objective::for_each_subset(
            free.difference(req.required),
            req.count - req.required.len(),
            &mut |t| {
                let s = t.union(req.required);
                let o = eval.objective(free, s, req.near);
                // Subsets arrive in tie-break order: only a strictly better key replaces.
                if best.is_none_or(|(bo, _)| o > bo) {
                    best = Some((o, s));
                }
            },
        );
        best.map(|(o, s)| (s, o))
    }

    /// The reference node ranking: each node's [`super::RankKey`] from its brute-force choice
    /// for `k` GPUs, a plain sort (best first, ties in input order). `rank_nodes` must agree.
    pub fn rank_nodes(nodes: &[(&NodeTopology, GpuSet)], k: usize) -> Vec<usize> {
        let req = Request::new(k);
        let mut keyed: Vec<_> = nodes
            .iter()
            .enumerate()
            .filter_map(|(i, (t, free))| {
                let (_, o) = Self::choose_detailed(t, *free, &req)?;
                let left = free.intersection(t.all()).len() - k;
                Some((super::RankKey::new(&o, left), i))
            })
            .collect();
        keyed.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        keyed.into_iter().map(|(_, i)| i).collect()
    }
}

impl Policy for Exhaustive {
    type Score = crate::placement::Score;

    fn name(&self) -> &'static str {
        "exhaustive"
    }

    fn choose(&self, topo: &NodeTopology, free: GpuSet, req: &Request) -> Option<GpuSet> {
        Self::choose_detailed(topo, free, req).map(|(s, _)| s)
    }

    fn score(&self, topo: &NodeTopology, set: GpuSet) -> crate::placement::Score {
        objective::score(topo, set)
    }
}
