//! The tries of one job ([`plan_with`], [`plan_memo`]): the best-ranked nodes first, then
//! their class, then every candidate (see the module docs of [`super`]).
//!
//! Runs for every candidate on every `select_p_job_test` call, so the first two tiers are
//! built in the same pass that finds the best key ([`Tiers::see`]), and the keys are kept
//! (and sorted) only for a multi-node job, whose tiers may need extending down the ranking.

use super::{Candidate, Need, NodeKey, Plan};
use crate::placement::TopoHandle;
use crate::steer::key_memo::KeyMemos;

/// The first two tiers while the keys are seen: every node whose key is the best so far
/// (`exact`), and every node of the best key's weight, health and class (`class`, a
/// superset). Every key seen is at most `top`, so when a better key of another class
/// arrives no earlier node can share its class (that class lies above `top`'s).
struct Tiers {
    top: Option<NodeKey>,
    exact: Vec<usize>,
    class: Vec<usize>,
    /// Every key seen, for a multi-node job only.
    keyed: Option<Vec<(usize, NodeKey)>>,
}

impl Tiers {
    fn new(cands: usize, need: &Need) -> Self {
        Tiers {
            top: None,
            exact: Vec::with_capacity(cands),
            class: Vec::with_capacity(cands),
            keyed: (need.min_nodes > 1).then(|| Vec::with_capacity(cands)),
        }
    }

    /// Node `node` has key `k`. Most candidates share the best key (nodes of one kind in
    /// one state), so equality is tested first: one comparison of four words.
    #[inline(always)]
    fn see(&mut self, node: usize, k: &NodeKey) {
        if let Some(keyed) = &mut self.keyed {
            keyed.push((node, *k));
        }
        match &mut self.top {
            Some(best) if k == best => {}
            Some(best) if k < best => {
                if k.same_class(best) {
                    self.class.push(node);
                }
                return;
            }
            Some(best) => {
                if !k.same_class(best) {
                    self.class.clear();
                }
                self.exact.clear();
                *best = *k;
            }
            None => self.top = Some(*k),
        }
        self.exact.push(node);
        self.class.push(node);
    }

    /// The plan: the two tiers (extended down the ranking when too small for a multi-node
    /// job, the required nodes added, each kept only when it narrows), then `all`.
    fn plan(self, need: &Need, all: Vec<usize>) -> Plan {
        if self.top.is_none() {
            return Plan { tiers: vec![all] };
        }
        let mut keyed = self.keyed.unwrap_or_default();
        let mut sorted = false;
        let mut tiers: Vec<Vec<usize>> = Vec::new();
        for tier in [self.exact, self.class] {
            // Too small for a multi-node job: extend down the ranking (never for one node:
            // the exact tier holds the best node).
            if tier.len() + need.required.len() < need.min_nodes.max(1) && !sorted {
                keyed.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
                sorted = true;
            }
            complete_tier(tier, &keyed, need, &all, &mut tiers);
        }
        tiers.truncate(need.max_calls - 1);
        tiers.push(all);
        Plan { tiers }
    }
}

/// Every candidate's node index, ascending; `Err` when the plan cannot narrow (no GPU
/// count to steer by, or a single call allowed): the plan of that list alone.
fn all_nodes(cands: &[Candidate<'_>], need: &Need) -> Result<Vec<usize>, Plan> {
    let mut all: Vec<usize> = cands.iter().map(|c| c.node).collect();
    if !all.is_sorted() {
        all.sort_unstable();
    }
    if need.gpus_per_node == 0 || need.max_calls <= 1 {
        return Err(Plan { tiers: vec![all] });
    }
    Ok(all)
}

/// [`super::plan`] with each candidate's [`super::node_key`] from `key(position in cands,
/// candidate)` (possibly remembered), so a caller that keeps the keys of unchanged nodes
/// ([`super::super::key_memo`]) does no per-node engine work.
pub fn plan_with(
    cands: &[Candidate<'_>],
    need: &Need,
    mut key: impl FnMut(usize, &Candidate<'_>) -> Option<NodeKey>,
) -> Plan {
    let all = match all_nodes(cands, need) {
        Ok(all) => all,
        Err(plan) => return plan,
    };
    let mut tiers = Tiers::new(cands.len(), need);
    for (i, c) in cands.iter().enumerate() {
        if let Some(k) = key(i, c) {
            tiers.see(c.node, &k);
        }
    }
    tiers.plan(need, all)
}

/// [`plan_with`] with the keys from `memos` ([`KeyMemos::node_key_ref`], compared where the
/// memo keeps them, not copied out): candidate `i` has the engine tables `tables(i)`, and
/// `compute(i, c)` gives its key when the memo has not seen its state (or it has no
/// tables). The same plan as [`plan_with`] over the same keys.
pub fn plan_memo<'t>(
    cands: &[Candidate<'_>],
    need: &Need,
    memos: &mut KeyMemos,
    tables: impl Fn(usize) -> Option<&'t TopoHandle>,
    mut compute: impl FnMut(usize, &Candidate<'_>) -> Option<NodeKey>,
) -> Plan {
    let all = match all_nodes(cands, need) {
        Ok(all) => all,
        Err(plan) => return plan,
    };
    let mut tiers = Tiers::new(cands.len(), need);
    for (i, c) in cands.iter().enumerate() {
        let mut key = || compute(i, c);
        match tables(i) {
            Some(h) => {
                if let Some(k) = memos.node_key_ref(c.node, h, c, need.gpus_per_node, key) {
                    tiers.see(c.node, k);
                }
            }
            None => {
                if let Some(k) = key() {
                    tiers.see(c.node, &k);
                }
            }
        }
    }
    tiers.plan(need, all)
}

/// Completes one candidate tier and keeps it if it is worth a try: extended down `ranked`
/// (best first) until a multi-node job's minimum fits, the required nodes added; kept only
/// when it is big enough, smaller than `all` and not the tier before it again.
pub(super) fn complete_tier(
    mut tier: Vec<usize>,
    ranked: &[(usize, NodeKey)],
    need: &Need,
    all: &[usize],
    tiers: &mut Vec<Vec<usize>>,
) {
    for (n, _) in ranked {
        if tier.len() + need.required.len() >= need.min_nodes.max(1) {
            break;
        }
        if !tier.contains(n) {
            tier.push(*n);
        }
    }
    tier.extend(need.required.iter().copied().filter(|r| all.contains(r)));
    crate::steer::tries::sort_dedup(&mut tier);
    if tier.len() >= need.min_nodes.max(1) && tier.len() < all.len() && tiers.last() != Some(&tier)
    {
        tiers.push(tier);
    }
}
