//! Precomputed per-topology tables that make the engine's decisions O(1) or close to it.
//!
//! Every value the objective needs ([`super::objective`]) is a function of a GPU subset, and a
//! node has at most 2^16 subsets in the exact range (≤ 16 GPUs), so we tabulate them once per
//! *distinct* topology:
//! - `quality[S]`: the packed [`Score`] of every subset, O(2^n · n) to build.
//! - `matching[S]`: the maximum-weight pair matching of every subset (the pairs lookahead),
//!   by the usual "match the lowest GPU or leave it" recursion, O(2^n · n).
//! - per size `s`: `best_s[S]`, the best quality of an `s`-subset of `S` (a subset-maximum
//!   transform, O(2^n · n)); built at once for the lookahead sizes, on first use for other
//!   request sizes.
//! - `look[S]`: the lookahead ([`super::lookahead`]) of leaving `S` free as one dense rank:
//!   the per-size best scores and the matching of every mask, sorted once. One `u32`
//!   comparison then stands for the whole lexicographic leftover value, and the rank is
//!   monotone in `S` (every component is), so it bounds the search too.
//! - on nodes of up to [`TIER_MAX_GPUS`] GPUs, per request size on first use, the whole
//!   decision: for every free mask `F`, the sets that maximise (quality, lookahead), in
//!   tie-break order. Only `near` is left to the call, a scan over that (usually tiny) tier.
//!
//! - `look_best_m[S]`: the best lookahead rank of an `m`-subset of `S`, per leftover size `m`
//!   on first use: the search's bound on what a choice can still leave (subset maximum).
//!
//! Memory at 16 GPUs: 3 × 256 KiB, 1.75 MiB of lookahead values (28 bytes per mask), plus
//! 256 KiB per request size and per leftover size used (4-6 lookahead sizes at once); at most
//! about 11 MiB per 16-GPU topology (6.5 MiB before `look_best`); at 8 GPUs a few KiB.
//!
//! Tables depend only on the pair values, so [`TableCache`] interns them by that matrix:
//! slurmctld with 10,000 identical nodes builds one set of tables, and a decision only pays
//! for hashing the n·(n−1)/2 pair values (or nothing, when the caller keeps the
//! [`TopoHandle`]).
//!
//! Above 16 GPUs ([`MAX_EXACT_GPUS`]) no tables are built; the engine falls back to a greedy
//! search there (see [`super::engine`]).

use super::lookahead::{self, Leftover, Loss};
use super::memo::{Memo, Memoised};
use super::objective::Objective;
use super::score::{Score, pair_gbps};
use crate::gpuset::GpuSet;
use crate::topology::NodeTopology;
use std::sync::{Arc, OnceLock};

/// Largest node the exact tables cover.
pub const MAX_EXACT_GPUS: usize = 16;

/// Largest node for which whole decisions (per free mask and `k`) are tabulated.
pub const TIER_MAX_GPUS: usize = 8;

/// Most memoised decisions kept per topology.
pub use super::memo::MEMO_CAP;

/// A shared handle to one topology's tables.
pub use super::table_cache::{TABLE_CACHE_BYTES, TABLE_CACHE_CAP, TableCache};

pub type TopoHandle = Arc<TopoTables>;

/// The decision-relevant identity of a topology: GPU count and the upper-triangle pair
/// values. Two nodes with equal keys get identical answers.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct TopoKey {
    n: u8,
    pairs: Vec<u16>,
}

impl TopoKey {
    /// The key of `topo`, or `None` above [`MAX_EXACT_GPUS`] GPUs.
    pub fn of(topo: &NodeTopology) -> Option<Self> {
        let n = topo.len();
        if n > MAX_EXACT_GPUS {
            return None;
        }
        let mut pairs = Vec::with_capacity(n * (n.saturating_sub(1)) / 2);
        for a in 0..n {
            for b in a + 1..n {
                // Pair values are at most 20 * 25 + 14 (see objective), far below u16::MAX.
                pairs.push(pair_gbps(topo.link(a, b)).min(0xFFFE) as u16);
            }
        }
        Some(TopoKey { n: n as u8, pairs })
    }
}

