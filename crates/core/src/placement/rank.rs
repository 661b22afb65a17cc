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
//! Slurm's node `Weight=` is not seen here (see `docs/engine.md`, Node ranking).
//!
//! # Why the class, not the fine quality, comes first
//! An NVLink count or a PCIe level is a real bandwidth step (NV2 vs NV1 2×, PIX vs SYS 2.4×),
//! while aggregates differ by a few percent between boards. An earlier version ranked by the
//! fine quality before fit, and on a fleet of DGX-1V it stranded more GPUs than stock Slurm:
//! a 2-GPU job opened an idle node for a marginally better pair rather than take an equal-class
//! pair on a busy node. Buckets first, then the loss (which is zero at size 8 on a node that is
//! already broken up, and positive on an idle one) keeps packing.
//!
//! Nodes with fewer than `k` free GPUs are left out. Each key is a few table lookups on the
//! node's interned tables (an O(1) tier lookup at ≤ 8 GPUs; a memoised search above), computed
//! once per distinct (topology, free mask); nodes are then placed by a counting sort:
//! 10,000 nodes take well under a millisecond (`docs/engine.md`).

use super::lookahead::Loss;
use super::objective::{Objective, Score};
use super::search::decide;
use super::tables::TopoTables;
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
/// Nodes that share tables and free mask share a key, and a cluster has few distinct
/// (topology, free mask) pairs, so keys are computed and sorted once per distinct pair, and
/// the nodes are then placed by a stable counting sort (ties keep input order): O(nodes +
/// distinct · log distinct).
pub fn rank_nodes<T: AsRef<TopoTables>>(candidates: &[(T, GpuSet)], k: usize) -> Vec<usize> {
    // Per distinct topology: free mask -> distinct-key id (u32::MAX = not seen yet).
    let mut topos: Vec<(&TopoTables, Vec<u32>)> = Vec::new();
    // Distinct keys (`None` = cannot host k) and how many nodes have each.
    let mut keys: Vec<(Option<u128>, u32)> = Vec::new();
    let mut last = usize::MAX;
    let node_ids: Vec<u32> = candidates
        .iter()
        .map(|(tables, free)| {
            let t = tables.as_ref();
            if topos.get(last).is_none_or(|(x, _)| !std::ptr::eq(*x, t)) {
                last = match topos.iter().position(|(x, _)| std::ptr::eq(*x, t)) {
                    Some(p) => p,
                    None => {
                        topos.push((t, vec![u32::MAX; 1 << t.len()]));
                        topos.len() - 1
                    }
                };
            }
            let f = free.bits() & t.all_bits();
            let slot = &mut topos[last].1[f as usize];
            if *slot == u32::MAX {
                *slot = keys.len() as u32;
                keys.push((node_key(t, f, k), 0));
            }
            let id = *slot;
            keys[id as usize].1 += 1;
            id
        })
        .collect();
    // Sort the distinct keys, best first (unplaceable ones left out). Equal keys form one
    // run; each run's first output position is the number of nodes ranked before it.
    let mut order: Vec<u32> = (0..keys.len() as u32)
        .filter(|&i| keys[i as usize].0.is_some())
        .collect();
    order.sort_unstable_by(|&a, &b| keys[b as usize].0.cmp(&keys[a as usize].0));
    let mut run_of = vec![u32::MAX; keys.len()];
    let mut next: Vec<usize> = Vec::new();
    let mut total = 0usize;
    for (pos, &id) in order.iter().enumerate() {
        if pos == 0 || keys[order[pos - 1] as usize].0 != keys[id as usize].0 {
            next.push(total);
        }
        run_of[id as usize] = (next.len() - 1) as u32;
        total += keys[id as usize].1 as usize;
    }
    // Place the nodes, in input order within a run (a stable counting sort).
    let mut out = vec![0usize; total];
    for (i, &id) in node_ids.iter().enumerate() {
        if let Some(p) = next.get_mut(run_of[id as usize] as usize) {
            out[*p] = i;
            *p += 1;
        }
    }
    out
}

