//! The plugin shell: what Slurm loads, and the gate between Slurm and gputopo.
//!
//! - `mod.rs` (here): the identity of the artifact and the list of roles it serves.
//! - [`export`], [`guard`], [`lifecycle`] (slurm-kit's, re-exported): the macros that emit
//!   identity data, `init`/`fini` and entry points; `catch_unwind` + error logging + degraded
//!   mode around every entry point; reference-counted, role-agnostic `init`/`fini`.
//! - [`select`]: the select role, all in one folder: its entry-point table, hooks trait,
//!   gputopo's hooks and the dlopen'ed stock `select/cons_tres`.
//! - [`priority`]: the priority role and its entry-point table.

pub mod error;
pub mod priority;
pub mod select;

pub use error::PluginError;
pub use slurm_kit::{export, guard, lifecycle};

crate::plugin_identity! {
    name: "GPU topology-aware node selection (wraps select/cons_tres)",
    // The type contains `cons_tres`: Slurm gates several cons_tres features on that text in
    // SelectType (MaxNodeCount, dynamic nodes, ...), not on the id; see docs/deployment.md.
    type: "select/gputopo_cons_tres",
    // 109 = SELECT_PLUGIN_CONS_TRES: keeps every feature keyed on the cons_tres id
    // (CoreCnt reservations, unpacking node/job info in clients); see docs/deployment.md.
    id: 109,
    log: crate::slurm::log_labels::LABELS,
    error: PluginError,
    roles: [&select::ROLE, &priority::ROLE],
}
