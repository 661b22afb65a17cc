//! Node ranking: which node should a job of `k` GPUs per node go to?
//!
//! Stock Slurm never lets GPU links influence node choice (cons_tres picks GPU indices after
//! the nodes are fixed), so a 4-GPU job may land on a node where only a poor set is left while
//! another node still has an NVLink quad. [`rank_nodes`] orders candidate nodes by, in turn:
//! 1. the best set the node can still offer for `k` GPUs (quality: bottleneck, then
//!    aggregate), so jobs go where they run fastest;
//! 2. best fit: fewest free GPUs left after taking `k`, which packs jobs and keeps whole nodes
//!    free for big jobs;
//! 3. least fragmentation: the lookahead (best same-size set, then pairing) of what the node's
//!    own best choice would leave free;
//! 4. the caller's order (index), so the result is deterministic.
//!
//! Nodes with fewer than `k` free GPUs are left out. Each key is a few table lookups on the
//! node's interned tables (an O(1) tier lookup at ≤ 8 GPUs; a memoised search above), computed
//! once per distinct (topology, free mask); nodes are then placed by a counting sort:
//! 10,000 nodes take well under a millisecond (`docs/engine.md`).

use super::search::decide;
use super::tables::TopoTables;
use crate::gpuset::GpuSet;

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
    // Distinct keys; `None` = cannot host k.
    let mut keys: Vec<Option<u128>> = Vec::new();
    let mut node_ids: Vec<u32> = Vec::with_capacity(candidates.len());
    let mut last = 0usize;
    for (tables, free) in candidates {
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
            keys.push(node_key(t, f, k));
        }
        node_ids.push(*slot);
    }
    // Rank the distinct keys, best first; unplaceable ones get no rank.
    let mut order: Vec<u32> = (0..keys.len() as u32)
        .filter(|&i| keys[i as usize].is_some())
        .collect();
    order.sort_unstable_by(|&a, &b| keys[b as usize].cmp(&keys[a as usize]));
    let mut rank = vec![u32::MAX; keys.len()];
    let mut distinct_ranks = 0u32;
    for (pos, &id) in order.iter().enumerate() {
        if pos > 0 && keys[order[pos - 1] as usize] == keys[id as usize] {
            rank[id as usize] = distinct_ranks - 1;
        } else {
            rank[id as usize] = distinct_ranks;
            distinct_ranks += 1;
        }
    }
    // Stable counting sort of the nodes by rank.
    let mut start = vec![0usize; distinct_ranks as usize + 1];
    for &id in &node_ids {
        let r = rank[id as usize];
        if r != u32::MAX {
            start[r as usize + 1] += 1;
        }
    }
    for r in 0..distinct_ranks as usize {
        start[r + 1] += start[r];
    }
    let mut out = vec![0usize; start[distinct_ranks as usize]];
    for (i, &id) in node_ids.iter().enumerate() {
        let r = rank[id as usize];
        if r != u32::MAX {
            out[start[r as usize]] = i;
            start[r as usize] += 1;
        }
    }
    out
}

/// The ranking key of one node (bigger is better), or `None` when it cannot host `k` GPUs.
fn node_key(t: &TopoTables, free: u32, k: usize) -> Option<u128> {
    let d = decide(t, free, k, 0, 0)?;
    let left = free.count_ones() - k as u32;
    // Fit: fewer left is better; 64 - left fits 7 bits.
    let fit = 64 - left;
    Some(
        (u128::from(d.head[0]) << 96)
            | (u128::from(fit) << 64)
            | (u128::from(d.head[1]) << 32)
            | u128::from(d.head[2]),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{NodeTopology, PcieLevel, fixture};
    use std::sync::Arc;

    fn s(v: &[usize]) -> GpuSet {
        v.iter().copied().collect()
    }

    #[test]
    fn best_set_then_best_fit_then_fragmentation() {
        let dgx = Arc::new(
            TopoTables::new(
                &fixture::parse(include_str!("../../../../contrib/topologies/dgx1v.topo")).unwrap(),
            )
            .unwrap(),
        );
        let pcie = Arc::new(
            TopoTables::new(&NodeTopology::uniform("p", 8, PcieLevel::Pix).unwrap()).unwrap(),
        );
        let nodes = vec![
            (Arc::clone(&pcie), s(&[0, 1])),         // 0: fits, PCIe only
            (Arc::clone(&dgx), s(&[0, 1, 2, 3, 4])), // 1: NV2+PIX pair {2,3}, 3 left
            (Arc::clone(&dgx), s(&[2, 3])),          // 2: NV2+PIX pair, nothing left
            (Arc::clone(&dgx), s(&[0])),             // 3: cannot host 2
            (Arc::clone(&dgx), s(&[0, 3])),          // 4: NV2+PHB pair
            (Arc::clone(&dgx), s(&[2, 3, 4, 5])),    // 5: {2,3}, leaves NV1 pair {4,5}
            (Arc::clone(&dgx), s(&[2, 3, 4, 7])),    // 6: {2,3}, leaves NV2 pair {4,7}
        ];
        assert_eq!(rank_nodes(&nodes, 2), vec![2, 6, 5, 1, 4, 0]);
        assert_eq!(rank_nodes(&nodes, 9), Vec::<usize>::new());
        let refs: Vec<(&TopoTables, GpuSet)> = nodes.iter().map(|(t, f)| (&**t, *f)).collect();
        assert_eq!(rank_nodes(&refs, 2), vec![2, 6, 5, 1, 4, 0]);
    }

    /// The counting-sort ranking equals a plain sort on keys computed by brute force.
    #[test]
    fn equals_brute_force_ranking() {
        use crate::placement::{Exhaustive, Request};
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
        for k in 1..=5 {
            let req = Request {
                count: k,
                ..Request::default()
            };
            let mut want: Vec<_> = nodes
                .iter()
                .enumerate()
                .filter_map(|(i, &(t, f))| {
                    let (_, o) = Exhaustive::choose_detailed(&topos[t], f, &req)?;
                    let key = (o.quality, std::cmp::Reverse(f.len() - k));
                    Some(((key, o.lookahead_same_k, o.lookahead_pairs), i))
                })
                .collect();
            want.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
            let want: Vec<usize> = want.into_iter().map(|(_, i)| i).collect();
            assert_eq!(rank_nodes(&cands, k), want, "k={k}");
        }
    }
}
