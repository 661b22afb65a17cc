//! `PriorityUsageResetPeriod`: when accumulated usage is cleared, as multifactor does it.
//!
//! Multifactor's decay thread clears all usage once at start (and after each reconfigure) for
//! `NOW`, and for the calendar periods whenever the next boundary after the last reset has
//! passed (`_next_reset` in priority_multifactor.c): midnight for `DAILY`, Sunday 00:00 for
//! `WEEKLY`, the 1st at 00:00 for `MONTHLY`, January/April/July/October 1st for `QUARTERLY`,
//! January 1st for `YEARLY`, all in slurmctld's local time. Slurm computes in local time with
//! `localtime_r`/`mktime`; this module is pure, so the caller passes the local time's offset
//! from UTC (seconds east), and boundaries are exact except across a daylight-saving change
//! between the last reset and now (off by that hour, like any fixed offset).

const DAY: i64 = 86_400;

/// Slurm's `PRIORITY_RESET_*`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResetPeriod {
    /// Never clear (the default).
    None,
    /// Clear when the decay loop starts (slurmctld start and each reconfigure).
    Now,
    /// Every day at 00:00.
    Daily,
    /// Every Sunday at 00:00.
    Weekly,
    /// On the 1st of every month at 00:00.
    Monthly,
    /// On the 1st of January, April, July and October at 00:00.
    Quarterly,
    /// On January 1st at 00:00.
    Yearly,
}

impl ResetPeriod {
    /// From `slurm_conf.priority_reset_period`; an unknown value reads as `None` (never clear
    /// usage on a value this code does not understand).
    pub fn from_slurm(v: u16) -> ResetPeriod {
        match v {
            1 => ResetPeriod::Now,
            2 => ResetPeriod::Daily,
            3 => ResetPeriod::Weekly,
            4 => ResetPeriod::Monthly,
            5 => ResetPeriod::Quarterly,
            6 => ResetPeriod::Yearly,
            _ => ResetPeriod::None,
        }
    }
}

/// The reset schedule of one decay loop: multifactor's `reset_period` and `next_reset`, the
/// locals of `_decay_thread` that each start of the loop and each reconfigure make afresh.
/// Shared by the association usage (with slurmdbd) and gputopo's ledger (without).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResetSchedule {
    period: ResetPeriod,
    /// The cached next boundary (0: not computed yet).
    next: i64,
}

impl ResetSchedule {
    /// A loop's schedule for `period` (at the loop's start and after a reconfigure).
    pub fn new(period: ResetPeriod) -> ResetSchedule {
        ResetSchedule { period, next: 0 }
    }

    /// Whether usage is cleared at the pass at `now`, moving `last_reset` as multifactor
    /// moves `g_last_reset`: a `last_reset` of 0 counts from `now` (the loop's start time);
    /// `Now` clears once per schedule; a calendar period clears once its boundary after
    /// `last_reset` (computed once, then after each reset) has passed, and that boundary
    /// becomes the last reset.
    pub fn due(&mut self, last_reset: &mut i64, now: i64, utc_offset: i64) -> bool {
        if *last_reset == 0 {
            *last_reset = now;
        }
        match self.period {
            ResetPeriod::None => false,
            ResetPeriod::Now => {
                self.period = ResetPeriod::None;
                *last_reset = now;
                true
            }
            p => {
                let next = |from| next_reset(p, from, now, utc_offset).unwrap_or(i64::MAX);
                if self.next == 0 {
                    self.next = next(*last_reset);
                }
                if now < self.next {
                    return false;
                }
                *last_reset = self.next;
                self.next = next(*last_reset);
                true
            }
        }
    }
}

