//! Precomputed per-topology tables that make the engine's decisions O(1) or close to it.
//!
//! Every value the objective needs ([`super::objective`]) is a function of a GPU subset, and a
//! node has at most 2^16 subsets in the exact range (≤ 16 GPUs), so we tabulate them once per
//! *distinct* topology:
//! - `quality[S]`: the packed [`Score`] of every subset, O(2^n · n) to build.
//! - `matching[S]`: the maximum-weight pair matching of every subset (the pairs lookahead),
//!   by the usual "match the lowest GPU or leave it" recursion, O(2^n · n).
//! - per request size `k`, built on first use: `best_k[S]`, the best quality of a `k`-subset
//!   of `S` (a subset-maximum transform, O(2^n · n)); and on nodes of up to
//!   [`TIER_MAX_GPUS`] GPUs the whole decision: for every free mask `F`, the sets that
//!   maximise (quality, lookahead), in tie-break order. Only `near` is left to the call, a
//!   scan over that (usually tiny) tier.
//!
//! Memory at 16 GPUs: 2 × 256 KiB plus 256 KiB per `k` used; at 8 GPUs a few KiB.
//!
//! Tables depend only on the pair values, so [`TableCache`] interns them by that matrix:
//! slurmctld with 10,000 identical nodes builds one set of tables, and a decision only pays
//! for hashing the n·(n−1)/2 pair values (or nothing, when the caller keeps the
//! [`TopoHandle`]).
//!
//! Above 16 GPUs ([`MAX_EXACT_GPUS`]) no tables are built; the engine falls back to a greedy
//! search there (see [`super::engine`]).

use super::objective::{Objective, Score, pair_gbps};
use crate::gpuset::GpuSet;
use crate::topology::NodeTopology;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Largest node the exact tables cover.
pub const MAX_EXACT_GPUS: usize = 16;

/// Largest node for which whole decisions (per free mask and `k`) are tabulated.
pub const TIER_MAX_GPUS: usize = 8;

/// Most memoised decisions kept per topology.
pub const MEMO_CAP: usize = 1 << 18;

/// A shared handle to one topology's tables.
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

/// The decisions of one request size `k` on one topology.
pub(crate) struct SizeTable {
    /// `best[S]`: packed best quality of a `k`-subset of `S`, 0 when `|S| < k`.
    pub(crate) best: Vec<u32>,
    /// Whole decisions per free mask, on small nodes.
    pub(crate) tiers: Option<Tiers>,
}

/// For each free mask `F`: the sets that maximise (quality, lookahead), in tie-break order,
/// and that maximum.
pub(crate) struct Tiers {
    /// `sets[offsets[F]..offsets[F + 1]]`.
    offsets: Vec<u32>,
    sets: Vec<u16>,
    /// Per `F`: quality, lookahead_same_k, lookahead_pairs of the tier (all equal).
    heads: Vec<[u32; 3]>,
}

impl Tiers {
    /// The tier of free mask `f` and its shared objective head.
    pub(crate) fn tier(&self, f: u32) -> (&[u16], [u32; 3]) {
        let f = f as usize;
        let (a, b) = (self.offsets[f] as usize, self.offsets[f + 1] as usize);
        (&self.sets[a..b], self.heads[f])
    }
}

/// A memo key: k, free, near, required.
type MemoKey = (u8, u32, u32, u32);

/// A memoised decision: chosen mask and objective head.
type Memoised = (u32, [u32; 3]);

/// Precomputed tables for one distinct topology (≤ [`MAX_EXACT_GPUS`] GPUs).
pub struct TopoTables {
    n: usize,
    /// Largest pair value of the node.
    max_pair: u32,
    quality: Vec<u32>,
    matching: Vec<u32>,
    sizes: Vec<OnceLock<SizeTable>>,
    /// Memoised decisions on nodes too big for tiers:
    /// (k, free, near, required) → (set, objective head).
    memo: Mutex<HashMap<MemoKey, Memoised>>,
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

