//! Association and QOS usage with slurmdbd, charged the way multifactor charges it: what
//! `GrpTRESMins`, `GrpWall`, `GrpTRESRunMins`, `UsageThreshold` and fair share read.
//!
//! Why here: in Slurm only the priority plugin charges usage (priority_multifactor.c
//! `_apply_new_usage`, called by the decay thread for running jobs and by
//! `priority_p_job_end` when a job ends, and `_init_grp_used_tres_run_secs` after a start or
//! reconfigure); `acct_policy.c` only reads it. A plugin that replaces multifactor must
//! therefore charge exactly the same amounts or every usage limit drifts. These are the rules,
//! as pure functions over plain numbers (22.05.8 and 24.11.5 agree on all of them; the one
//! release difference, 24.11's per-account and per-user `tres_run_secs` of a QOS, is a matter
//! of which records the plugin writes, not of the amounts). The plugin applies the amounts to
//! Slurm's records; its `long double` additions go through the C shim, so the sums are C's.

/// `TRES_ARRAY_ENERGY` (src/slurmctld/slurmctld.h): its allocation is known only after the
/// job, so multifactor never charges it (nor does `acct_policy_job_begin` add it).
pub const TRES_ENERGY: usize = 2;

/// `end_time_exp` once multifactor has charged a job's end (`(time_t) NO_VAL`): the job is
/// never charged again (`_apply_new_usage`, `acct_policy_job_fini`).
pub const END_CHARGED: i64 = 0xffff_fffe;

/// The fields of a job record `_apply_new_usage` reads.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ChargedJob {
    /// `start_time`.
    pub start: i64,
    /// `end_time` (0: none yet).
    pub end: i64,
    /// `end_time_exp` ([`END_CHARGED`] once charged at its end).
    pub end_exp: i64,
    /// `time_limit` in minutes.
    pub time_limit_mins: u32,
    /// `IS_JOB_FINISHED || IS_JOB_COMPLETING || IS_JOB_RESIZING` (a requeued job can be
    /// pending and completing: handled as finished).
    pub ending: bool,
    /// The job QOS's `usage_factor` when the job has a QOS and it is `>= 0`.
    pub usage_factor: Option<f64>,
}

/// One application of usage: what is added to `grp_used_wall` (seconds) and `usage_raw`
/// (billing-seconds), and the factor each allocated TRES count is multiplied by for
/// `usage_tres_raw` (`(long double) tres_factor * tres_alloc_cnt[i]`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Amount {
    /// Added to `grp_used_wall`.
    pub wall: f64,
    /// Added to `usage_raw` (as `(long double)`).
    pub billing: f64,
    /// Multiplied by each TRES count for `usage_tres_raw`.
    pub tres_factor: f64,
}

/// What `_apply_new_usage` charges for one job over one window.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Charge {
    /// The seconds of the window (`run_delta`, never negative).
    pub run_secs: f64,
    /// Decayed amounts: for associations, and for QOS without `NoDecay`.
    pub decayed: Amount,
    /// Amounts without decay: for QOS with `Flags=NoDecay`.
    pub undecayed: Amount,
    /// Seconds removed from `grp_used_tres_run_secs` per allocated TRES unit (the part of
    /// the reserved `tres × time limit` this window used up), usage factor applied.
    pub run_secs_released: u64,
}

impl Charge {
    /// The amount for a QOS: undecayed with `Flags=NoDecay`.
    pub fn for_qos(&self, no_decay: bool) -> &Amount {
        if no_decay {
            &self.undecayed
        } else {
            &self.decayed
        }
    }
}

/// `_apply_new_usage(job, start_period, end_period, adjust_for_end)`: the amounts to charge,
/// or `None` when the job's end was charged already (`end_time_exp == NO_VAL`). `billable` is
/// `calc_job_billable_tres(job, start_period', true)` with the window's start as clamped
/// here ([`charge_window_start`]); `decay_factor` multifactor's per-second factor.
///
/// C's conversions are kept: `run_delta` is a `double`, the end-of-time-limit part is
/// `uint64_t` arithmetic, the expected-end part an `int`, and the usage factor multiplies the
/// `uint64_t` release through a `double`.
pub fn job_charge(
    job: &ChargedJob,
    start_period: i64,
    end_period: i64,
    adjust_for_end: bool,
    billable: f64,
    decay_factor: f64,
) -> Option<Charge> {
    if job.end_exp == END_CHARGED {
        return None;
    }
    let start_period = charge_window_start(job, start_period);
    let mut end_period = end_period;
    if job.end != 0 && adjust_for_end && end_period > job.end {
        end_period = job.end;
    }
    let run_delta = ((end_period - start_period) as f64).max(0.0);
    let limit_ends = (job.start as u64).wrapping_add(u64::from(job.time_limit_mins) * 60);
    let mut released = if start_period as u64 >= limit_ends {
        0
    } else if job.ending {
        limit_ends - start_period as u64
    } else if end_period > job.end_exp {
        // `int end_exp = difftime(end_time_exp, start_period)`.
        let end_exp = (job.end_exp - start_period) as f64 as i32;
        u64::try_from(end_exp).unwrap_or(0)
    } else {
        run_delta as u64
    };
    let run_decay = run_delta * decay_factor.powf(run_delta);
    let mut decayed = Amount {
        wall: run_decay,
        billing: run_decay * billable,
        tres_factor: run_decay,
    };
    let mut undecayed = Amount {
        wall: run_delta,
        billing: run_delta * billable,
        tres_factor: run_delta,
    };
    if let Some(f) = job.usage_factor {
        for a in [&mut decayed, &mut undecayed] {
            a.billing *= f;
            a.wall *= f;
        }
        // run_decay and run_nodecay carry the factor into the TRES too.
        decayed.tres_factor = decayed.wall;
        undecayed.tres_factor = undecayed.wall;
        released = (released as f64 * f) as u64;
    }
    Some(Charge {
        run_secs: run_delta,
        decayed,
        undecayed,
        run_secs_released: released,
    })
}

