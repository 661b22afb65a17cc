//! Violation counters (`nvmlDeviceGetViolationStatus`): how long a GPU ran below its requested
//! clocks because of a power, thermal, board or reliability limit.
//!
//! Why: the clock-event reasons ([`super::telemetry::reason_bits`]) say only what holds the
//! clocks at the instant of the check, so a GPU that throttles in bursts between two checks
//! looks clean. The counters are cumulative nanoseconds of throttling against NVML's own
//! microsecond clock, so the difference between two checks is the share of the time between
//! them the GPU spent throttled, which is what sustained throttling means. The agent keeps each
//! device's previous counters in its state file ([`super::sticky::XidMemory`]) and hands the
//! shares to [`super::telemetry::signals`]: a share at or above `ViolationPercent` is seen as
//! the matching signal (power → `power_capped`, thermal → `thermal`, board limit and
//! reliability → `hw_slowdown`), held by the same hysteresis as the other evidence. Sync boost
//! (clocks matched to a group's slowest GPU) and low utilisation (clocks lowered because the
//! GPU idles) are reported but never make a GPU degraded: neither is a fault of the GPU.

/// One violation counter (`NVML_PERF_POLICY_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Limit {
    /// Power capping.
    Power,
    /// Thermal capping.
    Thermal,
    /// Sync boost: the clocks of a sync-boost group follow its slowest member.
    SyncBoost,
    /// The board's own limit.
    BoardLimit,
    /// Low utilisation: clocks lowered because the GPU has little work.
    LowUtilization,
    /// The board's reliability limit.
    Reliability,
}

impl Limit {
    /// Every counter, in report order.
    pub const ALL: [Limit; 6] = [
        Limit::Power,
        Limit::Thermal,
        Limit::SyncBoost,
        Limit::BoardLimit,
        Limit::LowUtilization,
        Limit::Reliability,
    ];

    /// Its name in reports and in the state file.
    pub const fn token(self) -> &'static str {
        match self {
            Limit::Power => "power",
            Limit::Thermal => "thermal",
            Limit::SyncBoost => "sync_boost",
            Limit::BoardLimit => "board_limit",
            Limit::LowUtilization => "low_utilization",
            Limit::Reliability => "reliability",
        }
    }

    /// The counter of a token, if it is one.
    pub fn from_token(s: &str) -> Option<Limit> {
        Limit::ALL.into_iter().find(|l| l.token() == s)
    }

    /// True for the limits that slow a busy GPU by a fault of its own (power, heat, board,
    /// reliability): only these become evidence.
    pub const fn slows(self) -> bool {
        !matches!(self, Limit::SyncBoost | Limit::LowUtilization)
    }
}

/// One reading of a counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Counter {
    /// NVML's reference clock, µs.
    pub at_us: u64,
    /// Time throttled since the driver loaded, ns.
    pub ns: u64,
}

/// The share of the time between `prev` and `now` the GPU was throttled, in percent (capped at
/// 100). `None` when the clock did not advance or a value went back (a driver reload reset
/// the counters): no evidence either way.
pub fn share(prev: Counter, now: Counter) -> Option<u32> {
    let dt_ns = now.at_us.checked_sub(prev.at_us)?.checked_mul(1000)?;
    let dv = now.ns.checked_sub(prev.ns)?;
    if dt_ns == 0 {
        return None;
    }
    let pct = u128::from(dv) * 100 / u128::from(dt_ns);
    Some(pct.min(100) as u32)
}

/// The shares since the previous check of every counter read both times.
pub fn shares(prev: &[(Limit, Counter)], now: &[(Limit, Counter)]) -> Vec<(Limit, u32)> {
    now.iter()
        .filter_map(|&(l, c)| {
            let (_, p) = prev.iter().find(|(pl, _)| *pl == l)?;
            Some((l, share(*p, c)?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn c(at_us: u64, ns: u64) -> Counter {
        Counter { at_us, ns }
    }

    #[test]
    fn share_of_the_time_between_two_checks() {
        // 60 s apart, 36 s of it throttled.
        assert_eq!(
            share(c(1_000_000, 5), c(61_000_000, 36_000_000_005)),
            Some(60)
        );
        assert_eq!(share(c(0, 0), c(1_000, 0)), Some(0));
        assert_eq!(share(c(0, 0), c(1, 5_000)), Some(100), "capped");
        assert_eq!(share(c(5, 0), c(5, 10)), None, "no time passed");
        assert_eq!(share(c(5, 100), c(9, 10)), None, "reset by a driver reload");
        assert_eq!(share(c(9, 0), c(5, 10)), None);
    }

    #[test]
    fn shares_only_of_counters_read_twice() {
        let prev = [(Limit::Power, c(0, 0)), (Limit::Thermal, c(0, 0))];
        let now = [(Limit::Power, c(10, 5_000)), (Limit::SyncBoost, c(10, 0))];
        assert_eq!(shares(&prev, &now), vec![(Limit::Power, 50)]);
        assert!(
            shares(&[], &now).is_empty(),
            "the first check has nothing to compare"
        );
    }

    #[test]
    fn tokens_round_trip_and_only_real_limits_slow() {
        for l in Limit::ALL {
            assert_eq!(Limit::from_token(l.token()), Some(l));
        }
        let slows: Vec<Limit> = Limit::ALL.into_iter().filter(|l| l.slows()).collect();
        assert_eq!(
            slows,
            [
                Limit::Power,
                Limit::Thermal,
                Limit::BoardLimit,
                Limit::Reliability
            ]
        );
    }
}
