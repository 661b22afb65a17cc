//! The recalculation loop: every PriorityCalcPeriod, recompute every pending job (all jobs with
//! CALCULATE_RUNNING), as multifactor's decay thread does. Without slurmdbd it first charges
//! running jobs to the ledger, decays it and re-ranks users (gputopo's extension).
//!
//! This is the only place gputopo takes slurmctld locks (job write, node read, partition read:
//! multifactor's `job_write_lock`), plus `priority_p_recover` and 22.05's factor list.

use std::cell::RefCell;
use std::sync::PoisonError;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use gputopo_core::priority::Flags;
use gputopo_core::priority::multifactor::apply_incr_only;
use gputopo_core::priority::recalc::{self, charged, recalculates};
use gputopo_core::priority::reset::ResetPeriod;

use super::state::{Extension, STATE, Scratch, Snapshot, compute, load_extension};
use crate::slurm::prio::job::{JobBuf, JobRecord, JobsLocked, job_list_exists};
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
///
/// One walk of `job_list` charges running and finished jobs (ledger, or associations with
/// slurmdbd), gathers the users with pending jobs and keeps the jobs to score; fair share is
/// then re-ranked and only the kept jobs are scored. Nothing is allocated per job: the kept
/// records go into a buffer reused from pass to pass, and one [`Scratch`] serves every job.
fn locked_pass(recover: bool) -> (bool, Option<Snapshot>) {
    let Some(ctld) = CtldLock::acquire(CtldLocks::JobWriteNodePartRead) else {
        return (true, None);
    };
    if !job_list_exists() {
        // Jobs not loaded yet: charging nothing but moving last_decay on would lose the time
        // since the last save. Retry in a second.
        return (false, None);
    }
    let with_dbd = STATE.with_dbd();
    // Before STATE.ext: picking up the TRES weights reloads the config, which locks it.
    let cfg = STATE.config();
    let mut ext_guard = STATE.ext.lock().unwrap_or_else(PoisonError::into_inner);
    if !with_dbd && ext_guard.is_none() {
        // job_list appeared after ensure_ledger looked: load the ledger first (retry soon).
        return (false, None);
    }
    let start = now();
    let mut ext = ext_guard.as_mut().filter(|_| !with_dbd);
    if let Some(ext) = ext.as_deref_mut().filter(|_| !recover) {
        let period = ResetPeriod::from_slurm(prio::reset_period());
        let first = std::mem::take(&mut ext.loop_start);
        if ext
            .ledger
            .apply_reset(period, start, prio::utc_offset(start), first)
        {
            log::info!("usage ledger cleared (PriorityUsageResetPeriod={period:?})");
        }
    }
    let mut dbd = (with_dbd && !recover).then(|| DbdPass::begin(start, &cfg));
    let tres_cnt = prio::tres_count();
    let mut jobs = JobsLocked::new(&ctld);
    let mut changed = false;
    let complete = BUF.with_borrow_mut(|buf| {
        let kept = jobs.walk(buf, |job| {
            let state = job.state();
            if let Some(ext) = ext.as_deref_mut() {
                if !recover && charged(&state) {
                    ext.charge(job, start, tres_cnt);
                } else if state.pending {
                    ext.pending.insert(job.user_id());
                }
            }
            if let Some(d) = dbd.as_mut() {
                d.charge(job);
            }
            recalculates(cfg.flags, &state)
        });
        if let Some(ext) = ext.as_deref_mut() {
            if !recover {
                // Only a pass that charged may move the clock (recover charges nothing).
                ext.ledger.decay_to(start);
            }
            ext.refresh_fairshare();
        }
        let ext = ext.as_deref();
        // With slurmdbd: Fair Tree over the usage just charged (classic ran before).
        let complete = dbd.take().is_none_or(DbdPass::finish);
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
        complete
    });
    if changed {
        prio::touch_last_job_update(now());
    }
    let snapshot = ext_guard
        .as_ref()
        .filter(|_| !with_dbd && !recover)
        .and_then(Extension::snapshot);
    log::debug!("recalculated priorities in {} s", now() - start);
    (complete, snapshot)
}

thread_local! {
    /// The records a pass keeps to score, reused by every pass of this thread (the loop's, or
    /// `priority_p_recover`'s).
    static BUF: RefCell<JobBuf> = RefCell::new(JobBuf::default());
}

/// When the association usage was last decayed and charged (slurmdbd mode).
static LAST_DBD_PASS: AtomicI64 = AtomicI64::new(0);

/// Multifactor's per-second decay factor for the configured `PriorityDecayHalfLife`.
pub fn decay_factor() -> f64 {
    let (_, hl) = prio::periods();
    recalc::decay_factor(hl)
}

/// With slurmdbd, what multifactor's decay thread does to associations, split around the
/// pass's one walk of `job_list`: [`Self::begin`] (classic fair share from the usage as it
/// stands, then decay), [`Self::charge`] for each job, [`Self::finish`] (Fair Tree).
struct DbdPass {
    /// The previous pass (0: none yet, nothing is charged).
    last: i64,
    now: i64,
    decay: f64,
    fair_tree: bool,
    classic_done: bool,
}

impl DbdPass {
    fn begin(now: i64, cfg: &gputopo_core::priority::PriorityConfig) -> DbdPass {
        // Classic fair share: multifactor's decay thread sets the effective usage from the
        // usage as it stands *before* this period's decay and charges, and scores jobs with
        // that, so the factor trails the usage by one PriorityCalcPeriod; gputopo does the
        // same (sprio parity).
        let fair_tree = cfg.flags.has(Flags::FAIR_TREE);
        let classic_done = fair_tree
            || assoc::classic_pass(cfg.flags.has(Flags::DEPTH_OBLIVIOUS), cfg.damp_factor);
        let mut last = LAST_DBD_PASS.swap(now, Ordering::Relaxed);
        let decay = decay_factor();
        if last > 0 && now > last {
            assoc::decay_usage(decay.powf((now - last) as f64).max(f64::MIN_POSITIVE));
        } else {
            last = 0;
        }
        DbdPass {
            last,
            now,
            decay,
            fair_tree,
            classic_done,
        }
    }

    /// Charges a running job's time since the last pass to its association chain.
    fn charge(&self, job: &JobRecord<'_>) {
        if self.last == 0 || !job.is_running() {
            return;
        }
        let (start, _, _) = job.run_times();
        if let Some(secs) = recalc::association_charge_secs(start, self.last, self.now) {
            job.charge_association(secs, self.decay);
        }
    }

    /// Fair Tree over the charged usage; false when the association tree is not there yet.
    fn finish(self) -> bool {
        if self.fair_tree {
            assoc::fair_tree_pass()
        } else {
            self.classic_done
        }
    }
}

/// The end of a job (slurmdbd mode): charge the time since the last pass.
pub fn charge_job_end(job: &JobRecord<'_>, now: i64) {
    let last = LAST_DBD_PASS.load(Ordering::Relaxed);
    let (start, end, _) = job.run_times();
    if let Some(secs) = recalc::job_end_charge_secs(start, end, last, now) {
        job.charge_association(secs, decay_factor());
    }
}

/// The loop body of the recalculation thread; returns when asked to stop.
pub fn run() {
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
