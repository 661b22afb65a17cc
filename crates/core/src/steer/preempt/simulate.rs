//! A model of how cons_tres plans a preemption (`_run_now` in cons_tres/job_test.c, the same
//! in 22.05.8 and 24.11.5), GPUs only, so a candidate order can be checked before it is used.
//!
//! cons_tres copies the node usage, then walks the candidates in list order, removing each
//! (REQUEUE/CANCEL) job's resources and testing the preemptor after every removal; at the
//! first fit it reorders the list (the last job removed first, then the other removed jobs by
//! how many of the selected nodes they use, most first; `list_sort` is stable on the glibc of
//! both CI releases) and walks again from the top, twice (`preempt_reorder_cnt` = 1: three
//! passes in all; fewer when there are fewer candidates). The victims are the jobs the last
//! pass removed that run on the selected nodes. A node fits when its idle GPUs plus those of
//! the removed jobs reach the per-node need: cons_tres counts an idle faulty GPU as free.

use super::Offered;
use crate::gpuset::GpuSet;
use crate::steer::victims::VictimNode;

/// Where cons_tres's last pass stops.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Every node that fits at the stop (the GPUs cons_tres then counts free there, faulty
    /// ones included); cons_tres selects among them.
    pub fits: Vec<(usize, GpuSet)>,
    /// The nodes it selects (modelled: those the last removal freed first, then by index).
    pub nodes: Vec<(usize, GpuSet)>,
    /// The victims: positions into the candidates, in the last pass's order.
    pub victims: Vec<usize>,
}

/// Passes of the removal walk: the first, and `preempt_reorder_cnt` (1) + 1 reorders.
const PASSES: usize = 3;

/// cons_tres walking `order` (positions into `offered`) for a job of `per_node` GPUs on
/// `count` nodes among `nodes`; `None` when no prefix of the list makes it fit.
pub fn simulate(
    nodes: &[VictimNode<'_>],
    offered: &[Offered],
    order: &[usize],
    per_node: usize,
    count: usize,
) -> Option<Outcome> {
    // cons_tres tries without preemption first: a job that fits on idle GPUs (faulty ones
    // counted) preempts nobody.
    let idle: Vec<(usize, GpuSet)> = nodes
        .iter()
        .filter(|n| n.idle.len() >= per_node)
        .map(|n| (n.index, n.idle))
        .collect();
    if idle.len() >= count {
        let mut chosen = idle.clone();
        chosen.truncate(count);
        return Some(Outcome {
            fits: idle,
            nodes: chosen,
            victims: Vec::new(),
        });
    }
    let mut list = order.to_vec();
    let mut pass = 0;
    loop {
        let (stop, fits, chosen) = walk(nodes, offered, &list, per_node, count)?;
        pass += 1;
        if pass >= PASSES || list.len() <= pass {
            let on_chosen = |i: usize| {
                offered[i]
                    .on
                    .iter()
                    .any(|(n, _)| chosen.iter().any(|(c, _)| c == n))
            };
            let victims = list[..=stop]
                .iter()
                .copied()
                .filter(|&i| on_chosen(i))
                .collect();
            return Some(Outcome {
                fits,
                nodes: chosen,
                victims,
            });
        }
        list = reorder(offered, &list, stop, &chosen);
    }
}

/// One walk: the position where the job first fits, every node fitting then, and the
/// nodes selected.
#[allow(clippy::type_complexity)]
fn walk(
    nodes: &[VictimNode<'_>],
    offered: &[Offered],
    list: &[usize],
    per_node: usize,
    count: usize,
) -> Option<(usize, Vec<(usize, GpuSet)>, Vec<(usize, GpuSet)>)> {
    let mut free: Vec<GpuSet> = nodes.iter().map(|n| n.idle).collect();
    for (pos, &i) in list.iter().enumerate() {
        let mut touched = Vec::new();
        for (node, gpus) in &offered[i].on {
            if let Some(k) = nodes.iter().position(|n| n.index == *node) {
                free[k] = free[k].union(*gpus);
                touched.push(*node);
            }
        }
        let fits: Vec<(usize, GpuSet)> = nodes
            .iter()
            .zip(&free)
            .filter(|(_, f)| f.len() >= per_node)
            .map(|(n, f)| (n.index, *f))
            .collect();
        if fits.len() >= count {
            let mut chosen = fits.clone();
            chosen.sort_by_key(|(n, _)| (!touched.contains(n), *n));
            chosen.truncate(count);
            return Some((pos, fits, chosen));
        }
    }
    None
}

/// cons_tres's reorder after a fit at `stop`: the last removed job first, then the others
/// by how many selected nodes they use (most first, stable).
fn reorder(
    offered: &[Offered],
    list: &[usize],
    stop: usize,
    chosen: &[(usize, GpuSet)],
) -> Vec<usize> {
    let usable = |i: usize| {
        offered[i]
            .on
            .iter()
            .filter(|(n, _)| chosen.iter().any(|(c, _)| c == n))
            .count()
    };
    let mut keyed: Vec<(usize, usize)> = list
        .iter()
        .enumerate()
        .map(|(p, &i)| {
            let k = if p == stop {
                usize::MAX
            } else if p < stop {
                usable(i)
            } else {
                0
            };
            (k, i)
        })
        .collect();
    keyed.sort_by_key(|k| std::cmp::Reverse(k.0));
    keyed.into_iter().map(|(_, i)| i).collect()
}
