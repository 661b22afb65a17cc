//! `select_p_job_test` after a panic: the plugin no longer trusts its decision code, but health
//! still fails closed and stays current (issue 25 item 3). On every call each candidate's
//! health is read as it is published now (the same cached `Extra` reading the normal path
//! uses), and every node with a faulty or drained GPU is withheld from cons_tres (a whole
//! node: no GPU re-pick runs now); everything else is plain cons_tres. So a fault published
//! (or a drain set) after the panic is honoured too. Logged at error level once, counted on every call
//! (`degraded_calls`).
//!
//! If this path panics itself, later calls withhold the nodes last seen with such a GPU
//! (each reading here updates that list), without reading `Extra` again.

use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, Ordering};

use gputopo_core::steer::tries::CallMode;

use crate::ffi;
use crate::plugin::select::steer::state::{Stats, SteerState};
use crate::slurm::bitmap::{BitmapMut, NodeIndex};
use crate::slurm::job::JobView;
use crate::slurm::{EntryPtr, node};

/// Set while the fresh reading runs; left set if it panicked (then the last list is used).
static READING: AtomicBool = AtomicBool::new(false);
/// The error line is written once.
static REPORTED: AtomicBool = AtomicBool::new(false);

/// The degraded job_test; `forward` calls cons_tres with the (possibly narrowed) bitmap.
pub fn job_test(
    st: &SteerState,
    forward: impl Fn() -> c_int,
    job: Option<EntryPtr<'_, ffi::job_record_t>>,
    bitmap: Option<EntryPtr<'_, ffi::bitstr_t>>,
    mode: CallMode,
) -> c_int {
    let steered = matches!(mode, CallMode::RunNow | CallMode::WillRun);
    if !steered {
        return forward();
    }
    Stats::add(&st.stats.degraded_calls, 1);
    if !REPORTED.swap(true, Ordering::Relaxed) {
        log::error!(
            "select/gputopo is degraded after an internal error: cons_tres decides alone, and nodes with a GPU published faulty or drained are withheld"
        );
    }
    let Some(mut candidates) = bitmap.as_ref().and_then(node::candidates) else {
        return forward();
    };
    if !st.config().health_aware {
        return forward();
    }
    let withheld = match job {
        Some(job) if !READING.swap(true, Ordering::Relaxed) => {
            let w = read_faulty(st, &JobView::new(job), &candidates);
            READING.store(false, Ordering::Relaxed);
            w
        }
        _ => st.known_faulty_nodes(),
    };
    for n in withheld {
        let _ = candidates.clear(NodeIndex(n));
    }
    forward()
}

/// The candidates with a GPU faulty or drained as published now (noted for the fallback list).
fn read_faulty(
    st: &SteerState,
    job: &JobView<'_>,
    candidates: &BitmapMut<'_, NodeIndex>,
) -> Vec<usize> {
    let mut out = Vec::new();
    for ni in candidates.iter_set() {
        let Some(nv) = node::view(job, ni) else {
            continue;
        };
        let gpus = nv.gpus().map_or(0, |g| g.count());
        let faulty = st
            .node_health(&nv, gpus)
            .map(|h| h.excluded_wide())
            .unwrap_or_default();
        if !faulty.is_empty() {
            out.push(ni.0);
        }
        st.note_faulty(ni.0, faulty);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 14 item 3: after a panic in the decision code, `select_p_job_test` still keeps
    /// the faulty GPUs gputopo knew out of service (their nodes are withheld from cons_tres),
    /// says so at error level once and counts every such call. (The panic that sends calls
    /// here is slurm_kit::guard's test; this is the path it leads to.)
    #[test]
    fn after_a_panic_job_test_withholds_known_faulty_nodes() {
        use crate::plugin::select::steer::degraded;
        use crate::slurm::bitmap::{Bitmap, BitmapRef};
        use std::cell::RefCell;

        let st = SteerState::new(gputopo_core::config::SelectConfig::default());
        st.note_faulty(3, gputopo_core::WideSet::from_iter([70]));
        st.note_faulty(5, gputopo_core::WideSet::new());
        let mut nodes: Bitmap<NodeIndex> = Bitmap::new(8).expect("bit_alloc");
        for n in 0..8 {
            nodes.set(NodeIndex(n)).unwrap();
        }
        let raw = nodes.into_raw();
        let offered = RefCell::new(Vec::new());
        let forward = || {
            // SAFETY: raw is the live bitmap allocated above, freed only at the end.
            let b = unsafe { BitmapRef::<NodeIndex>::from_raw(raw) }.expect("non-null");
            offered.replace(b.iter_set().map(|n| n.0).collect());
            0
        };
        for mode in [CallMode::RunNow, CallMode::WillRun] {
            // SAFETY: raw is live for this call.
            let arg = unsafe { EntryPtr::new(raw) };
            assert_eq!(degraded::job_test(&st, forward, None, arg, mode), 0);
            assert_eq!(*offered.borrow(), [0, 1, 2, 4, 5, 6, 7], "node 3 withheld");
        }
        assert_eq!(st.stats.degraded_calls.load(Ordering::Relaxed), 2);
        // TEST_ONLY ("could it ever run") is forwarded untouched and not counted.
        // SAFETY: as above.
        let mut raw_mut = unsafe { BitmapMut::<NodeIndex>::from_raw(raw) }.expect("non-null");
        raw_mut.set(NodeIndex(3)).unwrap();
        // SAFETY: as above.
        let arg = unsafe { EntryPtr::new(raw) };
        degraded::job_test(&st, forward, None, arg, CallMode::TestOnly);
        assert_eq!(offered.borrow().len(), 8);
        assert_eq!(st.stats.degraded_calls.load(Ordering::Relaxed), 2);
        let mut raw = raw;
        // SAFETY: frees the bitmap allocated above; no view is used afterwards.
        unsafe { ffi::slurm_bit_free(&mut raw) };
    }
}
