//! Writing a call's [`Placement`] back into the job, once, before Slurm commits it in
//! `select_p_select_nodeinfo_set`: the GPU selections (`gres_bit_select[node]`, or a new
//! bitmap where cons_tres left a count only), the share selections, and the placement note
//! in `SystemComment` ([`super::explain`]).

use gputopo_core::steer::call::Placement;

use crate::plugin::select::steer::explain;
use crate::slurm::bitmap::NodeIndex;
use crate::slurm::job::JobView;

/// Writes `p` into `job`'s GRES requests; returns how many selections were replaced. A
/// write Slurm's state refuses (a size that changed under us) is logged and skipped: that
/// selection stays cons_tres's.
pub fn placement(job: &mut JobView<'_>, p: &Placement) -> usize {
    let job_id = job.id();
    let mut requests = job.gres_requests();
    let mut replaced = 0;
    for w in &p.gpu {
        let Some(req) = requests.get_mut(w.request) else {
            continue;
        };
        let node = NodeIndex(w.node);
        let written = match w.count_only {
            Some(width) => req.write_count_only(node, width, &w.set),
            None => req.write_selected(node, &w.set),
        };
        match written {
            Ok(()) => replaced += 1,
            Err(e) => log::error!("JobId={job_id}: could not rewrite GPU selection: {e}"),
        }
    }
    for w in &p.shared {
        let Some(req) = requests.get_mut(w.request) else {
            continue;
        };
        match req.write_shared(NodeIndex(w.node), &w.shares) {
            Ok(()) => replaced += 1,
            Err(e) => log::error!("JobId={job_id}: could not rewrite shared GRES selection: {e}"),
        }
    }
    explain::placed(job, &p.notes);
    replaced
}
