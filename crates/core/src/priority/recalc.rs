//! The rules of one recalculation pass: which jobs are scored, charged and shown, from when a
//! job ages, over which interval a job is charged, how long its priority array is.
//!
//! Why here: the plugin's pass (`src/plugin/priority/recalc.rs`) walks slurmctld's job list
//! once under the job write lock and asks these functions about each record's plain fields;
//! keeping the rules out of the unsafe layer lets them be tested on plain data.

use super::config::{Flags, Release};

/// The state bits of a job record the pass looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct JobState {
    /// `IS_JOB_PENDING`.
    pub pending: bool,
    /// `IS_JOB_RUNNING`.
    pub running: bool,
    /// `IS_JOB_FINISHED` (completed, cancelled, failed, timed out, ...).
    pub finished: bool,
    /// `IS_JOB_FINISHED || IS_JOB_COMPLETING || IS_JOB_RESIZING`.
    pub ending: bool,
    /// `IS_JOB_POWER_UP_NODE`.
    pub power_up: bool,
    /// `IS_JOB_REVOKED`.
    pub revoked: bool,
    /// `job_ptr->priority` (0 = held).
    pub priority: u32,
}

/// Whether the pass recomputes this job's priority (multifactor's
/// `_decay_apply_new_usage_and_weighted_factors`): not held, not powering up nodes, pending
/// (or any live job with `CALCULATE_RUNNING`), not ending.
pub fn recalculates(flags: Flags, s: &JobState) -> bool {
    s.priority != 0
        && !s.power_up
        && (s.pending || flags.has(Flags::CALCULATE_RUNNING))
        && !s.ending
}

/// Whether the ledger pass charges the job (gputopo's extension): running jobs, and finished
/// ones too, because Slurm calls `priority_p_job_end` only with enforced limits and
/// associations.
pub fn charged(s: &JobState) -> bool {
    s.running || s.finished
}

/// The time a job ages from (gputopo's age without slurmdbd): `submit_time` with
/// `ACCRUE_ALWAYS`, else `begin_time` (its eligible time).
pub fn eligible_time(flags: Flags, submit: i64, begin: i64) -> i64 {
    if flags.has(Flags::ACCRUE_ALWAYS) {
        submit
    } else {
        begin
    }
}

/// Whether `sprio` lists the job (multifactor's `_filter_job` before its user/id/partition
/// filters): pending (or `CALCULATE_RUNNING`), not revoked, eligible already, not held, and
/// with details.
pub fn listed(flags: Flags, s: &JobState, eligible: i64, now: i64, has_details: bool) -> bool {
    (s.pending || flags.has(Flags::CALCULATE_RUNNING))
        && !s.revoked
        && eligible != 0
        && eligible <= now
        && s.priority != 0
        && has_details
}

/// The job's run times as the ledger charges them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct RunTimes {
    /// `start_time` (0 = never started).
    pub start: i64,
    /// `end_time` (0 or less = none yet; for a running job, the expected end).
    pub end: i64,
    /// Whether the job is running now (its end time is then only a limit).
    pub running: bool,
}

/// Seconds to charge to the ledger for `[max(start, last_decay), end or until]`: a running job
/// up to `until` (the pass), a finished one up to its own end, so a job that started and ended
/// between two passes is charged in full and no interval twice. `None` when there is nothing.
pub fn ledger_charge_secs(t: RunTimes, last_decay: i64, until: i64) -> Option<f64> {
    if t.start == 0 {
        return None;
    }
    let until = if t.running || t.end <= 0 {
        until
    } else {
        t.end.min(until)
    };
    let from = t.start.max(last_decay);
    (until > from).then(|| (until - from) as f64)
}

/// Seconds a running job is charged to its association chain by the slurmdbd-mode pass at
/// `now`, the previous pass having run at `last` (multifactor's `_apply_new_usage` window).
pub fn association_charge_secs(start: i64, last: i64, now: i64) -> Option<f64> {
    (start != 0).then(|| (now - start.max(last)) as f64)
}

/// Seconds charged at `priority_p_job_end` (slurmdbd mode) for the time since the last pass
/// at `last` (0 = no pass yet: nothing, the first pass starts the clock).
pub fn job_end_charge_secs(start: i64, end: i64, last: i64, now: i64) -> Option<f64> {
    if last == 0 || start == 0 {
        return None;
    }
    let until = if end > 0 { end.min(now) } else { now };
    Some((until - start.max(last)) as f64)
}

/// Multifactor's per-second decay factor `1 - 0.693 / PriorityDecayHalfLife` (1 without decay).
pub fn decay_factor(half_life_secs: u32) -> f64 {
    if half_life_secs > 0 {
        1.0 - 0.693 / f64::from(half_life_secs)
    } else {
        1.0
    }
}

