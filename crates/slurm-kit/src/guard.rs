//! The one gate every exported function passes through: panics and errors stop here.
//!
//! [`entry`] runs an entry point's body under `catch_unwind` (since Rust 1.81 a panic escaping
//! an `extern "C"` fn aborts the process, i.e. slurmctld), logs an `Err` with its whole cause
//! chain and a panic with its message and count (every occurrence, at error level), and maps
//! both to the entry point's failure value. A panic in an entry point of a forwarding table
//! ([`forwarding_entry`]: gputopo's `select_p_*`) sets [`is_degraded`]: from then on the
//! table's `hook` lines forward unchanged; its `guarded` lines still run their hook, which
//! decides what is safe then (gputopo's `select_p_job_test` still withholds the nodes whose
//! GPUs are published faulty now, `steer::degraded`). A panic in another entry point (gputopo's
//! priority role) only fails that call. This is also the only place where a Rust error becomes
//! a Slurm return code.

use std::any::Any;
use std::error::Error;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

static DEGRADED: AtomicBool = AtomicBool::new(false);
/// Panics caught in this process, every entry point together.
static PANICS: AtomicU64 = AtomicU64::new(0);

/// True after an entry point of a forwarding table panicked in this process: the table then
/// forwards to the stock plugin (see the module docs for what still runs).
pub fn is_degraded() -> bool {
    DEGRADED.load(Ordering::Relaxed)
}

/// How many panics were caught in this process.
pub fn panics() -> u64 {
    PANICS.load(Ordering::Relaxed)
}

/// Runs `body` for the exported function `symbol`, returning `failure` on error or panic.
pub fn entry<R, E: Error>(
    symbol: &'static str,
    failure: R,
    body: impl FnOnce() -> Result<R, E>,
) -> R {
    run(symbol, failure, None, body)
}

/// [`entry`] for an entry point of a forwarding table: a panic also degrades the plugin
/// ([`is_degraded`]), and `degraded` (what that leaves: "select/gputopo forwards to
/// select/cons_tres from now on ...") is logged with it.
pub fn forwarding_entry<R, E: Error>(
    symbol: &'static str,
    failure: R,
    degraded: &'static str,
    body: impl FnOnce() -> Result<R, E>,
) -> R {
    run(symbol, failure, Some(degraded), body)
}

fn run<R, E: Error>(
    symbol: &'static str,
    failure: R,
    degraded: Option<&'static str>,
    body: impl FnOnce() -> Result<R, E>,
) -> R {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(value)) => value,
        Ok(Err(err)) => {
            report(|| log::error!("{symbol}: {}", cause_chain(&err)));
            failure
        }
        Err(payload) => {
            let n = PANICS.fetch_add(1, Ordering::Relaxed) + 1;
            if degraded.is_some() {
                DEGRADED.store(true, Ordering::Relaxed);
            }
            let msg = panic_message(payload.as_ref());
            let then = degraded.unwrap_or("the call failed");
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
    use crate::SlurmError;

    /// An error with a cause, as a plugin's own error type would have.
    #[derive(Debug, thiserror::Error)]
    #[error("{what}")]
    struct Failed {
        what: &'static str,
        #[source]
        source: SlurmError,
    }

    #[test]
    fn ok_err_and_panic_map_to_values() {
        assert_eq!(entry("t_ok", -1, || Ok::<_, Failed>(5)), 5);
        let err = Failed {
            what: "stock init",
            source: SlurmError::Rc(-1),
        };
        assert_eq!(cause_chain(&err), "stock init: Slurm returned rc=-1");
        assert_eq!(entry("t_err", -1, || Err(err)), -1);
        assert!(!is_degraded());
        // Issue 25 item 3: a panic in an entry point of no forwarding table (gputopo's
        // priority role) is counted, and the plugin is not degraded by it.
        assert_eq!(
            entry("priority_p_set", 1, || -> Result<u32, Failed> {
                panic!("boom")
            }),
            1
        );
        assert_eq!(panics(), 1);
        assert!(!is_degraded(), "a priority panic leaves select as it is");
        assert_eq!(
            forwarding_entry(
                "select_p_job_test",
                -1,
                "select/example forwards from now on",
                || -> Result<i32, Failed> { panic!("boom") }
            ),
            -1
        );
        assert_eq!(panics(), 2);
        assert!(is_degraded());
    }
}
