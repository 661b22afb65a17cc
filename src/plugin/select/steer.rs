//! [`Steer`]: gputopo's [`SelectHooks`], where it changes what `select/cons_tres` decides.
//!
//! The entry-point table ([`super::abi`]) routes the hooked calls here; everything else is
//! forwarded unchanged. Each hook receives `forward` (the stock call with the original
//! arguments) and the arguments it needs; raw pointers arrive as `Option<EntryPtr<'call, T>>`.
//!
//! - `job_test` (`select_p_job_test`): in RUN_NOW and WILL_RUN, drops nodes whose faulty
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
//! - `select_nodeinfo_set` (the commit point): the trait's default, forwarded; the
//!   selection it commits is the one job_test left in `gres_bit_select`.
//! - `reconfigure` (`select_p_reconfigure`): re-reads Slurm's log level, forwards, then
//!   re-reads gputopo.conf and forgets cached topologies ([`state::reconfigure`]), and has
//!   the persisted health looked at again ([`persist`]).
//!
//! A panic anywhere below is caught by the guard; from then on job_test runs [`degraded`]
//! (cons_tres alone, nodes with a GPU published faulty withheld, read on every call) and
//! every other call forwards, except reconfigure.

pub mod decision_log;
pub mod degraded;
pub mod explain;
pub mod persist;
pub mod preempt;
pub mod read;
pub mod run;
pub mod state;
pub mod write;

use std::ffi::c_int;

use gputopo_core::steer::tries::CallMode;

use crate::ffi;
use crate::plugin::select::hooks::SelectHooks;
use crate::slurm::job::{self, JobView, ReservationArg};
use crate::slurm::preempt::PreempteeOut;
use crate::slurm::{EntryPtr, node};
use read::Call;
use state::Stats;

/// How often the counters are logged (at verbose level, on the next job_test call).
const SUMMARY_EVERY_SECS: u64 = 5;

/// gputopo's select hooks (the state they keep is [`state::state`]).
#[derive(Debug)]
pub struct Steer;

impl SelectHooks for Steer {
    fn job_test<R: ReservationArg>(
        &self,
        forward: impl Fn() -> c_int,
        job: Option<EntryPtr<'_, ffi::job_record_t>>,
        bitmap: Option<EntryPtr<'_, ffi::bitstr_t>>,
        _min_nodes: u32,
        max_nodes: u32,
        _req_nodes: u32,
        mode: CallMode,
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

    /// The priority role's usage ledger notes the ending job (it may be purged before the
    /// next pass), then cons_tres releases it.
    fn job_fini(
        &self,
        forward: impl FnOnce() -> c_int,
        job: Option<EntryPtr<'_, ffi::job_record_t>>,
    ) -> c_int {
        crate::plugin::priority::job_fini(forward, job)
    }

    /// `scontrol reconfigure` may have changed SlurmctldDebug and gputopo.conf.
    fn reconfigure(&self, forward: impl FnOnce() -> c_int) -> c_int {
        crate::slurm::log::sync_level();
        let rc = forward();
        state::reconfigure();
        persist::reconfigure();
        rc
    }
}

/// Slurm's name for a job_test mode, as in its own debug output.
fn mode_name(mode: CallMode) -> &'static str {
    match mode {
        CallMode::RunNow => "RUN_NOW",
        CallMode::TestOnly => "TEST_ONLY",
        CallMode::WillRun => "WILL_RUN",
        CallMode::Resv => "RESV",
        CallMode::Other => "UNKNOWN",
    }
}
