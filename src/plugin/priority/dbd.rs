//! With slurmdbd: what multifactor's decay thread and `priority_p_job_end` do to association
//! and QOS usage, which every accounting limit reads (22.05.8 and 24.11.5
//! priority_multifactor.c `_decay_thread`, `fair_tree_decay`, `priority_p_job_end`,
//! `priority_p_reconfig`, `_init_decay_vars`).
//!
//! The clock is multifactor's own: `g_last_ran`/`g_last_reset` in StateSaveLocation's
//! `priority_last_decay_ran`, read once per process when the role starts and written after
//! every pass, so restarts, 24.11's re-executing reconfigure and a switch between multifactor
//! and gputopo keep the period. Like multifactor, stopping charges nothing: the next start
//! charges running jobs from the last pass. The pass, split around the recalculation's one
//! walk of `job_list`: [`DbdPass::begin`] (usage reset, classic fair share from the usage as
//! it stands, decay), [`DbdPass::job`] for each job, [`DbdPass::finish`] (Fair Tree, clock).

use std::sync::{Mutex, MutexGuard, PoisonError};

use gputopo_core::priority::decay_clock::{self, DecayClock, Loaded};
use gputopo_core::priority::reset::{ResetPeriod, ResetSchedule};
use gputopo_core::priority::usage::{PassPlan, pass_charges, pass_plan};
use gputopo_core::priority::{Flags, PriorityConfig};

use crate::slurm::prio::job::{JobRecord, JobsLocked};
use crate::slurm::prio::{self, CtldLock, CtldLocks, assoc, usage};

/// Multifactor's `g_last_ran`/`g_last_reset` and its loop's reset schedule.
struct Clock {
    time: DecayClock,
    /// The file was read (once per process).
    loaded: bool,
    /// `PriorityUsageResetPeriod` of the running loop (a reconfigure makes a new one).
    schedule: Option<ResetSchedule>,
}

static CLOCK: Mutex<Clock> = Mutex::new(Clock {
    time: DecayClock {
        last_ran: 0,
        last_reset: 0,
    },
    loaded: false,
    schedule: None,
});

fn clock() -> MutexGuard<'static, Clock> {
    CLOCK.lock().unwrap_or_else(PoisonError::into_inner)
}

fn schedule() -> ResetSchedule {
    ResetSchedule::new(ResetPeriod::from_slurm(prio::reset_period()))
}

/// Multifactor's per-second decay factor for the configured `PriorityDecayHalfLife`.
fn decay_factor() -> f64 {
    let (_, hl) = prio::periods();
    gputopo_core::priority::recalc::decay_factor(hl)
}

/// Reads the decay clock once per process, at the role's start (with slurmdbd): jobs that end
/// while slurmctld loads its state are charged from it (`priority_p_job_end`), as with
/// multifactor, which reads it in `init`. No slurmctld lock is held there.
pub fn load_clock() {
    let mut c = clock();
    if c.loaded {
        return;
    }
    c.loaded = true;
    let Some(dir) = prio::state_save_location() else {
        return;
    };
    match decay_clock::load(&dir) {
        Ok(Loaded::Missing) => log::info!(
            "No last decay ({}) to recover",
            dir.join(decay_clock::DECAY_CLOCK_FILE).display()
        ),
        Ok(Loaded::Clock(t)) => {
            log::debug!(
                "last decay pass at {}, last usage reset at {}",
                t.last_ran,
                t.last_reset
            );
            c.time = t;
        }
        Ok(Loaded::Incomplete(t, why)) => {
            log::error!(
                "incomplete priority last decay file in {} ({why}); last decay pass taken as {}",
                dir.display(),
                t.last_ran
            );
            c.time = t;
        }
        Err((path, e)) => log::error!(
            "cannot read {}: {e}; running jobs are charged from the next pass on",
            path.display()
        ),
    }
}

/// The start of the recalculation loop (multifactor's `_decay_thread` before its loop): a
/// fresh reset schedule, and the run-seconds Slurm re-added for every running job at start
/// taken back down to what the passes before `last_ran` released.
pub fn loop_started() {
    load_clock();
    let last_ran = {
        let mut c = clock();
        c.schedule = Some(schedule());
        c.time.last_ran
    };
    init_run_secs(last_ran);
}

/// `priority_p_reconfig`: the next pass rereads `PriorityUsageResetPeriod` (a new schedule:
/// `NOW` clears again); with `assoc_clear` (22.05's in-place reconfigure, which rebuilt the
/// run-seconds from the time limits) the run-seconds are taken back down to the last pass.
/// Called without slurmctld locks when `assoc_clear` is set.
pub fn reconfigured(assoc_clear: bool) {
    let last_ran = {
        let mut c = clock();
        c.schedule = Some(schedule());
        c.time.last_ran
    };
    if assoc_clear {
        init_run_secs(last_ran);
    }
}