/// How many entries the job's priority array has: 22.05 `list_count(part_ptr_list) + 1` for a
/// multi-partition job; 24.11 partitions (at least 1) × QOS (at least 1) when either is a list.
/// `None` for a plain job (no array).
pub fn array_len(release: Release, partitions: usize, qos: usize) -> Option<usize> {
    match release {
        Release::V22_05 => (partitions > 0).then_some(partitions + 1),
        Release::V24_11 => (partitions > 0 || qos > 0).then(|| partitions.max(1) * qos.max(1)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending() -> JobState {
        JobState {
            pending: true,
            priority: 5,
            ..Default::default()
        }
    }

    #[test]
    fn recalculates_pending_unless_held_powering_or_ending() {
        let f = Flags(0);
        assert!(recalculates(f, &pending()));
        assert!(!recalculates(
            f,
            &JobState {
                priority: 0,
                ..pending()
            }
        ));
        assert!(!recalculates(
            f,
            &JobState {
                power_up: true,
                ..pending()
            }
        ));
        let running = JobState {
            running: true,
            priority: 5,
            ..Default::default()
        };
        assert!(!recalculates(f, &running));
        assert!(recalculates(Flags(Flags::CALCULATE_RUNNING), &running));
        let ending = JobState {
            ending: true,
            ..running
        };
        assert!(!recalculates(Flags(Flags::CALCULATE_RUNNING), &ending));
    }

    #[test]
    fn charges_running_and_finished_only() {
        assert!(!charged(&pending()));
        assert!(charged(&JobState {
            running: true,
            ..Default::default()
        }));
        assert!(charged(&JobState {
            finished: true,
            ..Default::default()
        }));
    }

    #[test]
    fn eligible_time_and_sprio_listing() {
        assert_eq!(eligible_time(Flags(0), 10, 20), 20);
        assert_eq!(eligible_time(Flags(Flags::ACCRUE_ALWAYS), 10, 20), 10);
        let f = Flags(0);
        assert!(listed(f, &pending(), 20, 30, true));
        assert!(!listed(f, &pending(), 31, 30, true), "not eligible yet");
        assert!(!listed(f, &pending(), 0, 30, true));
        assert!(!listed(f, &pending(), 20, 30, false));
        assert!(!listed(
            f,
            &JobState {
                revoked: true,
                ..pending()
            },
            20,
            30,
            true
        ));
        assert!(!listed(
            f,
            &JobState {
                priority: 0,
                ..pending()
            },
            20,
            30,
            true
        ));
    }

    #[test]
    fn ledger_window_from_own_times() {
        let run = |start, end, running| RunTimes {
            start,
            end,
            running,
        };
        // Started and ended between two passes: charged in full.
        assert_eq!(
            ledger_charge_secs(run(105, 110, false), 100, 160),
            Some(5.0)
        );
        // Running since before the last pass: from the last pass to now.
        assert_eq!(
            ledger_charge_secs(run(50, 9999, true), 100, 160),
            Some(60.0)
        );
        // Finished before the last pass: already charged.
        assert_eq!(ledger_charge_secs(run(50, 90, false), 100, 160), None);
        // Never started, or no end yet.
        assert_eq!(ledger_charge_secs(run(0, 0, false), 100, 160), None);
        assert_eq!(ledger_charge_secs(run(120, 0, false), 100, 160), Some(40.0));
    }

    #[test]
    fn association_windows() {
        assert_eq!(association_charge_secs(0, 100, 160), None);
        assert_eq!(association_charge_secs(130, 100, 160), Some(30.0));
        assert_eq!(association_charge_secs(10, 100, 160), Some(60.0));
        assert_eq!(job_end_charge_secs(10, 150, 0, 160), None);
        assert_eq!(job_end_charge_secs(10, 150, 100, 160), Some(50.0));
        assert_eq!(job_end_charge_secs(10, 0, 100, 160), Some(60.0));
    }

    #[test]
    fn decay_and_array_lengths() {
        assert_eq!(decay_factor(0), 1.0);
        assert_eq!(decay_factor(693), 0.999);
        assert_eq!(array_len(Release::V22_05, 0, 3), None);
        assert_eq!(array_len(Release::V22_05, 2, 0), Some(3));
        assert_eq!(array_len(Release::V24_11, 0, 0), None);
        assert_eq!(array_len(Release::V24_11, 3, 0), Some(3));
        assert_eq!(array_len(Release::V24_11, 0, 2), Some(2));
        assert_eq!(array_len(Release::V24_11, 3, 2), Some(6));
    }
}
