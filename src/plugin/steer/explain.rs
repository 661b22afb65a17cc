//! The placement note in the job's `SystemComment` (rules and wording:
//! [`gputopo_core::steer::explain`]): written at the end of a RUN_NOW re-pick for the GPUs
//! the job gets, and after a try loop that failed while the health filter withheld nodes.
//!
//! Only gputopo's own line is touched; the note is written from inside `select_p_job_test`,
//! where slurmctld holds the job write lock, after every cache of ours has been read (no lock
//! of the plugin is held while the job record changes), and only when the line changes.

use std::fmt::Display;

use gputopo_core::GpuSet;
use gputopo_core::config::SelectConfig;
use gputopo_core::steer::explain::{self, NodeNote};
use gputopo_core::steer::{HealthMasks, Placer};
use gputopo_core::topology::NodeTopology;

use crate::plugin::steer::state::SteerState;
use crate::slurm::bitmap::NodeIndex;
use crate::slurm::job::JobView;
use crate::slurm::node;

/// The note of a node whose topology gputopo models: `set` judged against the `usable` GPUs.
pub fn ranked<P: Placer>(
    placer: &P,
    node: &str,
    topo: &NodeTopology,
    set: GpuSet,
    usable: GpuSet,
    health: HealthMasks,
) -> NodeNote {
    NodeNote {
        node: node.to_owned(),
        gpus: set.to_string(),
        quality: Some(explain::assess(placer, topo, set, usable)),
        degraded: Some(set.intersection(health.degraded).to_string()),
    }
}

/// The note of a node without topology records (or beyond the model: `degraded` unknown).
pub fn plain(node: &str, gpus: impl Display, degraded: Option<GpuSet>) -> NodeNote {
    NodeNote {
        node: node.to_owned(),
        gpus: gpus.to_string(),
        quality: None,
        degraded: degraded.map(|d| d.to_string()),
    }
}

/// Sets gputopo's line for a job that gets the GPUs in `notes` (none: the line is removed).
pub fn placed(job: &mut JobView<'_>, notes: &[NodeNote]) {
    write(job, (!notes.is_empty()).then(|| explain::placed(notes)));
}

/// Sets gputopo's line for a job that waits while `withheld` nodes were kept from it for
/// faulty GPUs (none: the line is removed, the job waits for other reasons).
pub fn pending(st: &SteerState, cfg: &SelectConfig, job: &mut JobView<'_>, withheld: &[NodeIndex]) {
    let mut nodes: Vec<(String, String)> = withheld
        .iter()
        .filter_map(|&ni| {
            let nv = node::view(job, ni)?;
            let faulty = nv
                .gpus()
                .and_then(|ng| st.model(&nv, &ng, cfg.prefer_agent_topology))
                .map(|m| m.masks(cfg).faulty.to_string())
                .unwrap_or_default();
            Some((nv.name().to_owned(), faulty))
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
