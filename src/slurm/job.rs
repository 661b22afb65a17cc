//! Read-only view of a slurmctld `job_record_t` (the select helper grows this on demand).
//!
//! Only what gputopo reads today: the job id for log lines. Field layout comes from bindgen for
//! the exact release, so no per-release code is needed for these fields.

use crate::ffi;
use crate::slurm::EntryPtr;

/// A job id as Slurm prints it (`JobId=12`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SlurmJobId(pub u32);

impl std::fmt::Display for SlurmJobId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// A job record borrowed for one entry-point call.
#[doc(alias = "job_record_t")]
#[derive(Debug)]
pub struct JobView<'call> {
    job: EntryPtr<'call, ffi::job_record_t>,
}

impl<'call> JobView<'call> {
    /// Wraps the job pointer of an entry-point call.
    pub fn new(job: EntryPtr<'call, ffi::job_record_t>) -> Self {
        Self { job }
    }

    fn record(&self) -> &ffi::job_record_t {
        // SAFETY: EntryPtr guarantees a live job_record_t for 'call; slurmctld holds the job
        // write lock during select_p_* calls, so no other thread mutates it while we read.
        unsafe { &*self.job.as_ptr() }
    }

    /// The job id (`job_record_t.job_id`); 0 for the fake jobs reservations test with.
    pub fn id(&self) -> SlurmJobId {
        SlurmJobId(self.record().job_id)
    }
}