/// The packed [`RankKey`] of one node, or `None` when it cannot host `k` GPUs.
fn node_key(t: &TopoTables, free: u32, k: usize) -> Option<u128> {
    let set = GpuSet::from_bits(decide(t, free, k, 0, 0)?.set);
    let loss = t.loss(GpuSet::from_bits(free), set);
    Some(RankKey::of(t.score(set), loss, (free.count_ones() as usize) - k).packed())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{NodeTopology, PcieLevel};
    use std::sync::Arc;

    fn s(v: &[usize]) -> GpuSet {
        v.iter().copied().collect()
    }

    fn dgx1v() -> Arc<TopoTables> {
        Arc::new(TopoTables::new(&crate::fixtures::dgx1v()).unwrap())
    }

    #[test]
    fn class_then_best_fit_then_fragmentation_then_fine_quality() {
        let dgx = dgx1v();
        let pcie = Arc::new(
            TopoTables::new(&NodeTopology::uniform("p", 8, PcieLevel::Pix).unwrap()).unwrap(),
        );
        let nodes = vec![
            (Arc::clone(&pcie), s(&[0, 1])),         // 0: fits, PCIe only
            (Arc::clone(&dgx), s(&[0, 1, 2, 3, 4])), // 1: NV2+PIX pair {2,3}, 3 left
            (Arc::clone(&dgx), s(&[2, 3])),          // 2: NV2+PIX pair, nothing left
            (Arc::clone(&dgx), s(&[0])),             // 3: cannot host 2
            (Arc::clone(&dgx), s(&[0, 3])),          // 4: NV2+PHB pair, nothing left
            (Arc::clone(&dgx), s(&[2, 3, 4, 5])),    // 5: {2,3}, leaves NV1 pair {4,5}
            (Arc::clone(&dgx), s(&[2, 3, 4, 7])),    // 6: {2,3}, leaves NV2 pair {4,7}
            (Arc::clone(&dgx), s(&[0, 1])),          // 7: NV1 pair, nothing left
        ];
        // NV2 class: fit (2, 4 | 6, 5 | 1), within a fit the leftover, then 62 before 59
        // GB/s; then the NV1 node, then the PCIe-only one.
        assert_eq!(rank_nodes(&nodes, 2), vec![2, 4, 6, 5, 1, 7, 0]);
        assert_eq!(rank_nodes(&nodes, 9), Vec::<usize>::new());
        let refs: Vec<(&TopoTables, GpuSet)> = nodes.iter().map(|(t, f)| (&**t, *f)).collect();
        assert_eq!(rank_nodes(&refs, 2), vec![2, 4, 6, 5, 1, 7, 0]);
    }

    /// The stranding case: an idle DGX-1V offers a 62 GB/s NV2 pair (one PCIe switch), a busy
    /// one only a 59 GB/s NV2 pair (host bridge). Same class, so the busy node wins on fit and
    /// the idle node stays whole; a better class still beats fit.
    #[test]
    fn same_class_prefers_the_busier_node() {
        let dgx = dgx1v();
        let idle = (Arc::clone(&dgx), s(&[0, 1, 2, 3, 4, 5, 6, 7]));
        let busy = (Arc::clone(&dgx), s(&[0, 3]));
        let nodes = vec![idle.clone(), busy.clone()];
        assert_eq!(rank_nodes(&nodes, 2), vec![1, 0]);
        // Only an NV1 pair on the busy node: the idle node's NV2 class wins.
        let nodes = vec![(Arc::clone(&dgx), s(&[0, 1])), idle];
        assert_eq!(rank_nodes(&nodes, 2), vec![1, 0]);
    }

    /// A mixed fleet, all idle: 1-GPU jobs fill the PCIe boxes (whose 8-GPU set is worth a
    /// SYS path) before they break an NVSwitch board, then an 8-GPU job finds one whole; a
    /// 2-GPU job still goes where its pair is fastest.
    #[test]
    fn one_gpu_jobs_fill_plain_nodes_first() {
        let hgx = Arc::new(TopoTables::new(&crate::fixtures::hgx_h100()).unwrap());
        let pcie = Arc::new(TopoTables::new(&crate::fixtures::l40s_pcie8()).unwrap());
        let all = GpuSet::first_n(8);
        let mut nodes = vec![
            (Arc::clone(&hgx), all),
            (Arc::clone(&pcie), all),
            (Arc::clone(&hgx), all),
            (Arc::clone(&pcie), all),
        ];
        assert_eq!(rank_nodes(&nodes, 2)[0], 0);
        for job in 0..16 {
            let best = rank_nodes(&nodes, 1)[0];
            assert!(best == 1 || best == 3, "job {job} went to node {best}");
            let c = crate::placement::Gputopo::choose_on(
                &nodes[best].0,
                nodes[best].1,
                &crate::placement::Request::new(1),
            )
            .unwrap();
            nodes[best].1 = nodes[best].1.difference(c.gpus);
        }
        assert_eq!(rank_nodes(&nodes, 8), vec![0, 2]);
        // The next 1-GPU job breaks one NVSwitch board, and the one after stays on it.
        let first = rank_nodes(&nodes, 1)[0];
        nodes[first].1 = nodes[first].1.without(0);
        assert_eq!(rank_nodes(&nodes, 1)[0], first);
    }

    /// The counting-sort ranking equals a plain sort on keys computed by brute force.
    #[test]
    fn equals_brute_force_ranking() {
        use crate::placement::Exhaustive;
        let topos = [
            crate::fixtures::dgx1v(),
            crate::fixtures::rtx8000x4(),
            crate::fixtures::hgx_h100(),
        ];
        let handles: Vec<Arc<TopoTables>> = topos
            .iter()
            .map(|t| Arc::new(TopoTables::new(t).unwrap()))
            .collect();
        let mut x = 0x1234_5678_u64;
        let nodes: Vec<(usize, GpuSet)> = (0..120)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let t = (x % 3) as usize;
                (
                    t,
                    GpuSet::from_bits((x >> 8) as u32).intersection(topos[t].all()),
                )
            })
            .collect();
        let cands: Vec<(Arc<TopoTables>, GpuSet)> = nodes
            .iter()
            .map(|&(t, f)| (Arc::clone(&handles[t]), f))
            .collect();
        let plain: Vec<(&NodeTopology, GpuSet)> =
            nodes.iter().map(|&(t, f)| (&topos[t], f)).collect();
        for k in 1..=5 {
            let want = Exhaustive::rank_nodes(&plain, k);
            assert_eq!(rank_nodes(&cands, k), want, "k={k}");
        }
    }
}
