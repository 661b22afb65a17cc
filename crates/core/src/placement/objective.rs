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
//! A pair's value is an estimate of its peer-to-peer bandwidth in GB/s per direction:
//! `25 × nvlinks` when the pair has NVLink (NVLink 2/3/4 per link per direction; NVSwitch
//! pairs carry `min(switch links)` links, see `NodeTopology::apply_nvswitch`), and otherwise
//! a representative PCIe Gen3 x16 peer-to-peer figure for the path level:
//!
//! | level | SB | PIX | PXB | PHB | NODE | SYS |
//! |---|---|---|---|---|---|---|
//! | GB/s | 14 | 12 | 11 | 9 | 7 | 5 |
//!
//! The PCIe path of an NVLink pair counts for nothing: NCCL sends that pair's peer traffic over
//! the NVLink and the PCIe path carries none. An earlier version added the PCIe term to NVLink
//! pairs and so, on a DGX-1V with {4,5,6,7} free, took the NV2 pair {6,7} behind one PCIe
//! switch and left the NV1 pair {4,5}, where {4,7} leaves the NV2 pair {5,6}: the PCIe term was
//! compared before the lookahead and decided a question the lookahead should. Every PCIe value
//! is below one NVLink (25), so any NVLink beats every PCIe path and `n` NVLinks beat `n − 1`.
//! NVLink counts above [`NVLINK_CAP`] are treated as the cap (no GPU has more than 18), which
//! keeps a 16-GPU aggregate below 2^16 for the packed tables.
//!
//! A single GPU has no pair: its bottleneck is "unbounded" ([`Score::SINGLE`]), so for `k = 1`
//! all GPUs tie on quality and the lookahead decides.
//!
//! The functions here compute everything from the topology directly. They are the
//! specification, used by the exhaustive oracle and by `score`; the fast path in
//! [`super::tables`] and `super::search` must agree with them.

use super::lookahead::{self, Leftover, Loss};
use crate::gpuset::GpuSet;
use crate::topology::{Link, NodeTopology, PcieLevel};
use std::collections::HashMap;
use std::fmt;

/// Bandwidth of one NVLink, GB/s per direction.
pub const NVLINK_GBPS: u32 = 25;

/// NVLink counts above this are treated as this (no shipping GPU has more than 18).
pub const NVLINK_CAP: u8 = 20;

/// Representative peer-to-peer bandwidth of a PCIe path level, GB/s per direction.
pub const fn pcie_gbps(level: PcieLevel) -> u32 {
    match level {
        PcieLevel::SameBoard => 14,
        PcieLevel::Pix => 12,
        PcieLevel::Pxb => 11,
        PcieLevel::Phb => 9,
        PcieLevel::Node => 7,
        PcieLevel::Sys => 5,
    }
}

/// The value of one pair: estimated GB/s per direction (see the module docs).
pub fn pair_gbps(link: Link) -> u32 {
    match link.nvlinks.min(NVLINK_CAP) {
        0 => pcie_gbps(link.pcie),
        nv => u32::from(nv) * NVLINK_GBPS,
    }
}

/// Quality of a GPU set for collective communication: bottleneck first, then aggregate.
/// Ordered lexicographically; bigger is better.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Score {
    /// Minimum pair value over the set's pairs (GB/s); [`Score::SINGLE_BOTTLENECK`] for a
    /// set without pairs.
    pub bottleneck: u32,
    /// Sum of pair values over the set's pairs (GB/s).
    pub aggregate: u32,
}

impl Score {
    /// The bottleneck of a set without pairs (one GPU): unbounded.
    pub const SINGLE_BOTTLENECK: u32 = u32::MAX;
    /// The score of a one-GPU set.
    pub const SINGLE: Score = Score {
        bottleneck: Self::SINGLE_BOTTLENECK,
        aggregate: 0,
    };
    /// "No such set": below every real score (used when a leftover is too small).
    pub const NONE: Score = Score {
        bottleneck: 0,
        aggregate: 0,
    };

