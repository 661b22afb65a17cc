//! The decisions `select/gputopo` makes inside slurmctld, as pure functions over plain types.
//!
//! The plugin (`src/plugin/select/steer.rs`) lets stock cons_tres do the whole allocation, then
//! corrects it. It reads Slurm's structs into the types here, asks these functions what to
//! do, and writes the answer back; nothing here knows Slurm, and everything here is tested
//! without it.
//!
//! - [`repick`]: after cons_tres succeeded, which GPUs of one chosen node the job should get
//!   instead of cons_tres's pick (or why the pick stays, or why the node must be dropped
//!   because it would hand out a faulty GPU).
//! - [`narrow`]: which nodes to offer cons_tres first, widening step by step, ending with the
//!   full set so a runnable job never becomes unrunnable; plus the health pre-filter.
//! - [`reserved`]: the GPUs a GRES reservation leaves a job on a node (inside: only the
//!   reserved ones; outside: all but those).
//! - [`first_fit`]: the pick on a node whose topology Slurm does not know (cons_tres's own
//!   first-fit order, minus what health rules out).
//! - [`wide`]: health on nodes wider than the topology model (beyond 32 GPUs).
//! - [`shared`]: the pick of a shared GRES (`shard`, `mps`): never a faulty GPU's shares,
//!   degraded ones last, cons_tres's pick kept otherwise.
//! - [`victims`]: preemption victims that free the best GPU set at cons_tres's cost, faulty
//!   GPUs planned as absent, and the candidate order that steers cons_tres to them.
//! - [`preempt`]: whether and how to reorder slurmctld's preemption candidates for a GPU
//!   job (every gate, single- and multi-node), checked against a model of cons_tres's own
//!   removal passes.
//! - [`call`]: one `select_p_job_test` call as a state machine over a snapshot of Slurm's
//!   state (the plugin reads the snapshot, carries out each step, writes the placement),
//!   tested against a fake cons_tres.
//! - [`tries`]: the control loop underneath (tiers, widening, exclusion rounds, give-up).
//! - [`model`]: what gputopo knows of a node's GPUs (topology, health, types, tables).
//! - [`cool`]: among equally connected sets, GPUs that do not run warm (`PreferCool`).
//! - [`explain`]: the placement note users read in `scontrol show job` (`SystemComment`).
//! - [`health_cache`]: per-node GPU health parsed from node `Extra`, parsed once per change.
//! - [`key_memo`]: a node's rank keys, computed once per state of its GPUs, not per call.
//!
//! The GPU re-pick reaches the engine through the [`Policy`](crate::placement::Policy) trait, so its rules
//! are tested against a brute-force oracle and run against the real engine in slurmctld. Node
//! ranking uses the engine directly ([`crate::placement::Prepared`]): it orders nodes by the
//! engine's own [`crate::placement::RankKey`], so there is one node order, not two.

pub mod call;
pub mod cool;
pub mod explain;
pub mod first_fit;
pub mod health_cache;
pub mod key_memo;
pub mod model;
pub mod narrow;
pub mod preempt;
pub mod repick;
pub mod reserved;
pub mod shared;
pub mod tries;
pub mod victims;
pub mod wide;

#[cfg(test)]
mod oracle;

use crate::gpuset::GpuSet;

/// Per-GPU health of one node, as masks over Slurm GRES indices.
///
/// A GPU in neither mask is usable (`ok` or `unknown`: unknown never takes a GPU out of
/// service, because a broken agent must not idle a cluster).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HealthMasks {
    /// Never allocated.
    pub faulty: GpuSet,
    /// Allocated only when no healthy GPU is left for the job.
    pub degraded: GpuSet,
}

impl HealthMasks {
    /// All GPUs healthy.
    pub const ALL_OK: HealthMasks = HealthMasks {
        faulty: GpuSet::EMPTY,
        degraded: GpuSet::EMPTY,
    };

    /// True when some GPU is faulty or degraded.
    pub fn has_findings(&self) -> bool {
        !self.faulty.is_empty() || !self.degraded.is_empty()
    }
}
