//! Node ranking: which node should a job of `k` GPUs per node go to?
//!
//! Stock Slurm never lets GPU links influence node choice (cons_tres picks GPU indices after
//! the nodes are fixed), so a 4-GPU job may land on a node where only a poor set is left while
//! another node still has an NVLink quad, and 1-GPU jobs break up NVSwitch boards while PCIe
//! boxes sit idle. [`rank_nodes`] orders candidate nodes by [`RankKey`], that is, in turn:
//! 1. the **class** of the best set the node can still offer for `k` GPUs
//!    ([`Score::class`]: the bottleneck's NVLink count, or its PCIe level when it has no
//!    NVLink), so jobs go where they run fastest: the job's need comes first;
//! 2. **breaking an idle node** ([`Loss::whole`]): a job that would break an idle node costs
//!    that node's whole-board bottleneck, any other placement nothing. So small jobs go to
//!    nodes already in use, and between idle nodes to the one whose whole board is worth
//!    least: a 1-GPU job breaks an idle PCIe box (SYS, 5 GB/s) before an idle NVSwitch board
//!    (NV18, 450 GB/s), and large jobs find those whole;
//! 3. **best fit**: fewest free GPUs left after taking `k`, which packs jobs so that nodes
//!    drain and become idle again for whole-node jobs;
//! 4. the rest of the **loss** of the node's own choice ([`Loss`]): how much its best 16-, 8-,
//!    4- and 2-GPU sets lose in bottleneck, largest size first, then its pairing;
//! 5. the **fine quality** of that set (bottleneck, then aggregate, GB/s);
//! 6. the caller's order (index), so the result is deterministic.
//!
//! # Why fit before the finer loss
//! A first version compared the whole loss vector before fit. On the trace-shaped run (12
//! DGX-1V, mostly 1-GPU jobs and some 8-GPU ones, strict FIFO) it sent 1-GPU jobs to roomy
//! nodes whose best quad survived rather than to nearly full nodes whose last pair did not,
//! so load spread over many nodes, few became idle, and the mean wait rose from about 1,200 s
//! to 26,000 s. Packing is what frees whole nodes; the finer loss now only decides between
//! equally tight fits.
//!
//! Slurm's node `Weight=` is not seen here: the steering code orders by it first and uses this
//! order within a weight (see `docs/engine.md`, Node ranking).
//!
//! # Why the class, not the fine quality, comes first
//! An NVLink count or a PCIe level is a real bandwidth step (NV2 vs NV1 2×, PIX vs SYS 2.4×),
//! while aggregates differ by a few percent between boards. An earlier version ranked by the
//! fine quality before fit, and on a fleet of DGX-1V it stranded more GPUs than stock Slurm:
//! a 2-GPU job opened an idle node for a marginally better pair rather than take an equal-class
//! pair on a busy node. Buckets first, then the loss (which is zero at size 8 on a node that is
//! already broken up, and positive on an idle one) keeps packing.
//!
//! Nodes with fewer than `k` free GPUs are left out.
//!
//! # Why a key table and a counting sort
//! Nodes share topologies and few free masks occur, so a cluster has few distinct keys, and
//! ranking is "find the key, count, place". On nodes of up to [`TIER_MAX_GPUS`] GPUs the key
//! of every free mask is tabulated per `k` with the topology's tables on first use (256 keys
//! at 8 GPUs); above, it is computed once per distinct (topology, free mask) and call from
//! the memoised decision. One pass over the nodes gives each its slot (topology, free mask)
//! and counts the slots; the distinct slots' keys are sorted, equal keys merged into runs;
//! a second pass places each node at its run's next position (a stable counting sort, so
//! ties keep input order). No per-node branch but the one of a slot's first sight, and no
//! hashing: 10,000 nodes take about 62 instructions each, sort included (`docs/perf-log.md`).

use super::lookahead::Loss;
use super::objective::Objective;
use super::score::Score;
use super::search::decide;
use super::tables::{TIER_MAX_GPUS, TopoTables};
use crate::gpuset::GpuSet;
use std::cmp::Reverse;