    fn from_key(key: &TopoKey) -> Self {
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
        let max_pair = pv.iter().copied().max().unwrap_or(0);
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
        TopoTables {
            n,
            max_pair,
            quality,
            matching,
            sizes: (0..=n).map(|_| OnceLock::new()).collect(),
            memo: Mutex::new(HashMap::new()),
        }
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

    /// Largest pair value of the node.
    pub(crate) fn max_pair(&self) -> u32 {
        self.max_pair
    }

    /// Packed quality of subset `s`.
    pub(crate) fn quality(&self, s: u32) -> u32 {
        self.quality[s as usize]
    }

    /// Pair matching of subset `s`.
    pub(crate) fn matching(&self, s: u32) -> u32 {
        self.matching[s as usize]
    }

    /// The quality of `set` (GPUs beyond the node ignored).
    pub fn score(&self, set: GpuSet) -> Score {
        Score::from_packed(self.quality(set.bits() & self.all_bits()))
    }

    /// The tables of request size `k` (1 ≤ k ≤ n), built on first use.
    pub(crate) fn size(&self, k: usize) -> &SizeTable {
        self.sizes[k].get_or_init(|| self.build_size(k))
    }

    /// Builds `best_k` and, on small nodes, the decision tiers for size `k`.
    fn build_size(&self, k: usize) -> SizeTable {
        let full = 1usize << self.n;
        let mut best: Vec<u32> = (0..full)
            .map(|s| {
                if (s as u32).count_ones() as usize == k {
                    self.quality[s]
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
        let tiers = (self.n <= TIER_MAX_GPUS).then(|| self.build_tiers(k, &best));
        SizeTable { best, tiers }
    }

    /// The objective head (quality, lookahead_same_k, lookahead_pairs) of choosing `s` out
    /// of `f`, given `best_k`.
    pub(crate) fn head(&self, best_k: &[u32], f: u32, s: u32) -> [u32; 3] {
        let left = (f & !s) as usize;
        [self.quality[s as usize], best_k[left], self.matching[left]]
    }

    fn build_tiers(&self, k: usize, best_k: &[u32]) -> Tiers {
        let full = 1usize << self.n;
        let mut offsets = Vec::with_capacity(full + 1);
        let mut sets: Vec<u16> = Vec::new();
        let mut heads = Vec::with_capacity(full);
        for f in 0..full {
            offsets.push(sets.len() as u32);
            let start = sets.len();
            let mut top = [0u32; 3];
            super::objective::for_each_subset(GpuSet::from_bits(f as u32), k, &mut |s| {
                let h = self.head(best_k, f as u32, s.bits());
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
        Tiers {
            offsets,
            sets,
            heads,
        }
    }

    /// Forgets the memoised decisions (the tables stay): for memory pressure, and for
    /// measuring the cold search path.
    pub fn clear_memo(&self) {
        if let Ok(mut m) = self.memo.lock() {
            m.clear();
        }
    }

    /// Looks up a memoised decision.
    pub(crate) fn memo_get(&self, k: usize, f: u32, near: u32, req: u32) -> Option<Memoised> {
        self.memo
            .lock()
            .ok()
            .and_then(|m| m.get(&(k as u8, f, near, req)).copied())
    }

    /// Remembers a decision. The memo holds at most [`MEMO_CAP`] entries
    /// (about 8 MiB) and starts over when full, so memory stays bounded whatever the
    /// workload.
    pub(crate) fn memo_put(&self, k: usize, f: u32, near: u32, req: u32, v: Memoised) {
        if let Ok(mut m) = self.memo.lock() {
            if m.len() >= MEMO_CAP {
                m.clear();
            }
            m.insert((k as u8, f, near, req), v);
        }
    }
}

impl AsRef<TopoTables> for TopoTables {
    fn as_ref(&self) -> &TopoTables {
        self
    }
}

/// Converts an objective head plus `near` into the public [`Objective`].
pub(crate) fn objective_of(head: [u32; 3], near: u32) -> Objective {
    Objective {
        quality: Score::from_packed(head[0]),
        lookahead_same_k: Score::from_packed(head[1]),
        lookahead_pairs: head[2],
        near,
    }
}

/// Interns [`TopoTables`] by [`TopoKey`], so identical nodes share one set of tables.
#[derive(Default, Debug)]
pub struct TableCache {
    map: Mutex<HashMap<TopoKey, TopoHandle>>,
}

impl TableCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// The shared tables of `topo` (built on first sight of its key), or `None` above
    /// [`MAX_EXACT_GPUS`] GPUs.
    pub fn handle(&self, topo: &NodeTopology) -> Option<TopoHandle> {
        let key = TopoKey::of(topo)?;
        if let Ok(m) = self.map.lock() {
            if let Some(h) = m.get(&key) {
                return Some(Arc::clone(h));
            }
        }
        // Build outside the lock: a 16-GPU build takes milliseconds.
        let built = Arc::new(TopoTables::from_key(&key));
        match self.map.lock() {
            Ok(mut m) => Some(Arc::clone(m.entry(key).or_insert(built))),
            Err(_) => Some(built),
        }
    }

    /// Number of distinct topologies held.
    pub fn len(&self) -> usize {
        self.map.lock().map(|m| m.len()).unwrap_or(0)
    }

    /// True when no topology has been interned yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::objective;
    use crate::topology::{PcieLevel, fixture};

    fn dgx1v() -> NodeTopology {
        fixture::parse(include_str!("../../../../contrib/topologies/dgx1v.topo")).unwrap()
    }

    #[test]
    fn tables_match_direct_computation() {
        let t = dgx1v();
        let tab = TopoTables::new(&t).unwrap();
        for s in 0..256u32 {
            let set = GpuSet::from_bits(s);
            assert_eq!(tab.score(set), objective::score(&t, set), "{set:?}");
            assert_eq!(tab.matching(s), objective::pair_matching(&t, set));
            for k in 1..=8 {
                assert_eq!(
                    Score::from_packed(tab.size(k).best[s as usize]),
                    objective::best_subset_score(&t, set, k)
                );
            }
        }
    }

    #[test]
    fn identical_topologies_share_tables() {
        let cache = TableCache::new();
        let a = dgx1v();
        let mut b = dgx1v();
        b.name = "other".into();
        let ha = cache.handle(&a).unwrap();
        let hb = cache.handle(&b).unwrap();
        assert!(Arc::ptr_eq(&ha, &hb));
        let c = NodeTopology::uniform("u", 8, PcieLevel::Pix).unwrap();
        cache.handle(&c).unwrap();
        assert_eq!(cache.len(), 2);
        let big = NodeTopology::uniform("big", 17, PcieLevel::Pix).unwrap();
        assert!(cache.handle(&big).is_none());
    }
}
