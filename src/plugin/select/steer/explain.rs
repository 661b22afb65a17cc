//! The placement note in the job's `SystemComment` (rules and wording:
//! [`gputopo_core::steer::explain`]): written once a RUN_NOW call's placement is final, for
//! the GPUs the job gets, and after a call that failed while the health filter withheld
//! nodes.
//!
//! Only gputopo's own line is touched; the note is written from inside `select_p_job_test`,
//! where slurmctld holds the job write lock, after every cache of ours has been read (no lock
//! of the plugin is held while the job record changes), and only when the line changes.

use gputopo_core::config::SelectConfig;
use gputopo_core::steer::call::Snapshot;
use gputopo_core::steer::explain::{self, NodeNote};

use crate::slurm::bitmap::NodeIndex;
use crate::slurm::job::JobView;
use crate::slurm::node;

/// Sets gputopo's line for a job that gets the GPUs in `notes` (none: the line is removed).
pub fn placed(job: &mut JobView<'_>, notes: &[NodeNote]) {
    write(job, (!notes.is_empty()).then(|| explain::placed(notes)));
}

/// Sets gputopo's line for a job that waits while `withheld` nodes were kept from it for
/// faulty GPUs (none: the line is removed, the job waits for other reasons).
pub fn pending(job: &mut JobView<'_>, snap: &Snapshot, cfg: &SelectConfig, withheld: &[usize]) {
    let mut nodes: Vec<(String, String)> = withheld
        .iter()
        .filter_map(|&n| {
            let state = snap.node(n);
            let name = match state.and_then(|s| s.name()) {
                Some(name) => name.to_owned(),
                None => node::view(job, NodeIndex(n))?.name().to_owned(),
            };
            let faulty = state.map(|s| s.faulty(cfg).to_string()).unwrap_or_default();
            Some((name, faulty))
        })
        .collect();
    nodes.sort();
    nodes.dedup();
    write(job, explain::pending(&nodes));
}

fn write(job: &mut JobView<'_>, ours: Option<String>) {
    // A comment that is not UTF-8 is left alone rather than rewritten lossily.
    let Ok(existing) = job.system_comment() else {
        return;
    };
    if let Some(new) = explain::merge(existing.as_deref(), ours.as_deref()) {
        job.set_system_comment(&new);
    }
}
