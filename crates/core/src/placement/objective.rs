//! The objective the `gputopo` engine maximises, and direct (table-free) ways to evaluate it.
//!
//! # Why this objective
//! A multi-GPU job is as fast as its slowest collective, and a ring/tree all-reduce is bounded
//! by the weakest link it has to cross. So a set is judged first by its **bottleneck** (the
//! minimum over its pairs of a per-pair bandwidth value), then by its **aggregate** (the sum
//! over pairs, which rewards sets whose other links are good too). Only when two sets are
//! equally good for the job do we look at what the choice does to the *next* jobs: the
//! **lookahead** ([`super::lookahead`]) values the GPUs left free at every size the node can
//! still serve, largest first, so intact groups stay whole and a 1-GPU job takes the GPU the
//! rest needs least. Then **affinity** to the job's cores (`Request::near`), then the lowest
//! set, so that every answer is deterministic.
//!
//! The full key, compared lexicographically (bigger is better):
//! 1. `quality` ([`Score`]): `(bottleneck, aggregate)` of the chosen set.
//! 2. `leftover` ([`Leftover`]): per lookahead size, largest first, the best [`Score`] a
//!    subset of that size of the leftover free GPUs still has; then their maximum-weight pair
//!    matching.
//! 3. `near`: how many chosen GPUs are in `Request::near`.
//! 4. the lexicographically smallest sorted index list (e.g. {0,3} before {0,4}).
//!
//! `loss` ([`Loss`]) is reported beside them: the same leftover value as a drop from the free
//! GPUs, comparable across nodes (node ranking uses it); on one node it follows `leftover`.
//!
//! # Pair values
//! Pair values (GB/s per direction, NVLink and PCIe levels) and [`Score`] live in
//! [`mod@super::score`].
//!
//! The functions here compute everything from the topology directly. They are the
//! specification, used by the exhaustive oracle and by `score`; the fast path in
//! [`super::tables`] and `super::search` must agree with them.

use super::lookahead::{self, Leftover, Loss};
use super::score::{Score, pair_gbps};
use crate::gpuset::GpuSet;
use crate::topology::NodeTopology;
use std::collections::HashMap;
use std::fmt;

/// The full objective value of choosing one set out of a free set (see the module docs).
/// Ordered lexicographically by field; bigger is better (`loss` is determined by `leftover`
/// on one node, so it never decides there). Ties beyond this are broken by the lowest set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Objective {
    /// (a) the chosen set's own quality.
    pub quality: Score,
    /// (b) the value of the leftover free GPUs, per size, then their pairing.
    pub leftover: Leftover,
    /// What the choice costs later jobs, comparable across nodes (node ranking).
    pub loss: std::cmp::Reverse<Loss>,
    /// (c) chosen GPUs with affinity to the job's cores.
    pub near: u32,
}

impl fmt::Display for Objective {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} leftover=", self.quality)?;
        let mut sep = "";
        for &(s, sc) in self.leftover.by_size.iter().filter(|(s, _)| *s > 0) {
            write!(f, "{sep}{s}:{}", sc.bottleneck)?;
            sep = ",";
        }
        if sep.is_empty() {
            write!(f, "-")?;
        }
        write!(
            f,
            " leftover_pairs={} near={}",
            self.leftover.pairs, self.near
        )
    }
}

/// True when `a` comes before `b` in the final tie-break: `a`'s sorted index list is
/// lexicographically smaller (for sets of equal size: `a` holds the lowest GPU where they differ).
pub fn lex_smaller(a: GpuSet, b: GpuSet) -> bool {
    let d = a.bits() ^ b.bits();
    d != 0 && a.bits() & d & d.wrapping_neg() != 0
}

/// The quality of `set` on `topo` (its bottleneck and aggregate pair value). GPUs outside the
/// topology are ignored.
pub fn score(topo: &NodeTopology, set: GpuSet) -> Score {
    let set = set.intersection(topo.all());
    let mut s = Score::SINGLE;
    for a in set.iter() {
        for b in set.iter().filter(|&b| b > a) {
            let v = pair_gbps(topo.link(a, b));
            s.bottleneck = s.bottleneck.min(v);
            s.aggregate += v;
        }
    }
    if set.is_empty() { Score::NONE } else { s }
}

/// The best [`score`] of any `k`-subset of `set` ([`Score::NONE`] when `set` has fewer than
/// `k` GPUs or `k` is 0). Exhaustive; for the oracle and tests.
pub fn best_subset_score(topo: &NodeTopology, set: GpuSet, k: usize) -> Score {
    let mut best = Score::NONE;
    if k == 0 {
        return best;
    }
    for_each_subset(set, k, &mut |s| best = best.max(score(topo, s)));
    best
}

/// Maximum-weight matching of `set` under pair values (sum over disjoint pairs): match the
/// lowest GPU with each other one, or leave it out, memoised per subset. For the oracle and
/// tests.
pub fn pair_matching(topo: &NodeTopology, set: GpuSet) -> u32 {
    Evaluator::new(topo).pairs(set)
}

