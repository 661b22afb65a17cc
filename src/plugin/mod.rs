//! The plugin shell: what Slurm loads, and the gate between Slurm and gputopo.
//!
//! - `mod.rs` (here): the identity of the artifact and the list of roles it serves.
//! - [`export`]: the macros that emit identity data, `init`/`fini` and entry points.
//! - [`guard`]: `catch_unwind` + error logging + degraded mode around every entry point.
//! - [`lifecycle`]: reference-counted, role-agnostic `init`/`fini`.
//! - [`stock`]: the dlopen'ed stock `select/cons_tres`.
//! - [`select`]: the select role; its entry-point table is `crate::plugin::select::abi`.
//! - [`steer`]: the two select hooks (`job_test`, `select_nodeinfo_set`).

pub mod error;
pub mod export;
pub mod guard;
pub mod lifecycle;
pub mod priority;
pub mod select;

pub use error::PluginError;

crate::plugin_identity! {
    name: "GPU topology-aware node selection (wraps select/cons_tres)",
    // The type contains `cons_tres`: Slurm gates several cons_tres features on that text in
    // SelectType (MaxNodeCount, dynamic nodes, ...), not on the id; see docs/deployment.md.
    type: "select/gputopo_cons_tres",
    // 109 = SELECT_PLUGIN_CONS_TRES: keeps every feature keyed on the cons_tres id
    // (CoreCnt reservations, unpacking node/job info in clients); see docs/deployment.md.
    id: 109,
    roles: [&select::ROLE, &priority::ROLE],
}
