//! `select_p_job_test` after a panic: the plugin no longer trusts its own decision code, but
//! health still fails closed. Every node where gputopo knew a faulty GPU is withheld from
//! cons_tres (a whole node, since no GPU re-pick runs now); everything else is plain
//! cons_tres. Logged at error level once, counted on every call (`degraded_calls`).
//!
//! This path is kept tiny; if it panics itself, later calls forward unchanged.

use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, Ordering};

use gputopo_core::steer::tries::CallMode;

use crate::ffi;
use crate::plugin::select::steer::state::{Stats, SteerState};
use crate::slurm::bitmap::NodeIndex;
use crate::slurm::{EntryPtr, node};

/// Set while this path runs; left set if it panicked (then every call forwards).
static RUNNING: AtomicBool = AtomicBool::new(false);
/// The error line is written once.
static REPORTED: AtomicBool = AtomicBool::new(false);

/// The degraded job_test; `forward` calls cons_tres with the (possibly narrowed) bitmap.
pub fn job_test(
    st: &SteerState,
    forward: impl Fn() -> c_int,
    bitmap: Option<EntryPtr<'_, ffi::bitstr_t>>,
    mode: CallMode,
) -> c_int {
    let steered = matches!(mode, CallMode::RunNow | CallMode::WillRun);
    if !steered || RUNNING.swap(true, Ordering::Relaxed) {
        return forward();
    }
    Stats::add(&st.stats.degraded_calls, 1);
    let withheld = st.known_faulty_nodes();
    if !REPORTED.swap(true, Ordering::Relaxed) {
        log::error!(
            "select/gputopo is degraded after an internal error: cons_tres decides alone, and the {} node(s) with GPUs known to be faulty are withheld",
            withheld.len()
        );
    }
    if let Some(mut candidates) = bitmap.as_ref().and_then(node::candidates) {
        for n in withheld {
            let _ = candidates.clear(NodeIndex(n));
        }
    }
    let rc = forward();
    RUNNING.store(false, Ordering::Relaxed);
    rc
}
