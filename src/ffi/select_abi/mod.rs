//! The select plugin's entry-point table for the ABI generation of the build tree.
//!
//! `build.rs` emits `cfg(select_abi = "...")` from `SLURM_VERSION_NUMBER`; exactly one table is
//! compiled. Each table lists every `select_p_*` of its release's `node_select_syms[]`, in
//! that order, with the prototype of the release's `slurm_select_ops_t`, and says per line
//! whether it is forwarded to the stock cons_tres or hooked (`crate::forwarding_table!`).
//! `tests/abi.rs` checks the exported set against the tree's `node_select_syms[]`.

#[cfg_attr(select_abi = "22.05", path = "v22_05.rs")]
#[cfg_attr(select_abi = "23.11", path = "v23_11.rs")]
#[cfg_attr(any(select_abi = "25.05", select_abi = "26.05"), path = "v25_05.rs")]
mod imp;

pub use imp::*;