/// For each free mask `F`: the sets that maximise (quality, lookahead), in tie-break order,
/// and that maximum.
pub(crate) struct Tiers {
    /// `sets[offsets[F]..offsets[F + 1]]`.
    offsets: Vec<u32>,
    sets: Vec<u16>,
    /// Per `F`: quality and lookahead rank of the tier (all equal).
    heads: Vec<[u32; 2]>,
    /// Per `F`: the tier's first set, the answer when `near` is empty (one load).
    first: Vec<u16>,
}

impl Tiers {
    /// The tier of free mask `f` and its shared objective head.
    pub(crate) fn tier(&self, f: u32) -> (&[u16], [u32; 2]) {
        let f = f as usize;
        let (a, b) = (self.offsets[f] as usize, self.offsets[f + 1] as usize);
        (&self.sets[a..b], self.heads[f])
    }

    /// The first set of the tier of free mask `f` (0 when it is empty: fewer than k free).
    pub(crate) fn first(&self, f: u32) -> u16 {
        self.first[f as usize]
    }

    /// The objective head shared by the tier of free mask `f`.
    pub(crate) fn head(&self, f: u32) -> [u32; 2] {
        self.heads[f as usize]
    }
}

/// The lookahead value of one mask: packed best score per lookahead size, then matching.
type LookValue = [u32; lookahead::MAX_SIZES + 1];

/// Precomputed tables for one distinct topology (≤ [`MAX_EXACT_GPUS`] GPUs).
pub struct TopoTables {
    n: usize,
    quality: Vec<u32>,
    matching: Vec<u32>,
    /// Lookahead sizes, largest first.
    look_sizes: Vec<usize>,
    /// Dense rank of the lookahead value of every mask (bigger is better).
    look: Vec<u32>,
    /// The lookahead value of every mask: packed best score per lookahead size, then the
    /// matching (one cache line per decision instead of a lookup per size table).
    look_values: Vec<LookValue>,
    /// For each of [`lookahead::LOSS_SIZES`], its slot in `look_sizes` (if the node has it).
    loss_slots: [Option<usize>; 4],
    /// `best[s][S]`: packed best quality of an `s`-subset of `S`, 0 when `|S| < s`.
    best: Vec<OnceLock<Vec<u32>>>,
    /// `look_best[m][S]`: the best lookahead rank of an `m`-subset of `S` (0 when `|S| < m`):
    /// the search's bound on what a choice can leave (built on first use per leftover size).
    look_best: Vec<OnceLock<Vec<u32>>>,
    /// Whole decisions per free mask and request size, on small nodes.
    tiers: Vec<OnceLock<Tiers>>,
    /// Node-ranking keys per free mask and request size, on small nodes (`super::rank`).
    pub(super) rank_keys: Vec<OnceLock<Vec<u128>>>,
    /// Memoised decisions on nodes too big for tiers:
    /// (k, free, near, required) → (set, objective head).
    memo: Memo,
}

impl std::fmt::Debug for TopoTables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TopoTables").field("n", &self.n).finish()
    }
}

impl TopoTables {
    /// Builds the size-independent tables for `topo`, or `None` above [`MAX_EXACT_GPUS`].
    pub fn new(topo: &NodeTopology) -> Option<Self> {
        TopoKey::of(topo).map(|k| Self::from_key(&k))
    }

