//! The recalculation loop: every PriorityCalcPeriod, recompute every pending job (all jobs with
//! CALCULATE_RUNNING), as multifactor's decay thread does. Without slurmdbd it first charges
//! running jobs to the ledger, decays it and re-ranks users (gputopo's extension).
//!
//! This is the only place gputopo takes slurmctld locks (job write, node read, partition read:
//! multifactor's `job_write_lock`), plus `priority_p_recover` and 22.05's factor list.

use std::collections::BTreeSet;
use std::sync::PoisonError;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use gputopo_core::priority::Flags;
use gputopo_core::priority::multifactor::apply_incr_only;
use gputopo_core::priority::reset::ResetPeriod;

use super::state::{Extension, STATE, Snapshot, compute, load_extension};
use crate::slurm::prio::job::{JobRecord, job_list, job_list_exists};
use crate::slurm::prio::{self, AssocLock, CtldLock, CtldLocks, assoc};

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// One pass over `job_list`. `recover` = `priority_p_recover`'s pass (no ledger charge).
/// Returns false when the association tree was not there yet (retry soon). The ledger is
/// written after the slurmctld locks are released.
pub fn pass(recover: bool) -> bool {
    ensure_ledger();
    let (complete, snapshot) = locked_pass(recover);
    if let Some(s) = snapshot {
        s.write();
    }
    complete
}

/// Loads the ledger (without slurmdbd) the first time this slurmctld is in control, i.e. has
/// a `job_list`: a backup controller initialises its plugins in standby, and the ledger it
/// must start from is the one the primary wrote last, at takeover. Read outside every lock
/// (slurmctld's and [`super::state::State::ext`]).
fn ensure_ledger() {
    let loaded = || {
        STATE
            .ext
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    };
    if STATE.with_dbd() || !job_list_exists() || loaded() {
        return;
    }
    let ext = load_extension(now());
    let mut slot = STATE.ext.lock().unwrap_or_else(PoisonError::into_inner);
    if slot.is_none() {
        *slot = Some(ext);
    }
}

/// The part of [`pass`] that runs under the job write lock; returns the ledger snapshot.
fn locked_pass(recover: bool) -> (bool, Option<Snapshot>) {
    let Some(_ctld) = CtldLock::acquire(CtldLocks::JobWriteNodePartRead) else {
        return (true, None);
    };
    if !job_list_exists() {
        // Jobs not loaded yet: charging nothing but moving last_decay on would lose the time
        // since the last save. Retry in a second.
        return (false, None);
    }
    if !STATE.with_dbd()
        && STATE
            .ext
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_none()
    {
        // job_list appeared after ensure_ledger looked: load the ledger first (retry soon).
        return (false, None);
    }
    let start = now();
    let cfg = STATE.config();
    let tres_cnt = prio::tres_count();
    // SAFETY: job write lock held until `_ctld` drops, after every use of these pointers.
    let jobs = unsafe { job_list() };
    let mut ext_guard = STATE.ext.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(ext) = ext_guard.as_mut().filter(|_| !STATE.with_dbd()) {
        if !recover {
            let period = ResetPeriod::from_slurm(prio::reset_period());
            let first = std::mem::take(&mut ext.loop_start);
            if ext
                .ledger
                .apply_reset(period, start, prio::utc_offset(start), first)
            {
                log::info!("usage ledger cleared (PriorityUsageResetPeriod={period:?})");
            }
        }
        let mut pending = BTreeSet::new();
        for &raw in &jobs {
            // SAFETY: element of job_list, job write lock held.
            let Some(job) = (unsafe { JobRecord::from_raw(raw) }) else {
                continue;
            };
            if !recover && (job.is_running() || job.is_finished()) {
                // Finished jobs too: Slurm calls priority_p_job_end only with enforced
                // limits and associations, so the pass charges what ran since the last one.
                ext.charge(&job, start, tres_cnt);
            } else if job.is_pending() {
                pending.insert(job.user_id());
            }
        }
        if !recover {
            // Only a pass that charged may move the clock (recover charges nothing).
            ext.ledger.decay_to(start);
        }
        ext.refresh_fairshare(&pending);
    }
    let mut complete = true;
    if STATE.with_dbd() && !recover {
        complete = accrue_association_usage_inner(&jobs, start, &cfg);
    }
    let ext = if STATE.with_dbd() {
        None
    } else {
        ext_guard.as_ref()
    };
    let _assoc = AssocLock::acquire(false, false);
    let mut changed = false;
    for raw in jobs {
        // SAFETY: element of job_list, job write lock held.
        let Some(mut job) = (unsafe { JobRecord::from_raw(raw) }) else {
            continue;
        };
        if job.priority() == 0
            || job.is_power_up()
            || (!job.is_pending() && !cfg.flags.has(Flags::CALCULATE_RUNNING))
            || job.is_ending()
        {
            continue;
        }
        let new = compute(&mut job, &cfg, ext, start);
        let kept = apply_incr_only(cfg.flags, job.priority(), new);
        if kept != job.priority() {
            job.set_priority(kept);
            changed = true;
        }
    }
    if changed {
        prio::touch_last_job_update(now());
    }
    drop(_assoc);
    let snapshot = ext_guard
        .as_ref()
        .filter(|_| !STATE.with_dbd() && !recover)
        .and_then(Extension::snapshot);
    log::debug!("recalculated priorities in {} s", now() - start);
    (complete, snapshot)
}

