//! The one gate every exported function passes through: panics and errors stop here.
//!
//! [`entry`] runs an entry point's body under `catch_unwind` (since Rust 1.81 a panic escaping
//! an `extern "C"` fn aborts the process, i.e. slurmctld), logs an `Err` with its whole cause
//! chain and a panic with its message and count (every occurrence, at error level), and maps
//! both to the entry point's failure value. A panic in a `select_p_*` entry point sets
//! [`is_degraded`]: from then on the select hooks are skipped and calls are forwarded, except
//! `select_p_job_test`, which still withholds the nodes whose GPUs are published faulty now
//! (`steer::degraded`), and `select_p_reconfigure`. A panic in another role (priority) leaves
//! the select role as it is. This is also the only place where a Rust error becomes a Slurm
//! return code.

use std::any::Any;
use std::error::Error;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::plugin::PluginError;

static DEGRADED: AtomicBool = AtomicBool::new(false);
/// Panics caught in this process, every entry point together.
static PANICS: AtomicU64 = AtomicU64::new(0);

/// True after a select entry point panicked in this process: the select role then forwards
/// to the stock plugin (see the module docs for what still runs).
pub fn is_degraded() -> bool {
    DEGRADED.load(Ordering::Relaxed)
}

/// How many panics were caught in this process.
pub fn panics() -> u64 {
    PANICS.load(Ordering::Relaxed)
}

/// Runs `body` for the exported function `symbol`, returning `failure` on error or panic.
pub fn entry<R>(
    symbol: &'static str,
    failure: R,
    body: impl FnOnce() -> Result<R, PluginError>,
) -> R {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(value)) => value,
        Ok(Err(err)) => {
            report(|| log::error!("{symbol}: {}", cause_chain(&err)));
            failure
        }
        Err(payload) => {
            let n = PANICS.fetch_add(1, Ordering::Relaxed) + 1;
            let select = symbol.starts_with("select_p_");
            if select {
                DEGRADED.store(true, Ordering::Relaxed);
            }
            let msg = panic_message(payload.as_ref());
            let then = if select {
                "select/gputopo forwards to select/cons_tres from now on and withholds the nodes with a GPU published faulty or drained"
            } else {
                "the call failed"
            };
            report(|| log::error!("{symbol}: internal error #{n} (panic: {msg}); {then}"));
            failure
        }
    }
}

/// Logs without letting a panic in the logging path itself escape.
fn report(log_it: impl FnOnce()) {
    let _ignored = catch_unwind(AssertUnwindSafe(log_it));
}

fn cause_chain(err: &dyn Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn panic_message(payload: &(dyn Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "non-string panic payload"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slurm::SlurmError;

    #[test]
    fn ok_err_and_panic_map_to_values() {
        assert_eq!(entry("t_ok", -1, || Ok(5)), 5);
        let err = PluginError::Slurm {
            what: "stock init".into(),
            source: SlurmError::Rc(-1),
        };
        assert_eq!(cause_chain(&err), "stock init: Slurm returned rc=-1");
        assert_eq!(entry("t_err", -1, || Err(err)), -1);
        assert!(!is_degraded());
        // Issue 25 item 3: a panic in another role's entry point is counted, and the select
        // role is not degraded by it.
        assert_eq!(
            entry("priority_p_set", 1, || -> Result<u32, PluginError> {
                panic!("boom")
            }),
            1
        );
        assert_eq!(panics(), 1);
        assert!(!is_degraded(), "a priority panic leaves select as it is");
        assert_eq!(
            entry("select_p_job_test", -1, || -> Result<i32, PluginError> {
                panic!("boom")
            }),
            -1
        );
        assert_eq!(panics(), 2);
        assert!(is_degraded());
        after_a_panic_job_test_withholds_known_faulty_nodes();
    }

    /// Issue 14 item 3: after a panic in the decision code, `select_p_job_test` still keeps
    /// the faulty GPUs gputopo knew out of service (their nodes are withheld from cons_tres),
    /// says so at error level once and counts every such call. Runs after the panic above
    /// (`is_degraded` is process-wide, so the two share one test).
    fn after_a_panic_job_test_withholds_known_faulty_nodes() {
        use crate::ffi;
        use crate::plugin::select::steer::{degraded, state::SteerState};
        use crate::slurm::EntryPtr;
        use crate::slurm::bitmap::{Bitmap, BitmapRef, NodeIndex};
        use gputopo_core::steer::tries::CallMode;
        use std::cell::RefCell;
        use std::sync::atomic::Ordering;

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
        let mut raw_mut = unsafe { crate::slurm::bitmap::BitmapMut::<NodeIndex>::from_raw(raw) }
            .expect("non-null");
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