    pub(super) fn from_key(key: &TopoKey) -> Self {
        let n = usize::from(key.n);
        let mut pv = vec![0u32; n * n];
        let mut it = key.pairs.iter();
        for a in 0..n {
            for b in a + 1..n {
                let v = u32::from(it.next().copied().unwrap_or(0));
                pv[a * n + b] = v;
                pv[b * n + a] = v;
            }
        }
        let full = 1usize << n;
        let mut quality = vec![0u32; full];
        for s in 1..full {
            let hi = usize::BITS as usize - 1 - s.leading_zeros() as usize;
            let rest = s & !(1 << hi);
            if rest == 0 {
                quality[s] = Score::SINGLE.to_packed();
                continue;
            }
            let prev = Score::from_packed(quality[rest]);
            let (mut b, mut sum) = (prev.bottleneck, prev.aggregate);
            let mut r = rest;
            while r != 0 {
                let j = r.trailing_zeros() as usize;
                r &= r - 1;
                let v = pv[hi * n + j];
                b = b.min(v);
                sum += v;
            }
            quality[s] = Score {
                bottleneck: b,
                aggregate: sum,
            }
            .to_packed();
        }
        let mut matching = vec![0u32; full];
        for s in 1..full {
            let lo = s.trailing_zeros() as usize;
            let rest = s & (s - 1);
            let mut best = matching[rest];
            let mut r = rest;
            while r != 0 {
                let j = r.trailing_zeros() as usize;
                r &= r - 1;
                best = best.max(pv[lo * n + j] + matching[rest & !(1 << j)]);
            }
            matching[s] = best;
        }
        let look_sizes = lookahead::sizes(n, |a, b| pv[a * n + b]);
        let loss_slots = lookahead::LOSS_SIZES.map(|s| look_sizes.iter().position(|&z| z == s));
        let mut t = TopoTables {
            n,
            quality,
            matching,
            look_sizes,
            look: Vec::new(),
            look_values: Vec::new(),
            loss_slots,
            best: (0..=n).map(|_| OnceLock::new()).collect(),
            look_best: (0..=n).map(|_| OnceLock::new()).collect(),
            tiers: (0..=n).map(|_| OnceLock::new()).collect(),
            rank_keys: (0..=n).map(|_| OnceLock::new()).collect(),
            memo: Memo::default(),
        };
        (t.look, t.look_values) = t.build_look();
        t
    }

    /// The dense lookahead rank of every mask: sort the masks by (best score per lookahead
    /// size, largest size first, then matching) and number the distinct values.
    fn build_look(&self) -> (Vec<u32>, Vec<LookValue>) {
        let full = 1usize << self.n;
        let cols: Vec<&[u32]> = self.look_sizes.iter().map(|&s| self.best(s)).collect();
        let value = |m: usize| {
            let mut v: LookValue = [0; lookahead::MAX_SIZES + 1];
            for (slot, col) in v.iter_mut().zip(cols.iter()) {
                *slot = col[m];
            }
            v[cols.len()] = self.matching[m];
            v
        };
        let values: Vec<_> = (0..full).map(value).collect();
        let mut order: Vec<u32> = (0..full as u32).collect();
        order.sort_unstable_by(|&a, &b| values[a as usize].cmp(&values[b as usize]));
        let mut look = vec![0u32; full];
        let mut rank = 0u32;
        for w in 0..order.len() {
            if w > 0 && values[order[w - 1] as usize] != values[order[w] as usize] {
                rank += 1;
            }
            look[order[w] as usize] = rank;
        }
        (look, values)
    }

    /// Number of GPUs.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Always false: a topology has at least one GPU.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// All GPUs of the node as a mask.
    pub(crate) fn all_bits(&self) -> u32 {
        GpuSet::first_n(self.n).bits()
    }

    /// Packed quality of subset `s`.
    pub(crate) fn quality(&self, s: u32) -> u32 {
        self.quality[s as usize]
    }

    /// The quality of `set` (GPUs beyond the node ignored).
    pub fn score(&self, set: GpuSet) -> Score {
        Score::from_packed(self.quality(set.bits() & self.all_bits()))
    }

    /// Lookahead rank of leaving `s` free.
    pub(crate) fn look(&self, s: u32) -> u32 {
        self.look[s as usize]
    }