/// When the association usage was last decayed and charged (slurmdbd mode).
static LAST_DBD_PASS: AtomicI64 = AtomicI64::new(0);

/// Multifactor's per-second decay factor `1 - 0.693 / PriorityDecayHalfLife`.
pub fn decay_factor() -> f64 {
    let (_, hl) = prio::periods();
    if hl > 0 {
        1.0 - 0.693 / f64::from(hl)
    } else {
        1.0
    }
}

/// With slurmdbd: decay association usage, charge running jobs, rank with Fair Tree
/// (multifactor's decay thread). Caller holds the job write lock.
fn accrue_association_usage_inner(
    jobs: &[*mut crate::ffi::job_record_t],
    now: i64,
    cfg: &gputopo_core::priority::PriorityConfig,
) -> bool {
    // Classic fair share: multifactor's decay thread sets the effective usage from the usage
    // as it stands *before* this period's decay and charges, and scores jobs with that, so the
    // factor trails the usage by one PriorityCalcPeriod; gputopo does the same (sprio parity).
    let fair_tree = cfg.flags.has(Flags::FAIR_TREE);
    let classic_done =
        fair_tree || assoc::classic_pass(cfg.flags.has(Flags::DEPTH_OBLIVIOUS), cfg.damp_factor);
    let last = LAST_DBD_PASS.swap(now, Ordering::Relaxed);
    let d = decay_factor();
    if last > 0 && now > last {
        let real = d.powf((now - last) as f64).max(f64::MIN_POSITIVE);
        assoc::decay_usage(real);
        for &raw in jobs {
            // SAFETY: element of job_list, job write lock held by the caller.
            let Some(job) = (unsafe { JobRecord::from_raw(raw) }) else {
                continue;
            };
            let (start, _, _) = job.run_times();
            if !job.is_running() || start == 0 {
                continue;
            }
            job.charge_association((now - start.max(last)) as f64, d);
        }
    }
    if fair_tree {
        assoc::fair_tree_pass()
    } else {
        classic_done
    }
}

/// The end of a job (slurmdbd mode): charge the time since the last pass.
pub fn charge_job_end(job: &JobRecord<'_>, now: i64) {
    let last = LAST_DBD_PASS.load(Ordering::Relaxed);
    let (start, end, _) = job.run_times();
    if last == 0 || start == 0 {
        return;
    }
    let until = if end > 0 { end.min(now) } else { now };
    job.charge_association((until - start.max(last)) as f64, decay_factor());
}

/// The loop body of the recalculation thread; returns when asked to stop.
pub fn run() {
    loop {
        let t0 = std::time::Instant::now();
        let complete = pass(false);
        log::debug!("recalculation took {} us", t0.elapsed().as_micros());
        let (period, _) = prio::periods();
        let period = if complete { period } else { 1 };
        let (lock, cv) = &STATE.stop;
        let stop = lock.lock().unwrap_or_else(PoisonError::into_inner);
        let (stop, _) = cv
            .wait_timeout_while(stop, Duration::from_secs(u64::from(period)), |s| !*s)
            .unwrap_or_else(PoisonError::into_inner);
        if *stop {
            return;
        }
    }
}

/// Starts the thread (once).
pub fn start_thread() {
    let mut t = STATE.thread.lock().unwrap_or_else(PoisonError::into_inner);
    if t.is_some() {
        return;
    }
    *STATE.stop.0.lock().unwrap_or_else(PoisonError::into_inner) = false;
    match std::thread::Builder::new()
        .name("gputopo-prio".into())
        .spawn(|| {
            if std::panic::catch_unwind(run).is_err() {
                log::error!("recalculation thread panicked; priorities are no longer recalculated");
            }
        }) {
        Ok(h) => *t = Some(h),
        Err(e) => log::error!("cannot start the recalculation thread: {e}"),
    }
}

/// Stops and joins the thread.
pub fn stop_thread() {
    *STATE.stop.0.lock().unwrap_or_else(PoisonError::into_inner) = true;
    STATE.stop.1.notify_all();
    let h = STATE
        .thread
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    if let Some(h) = h {
        let _ = h.join();
    }
}
