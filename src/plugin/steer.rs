//! The hook point where gputopo changes what `select/cons_tres` decides.
//!
//! The entry-point tables (`crate::ffi::select_abi`) route exactly two calls here; everything
//! else is forwarded unchanged. Each hook receives `forward` (the stock call with the original
//! arguments) and the arguments it needs; raw pointers arrive as `Option<EntryPtr<'call, T>>`.
//! For now both hooks forward unchanged; `job_test` logs one debug line per call:
//! `select/gputopo: job_test JobId=12 mode=RUN_NOW rc=0`.
//! (Owned by the select work from here on; keep the signatures release-independent.)

use std::ffi::c_int;

use crate::ffi;
use crate::slurm::EntryPtr;
use crate::slurm::job::JobView;

/// `select_p_job_test`: called by slurmctld with the job and node write locks held.
#[allow(clippy::too_many_arguments)]
pub fn job_test(
    forward: impl FnOnce() -> c_int,
    job: Option<EntryPtr<'_, ffi::job_record_t>>,
    _bitmap: Option<EntryPtr<'_, ffi::bitstr_t>>,
    _min_nodes: u32,
    _max_nodes: u32,
    _req_nodes: u32,
    mode: u16,
) -> c_int {
    let rc = forward();
    let job_id = job.map(|j| JobView::new(j).id().0).unwrap_or(0);
    log::debug!("job_test JobId={job_id} mode={} rc={rc}", mode_name(mode));
    rc
}

/// `select_p_select_nodeinfo_set`: the commit point (cons_tres fills the job's GRES allocation).
pub fn select_nodeinfo_set(
    forward: impl FnOnce() -> c_int,
    _job: Option<EntryPtr<'_, ffi::job_record_t>>,
) -> c_int {
    forward()
}

/// Slurm's name for a job_test mode (flag bits ignored), as in its own debug output.
fn mode_name(mode: u16) -> &'static str {
    match u32::from(mode) & ffi::SELECT_MODE_BASE {
        ffi::SELECT_MODE_RUN_NOW => "RUN_NOW",
        ffi::SELECT_MODE_TEST_ONLY => "TEST_ONLY",
        ffi::SELECT_MODE_WILL_RUN => "WILL_RUN",
        ffi::SELECT_MODE_RESV => "RESV",
        _ => "UNKNOWN",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_names_ignore_flag_bits() {
        assert_eq!(mode_name(0), "RUN_NOW");
        assert_eq!(mode_name(0x101), "TEST_ONLY");
        assert_eq!(mode_name(2), "WILL_RUN");
        assert_eq!(mode_name(9), "UNKNOWN");
    }
}
