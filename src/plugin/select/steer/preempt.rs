//! Preemption victims (issue 15 item 1, issue 25 item 2): before cons_tres plans a
//! preemption for a GPU job, read the candidate list ([`crate::slurm::preempt`]), let the core
//! decide over the call's snapshot ([`gputopo_core::steer::preempt::decide`]: every gate, the
//! plan, and a model of cons_tres's own removal passes the new order must satisfy), and
//! reorder the list when it says so. cons_tres still decides whether and whom to preempt;
//! only the order inside runs of equal rank changes.

use gputopo_core::config::SelectConfig;
use gputopo_core::steer::call::{Ctx, Snapshot};
use gputopo_core::steer::preempt::{self, Decision, Offered};

use crate::ffi;
use crate::plugin::select::steer::decision_log::emit;
use crate::plugin::select::steer::state::SteerState;
use crate::slurm::EntryPtr;
use crate::slurm::preempt as list;

/// Reorders `candidates` for the call over `snap` (RUN_NOW and WILL_RUN with candidates).
pub fn order_candidates(
    st: &SteerState,
    cfg: &SelectConfig,
    snap: &Snapshot,
    candidates: &EntryPtr<'_, ffi::xlist>,
) {
    let cands = list::candidates(candidates);
    let offered: Vec<Offered> = cands.iter().map(|c| c.offered.clone()).collect();
    let log = cfg.log_decisions || crate::slurm::conf::debug_select_or_gres();
    let ctx = Ctx {
        cfg,
        engine: &st.engine,
        log,
        multiple_sharing: crate::slurm::conf::multiple_sharing_gres_pj(),
    };
    let youngest_first = crate::slurm::conf::preempt_youngest_first();
    let decision = preempt::decide(snap, &offered, &ctx, youngest_first);
    match &decision {
        Decision::Reorder { order, .. } => list::reorder(candidates, &cands, order),
        Decision::Keep(gate) => {
            log::debug!(
                target: "gputopo::select",
                "JobId={} preemption: Slurm's candidate order kept ({gate:?})",
                snap.job.id
            );
        }
    }
    if let (true, Decision::Reorder { victims, nodes, .. }) = (log, &decision) {
        let on: Vec<String> = nodes
            .iter()
            .map(|(n, g)| {
                let name = snap.node(*n).and_then(|s| s.name()).unwrap_or("?");
                format!("{name} GPUs {g}")
            })
            .collect();
        let msg = format!(
            "decision JobId={} preemption: victims {victims:?} free {} (candidates reordered)",
            snap.job.id,
            on.join(", ")
        );
        emit(cfg.log_decisions, &msg);
    }
}
