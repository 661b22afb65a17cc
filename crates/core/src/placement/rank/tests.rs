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
    let pcie =
        Arc::new(TopoTables::new(&NodeTopology::uniform("p", 8, PcieLevel::Pix).unwrap()).unwrap());
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
    let plain: Vec<(&NodeTopology, GpuSet)> = nodes.iter().map(|&(t, f)| (&topos[t], f)).collect();
    for k in 1..=5 {
        let want = Exhaustive::rank_nodes(&plain, k);
        assert_eq!(rank_nodes(&cands, k), want, "k={k}");
    }
}

/// The single-pass ranking returns exactly the order of the previous two-pass one
/// (`reference`) on random fleets: every shipped topology (4, 8 and 16 GPUs), each also as a
/// second, separately built table with the same keys (equal keys across topologies must keep
/// input order), more topologies than the per-call cache has entries, random free masks
/// (idle, empty and full nodes among them) and every `k` from 0 to past the largest node.
#[test]
fn equals_the_previous_ranking_on_random_fleets() {
    let topos: Vec<NodeTopology> = crate::fixtures::all().into_iter().map(|(_, t)| t).collect();
    let tables: Vec<Arc<TopoTables>> = topos
        .iter()
        .chain(topos.iter())
        .map(|t| Arc::new(TopoTables::new(t).unwrap()))
        .collect();
    let mut next = crate::placement::test_rng(0xC0FF_EE12);
    for fleet in 0..24 {
        // A few topologies per fleet, or all of them.
        let kinds: Vec<usize> = if fleet % 4 == 0 {
            (0..tables.len()).collect()
        } else {
            (0..1 + next(4))
                .map(|_| next(tables.len() as u64) as usize)
                .collect()
        };
        let nodes: Vec<(Arc<TopoTables>, GpuSet)> = (0..next(300))
            .map(|_| {
                let t = &tables[kinds[next(kinds.len() as u64) as usize]];
                let all = GpuSet::first_n(t.len());
                let free = match next(8) {
                    0 => all,
                    1 => GpuSet::EMPTY,
                    // Few distinct masks on 16-GPU nodes keeps the debug build's cold
                    // searches short.
                    _ if t.len() > 8 => GpuSet::from_bits(0xFFFF << next(8)).intersection(all),
                    _ => GpuSet::from_bits(next(1 << 16) as u32).intersection(all),
                };
                (Arc::clone(t), free)
            })
            .collect();
        for k in 0..=17 {
            assert_eq!(
                rank_nodes(&nodes, k),
                reference::rank_nodes_reference(&nodes, k),
                "fleet {fleet}, k={k}"
            );
        }
    }
    // Borrowed tables rank the same as shared handles.
    let refs: Vec<(&TopoTables, GpuSet)> = (0..40)
        .map(|i| (&*tables[i % tables.len()], GpuSet::from_bits(i as u32 * 37)))
        .collect();
    for k in 1..=4 {
        assert_eq!(
            rank_nodes(&refs, k),
            reference::rank_nodes_reference(&refs, k)
        );
    }
}

/// The tabulated key of every free mask equals the key computed on demand.
#[test]
fn key_tables_equal_keys_on_demand() {
    let t = TopoTables::new(&crate::fixtures::dgx1v()).unwrap();
    for k in 0..=9 {
        let keys = t.rank_keys(k);
        for f in 0..256u32 {
            let want = node_key(&t, f, k).unwrap_or(0);
            assert_eq!(
                keys.map_or(want, |ks| ks[f as usize]),
                want,
                "k={k} f={f:#x}"
            );
        }
    }
    let big = TopoTables::new(&crate::fixtures::dgx2()).unwrap();
    assert!(
        big.rank_keys(4).is_none(),
        "16-GPU nodes compute keys per call"
    );
}