/// The order of nodes for a job (bigger is better), compared field by field: see the module
/// docs for why the class comes first and the fine quality last.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RankKey {
    /// [`Score::class`] of the node's best set for the job.
    pub class: u32,
    /// The bottleneck of the idle node the job would break, 0 when it breaks none
    /// ([`Loss::whole`]; smaller is better).
    pub whole: Reverse<u32>,
    /// Free GPUs left after the job (fewer is better).
    pub left: Reverse<u32>,
    /// What the node's own choice costs later jobs (smaller is better).
    pub loss: Reverse<Loss>,
    /// The fine quality of the node's best set.
    pub quality: Score,
}

impl RankKey {
    /// The key of a node whose own choice for the job has objective `o` and leaves `left`
    /// GPUs free.
    pub fn new(o: &Objective, left: usize) -> Self {
        Self::of(o.quality, o.loss.0, left)
    }

    /// The key of a node whose own choice has quality `quality` and loss `loss` and leaves
    /// `left` GPUs free (what [`RankKey::new`] reads of an objective).
    pub fn of(quality: Score, loss: Loss, left: usize) -> Self {
        RankKey {
            class: quality.class(),
            whole: Reverse(loss.whole),
            left: Reverse(u32::try_from(left).unwrap_or(u32::MAX)),
            loss: Reverse(loss),
            quality,
        }
    }

    /// One integer with the same order, for nodes of up to 16 GPUs: classes and bottlenecks
    /// are at most 25 × `NVLINK_CAP` (10 bits; `u32::MAX` for `k = 1` clips to the top), a
    /// pairing drop at most 8 × 500 (16 bits). `loss.whole` repeats `whole`: equal there.
    fn packed(&self) -> u128 {
        let class = u128::from(self.class.min(0x3FF));
        let whole = u128::from(0x3FF - self.whole.0.min(0x3FF));
        let fit = u128::from(0xFF - self.left.0.min(0xFF));
        let mut loss = 0u128;
        for &d in &self.loss.0.by_size {
            loss = (loss << 10) | u128::from(0x3FF - d.min(0x3FF));
        }
        loss = (loss << 16) | u128::from(0xFFFF - self.loss.0.pairs.min(0xFFFF));
        (class << 114)
            | (whole << 104)
            | (fit << 96)
            | (loss << 40)
            | u128::from(self.quality.to_packed())
    }
}

/// Orders `candidates` (node tables and free GPUs) for a job of `k` GPUs per node, best
/// first, leaving out nodes that cannot host it. Returns indices into `candidates`.
///
/// Equal keys keep input order. O(nodes + distinct · log distinct), where distinct is the
/// number of distinct (topology, free mask) pairs (see the module docs).
pub fn rank_nodes<T: AsRef<TopoTables>>(candidates: &[(T, GpuSet)], k: usize) -> Vec<usize> {
    let mut topos: Vec<Topo<'_>> = Vec::new();
    // Per slot (a topology's base + free mask): its nodes, later its run.
    let mut count: Vec<u32> = Vec::new();
    // Slots in order of first sight.
    let mut seen: Vec<u32> = Vec::new();
    let mut ways = [Way::EMPTY; WAYS];
    // Per node: its slot in the low half; the placing pass writes the high halves.
    let mut slots: Vec<u64> = Vec::with_capacity(candidates.len());
    // The node pass runs until a topology misses the cache, enters it, and resumes.
    while slots.len() < candidates.len() {
        let counts = &mut count[..];
        let mut miss = None;
        for (tables, free) in &candidates[slots.len()..] {
            let t = tables.as_ref();
            let way = ways[way_of(t)];
            if way.addr != std::ptr::from_ref(t) as usize {
                miss = Some(t);
                break;
            }
            let s = way.base + (free.bits() & way.all);
            let c = &mut counts[s as usize];
            if *c == 0 {
                seen.push(s);
            }
            *c += 1;
            slots.push(u64::from(s));
        }
        if let Some(t) = miss {
            ways[way_of(t)] = enter(&mut topos, &mut count, t, k);
        }
    }
    // The distinct slots' keys, best first; 0 (cannot host k) sorts last.
    let mut keyed: Vec<(u128, u32)> = seen
        .iter()
        .map(|&s| {
            let topo = &topos[topos.partition_point(|x| x.base <= s) - 1];
            let f = s - topo.base;
            let key = match topo.keys {
                Some(keys) => keys[f as usize],
                None => node_key(topo.tables, f, k).unwrap_or(0),
            };
            (key, s)
        })
        .collect();
    keyed.sort_unstable_by_key(|&(key, _)| Reverse(key));
    // Runs of equal keys: each slot's count becomes its run, each run's cursor its first
    // output position. The run of key 0 comes last; what is placed there is cut off.
    let mut cursor: Vec<usize> = Vec::with_capacity(keyed.len());
    let (mut placed, mut hosted) = (0usize, None);
    for (j, &(key, s)) in keyed.iter().enumerate() {
        if j == 0 || keyed[j - 1].0 != key {
            cursor.push(placed);
            if key == 0 {
                hosted = Some(placed);
            }
        }
        let c = &mut count[s as usize];
        placed += *c as usize;
        *c = (cursor.len() - 1) as u32;
    }
    // Place node i at its run's next position p, in the high half of `slots[p]`: the low
    // halves (the slots still to read) stay intact, and one buffer serves both passes.
    let (runs, cursor) = (&count[..], &mut cursor[..]);
    for i in 0..slots.len() {
        let p = &mut cursor[runs[slots[i] as u32 as usize] as usize];
        slots[*p] |= (i as u64) << 32;
        *p += 1;
    }
    slots.truncate(hosted.unwrap_or(placed));
    // Same size and alignment: the standard library collects this in place.
    slots.into_iter().map(|x| (x >> 32) as usize).collect()
}

