//! Trace-driven, discrete-event simulation of GPU placement policies on a cluster.
//!
//! The evaluation of gputopo (issue 6) replays the same jobs on the same cluster under each
//! policy and compares placement quality, fragmentation, queueing and completion times. The
//! simulator calls the very engine the plugin uses ([`gputopo_core::placement::engine::Gputopo`] and
//! [`gputopo_core::placement::rank::rank_nodes`]), never a copy of it.
//!
//! # Model
//! - **Clock**: virtual seconds; events are job submissions, job ends and GPU faults, handled
//!   in time order (ties: ends, then faults, then submissions, each in creation order). No
//!   wall clock and no hash-order dependence: a run is a pure function of its inputs and seed.
//! - **Cluster** ([`cluster`]): node counts × topologies. Each node holds an allocated mask and
//!   a faulty mask.
//! - **Scheduling**: strict FIFO, as Slurm's `sched/builtin` without backfill: the queue head
//!   starts as soon as it fits, nothing overtakes it. Jobs that can never fit (more GPUs per
//!   node than any node has, more nodes than the cluster) are rejected at load time.
//! - **Node choice**: `gputopo` ranks nodes with the engine's `rank_nodes` (class of the best
//!   set, then best fit, then least fragmentation, then fine set quality, then node index). The baselines take the lowest-index nodes
//!   with enough free GPUs, as Slurm does with equal node weights (cons_tres lets NVLinks
//!   influence only the indices on an already chosen node).
//! - **GPU choice**: the policy's `choose` on each chosen node.
//! - **Faults** ([`Fault`]): at a given time a GPU becomes faulty for good (an uncorrectable
//!   ECC error). Health-aware handling removes faulty GPUs from the free set the policy sees;
//!   health-unaware handling leaves them in it, and every allocation that includes one is
//!   counted. `gputopo` is always health-aware (the plugin reads the agent's health verdicts);
//!   the baselines follow [`Health`]. A running job is not killed by a fault.
//! - **Completion time**: the trace's duration is the job's run time on an ideal set; a worse
//!   set stretches it through the communication model in [`comm`].
//!
//! Metrics are defined in [`metrics`]; inputs come from [`trace`] and [`generator`].

pub mod cluster;
pub mod comm;
pub mod generator;
pub mod metrics;
pub mod preempt;
pub mod rng;
mod run;
pub mod throttle;
pub mod trace;

pub use cluster::ClusterSpec;
pub use metrics::Summary;
pub use run::{Placement, simulate};

/// One job of the workload.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Job {
    /// Submission time, seconds from the start of the trace.
    pub submit: f64,
    /// Run time on an ideal GPU set, seconds.
    pub duration: f64,
    /// GPUs wanted on each node (`--gres=gpu:K`).
    pub gpus_per_node: u8,
    /// Nodes wanted.
    pub nodes: u32,
    /// Submitting user (kept for reports; FIFO ignores it).
    pub user: u32,
}

/// A GPU that becomes faulty (permanently) at `time`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fault {
    /// Seconds from the start of the trace.
    pub time: f64,
    /// Node index in the cluster (in the order of [`ClusterSpec`]).
    pub node: u32,
    /// GPU index on that node.
    pub gpu: u8,
}

/// How the baselines treat faulty GPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Health {
    /// Faulty GPUs are removed from the free set the policy sees.
    Aware,
    /// Faulty GPUs stay in the free set (stock Slurm has no per-GPU out-of-service state).
    Unaware,
}

/// Knobs of one simulation.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Health handling of the baselines (`gputopo` is always aware).
    pub health: Health,
    /// Share of a multi-GPU job's step time spent communicating on an ideal set
    /// (see [`comm`]).
    pub comm_fraction: f64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            health: Health::Aware,
            comm_fraction: comm::DEFAULT_COMM_FRACTION,
        }
    }
}