/// `_init_grp_used_tres_run_secs(last_ran)`, under the job read lock.
fn init_run_secs(last_ran: i64) {
    if !prio::enforce_limits() {
        return;
    }
    let Some(ctld) = CtldLock::acquire(CtldLocks::JobNodePartRead) else {
        return;
    };
    usage::init_grp_used_tres_run_secs(&JobsLocked::new(&ctld), last_ran, prio::tres_count());
}

/// `priority_p_job_end` (Slurm holds the job write lock): charges the job from the last pass
/// up to its end, releases the rest of its reserved run-seconds and marks it charged.
pub fn job_end(job: &mut JobRecord<'_>, now: i64) {
    let last_ran = clock().time.last_ran;
    usage::apply_new_usage(
        job,
        last_ran,
        now,
        true,
        decay_factor(),
        prio::tres_count(),
        prio::enforce_limits(),
    );
}

/// One slurmdbd-mode pass (see the module docs).
#[derive(Debug)]
pub struct DbdPass {
    plan: PassPlan,
    last_ran: i64,
    now: i64,
    decay: f64,
    tres_cnt: usize,
    enforce: bool,
    fair_tree: bool,
    calc_running: bool,
}

impl DbdPass {
    /// Before the walk: `PriorityUsageResetPeriod`, classic fair share (from the usage as it
    /// stands, so the factor trails by one period as with multifactor), decay. `None` while
    /// assoc_mgr has no association tree yet (the pass is retried; nothing is charged).
    pub fn begin(now: i64, cfg: &PriorityConfig) -> Option<DbdPass> {
        if !assoc::tree_exists() {
            return None;
        }
        let tres_cnt = prio::tres_count();
        let (last_ran, reset) = {
            let mut c = clock();
            let mut last_reset = c.time.last_reset;
            let due = c.schedule.get_or_insert_with(schedule).due(
                &mut last_reset,
                now,
                prio::utc_offset(now),
            );
            c.time.last_reset = last_reset;
            (c.time.last_ran, due)
        };
        if reset {
            usage::reset_usage(tres_cnt);
            log::info!(
                "association and QOS usage reset (PriorityUsageResetPeriod={:?})",
                ResetPeriod::from_slurm(prio::reset_period())
            );
        }
        let fair_tree = cfg.flags.has(Flags::FAIR_TREE);
        if !fair_tree {
            assoc::classic_pass(cfg.flags.has(Flags::DEPTH_OBLIVIOUS), cfg.damp_factor);
        }
        let decay = decay_factor();
        let plan = pass_plan(fair_tree, last_ran, now, decay);
        if let Some(d) = plan.decay {
            usage::apply_decay(d, tres_cnt);
        }
        Some(DbdPass {
            plan,
            last_ran,
            now,
            decay,
            tres_cnt,
            enforce: prio::enforce_limits(),
            fair_tree,
            calc_running: cfg.flags.has(Flags::CALCULATE_RUNNING),
        })
    }

    /// Whether the clock moved since the last pass (multifactor's decay branch, where the
    /// site factor plugin updates every job's factor).
    pub fn moved(&self) -> bool {
        self.plan.moved
    }

    /// One job of the walk: charges it where the pass charges it (running jobs, from the last
    /// pass to now); returns whether the pass may score it (a first pass without Fair Tree
    /// scores nothing; without Fair Tree a job whose end was charged is not scored either).
    pub fn job(&self, job: &mut JobRecord<'_>) -> bool {
        if !self.plan.charge_and_score {
            return false;
        }
        let (start, _, _) = job.run_times();
        let charges = pass_charges(
            self.calc_running,
            job.is_pending(),
            job.is_finished_or_completing(),
            job.is_power_up(),
            start,
            job.has_assoc(),
        );
        if !charges {
            return true;
        }
        let charged = usage::apply_new_usage(
            job,
            self.last_ran,
            self.now,
            false,
            self.decay,
            self.tres_cnt,
            self.enforce,
        );
        charged || self.fair_tree
    }

    /// After the walk: Fair Tree over the usage just charged, and the clock moved to this
    /// pass. Returns the clock to write once the slurmctld locks are released.
    pub fn finish(self) -> ClockSave {
        if self.fair_tree {
            assoc::fair_tree_pass();
        }
        let mut c = clock();
        c.time.last_ran = self.now;
        ClockSave(c.time)
    }
}

/// The decay clock as a pass left it, to write without slurmctld locks.
#[derive(Debug)]
pub struct ClockSave(DecayClock);

impl ClockSave {
    /// Writes `priority_last_decay_ran` (crash-safe, 0600, SlurmUser's); errors are logged.
    pub fn write(self) {
        let Some(dir) = prio::state_save_location() else {
            return;
        };
        if let Err((path, e)) = decay_clock::write(&dir, &self.0, Some(prio::slurm_user_id())) {
            log::error!("Can't save decay state {}: {e}", path.display());
        }
    }
}
