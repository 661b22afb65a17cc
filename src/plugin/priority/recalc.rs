//! The recalculation loop: every PriorityCalcPeriod, recompute every pending job (all jobs with
//! CALCULATE_RUNNING), as multifactor's decay thread does. With slurmdbd it first resets,
//! decays and charges association and QOS usage as multifactor does ([`super::dbd`]); without
//! slurmdbd it charges running and finished jobs to the ledger, decays it and re-ranks users
//! (gputopo's extension).
//!
//! This is the only place gputopo takes slurmctld locks (job write, node read, partition read:
//! multifactor's `job_write_lock`), plus `priority_p_recover` and 22.05's factor list.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::PoisonError;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use gputopo_core::priority::multifactor::apply_incr_only;
use gputopo_core::priority::recalc::{charged, recalculates};
use gputopo_core::priority::reset::ResetPeriod;

use super::dbd::{self, ClockSave, DbdPass};
use super::ended::{self, LedgerJob};
use super::state::{Extension, STATE, Scratch, Snapshot, compute, load_extension};
use crate::slurm::prio::job::{JobBuf, JobsLocked, job_list_exists};
use crate::slurm::prio::{self, AssocLock, CtldLock, CtldLocks};

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
    let (complete, saves) = locked_pass(recover);
    if let Some(s) = saves.ledger {
        s.write();
    }
    if let Some(c) = saves.clock {
        c.write();
    }
    complete
}

