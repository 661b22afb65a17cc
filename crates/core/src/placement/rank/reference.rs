//! The ranking as it was before the single-pass counting sort (test only): the property test
//! in `tests` checks that [`super::rank_nodes`] returns exactly this order.

use super::node_key;
use crate::gpuset::GpuSet;
use crate::placement::tables::TopoTables;

/// Per distinct (topology, free mask) one key, a sort of the distinct keys, then a stable
/// counting sort of the nodes (the previous `rank_nodes`, unchanged).
pub(super) fn rank_nodes_reference<T: AsRef<TopoTables>>(
    candidates: &[(T, GpuSet)],
    k: usize,
) -> Vec<usize> {
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
