//! The hook point where gputopo changes what `select/cons_tres` decides.
//!
//! The entry-point tables (`crate::ffi::select_abi`) route exactly two calls here; everything
//! else is forwarded unchanged. Each hook receives `forward` (the stock call with the original
//! arguments) and the arguments it needs; raw pointers arrive as `Option<EntryPtr<'call, T>>`.
//!
//! - [`job_test`] (`select_p_job_test`): in RUN_NOW and WILL_RUN, drops nodes whose faulty
//!   GPUs rule them out, steers cons_tres toward the nodes where the job's GPUs connect best
//!   (narrowing the candidate bitmap, widening on failure), and after a RUN_NOW success
//!   re-picks the GPU indices on each chosen node. [`read`] takes Slurm's state once per call
//!   into the core's snapshot, the core's state machine
//!   ([`gputopo_core::steer::call`]) decides every step, [`run`] carries the steps out and
//!   [`write`] writes the placement back once; state and config in [`state`]. TEST_ONLY is
//!   forwarded untouched.
//! - Before a call that offers preemption candidates, [`preempt`] reorders them so cons_tres
//!   frees the best-connected healthy GPUs at the same cost (the core decides over the
//!   call's snapshot).
//! - [`select_nodeinfo_set`] (the commit point): forwarded; the selection it commits is the
//!   one job_test left in `gres_bit_select`.
//!
//! A panic anywhere below is caught by the guard; from then on job_test runs [`degraded`]
//! (cons_tres alone, nodes with a GPU published faulty withheld, read on every call) and
//! every other call forwards, except reconfigure.

pub mod degraded;
pub mod explain;
pub mod persist;
pub mod preempt;
pub mod read;
pub mod run;
pub mod state;
pub mod write;

use std::ffi::c_int;

use crate::ffi;
use crate::slurm::job::{self, JobView, ReservationArg};
use crate::slurm::preempt::PreempteeOut;
use crate::slurm::{EntryPtr, node};
use run::Call;
use state::Stats;

/// How often the counters are logged (at verbose level, on the next job_test call).
const SUMMARY_EVERY_SECS: u64 = 5;

/// `select_p_job_test`: called by slurmctld with the job and node write locks held.
#[allow(clippy::too_many_arguments)]
pub fn job_test<R: ReservationArg>(
    forward: impl Fn() -> c_int,
    job: Option<EntryPtr<'_, ffi::job_record_t>>,
    bitmap: Option<EntryPtr<'_, ffi::bitstr_t>>,
    _min_nodes: u32,
    max_nodes: u32,
    _req_nodes: u32,
    mode: u16,
    preemptee_candidates: Option<EntryPtr<'_, ffi::xlist>>,
    preemptee_job_list: Option<EntryPtr<'_, *mut ffi::xlist>>,
    reservation: Option<EntryPtr<'_, R>>,
) -> c_int {
    let st = state::state();
    st.sync_persisted();
    if crate::plugin::guard::is_degraded() {
        return degraded::job_test(st, forward, job, bitmap, mode);
    }
    Stats::add(&st.stats.calls, 1);
    if st.stats.due(SUMMARY_EVERY_SECS) {
        log::info!("{}", st.stats.summary());
    }
    let (Some(job), Some(bitmap)) = (job, bitmap) else {
        return forward();
    };
    let Some(candidates) = node::candidates(&bitmap) else {
        return forward();
    };
    let mut job = JobView::new(job);
    #[cfg(feature = "test-panic")]
    if job.name() == Some("gputopo_test_panic") {
        panic!("injected by the test-panic build for job {}", job.id());
    }
    let preemption = job::offers_preemption(preemptee_candidates.as_ref());
    let victims_out = preemptee_job_list.map(PreempteeOut::new);
    let call = Call {
        max_nodes,
        mode,
        preemption,
        candidates: preemptee_candidates.as_ref().filter(|_| preemption),
        victims_out: victims_out.as_ref(),
        reserved: reservation.as_ref().and_then(R::gres),
    };
    let rc = run::job_test(st, &forward, &mut job, candidates, call);
    log::debug!(
        "job_test JobId={} mode={} rc={rc}",
        job.id().0,
        mode_name(mode)
    );
    rc
}

/// `select_p_select_nodeinfo_set`: the commit point (cons_tres fills the job's GRES allocation).
pub fn select_nodeinfo_set(
    forward: impl FnOnce() -> c_int,
    _job: Option<EntryPtr<'_, ffi::job_record_t>>,
) -> c_int {
    forward()
}

/// `select_p_reconfigure`: re-read gputopo.conf, forget cached health and topologies.
pub fn reconfigure() {
    state::reconfigure();
    persist::reconfigure();
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