/// What a pass writes to StateSaveLocation once the slurmctld locks are released.
#[derive(Debug, Default)]
struct Saves {
    /// The ledger (without slurmdbd).
    ledger: Option<Snapshot>,
    /// Multifactor's decay clock (with slurmdbd).
    clock: Option<ClockSave>,
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

/// The part of [`pass`] that runs under the job write lock; returns what to save.
///
/// One walk of `job_list` charges running and finished jobs (ledger, or associations and QOS
/// with slurmdbd), gathers the users with pending jobs and keeps the jobs to score; fair
/// share is then re-ranked and only the kept jobs are scored. Nothing is allocated per job:
/// the kept records go into a buffer reused from pass to pass, and one [`Scratch`] serves
/// every job. With slurmdbd, `priority_p_recover`'s pass does nothing (multifactor's neither).
fn locked_pass(recover: bool) -> (bool, Saves) {
    let with_dbd = STATE.with_dbd();
    if with_dbd && recover {
        return (true, Saves::default());
    }
    let Some(ctld) = CtldLock::acquire(CtldLocks::JobWriteNodePartRead) else {
        return (true, Saves::default());
    };
    if !job_list_exists() {
        // Jobs not loaded yet: charging nothing but moving last_decay on would lose the time
        // since the last save. Retry in a second.
        return (false, Saves::default());
    }
    // Before STATE.ext: picking up the TRES weights reloads the config, which locks it.
    let cfg = STATE.config();
    let mut ext_guard = STATE.ext.lock().unwrap_or_else(PoisonError::into_inner);
    if !with_dbd && ext_guard.is_none() {
        // job_list appeared after ensure_ledger looked: load the ledger first (retry soon).
        return (false, Saves::default());
    }
    let start = now();
    let mut ext = ext_guard.as_mut().filter(|_| !with_dbd);
    if let Some(ext) = ext.as_deref_mut().filter(|_| !recover) {
        if ext
            .ledger
            .apply_reset(&mut ext.reset, start, prio::utc_offset(start))
        {
            log::info!(
                "usage ledger cleared (PriorityUsageResetPeriod={:?})",
                ResetPeriod::from_slurm(prio::reset_period())
            );
        }
    }
    let dbd = if with_dbd {
        match DbdPass::begin(start, &cfg) {
            Some(d) => Some(d),
            // No association tree yet: nothing charged, retry in a second.
            None => return (false, Saves::default()),
        }
    } else {
        None
    };
    if !recover {
        // A pass after another of this loop (with slurmdbd: since the decay clock's last
        // pass) lets the site factor plugin update every job first, as multifactor does.
        let prev = PREV_PASS.swap(start, Ordering::Relaxed);
        if dbd
            .as_ref()
            .map_or(prev > 0 && start > prev, DbdPass::moved)
        {
            prio::site_factor::update();
        }
    }
    let tres_cnt = prio::tres_count();
    // Jobs that ended since the last pass (noted by select_p_job_fini): those not found
    // finished in job_list below were purged already and are charged from the note.
    let mut noted = if ext.is_some() && !recover {
        ended::take()
    } else {
        HashMap::new()
    };
    let mut jobs = JobsLocked::new(&ctld);
    let mut changed = false;
    let clock = BUF.with_borrow_mut(|buf| {
        let kept = jobs.walk(buf, |job| {
            let state = job.state();
            if let Some(ext) = ext.as_deref_mut() {
                if !recover && charged(&state) {
                    let j = LedgerJob::of(job, ext.gpu_index, tres_cnt);
                    if state.finished {
                        noted.remove(&j.key());
                    }
                    ext.charge(&j, start);
                } else if state.pending {
                    ext.pending.insert(job.user_id());
                }
            }
            let scored = dbd.as_ref().is_none_or(|d| d.job(job));
            scored && recalculates(cfg.flags, &state)
        });
        if let Some(ext) = ext.as_deref_mut() {
            if !recover {
                for j in noted.values() {
                    ext.charge(j, start);
                }
                // Only a pass that charged may move the clock (recover charges nothing).
                ext.ledger.decay_to(start);
            }
            ext.refresh_fairshare();
        }
        let ext = ext.as_deref();
        // With slurmdbd: Fair Tree over the usage just charged (classic ran before).
        let clock = dbd.map(DbdPass::finish);
        let _assoc = AssocLock::read_assoc_qos();
        let mut scratch = Scratch::read();
        kept.for_each(|mut job| {
            let new = compute(&mut job, &cfg, ext, start, &mut scratch);
            let kept = apply_incr_only(cfg.flags, job.priority(), new);
            if kept != job.priority() {
                job.set_priority(kept);
                changed = true;
            }
        });
        clock
    });
    if changed {
        prio::touch_last_job_update(now());
    }
    let ledger = ext_guard
        .as_ref()
        .filter(|_| !with_dbd && !recover)
        .and_then(Extension::snapshot);
    log::debug!("recalculated priorities in {} s", now() - start);
    (true, Saves { ledger, clock })
}

/// When this loop's previous charging pass ran (0: none yet; reset when the loop starts).
static PREV_PASS: AtomicI64 = AtomicI64::new(0);

thread_local! {
    /// The records a pass keeps to score, reused by every pass of this thread (the loop's, or
    /// `priority_p_recover`'s).
    static BUF: RefCell<JobBuf> = RefCell::new(JobBuf::default());
}

/// The loop body of the recalculation thread; returns when asked to stop.
pub fn run() {
    PREV_PASS.store(0, Ordering::Relaxed);
    if STATE.with_dbd() {
        dbd::loop_started();
    }
    loop {
        let t0 = std::time::Instant::now();
        let complete = pass(false);
        if complete {
            // Only passes that ran: a standby backup (22.05) retries every second.
            log::debug!("recalculation took {} us", t0.elapsed().as_micros());
        }
        let (period, _) = prio::periods();
        let period = if complete { period } else { 1 };
        let (lock, cv) = &STATE.stop;
        let stop = lock.lock().unwrap_or_else(PoisonError::into_inner);
        let (stop, _) = cv
            .wait_timeout_while(stop, Duration::from_secs(u64::from(period)), |s| !*s)
            .unwrap_or_else(PoisonError::into_inner);
        if *stop {
            log::debug!("recalculation thread stopped");
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
        Ok(h) => {
            log::debug!("recalculation thread started");
            *t = Some(h);
        }
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