/// The objective value of choosing `set` out of `free` (with `set ⊆ free`) for a job that
/// prefers `near`, computed directly from the topology.
pub fn objective(topo: &NodeTopology, free: GpuSet, set: GpuSet, near: GpuSet) -> Objective {
    Evaluator::new(topo).objective(free, set, near)
}

/// Direct evaluation of the objective with memoised best subsets, for the oracle: `best(S, s)`
/// is the best of `S` itself (|S| = s) and of `S` minus each of its GPUs (|S| > s), a
/// different computation from the tables' subset-maximum transform. One evaluator per
/// (topology, free set) keeps the oracle polynomial in the number of masks it visits.
pub struct Evaluator<'t> {
    topo: &'t NodeTopology,
    sizes: Vec<usize>,
    best: HashMap<(u8, u32), Score>,
    pairs: HashMap<GpuSet, u32>,
}

impl<'t> Evaluator<'t> {
    /// An evaluator for `topo` (its lookahead sizes from [`lookahead::sizes`]).
    pub fn new(topo: &'t NodeTopology) -> Self {
        let sizes = lookahead::sizes(topo.len(), |a, b| pair_gbps(topo.link(a, b)));
        Evaluator {
            topo,
            sizes,
            best: HashMap::new(),
            pairs: HashMap::new(),
        }
    }

    /// The best score of an `s`-subset of `set` ([`Score::NONE`] when `|set| < s`).
    pub fn best(&mut self, set: GpuSet, s: usize) -> Score {
        let n = set.len();
        if s == 0 || n < s {
            return Score::NONE;
        }
        if n == s {
            return score(self.topo, set);
        }
        if let Some(&v) = self.best.get(&(s as u8, set.bits())) {
            return v;
        }
        let mut b = Score::NONE;
        for g in set.iter() {
            b = b.max(self.best(set.without(g), s));
        }
        self.best.insert((s as u8, set.bits()), b);
        b
    }

    /// Maximum-weight pair matching of `set` (see [`pair_matching`]).
    pub fn pairs(&mut self, set: GpuSet) -> u32 {
        let set = set.intersection(self.topo.all());
        let Some(lo) = set.first() else { return 0 };
        if let Some(&v) = self.pairs.get(&set) {
            return v;
        }
        let rest = set.without(lo);
        let mut best = self.pairs(rest);
        for j in rest.iter() {
            best = best.max(pair_gbps(self.topo.link(lo, j)) + self.pairs(rest.without(j)));
        }
        self.pairs.insert(set, best);
        best
    }

    /// The value of leaving `left` free.
    pub fn leftover(&mut self, left: GpuSet) -> Leftover {
        let left = left.intersection(self.topo.all());
        let pairs = self.pairs(left);
        let sizes = self.sizes.clone();
        lookahead::leftover(&sizes, |s| self.best(left, s), pairs)
    }

    /// The objective value of choosing `set` out of `free` for a job preferring `near`.
    pub fn objective(&mut self, free: GpuSet, set: GpuSet, near: GpuSet) -> Objective {
        let free = free.intersection(self.topo.all());
        let leftover = self.leftover(free.difference(set));
        let before = self.leftover(free);
        let all = self.topo.all();
        let whole = if free == all && !set.is_empty() {
            score(self.topo, all)
        } else {
            Score::NONE
        };
        Objective {
            quality: score(self.topo, set),
            leftover,
            loss: std::cmp::Reverse(Loss::between(whole, &before, &leftover)),
            near: set.intersection(near).len() as u32,
        }
    }
}

/// Calls `f` with every `k`-element subset of `set`, in lexicographic order of their sorted
/// index lists.
pub fn for_each_subset(set: GpuSet, k: usize, f: &mut impl FnMut(GpuSet)) {
    fn rec(items: &[usize], k: usize, acc: GpuSet, f: &mut impl FnMut(GpuSet)) {
        if k == 0 {
            f(acc);
            return;
        }
        for (i, &g) in items.iter().enumerate() {
            if items.len() - i < k {
                break;
            }
            rec(&items[i + 1..], k - 1, acc.with(g), f);
        }
    }
    let items = set.to_vec();
    if k <= items.len() {
        rec(&items, k, GpuSet::EMPTY, f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lex_order_and_subsets() {
        let s = |v: &[usize]| v.iter().copied().collect::<GpuSet>();
        assert!(lex_smaller(s(&[0, 3]), s(&[0, 4])));
        assert!(lex_smaller(s(&[0, 4]), s(&[1, 2])));
        assert!(!lex_smaller(s(&[1, 2]), s(&[1, 2])));
        let mut all = Vec::new();
        for_each_subset(s(&[1, 3, 4, 6]), 2, &mut |x| all.push(x));
        assert_eq!(all.len(), 6);
        assert!(all.windows(2).all(|w| lex_smaller(w[0], w[1])));
    }
}
