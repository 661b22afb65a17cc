//! What multifactor's usage charging reads from a job record and the one field it writes
//! (`end_time_exp`, set to `NO_VAL` once the job's end is charged so that it is never charged
//! again, by the priority plugin or by `acct_policy_job_fini`).

use gputopo_core::priority::usage::{ChargedJob, END_CHARGED};

use super::super::xmalloc::borrow_array;
use super::{JOB_COMPLETING, JobRecord};
use crate::ffi;

/// The records a job's usage goes to: its QOS, its partition's QOS (when another one), its
/// association chain. Raw pointers of assoc_mgr records, used under the assoc_mgr locks.
#[derive(Debug, Clone, Copy)]
pub(in crate::slurm::prio) struct Targets {
    pub qos: *mut ffi::slurmdb_qos_rec_t,
    pub part_qos: *mut ffi::slurmdb_qos_rec_t,
    pub assoc: *mut ffi::slurmdb_assoc_rec_t,
}

impl JobRecord<'_> {
    /// The fields `_apply_new_usage` reads. `usage_factor` is the job QOS's when it has one
    /// and it is `>= 0` (caller holds the assoc_mgr QOS lock).
    pub fn charged_job(&self) -> ChargedJob {
        let j = &*self.job;
        // SAFETY: the job's QOS record lives in assoc_mgr while jobs reference it.
        let qos = unsafe { j.qos_ptr.as_ref() };
        ChargedJob {
            start: j.start_time,
            end: j.end_time,
            end_exp: j.end_time_exp,
            time_limit_mins: j.time_limit,
            ending: self.is_ending(),
            usage_factor: qos.map(|q| q.usage_factor).filter(|f| *f >= 0.0),
        }
    }

    /// `IS_JOB_FINISHED || IS_JOB_COMPLETING` (the decay pass leaves these to
    /// `priority_p_job_end`).
    pub fn is_finished_or_completing(&self) -> bool {
        self.is_finished() || self.job.job_state & JOB_COMPLETING != 0
    }

    /// Whether the job has an association (`job_ptr->assoc_ptr`).
    pub fn has_assoc(&self) -> bool {
        !self.job.assoc_ptr.is_null()
    }

    /// Whether its end was charged already (`end_time_exp == NO_VAL`).
    pub fn end_charged(&self) -> bool {
        self.job.end_time_exp == END_CHARGED
    }

    /// Marks the job's end as charged (`end_time_exp = (time_t) NO_VAL`).
    pub fn mark_end_charged(&mut self) {
        self.job.end_time_exp = END_CHARGED;
    }

    /// Where the job's usage goes (see [`Targets`]). The partition QOS counts only when it is
    /// not the job's own QOS (`_apply_new_usage`, `_handle_tres_run_secs`).
    pub(in crate::slurm::prio) fn targets(&self) -> Targets {
        let j = &*self.job;
        // SAFETY: the partition record outlives jobs that reference it (part read lock or
        // job write lock held by the caller).
        let part_qos = unsafe { j.part_ptr.as_ref() }
            .map(|p| p.qos_ptr)
            .filter(|&q| q != j.qos_ptr)
            .unwrap_or(std::ptr::null_mut());
        Targets {
            qos: j.qos_ptr,
            part_qos,
            assoc: j.assoc_ptr,
        }
    }

    /// `tres_alloc_cnt[0..n]` (n = `slurmctld_tres_cnt`, bounded by the allocation), if any.
    pub(in crate::slurm::prio) fn tres_alloc_all(&self, n: usize) -> Option<&[u64]> {
        // SAFETY: null or an xmalloc'ed array owned by the job (job lock held); read by its
        // allocated size.
        unsafe { borrow_array(self.job.tres_alloc_cnt, n) }
    }

    /// The record, for slurmctld functions that take the job (`calc_job_billable_tres`).
    pub(in crate::slurm::prio) fn as_mut_ptr(&mut self) -> *mut ffi::job_record_t {
        self.job
    }
}