    /// `best_k`: packed best quality of a `k`-subset of every mask (1 ≤ k ≤ n), built on
    /// first use.
    pub(crate) fn best(&self, k: usize) -> &[u32] {
        self.best[k].get_or_init(|| self.build_best(k))
    }

    /// `look_best_m`: the best lookahead rank of an `m`-subset of every mask (0 ≤ m ≤ n),
    /// built on first use. A choice of `k` out of `F` that keeps `I` leaves an
    /// `(|F| − k)`-subset of `F \ I`, so this bounds the search's lookahead far tighter than
    /// `look(F \ I)` (on an NVSwitch board it is exact: every leftover of one size is worth
    /// the same).
    pub(crate) fn look_best(&self, m: usize) -> &[u32] {
        self.look_best[m].get_or_init(|| self.subset_max(m, &self.look))
    }

    /// The decision tiers of request size `k` on a node of at most [`TIER_MAX_GPUS`] GPUs,
    /// built on first use; `None` on larger nodes.
    pub(crate) fn tiers(&self, k: usize) -> Option<&Tiers> {
        (self.n <= TIER_MAX_GPUS).then(|| self.tiers[k].get_or_init(|| self.build_tiers(k)))
    }

    /// The value of leaving `left` free (per lookahead size, then pairing).
    pub fn leftover(&self, left: GpuSet) -> Leftover {
        let v = &self.look_values[(left.bits() & self.all_bits()) as usize];
        let mut by_size = [(0u8, Score::NONE); lookahead::MAX_SIZES];
        for ((slot, &s), &p) in by_size.iter_mut().zip(&self.look_sizes).zip(v.iter()) {
            *slot = (s as u8, Score::from_packed(p));
        }
        Leftover {
            by_size,
            pairs: v[self.look_sizes.len()],
        }
    }

    /// The full objective of choosing `set` out of `free` for a job preferring `near`.
    ///
    /// Not on the decision path ([`super::Gputopo::pick_on`] does without it): it explains
    /// a choice, for `gputopo pick` and [`super::Gputopo::choose_on`].
    pub fn objective(&self, free: GpuSet, set: GpuSet, near: GpuSet) -> Objective {
        let l = free.bits() & self.all_bits() & !set.bits();
        Objective {
            quality: self.score(set),
            leftover: self.leftover(GpuSet::from_bits(l)),
            loss: std::cmp::Reverse(self.loss(free, set)),
            near: set.intersection(near).len() as u32,
        }
    }

    /// What choosing `set` out of `free` costs later jobs ([`Loss`], the objective's `loss`):
    /// two rows of `look_values`, no per-size table lookups (it equals [`Loss::between`],
    /// which the oracle uses; the property tests compare). Node ranking reads only this.
    pub fn loss(&self, free: GpuSet, set: GpuSet) -> Loss {
        let all = self.all_bits();
        let f = free.bits() & all;
        let l = f & !set.bits();
        let (before, after) = (&self.look_values[f as usize], &self.look_values[l as usize]);
        let bottleneck = |p: u32| lookahead::bottleneck_value(Score::from_packed(p));
        let mut by_size = [0u32; 4];
        for (d, slot) in by_size.iter_mut().zip(self.loss_slots) {
            if let Some(j) = slot {
                *d = bottleneck(before[j]).saturating_sub(bottleneck(after[j]));
            }
        }
        let m = self.look_sizes.len();
        let whole = if f == all && !set.is_empty() {
            bottleneck(self.quality(all))
        } else {
            0
        };
        Loss {
            whole,
            by_size,
            pairs: before[m].saturating_sub(after[m]),
        }
    }

    /// Builds `best_k` for size `k`.
    fn build_best(&self, k: usize) -> Vec<u32> {
        self.subset_max(k, &self.quality)
    }

