//! gputopo: the Slurm plugin library loaded by slurmctld as `select/gputopo_cons_tres` and
//! `priority/gputopo`.
//!
//! # Architecture map
//! Layers, each using only the ones below it in this list:
//! - [`plugin`]: what Slurm loads: identity symbols, `init`/`fini` (the kit's export macros and
//!   panic/error guard, with gputopo's roles, log labels and error type), and one folder per role, each holding its entry-point table: [`plugin::select`] (the table
//!   [`plugin::select::abi`], the hooks trait, gputopo's hooks [`plugin::select::steer`], the
//!   dlopen'ed stock `select/cons_tres`) and [`plugin::priority`].
//! - [`slurm`]: gputopo's views of Slurm's records (job, gres, node, preemption, priority),
//!   over the kit's safe wrappers, which it re-exports under their old paths.
//! - `slurm-kit` (crates/slurm-kit, re-exported as [`ffi`] for its raw layer): what any Rust
//!   Slurm plugin needs, nothing of gputopo: the bindgen bindings of the exact Slurm tree in
//!   `SLURM_SRC_DIR` (`slurm_kit::sys`), bitmaps, lists, log, xmalloc, named lock sets,
//!   slurmctld-only symbols with typed signatures.
//! - `gputopo-core` (separate crate, no unsafe): every decision, as pure functions.
//!
//! # Invariants
//! - `unsafe` appears only in `slurm-kit`, `slurm/`, `plugin/select/stock.rs` and the code
//!   the kit's export macros emit into the tables.
//! - No panic crosses the ABI: every export runs inside [`plugin::guard::entry`].
//! - Only libslurmfull functions are referenced directly; slurmctld-only symbols go through
//!   [`slurm::ctld`] (the kit's), so the same `.so` loads in slurmd, slurmstepd and every client.
//! - Nothing takes slurmctld locks inside a `select_p_*` call.

// Every `unsafe fn` states its contract, and every unsafe block holds one unsafe operation
// with its own `// SAFETY:` comment (style.md §3), in the whole crate.
#![deny(clippy::missing_safety_doc)]
#![deny(clippy::multiple_unsafe_ops_per_block)]

pub mod plugin;
pub mod slurm;

/// The raw bindings (`slurm_kit::sys`), under the name the plugin's code has always used.
pub use slurm_kit::sys as ffi;
// `crate::ctld_symbol!` and the export macros keep their paths in the plugin's code.
pub use slurm_kit::{ctld_symbol, forwarding_table, own_entry_points, plugin_identity};
