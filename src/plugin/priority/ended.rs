//! Without slurmdbd, jobs as the usage ledger charges them, and the jobs that ended since the
//! last pass, noted when they end so that none is lost to the purge of its record.
//!
//! Why a note at the end: the ledger pass charges every finished job it finds in `job_list`
//! from its own start and end times, but with `MinJobAge` shorter than `PriorityCalcPeriod`
//! slurmctld purges a finished record before the next pass, and Slurm calls
//! `priority_p_job_end` only with enforced limits (never without slurmdbd). The select role of
//! the same `.so` sees every end: slurmctld calls `select_p_job_fini` from `deallocate_nodes`
//! for every job that held resources, with the job and node write locks held. There the job
//! is copied into a bounded in-memory list (no slurmctld lock taken, no file I/O); the next
//! pass charges each noted job it did not find finished in `job_list` itself.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use gputopo_core::priority::recalc::RunTimes;

use crate::slurm::prio::job::JobRecord;

/// One job as the ledger charges it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LedgerJob {
    /// `job_id`.
    pub job_id: u32,
    /// The user charged.
    pub uid: u32,
    /// Its run times (for an ended job: its end, or when it was noted).
    pub times: RunTimes,
    /// GPU equivalents held ([`gputopo_core::priority::gpu_count`]).
    pub gpus: f64,
    /// `billable_tres`.
    pub billing: f64,
}

impl LedgerJob {
    /// The job as it stands. `gpu_index` is `gres/gpu`'s TRES index when it is a TRES (then
    /// its allocated count is the whole GPUs), else the allocated `gpu` GRES count, or the
    /// request where Slurm zeroed it; shared GRES add their part of a GPU. Caller holds the
    /// job lock and the node lock (read).
    pub fn of(job: &JobRecord<'_>, gpu_index: Option<usize>, tres_cnt: usize) -> LedgerJob {
        let whole = gpu_index
            .and_then(|i| job.tres_alloc(i, tres_cnt))
            .unwrap_or_else(|| job.gpus_to_charge());
        LedgerJob {
            job_id: job.id(),
            uid: job.user_id(),
            times: job.charge_times(),
            gpus: whole as f64 + job.shared_gpu_share(),
            billing: job.billable_tres(),
        }
    }

    /// The key a pass matches noted jobs with: a requeued job runs again under its id, with
    /// another start time.
    pub fn key(&self) -> (u32, i64) {
        (self.job_id, self.times.start)
    }
}

/// At most this many ended jobs wait for a pass (a million is minutes of the busiest
/// cluster's throughput; a loop stalled longer than that loses the oldest notes, logged).
const MAX_NOTED: usize = 1_000_000;

static NOTED: Mutex<Vec<LedgerJob>> = Mutex::new(Vec::new());

/// Notes a job that ends now (`select_p_job_fini`, job and node write locks held by Slurm).
/// A job that never started is not noted.
pub fn note(job: &JobRecord<'_>, now: i64) {
    if job.charge_times().start == 0 {
        return;
    }
    let mut j = LedgerJob::of(
        job,
        crate::slurm::prio::gpu_tres_index(),
        crate::slurm::prio::tres_count(),
    );
    j.times.running = false;
    if j.times.end <= 0 || j.times.end > now {
        j.times.end = now;
    }
    let mut noted = NOTED.lock().unwrap_or_else(PoisonError::into_inner);
    if noted.len() >= MAX_NOTED {
        log::error!(
            "{MAX_NOTED} ended jobs wait for the priority pass; job {} is charged only if its record outlives the next pass",
            j.job_id
        );
        return;
    }
    noted.push(j);
}

/// The jobs noted since the last pass, by [`LedgerJob::key`] (the list is emptied).
pub fn take() -> HashMap<(u32, i64), LedgerJob> {
    let noted = std::mem::take(&mut *NOTED.lock().unwrap_or_else(PoisonError::into_inner));
    noted.into_iter().map(|j| (j.key(), j)).collect()
}

/// Forgets every note (the ledger is not kept in this process: slurmdbd, or the role stopped).
pub fn clear() {
    NOTED.lock().unwrap_or_else(PoisonError::into_inner).clear();
}