    /// For every mask `S`, the maximum of `value` over the `k`-subsets of `S` (0 when
    /// `|S| < k`): a subset-maximum transform, O(2^n · n).
    fn subset_max(&self, k: usize, value: &[u32]) -> Vec<u32> {
        let full = 1usize << self.n;
        let mut best: Vec<u32> = (0..full)
            .map(|s| {
                if (s as u32).count_ones() as usize == k {
                    value[s]
                } else {
                    0
                }
            })
            .collect();
        for i in 0..self.n {
            let bit = 1usize << i;
            for s in 0..full {
                if s & bit != 0 {
                    let v = best[s ^ bit];
                    if v > best[s] {
                        best[s] = v;
                    }
                }
            }
        }
        best
    }

    /// The objective head (quality, lookahead rank) of choosing `s` out of `f`.
    pub(crate) fn head(&self, f: u32, s: u32) -> [u32; 2] {
        [self.quality[s as usize], self.look[(f & !s) as usize]]
    }

    fn build_tiers(&self, k: usize) -> Tiers {
        let full = 1usize << self.n;
        let mut offsets = Vec::with_capacity(full + 1);
        let mut sets: Vec<u16> = Vec::new();
        let mut heads = Vec::with_capacity(full);
        for f in 0..full {
            offsets.push(sets.len() as u32);
            let start = sets.len();
            let mut top = [0u32; 2];
            super::objective::for_each_subset(GpuSet::from_bits(f as u32), k, &mut |s| {
                let h = self.head(f as u32, s.bits());
                if h > top || sets.len() == start {
                    top = h;
                    sets.truncate(start);
                    sets.push(s.bits() as u16);
                } else if h == top {
                    sets.push(s.bits() as u16);
                }
            });
            heads.push(top);
        }
        offsets.push(sets.len() as u32);
        let first = offsets[..full]
            .iter()
            .zip(&offsets[1..])
            .map(|(&a, &b)| if a < b { sets[a as usize] } else { 0 })
            .collect();
        Tiers {
            offsets,
            sets,
            heads,
            first,
        }
    }

    /// Heap bytes held now: the base tables, every per-size table built so far and the memo
    /// (what [`TableCache`] bounds; per-size tables and the memo grow on first use).
    pub fn bytes(&self) -> usize {
        fn size<T>(v: &[T]) -> usize {
            std::mem::size_of_val(v)
        }
        let built = |cells: &[OnceLock<Vec<u32>>]| {
            cells
                .iter()
                .filter_map(|c| c.get())
                .map(|v| size(v))
                .sum::<usize>()
        };
        let tiers = self.tiers.iter().filter_map(|c| c.get());
        let tiers: usize = tiers
            .map(|t| size(&t.offsets) + size(&t.sets) + size(&t.heads) + size(&t.first))
            .sum();
        let keys: usize = self
            .rank_keys
            .iter()
            .filter_map(|c| c.get())
            .map(|v| size(v))
            .sum();
        size(&self.quality)
            + size(&self.matching)
            + size(&self.look)
            + size(&self.look_values)
            + built(&self.best)
            + built(&self.look_best)
            + tiers
            + keys
            + self.memo.bytes()
    }

    /// Forgets the memoised decisions (the tables and the memo's capacity stay): for
    /// measuring the cold search path.
    pub fn clear_memo(&self) {
        self.memo.clear();
    }

    /// Forgets the memoised decisions and frees their memory (the table cache's byte bound).
    pub(crate) fn release_memo(&self) {
        self.memo.release();
    }

    /// Looks up a memoised decision.
    pub(crate) fn memo_get(&self, k: usize, f: u32, near: u32, req: u32) -> Option<Memoised> {
        self.memo.get(k, f, near, req)
    }

    /// Remembers a decision (bounded by [`MEMO_CAP`], see `memo`).
    pub(crate) fn memo_put(&self, k: usize, f: u32, near: u32, req: u32, v: Memoised) {
        self.memo.put(k, f, near, req, v);
    }
}

impl AsRef<TopoTables> for TopoTables {
    fn as_ref(&self) -> &TopoTables {
        self
    }
}

#[cfg(test)]
mod tests;
