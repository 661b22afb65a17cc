//! What gputopo may change in `select/cons_tres`: one trait whose methods forward by default.
//!
//! The entry-point table ([`super::abi`]) stays dumb: a `forward` line calls the stock
//! function, a `hook` line calls one [`SelectHooks`] method with `forward` (the stock call
//! with the original arguments) and the arguments converted once at the table edge (raw
//! pointers into `Option<EntryPtr>`, the job_test mode into a [`CallMode`]). An
//! implementation overrides only the calls it changes; every other method keeps its default,
//! which forwards. slurm-spank-rs's `Plugin` trait has the same shape.
//! gputopo's implementation is [`super::steer::Steer`].

use std::ffi::c_int;

use gputopo_core::steer::tries::CallMode;

use crate::ffi;
use crate::plugin::export::HookArg;
use crate::slurm::EntryPtr;
use crate::slurm::job::ReservationArg;

/// The hooks of the select role; every default forwards to the stock plugin unchanged.
pub trait SelectHooks: Sync {
    /// `select_p_job_test`, called by slurmctld with the job and node write locks held.
    /// `forward` calls cons_tres with the original arguments, the candidate `bitmap` among
    /// them, which a hook may rewrite in place before each call. `reservation` is the
    /// release's last argument (`exc_core_bitmap` in 22.05, `resv_exc_t *` later).
    #[allow(clippy::too_many_arguments)]
    fn job_test<R: ReservationArg>(
        &self,
        forward: impl Fn() -> c_int,
        _job: Option<EntryPtr<'_, ffi::job_record_t>>,
        _bitmap: Option<EntryPtr<'_, ffi::bitstr_t>>,
        _min_nodes: u32,
        _max_nodes: u32,
        _req_nodes: u32,
        _mode: CallMode,
        _preemptee_candidates: Option<EntryPtr<'_, ffi::xlist>>,
        _preemptee_job_list: Option<EntryPtr<'_, *mut ffi::xlist>>,
        _reservation: Option<EntryPtr<'_, R>>,
    ) -> c_int {
        forward()
    }

    /// `select_p_select_nodeinfo_set`: the commit point, where cons_tres fills the job's GRES
    /// allocation from what job_test left in `gres_bit_select`.
    fn select_nodeinfo_set(
        &self,
        forward: impl FnOnce() -> c_int,
        _job: Option<EntryPtr<'_, ffi::job_record_t>>,
    ) -> c_int {
        forward()
    }

    /// `select_p_job_fini`: a job's allocation ends (slurmctld's `deallocate_nodes`, job and
    /// node write locks held), before cons_tres releases it.
    fn job_fini(
        &self,
        forward: impl FnOnce() -> c_int,
        _job: Option<EntryPtr<'_, ffi::job_record_t>>,
    ) -> c_int {
        forward()
    }

    /// `select_p_reconfigure` (`scontrol reconfigure`).
    fn reconfigure(&self, forward: impl FnOnce() -> c_int) -> c_int {
        forward()
    }
}

/// The `uint16_t mode` of `select_p_job_test` as the table declares it: the same C type
/// (`repr(transparent)`), so the stock call receives it unchanged, while a hook receives it
/// decoded once, here, into the core's [`CallMode`] (Slurm's `SELECT_MODE_*` with the flag
/// bits masked off by `SELECT_MODE_BASE`).
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SelectMode(pub u16);

impl SelectMode {
    /// The base mode; an unknown one is [`CallMode::Other`].
    pub fn call_mode(self) -> CallMode {
        match u32::from(self.0) & ffi::SELECT_MODE_BASE {
            ffi::SELECT_MODE_RUN_NOW => CallMode::RunNow,
            ffi::SELECT_MODE_TEST_ONLY => CallMode::TestOnly,
            ffi::SELECT_MODE_WILL_RUN => CallMode::WillRun,
            ffi::SELECT_MODE_RESV => CallMode::Resv,
            _ => CallMode::Other,
        }
    }
}

impl HookArg<'_> for SelectMode {
    type Out = CallMode;
    unsafe fn into_hook_arg(self) -> CallMode {
        self.call_mode()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_modes_ignore_flag_bits() {
        let cases = [
            ("run now", 0, CallMode::RunNow),
            ("test only + preempt flag", 0x101, CallMode::TestOnly),
            ("will run", 2, CallMode::WillRun),
            ("resv", 4, CallMode::Resv),
            ("unknown", 3, CallMode::Other),
        ];
        for (name, raw, want) in cases {
            assert_eq!(SelectMode(raw).call_mode(), want, "{name}");
        }
    }
}