/// Entries of the per-call topology cache, direct-mapped by table address: a fleet of a few
/// board types, interleaved in any order, finds its topology in one compare per node.
const WAYS: usize = 8;

/// A topology as the node pass needs it: its tables' address, first slot and node mask.
#[derive(Clone, Copy)]
struct Way {
    addr: usize,
    base: u32,
    all: u32,
}

impl Way {
    /// No topology (no table lives at address 0).
    const EMPTY: Way = Way {
        addr: 0,
        base: 0,
        all: 0,
    };
}

/// A topology seen in one call: its tables, its first slot, and its key table if tabulated.
struct Topo<'a> {
    tables: &'a TopoTables,
    base: u32,
    keys: Option<&'a [u128]>,
}

/// The cache entry of a table (Fibonacci hashing of its address).
fn way_of(t: &TopoTables) -> usize {
    (std::ptr::from_ref(t) as usize as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) as usize
        >> (usize::BITS - 3)
}

/// The [`Way`] of `t`, adding it (and its 2^n slots) on first sight in this call.
#[cold]
#[inline(never)]
fn enter<'a>(topos: &mut Vec<Topo<'a>>, count: &mut Vec<u32>, t: &'a TopoTables, k: usize) -> Way {
    let p = match topos.iter().position(|x| std::ptr::eq(x.tables, t)) {
        Some(p) => p,
        None => {
            topos.push(Topo {
                tables: t,
                base: count.len() as u32,
                keys: t.rank_keys(k),
            });
            count.resize(count.len() + (1 << t.len()), 0);
            topos.len() - 1
        }
    };
    Way {
        addr: std::ptr::from_ref(t) as usize,
        base: topos[p].base,
        all: t.all_bits(),
    }
}

impl TopoTables {
    /// The packed [`RankKey`] of every free mask for `k` GPUs (0 where `k` does not fit), on
    /// nodes of up to [`TIER_MAX_GPUS`] GPUs; built on first use per `k` (4 KiB at 8 GPUs).
    fn rank_keys(&self, k: usize) -> Option<&[u128]> {
        if self.len() > TIER_MAX_GPUS {
            return None;
        }
        let cell = self.rank_keys.get(k)?;
        let keys = cell.get_or_init(|| {
            (0..1u32 << self.len())
                .map(|f| node_key(self, f, k).unwrap_or(0))
                .collect()
        });
        Some(keys)
    }
}

/// The packed [`RankKey`] of one node, or `None` when it cannot host `k` GPUs. Never 0:
/// the fit field of a node that can host `k` is at least `0xFF − 16`.
fn node_key(t: &TopoTables, free: u32, k: usize) -> Option<u128> {
    let set = GpuSet::from_bits(decide(t, free, k, 0, 0)?.set);
    let loss = t.loss(GpuSet::from_bits(free), set);
    Some(RankKey::of(t.score(set), loss, (free.count_ones() as usize) - k).packed())
}

#[cfg(test)]
mod reference;
#[cfg(test)]
mod tests;
