//! gputopo-core: everything in gputopo that *decides*, as pure functions over plain Rust types.
//!
//! # Architecture map
//! gputopo is one Slurm plugin library (`select/gputopo`, `priority/gputopo`), a node agent
//! (`gputopo` command) and this core. The plugin and the agent are thin shells that convert
//! Slurm structs and NVML answers into the types defined here, call in, and write the answer back.
//!
//! - [`gpuset`]: [`GpuSet`], a bitmask of GPU indices on one node (Slurm's GRES index order).
//! - [`wideset`]: [`WideSet`], the same for nodes of any size (health beyond [`GpuSet`]'s 32).
//! - [`cpulist`]: Slurm/Linux CPU list syntax (`0-15,32`), used by `Cores=`.
//! - [`keyvalue`]: Slurm's `Key=Value` line syntax shared by every parser.
//! - [`topology`]: [`NodeTopology`], the interconnect model of one node (NVLink counts with
//!   NVSwitch semantics, PCIe path levels, socket/core affinity) and its parsers/renderers.
//! - `fixtures` (tests, feature `fixtures`): named topologies from `contrib/topologies/`.
//! - [`placement`]: the [`placement::Policy`] trait and the exact engine (the baselines the
//!   evaluation compares it with, and the simulator, are in the `gputopo-eval` crate).
//! - [`health`]: per-GPU health verdicts and the JSON the agent publishes in node `Extra`.
//! - [`identity`]: which device Slurm calls GPU i (Slurm's own GPU order, from gres.conf and
//!   the system list), so health is never published under another device's index.
//! - [`config`]: parsing of `gputopo.conf`.
//! - [`priority`]: Slurm's multifactor priority math, and gputopo's extensions.
//! - [`state_file`]: files in `StateSaveLocation`: crash-safe writes, bounded reads.
//! - [`steer`]: what `select/gputopo` changes in cons_tres's answer (GPU re-pick, node
//!   steering, health cache), as pure decisions; [`steer::call`] runs one
//!   `select_p_job_test` call as a state machine over a snapshot of Slurm's state.
//!
//! This crate knows nothing of Slurm, NVML, C or `unsafe`; the compiler enforces the last one.
#![forbid(unsafe_code)]

pub mod config;
pub mod cpulist;
pub mod fast_hash;
#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;
pub mod gpuset;
pub mod health;
pub mod identity;
pub mod keyvalue;
pub mod placement;
pub mod priority;
pub mod state_file;
pub mod steer;
pub mod topology;
pub mod wideset;

pub use gpuset::GpuSet;
pub use topology::{Gpu, Link, NodeTopology, PcieLevel};
pub use wideset::WideSet;
