//! Topology-aware preemption victims (issue 15 item 1): before cons_tres plans a preemption
//! for a one-node GPU job, the candidate list is reordered so that, among the victim sets
//! that cost no more (same number of jobs, same preemption ranks), cons_tres removes the one
//! whose freed GPUs give the job the best set, faulty GPUs planned as absent
//! ([`gputopo_core::steer::victims`] decides; [`crate::slurm::preempt`] reads and sorts the
//! list). cons_tres still decides whether and whom to preempt; only the order inside runs of
//! equal rank changes, and not at all with `PreemptParameters=youngest_first` (start times
//! then rank jobs, which this module does not model). Nor when a candidate would be suspended
//! (`PreemptMode=SUSPEND`): a suspended job keeps its GPUs
//! ([`gputopo_core::steer::victims::mode`]), so the order could change only whose cores the
//! job takes, which cons_tres's own order already decides.

use gputopo_core::GpuSet;
use gputopo_core::config::SelectConfig;
use gputopo_core::steer::victims::{self, Candidate, VictimNode};

use crate::ffi;
use gputopo_core::steer::model::NodeModel;

use crate::plugin::select::steer::read;
use crate::plugin::select::steer::run::emit;
use crate::plugin::select::steer::state::SteerState;
use crate::slurm::EntryPtr;
use crate::slurm::bitmap::NodeIndex;
use crate::slurm::job::JobView;
use crate::slurm::{node, preempt};

/// Reorders `list` for `job` on the `offered` nodes (RUN_NOW and WILL_RUN with candidates).
pub fn order_candidates(
    st: &SteerState,
    cfg: &SelectConfig,
    job: &mut JobView<'_>,
    offered: &[NodeIndex],
    list: &EntryPtr<'_, ffi::xlist>,
    max_nodes: u32,
) {
    if !(cfg.topology_aware || cfg.health_aware) || max_nodes != 1 {
        return;
    }
    if crate::slurm::conf::preempt_youngest_first() {
        return;
    }
    let Some(need) = read::gpu_need(job, max_nodes).filter(|n| n.type_id.is_none()) else {
        return;
    };
    let cands = preempt::candidates(list);
    if cands.iter().any(|c| c.keeps_gpus) {
        // Suspension frees cores only: the order cannot change the job's GPUs (module docs).
        return;
    }
    // Runs of equal keys share a rank (the list is in Slurm's order).
    let mut rank = 0u64;
    let core: Vec<Candidate> = cands
        .iter()
        .enumerate()
        .map(|(i, c)| {
            if i > 0 && cands[i - 1].key != c.key {
                rank += 1;
            }
            Candidate {
                job: c.job_id,
                rank,
                node: c.node.map_or(usize::MAX, |n| n.0),
                gpus: c.gpus,
            }
        })
        .collect();
    let mut models: Vec<(usize, std::sync::Arc<NodeModel>, GpuSet, GpuSet)> = Vec::new();
    for &ni in offered {
        let held = core
            .iter()
            .filter(|c| c.node == ni.0)
            .fold(GpuSet::EMPTY, |a, c| a.union(c.gpus));
        if held.is_empty() {
            continue; // no victim there: preemption cannot change what the job gets
        }
        let Some(nv) = node::view(job, ni) else {
            continue;
        };
        let Some(g) = nv.gpus() else { continue };
        let Some(model) = st.model(&nv, &g, cfg.prefer_agent_topology) else {
            continue;
        };
        let busy = g.allocated().union(g.shared_in_use());
        let all = model.topo.all();
        models.push((ni.0, model, busy.difference(held), all.difference(busy)));
    }
    let vnodes: Vec<VictimNode<'_>> = models
        .iter()
        .map(|(i, m, pinned, idle)| VictimNode {
            index: *i,
            topo: &m.topo,
            pinned: *pinned,
            idle: *idle,
            health: m.masks(cfg),
        })
        .collect();
    let Some(plan) = victims::choose(&st.engine, &vnodes, &core, need.per_node) else {
        return;
    };
    let order = victims::order(&core, &plan);
    let moved = order.iter().enumerate().any(|(p, &i)| p != i);
    if moved {
        preempt::reorder(list, &cands, &order);
    }
    if cfg.log_decisions || crate::slurm::conf::debug_select_or_gres() {
        let ids: Vec<u32> = plan.victims.iter().map(|&i| core[i].job).collect();
        let msg = format!(
            "decision JobId={} preemption: victims {ids:?} free GPUs {} on node index {}{}",
            job.id().0,
            plan.gpus,
            plan.node,
            if moved { " (candidates reordered)" } else { "" }
        );
        emit(cfg.log_decisions, &msg);
    }
}