    /// The set's interconnect **class**, a bucketed bottleneck (bigger is better): the
    /// bottleneck's NVLink bandwidth (`25 × nvlinks`) when it has NVLink, its PCIe value when
    /// it has none, and `u32::MAX` for a set without pairs. Two NVLink sets whose bottlenecks
    /// differ only in the PCIe tie-break term (NV2 behind one switch, 62, against NV2 through
    /// the host bridge, 59) are in the same class; NV2 vs NV1 and PIX vs SYS are not. Node
    /// ranking compares classes before fit (see [`super::rank`]). Monotone in `bottleneck`.
    pub fn class(self) -> u32 {
        match self.bottleneck {
            Self::SINGLE_BOTTLENECK => u32::MAX,
            b if b >= NVLINK_GBPS => b / NVLINK_GBPS * NVLINK_GBPS,
            b => b,
        }
    }

    /// Packs into the 32-bit form the tables use (valid for nodes of up to 16 GPUs, where
    /// the bottleneck fits 16 bits and the aggregate stays below 2^16).
    pub(crate) fn to_packed(self) -> u32 {
        let b = if self.bottleneck == Self::SINGLE_BOTTLENECK {
            0xFFFF
        } else {
            self.bottleneck.min(0xFFFE)
        };
        (b << 16) | self.aggregate.min(0xFFFF)
    }

    /// The inverse of [`Score::to_packed`].
    pub(crate) fn from_packed(p: u32) -> Self {
        let b = p >> 16;
        Score {
            bottleneck: if b == 0xFFFF {
                Self::SINGLE_BOTTLENECK
            } else {
                b
            },
            aggregate: p & 0xFFFF,
        }
    }
}

impl fmt::Display for Score {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.bottleneck {
            Self::SINGLE_BOTTLENECK => write!(f, "bottleneck=- aggregate={}", self.aggregate),
            b => write!(f, "bottleneck={b} aggregate={}", self.aggregate),
        }
    }
}

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
    fn any_nvlink_beats_every_pcie_level_and_counts_dominate() {
        let best_pcie = pcie_gbps(PcieLevel::SameBoard);
        let worst_pcie = pcie_gbps(PcieLevel::Sys);
        for n in 1..=NVLINK_CAP {
            let lo = pair_gbps(Link {
                nvlinks: n,
                pcie: PcieLevel::Sys,
            });
            let hi_prev = pair_gbps(Link {
                nvlinks: n - 1,
                pcie: PcieLevel::SameBoard,
            });
            assert!(lo > hi_prev, "NV{n}");
        }
        assert!(best_pcie - worst_pcie < NVLINK_GBPS);
        let levels: Vec<u32> = PcieLevel::ALL.iter().map(|&l| pcie_gbps(l)).collect();
        assert!(levels.windows(2).all(|w| w[0] > w[1]));
    }

    #[test]
    fn class_buckets_nvlink_sets_by_link_count_and_pcie_sets_by_level() {
        let sc = |nvlinks, pcie| Score {
            bottleneck: pair_gbps(Link { nvlinks, pcie }),
            aggregate: 0,
        };
        assert_eq!(sc(2, PcieLevel::Pix).class(), sc(2, PcieLevel::Sys).class());
        assert!(sc(2, PcieLevel::Sys).class() > sc(1, PcieLevel::SameBoard).class());
        assert!(sc(1, PcieLevel::Sys).class() > sc(0, PcieLevel::SameBoard).class());
        assert!(sc(0, PcieLevel::Pix).class() > sc(0, PcieLevel::Pxb).class());
        assert_eq!(Score::SINGLE.class(), u32::MAX);
        assert_eq!(Score::NONE.class(), 0);
    }

    #[test]
    fn packing_preserves_order() {
        let xs = [
            Score::NONE,
            Score {
                bottleneck: 5,
                aggregate: 5,
            },
            Score {
                bottleneck: 5,
                aggregate: 60000,
            },
            Score {
                bottleneck: 514,
                aggregate: 1,
            },
            Score::SINGLE,
        ];
        for w in xs.windows(2) {
            assert!(w[0] < w[1]);
            assert!(w[0].to_packed() < w[1].to_packed());
            assert_eq!(Score::from_packed(w[1].to_packed()), w[1]);
        }
    }

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