/// The next reset after `last_reset` (Unix seconds), as multifactor's `_next_reset`: the next
/// calendar boundary after the day of `last_reset`, and for `DAILY`/`WEEKLY` skipped forward
/// so that it is at most one period before `now`. `None` for `None` and `Now`.
pub fn next_reset(period: ResetPeriod, last_reset: i64, now: i64, utc_offset: i64) -> Option<i64> {
    let local_day = (last_reset + utc_offset).div_euclid(DAY);
    let midnight = local_day * DAY - utc_offset;
    let (y, m, _) = civil_from_days(local_day);
    let first_of = |y: i64, m: u32| days_from_civil(y, m, 1) * DAY - utc_offset;
    Some(match period {
        ResetPeriod::None | ResetPeriod::Now => return None,
        ResetPeriod::Daily => {
            let mut t = midnight + DAY;
            while t + DAY < now {
                t += DAY;
            }
            t
        }
        ResetPeriod::Weekly => {
            // 1970-01-01 was a Thursday: weekday 0 = Sunday.
            let wday = (local_day + 4).rem_euclid(7);
            let mut t = midnight + DAY * (7 - wday);
            while t + 7 * DAY < now {
                t += 7 * DAY;
            }
            t
        }
        ResetPeriod::Monthly => {
            if m < 12 {
                first_of(y, m + 1)
            } else {
                first_of(y + 1, 1)
            }
        }
        ResetPeriod::Quarterly => match m {
            1..=3 => first_of(y, 4),
            4..=6 => first_of(y, 7),
            7..=9 => first_of(y, 10),
            _ => first_of(y + 1, 1),
        },
        ResetPeriod::Yearly => first_of(y + 1, 1),
    })
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day number (inverse of [`days_from_civil`]).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-12-01 10:30:00 UTC, a Tuesday.
    const T: i64 = 1_796_121_000;

    fn utc(y: i64, m: u32, d: u32) -> i64 {
        days_from_civil(y, m, d) * DAY
    }

    #[test]
    fn calendar_round_trips() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(utc(2026, 12, 1) + 10 * 3600 + 1800, T);
        for z in [-800_000, -1, 0, 59, 60, 10_957, 20_423, 2_000_000] {
            let (y, m, d) = civil_from_days(z);
            assert_eq!(days_from_civil(y, m, d), z);
        }
        assert_eq!(civil_from_days(days_from_civil(2024, 2, 29)), (2024, 2, 29));
    }

    #[test]
    fn boundaries_follow_multifactor() {
        let p = |period| next_reset(period, T, T, 0);
        assert_eq!(p(ResetPeriod::None), None);
        assert_eq!(p(ResetPeriod::Now), None);
        assert_eq!(p(ResetPeriod::Daily), Some(utc(2026, 12, 2)));
        assert_eq!(
            p(ResetPeriod::Weekly),
            Some(utc(2026, 12, 6)),
            "next Sunday"
        );
        assert_eq!(p(ResetPeriod::Monthly), Some(utc(2027, 1, 1)));
        assert_eq!(p(ResetPeriod::Quarterly), Some(utc(2027, 1, 1)));
        assert_eq!(p(ResetPeriod::Yearly), Some(utc(2027, 1, 1)));
        let may = utc(2026, 5, 17);
        assert_eq!(
            next_reset(ResetPeriod::Monthly, may, may, 0),
            Some(utc(2026, 6, 1))
        );
        assert_eq!(
            next_reset(ResetPeriod::Quarterly, may, may, 0),
            Some(utc(2026, 7, 1))
        );
        // A Sunday's next weekly reset is the following Sunday.
        let sunday = utc(2026, 12, 6) + 5;
        assert_eq!(
            next_reset(ResetPeriod::Weekly, sunday, sunday, 0),
            Some(utc(2026, 12, 13))
        );
    }

    #[test]
    fn local_time_and_catching_up() {
        // UTC+2: local midnight is 22:00 UTC the day before.
        assert_eq!(
            next_reset(ResetPeriod::Daily, T, T, 7200),
            Some(utc(2026, 12, 2) - 7200)
        );
        // 10 days without a pass: DAILY skips to the boundary at most one day before now.
        let now = T + 10 * DAY;
        let next = next_reset(ResetPeriod::Daily, T, now, 0).unwrap();
        assert!(next <= now && next + DAY >= now, "{next} vs {now}");
        assert_eq!(ResetPeriod::from_slurm(4), ResetPeriod::Monthly);
        assert_eq!(ResetPeriod::from_slurm(99), ResetPeriod::None);
    }

    #[test]
    fn schedule_caches_the_boundary_as_the_decay_thread() {
        let mut last = 0;
        let mut s = ResetSchedule::new(ResetPeriod::Daily);
        assert!(!s.due(&mut last, T, 0), "counts from the loop's start");
        assert_eq!(last, T);
        assert!(!s.due(&mut last, T + 3600, 0));
        let midnight = utc(2026, 12, 2);
        assert!(s.due(&mut last, midnight, 0));
        assert_eq!(last, midnight);
        assert!(!s.due(&mut last, midnight + 60, 0), "once per boundary");
        assert!(s.due(&mut last, midnight + DAY, 0));
        // NOW: once per schedule (a reconfigure makes a new one).
        let mut s = ResetSchedule::new(ResetPeriod::Now);
        let mut last = 5;
        assert!(s.due(&mut last, T, 0));
        assert_eq!(last, T);
        assert!(!s.due(&mut last, T + 60, 0));
        let mut none = ResetSchedule::new(ResetPeriod::None);
        let mut last = 0;
        assert!(!none.due(&mut last, T, 0));
        assert_eq!(last, T, "g_last_reset starts at the loop's start");
    }
}
