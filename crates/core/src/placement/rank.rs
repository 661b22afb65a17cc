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
//! node's interned tables (an O(1) tier lookup at ≤ 8 GPUs; a memoised search above), and the
//! keys are sorted once: 10,000 nodes take well under a millisecond (`docs/engine.md`).

use super::search::decide;
use super::tables::TopoTables;
use crate::gpuset::GpuSet;

/// Orders `candidates` (node tables and free GPUs) for a job of `k` GPUs per node, best
/// first, leaving out nodes that cannot host it. Returns indices into `candidates`.
pub fn rank_nodes<T: AsRef<TopoTables>>(candidates: &[(T, GpuSet)], k: usize) -> Vec<usize> {
    let mut keyed: Vec<(u128, u32)> = Vec::with_capacity(candidates.len());
    for (i, (tables, free)) in candidates.iter().enumerate() {
        if let Some(key) = node_key(tables.as_ref(), *free, k) {
            keyed.push((key, i as u32));
        }
    }
    // Descending key, ascending index.
    keyed.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    keyed.into_iter().map(|(_, i)| i as usize).collect()
}

/// The ranking key of one node (bigger is better), or `None` when it cannot host `k` GPUs.
fn node_key(t: &TopoTables, free: GpuSet, k: usize) -> Option<u128> {
    let d = decide(t, free.bits(), k, 0, 0)?;
    let left = (free.bits() & t.all_bits()).count_ones() - k as u32;
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
}