/// The window's start `_apply_new_usage` uses (and passes to `calc_job_billable_tres`): the
/// later of `start_period` and the job's start.
pub fn charge_window_start(job: &ChargedJob, start_period: i64) -> i64 {
    start_period.max(job.start)
}

/// `tres_run_delta[i]`: the run-seconds a charge releases for TRES `i` with `alloc` units
/// allocated (0 for an unallocated or non-consumed TRES), `uint64_t` arithmetic.
pub fn tres_released(run_secs_released: u64, alloc: u64) -> u64 {
    if alloc == 0 || alloc == super::NO_CONSUME_VAL64 {
        0
    } else {
        run_secs_released.wrapping_mul(alloc)
    }
}

/// Whether `usage_tres_raw[i]` gets `(long double) tres_factor * alloc` for TRES `i`: an
/// allocated, consumed TRES other than energy.
pub fn tres_charged(i: usize, alloc: u64) -> bool {
    i != TRES_ENERGY && alloc != 0 && alloc != super::NO_CONSUME_VAL64
}

/// `grp_used_tres_run_secs[i] -= delta` the way multifactor does it: an underflow leaves 0
/// (and multifactor logs an error); returns the new value and whether it underflowed.
pub fn release_run_secs(have: u64, delta: u64) -> (u64, bool) {
    match have.checked_sub(delta) {
        Some(v) => (v, false),
        None => (0, true),
    }
}

/// `_init_grp_used_tres_run_secs`: after a start or a reconfigure Slurm re-adds every running
/// job's whole `tres × time limit` to the run-seconds (`acct_policy_job_begin`); the part
/// charged before `last_ran` (the previous decay pass) is taken out again. Returns the
/// seconds per allocated TRES unit to release (`tres_alloc_cnt[i] * usage_factor` as a
/// `double`, converted to `uint64_t`), or `None` for a job that is not concerned: its end was
/// charged, it is not running, or it started after `last_ran`.
pub fn restart_release_factor(job: &ChargedJob, running: bool, last_ran: i64) -> Option<f64> {
    if job.end_exp == END_CHARGED || !running || job.start > last_ran {
        return None;
    }
    Some(job.usage_factor.unwrap_or(1.0) * (last_ran - job.start) as f64)
}

/// `tres_alloc_cnt[i] * usage_factor` of [`restart_release_factor`] for one TRES (0 for a
/// non-consumed one: multifactor leaves that slot as it was, unset).
pub fn restart_tres_released(factor: f64, alloc: u64) -> u64 {
    if alloc == super::NO_CONSUME_VAL64 {
        0
    } else {
        (alloc as f64 * factor) as u64
    }
}

/// Whether the decay pass charges a job (`decay_apply_new_usage`): not finished or completing,
/// started, with an association, not powering up nodes, and not pending (any live job with
/// `CALCULATE_RUNNING`).
pub fn pass_charges(
    calculate_running: bool,
    pending: bool,
    finished_or_completing: bool,
    power_up: bool,
    start: i64,
    has_assoc: bool,
) -> bool {
    !finished_or_completing
        && (calculate_running || !pending)
        && !power_up
        && start != 0
        && has_assoc
}

/// What one slurmdbd-mode pass at `now` does, from the time of the previous one (`last_ran`,
/// 0 = none since the state file was lost or never written), as multifactor's decay thread.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PassPlan {
    /// The decay factor to apply to all stored usage (`pow(decay_factor, now - last_ran)`,
    /// at least `DBL_MIN`), when there is one.
    pub decay: Option<f64>,
    /// Whether running jobs are charged (from `last_ran`) and pending jobs scored.
    pub charge_and_score: bool,
    /// Whether the clock moved since the last pass (then the site factor plugin updates
    /// every job's factor, `site_factor_g_update`).
    pub moved: bool,
}

/// The decay thread's loop body: without Fair Tree, a first pass (or one whose clock did not
/// move) neither decays, charges nor scores (`goto get_usage`); with Fair Tree,
/// `fair_tree_decay` charges and scores on every pass, the first one charging running jobs
/// from their start.
pub fn pass_plan(fair_tree: bool, last_ran: i64, now: i64, decay_factor: f64) -> PassPlan {
    let moved = last_ran != 0 && now > last_ran;
    let decay = moved
        .then(|| {
            decay_factor
                .powf((now - last_ran) as f64)
                .max(f64::MIN_POSITIVE)
        })
        // `_apply_decay` skips a factor of exactly 1 (no half-life).
        .filter(|d| *d != 1.0);
    PassPlan {
        decay,
        charge_and_score: fair_tree || moved,
        moved,
    }
}

#[cfg(test)]
#[path = "usage_tests.rs"]
mod tests;
