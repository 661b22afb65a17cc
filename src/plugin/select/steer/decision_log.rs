//! The one rule for decision lines in slurmctld's log, shared by the call loop ([`super::run`])
//! and the preemption reorder ([`super::preempt`]): info level with `LogDecisions=yes`, else
//! debug (where `DebugFlags=SelectType` or `Gres` shows them).

/// Writes a decision line: info level with `LogDecisions=yes`, else debug.
pub fn emit(verbose: bool, msg: &str) {
    if verbose {
        log::info!(target: "gputopo::select", "{msg}");
    } else {
        log::debug!(target: "gputopo::select", "{msg}");
    }
}
