//! Telemetry: heat, power, clock throttling, PCIe link training and NVLink errors, and the
//! hysteresis that turns them into `degraded` verdicts without flapping.
//!
//! Why: a GPU that runs at 60 % clocks because it is hot or power-capped, or whose PCIe link
//! trained at x4, slows every multi-GPU job that lands on it (a job runs at its slowest GPU's
//! speed), yet none of this is a fault. So these signals make a GPU `degraded` (used last),
//! never `faulty`, and only once they are *sustained*: a signal must be seen in
//! `TelemetryRaiseChecks` health checks in a row to count, and then stays until
//! `TelemetryClearChecks` checks in a row did not see it. A check that could not read a signal
//! changes nothing (missing telemetry is not evidence either way; many boards do not support
//! every query).
//!
//! [`signals`] is the instantaneous rule, [`Track::step`] the hysteresis; the agent keeps one
//! [`Track`] per device and signal in its state file (`sticky::XidMemory`).

use super::Reading;

/// One sustained telemetry signal; each is a `degraded` reason (token in [`Signal::token`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Signal {
    /// Temperature within `ThermalMarginC` of the slowdown (or shutdown) threshold, or a
    /// thermal clock-event reason (HW thermal, SW thermal slowdown): `thermal`.
    Thermal,
    /// Power draw at `PowerCapPercent` of the enforced limit, or a power clock-event reason
    /// (SW power cap, HW power brake): `power_capped`.
    PowerCapped,
    /// The HW slowdown clock-event reason (the board's own protection, e.g. a failed fan or
    /// an external power-brake signal): `hw_slowdown`.
    HwSlowdown,
    /// The PCIe link trained below the card's maximum width (and, with `PcieGenDegraded=yes`,
    /// generation): `pcie_degraded`.
    PcieDegraded,
    /// NVLink error counters (replay, recovery, CRC) summed over the GPU's links at or above
    /// `NvlinkErrorsDegraded`: `nvlink_errors`.
    NvlinkErrors,
}

impl Signal {
    /// Every signal, in token order of the state file.
    pub const ALL: [Signal; 5] = [
        Signal::Thermal,
        Signal::PowerCapped,
        Signal::HwSlowdown,
        Signal::PcieDegraded,
        Signal::NvlinkErrors,
    ];

    /// The reason token (also the key in the agent's state file).
    pub const fn token(self) -> &'static str {
        match self {
            Signal::Thermal => "thermal",
            Signal::PowerCapped => "power_capped",
            Signal::HwSlowdown => "hw_slowdown",
            Signal::PcieDegraded => "pcie_degraded",
            Signal::NvlinkErrors => "nvlink_errors",
        }
    }

    /// The signal of a token, if it is one.
    pub fn from_token(s: &str) -> Option<Signal> {
        Signal::ALL.into_iter().find(|g| g.token() == s)
    }
}

/// NVML clock-event ("throttle") reason bits (`nvmlClocksEventReason*`).
pub mod reason_bits {
    /// SW power cap.
    pub const SW_POWER_CAP: u64 = 0x4;
    /// HW slowdown (any HW reason; the two below narrow it on newer drivers).
    pub const HW_SLOWDOWN: u64 = 0x8;
    /// SW thermal slowdown.
    pub const SW_THERMAL: u64 = 0x20;
    /// HW thermal slowdown.
    pub const HW_THERMAL: u64 = 0x40;
    /// HW power brake slowdown.
    pub const HW_POWER_BRAKE: u64 = 0x80;
}

/// One check's telemetry of one GPU (`NotSupported`/`Failed`/`Missing` are not evidence).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Telemetry {
    /// GPU temperature, °C.
    pub temp_c: Reading<u32>,
    /// Slowdown threshold, °C.
    pub slowdown_c: Reading<u32>,
    /// Shutdown threshold, °C.
    pub shutdown_c: Reading<u32>,
    /// Power draw, mW.
    pub power_mw: Reading<u32>,
    /// Enforced power limit, mW.
    pub power_limit_mw: Reading<u32>,
    /// Clock-event reasons (bits of [`reason_bits`]).
    pub clock_events: Reading<u64>,
    /// PCIe generation: (current, max).
    pub pcie_gen: Reading<(u32, u32)>,
    /// PCIe width: (current, max).
    pub pcie_width: Reading<(u32, u32)>,
    /// NVLink replay + recovery + CRC errors over the GPU's active links (`NotSupported` on
    /// GPUs without NVLink).
    pub nvlink_errors: Reading<u64>,
}

/// Telemetry thresholds (`gputopo.conf`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TelemetryPolicy {
    /// `thermal` within this many °C of the slowdown/shutdown threshold. Default 5.
    pub thermal_margin_c: u32,
    /// `power_capped` at this share of the enforced limit, in percent; 0 = only the clock-event
    /// reasons count. Default 100.
    pub power_cap_percent: u32,
    /// A PCIe generation below the maximum counts too. Default no: GPUs lower the generation
    /// themselves when idle to save power.
    pub pcie_gen_degraded: bool,
    /// `nvlink_errors` at this many errors; 0 = off. Default 100.
    pub nvlink_errors_degraded: u64,
    /// Checks in a row a signal must be seen to count. Default 2.
    pub raise_checks: u32,
    /// Checks in a row without it before it stops counting. Default 3.
    pub clear_checks: u32,
}

impl Default for TelemetryPolicy {
    fn default() -> Self {
        TelemetryPolicy {
            thermal_margin_c: 5,
            power_cap_percent: 100,
            pcie_gen_degraded: false,
            nvlink_errors_degraded: 100,
            raise_checks: 2,
            clear_checks: 3,
        }
    }
}

/// What this check says about each signal: `Some(true)` seen, `Some(false)` read and not
/// seen, `None` not readable (no evidence).
pub fn signals(t: &Telemetry, p: &TelemetryPolicy) -> [(Signal, Option<bool>); 5] {
    use reason_bits as b;
    let events = t.clock_events.value().copied();
    let bits = |mask: u64| events.map(|e| e & mask != 0);
    let or = |a: Option<bool>, b: Option<bool>| match (a, b) {
        (Some(true), _) | (_, Some(true)) => Some(true),
        (None, None) => None,
        _ => Some(false),
    };
    let hot = t.temp_c.value().and_then(|&temp| {
        let limit = [t.slowdown_c.value(), t.shutdown_c.value()]
            .into_iter()
            .flatten()
            .min()?;
        Some(temp.saturating_add(p.thermal_margin_c) >= *limit)
    });
    let power = match (t.power_mw.value(), t.power_limit_mw.value()) {
        (Some(&w), Some(&lim)) if p.power_cap_percent > 0 && lim > 0 => {
            Some(u64::from(w) * 100 >= u64::from(lim) * u64::from(p.power_cap_percent))
        }
        _ => None,
    };
    let below = |r: &Reading<(u32, u32)>| r.value().map(|&(cur, max)| cur > 0 && cur < max);
    let pcie = if p.pcie_gen_degraded {
        or(below(&t.pcie_width), below(&t.pcie_gen))
    } else {
        below(&t.pcie_width)
    };
    let nvlink = t
        .nvlink_errors
        .value()
        .filter(|_| p.nvlink_errors_degraded > 0)
        .map(|&n| n >= p.nvlink_errors_degraded);
    [
        (
            Signal::Thermal,
            or(hot, bits(b::SW_THERMAL | b::HW_THERMAL)),
        ),
        (
            Signal::PowerCapped,
            or(power, bits(b::SW_POWER_CAP | b::HW_POWER_BRAKE)),
        ),
        (Signal::HwSlowdown, bits(b::HW_SLOWDOWN)),
        (Signal::PcieDegraded, pcie),
        (Signal::NvlinkErrors, nvlink),
    ]
}

/// How many thermal margins below the slowdown threshold a GPU counts as warm.
pub const WARM_MARGINS: u32 = 3;

/// This check's soft heat signal: the GPU is within `WARM_MARGINS × ThermalMarginC` of its
/// slowdown (or shutdown) threshold (15 °C by default), or a thermal, power or HW-slowdown
/// signal is seen right now without being sustained yet. Unlike [`signals`] it makes no
/// verdict: the agent publishes it for `ok` GPUs (`Extra` key `w`) and the select plugin
/// prefers cooler GPUs among equally connected sets, so heat spreads instead of piling up on
/// the same cards. Unreadable telemetry is not warm.
pub fn warm(t: &Telemetry, p: &TelemetryPolicy) -> bool {
    let near_limit = t.temp_c.value().is_some_and(|&temp| {
        [t.slowdown_c.value(), t.shutdown_c.value()]
            .into_iter()
            .flatten()
            .min()
            .is_some_and(|&limit| {
                temp.saturating_add(p.thermal_margin_c.saturating_mul(WARM_MARGINS)) >= limit
            })
    });
    let throttling = signals(t, p).into_iter().any(|(g, seen)| {
        seen == Some(true)
            && matches!(
                g,
                Signal::Thermal | Signal::PowerCapped | Signal::HwSlowdown
            )
    });
    near_limit || throttling
}

/// One signal's hysteresis state on one device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Track {
    /// The signal counts now.
    #[serde(default)]
    pub on: bool,
    /// Checks in a row that disagreed with `on` (seen while off, clean while on).
    #[serde(default)]
    pub run: u32,
}

impl Track {
    /// The state after one check that saw the signal (`Some(true)`), read it clean
    /// (`Some(false)`) or could not read it (`None`: unchanged).
    pub fn step(self, seen: Option<bool>, p: &TelemetryPolicy) -> Track {
        let Some(seen) = seen else {
            return self;
        };
        if seen == self.on {
            return Track {
                on: self.on,
                run: 0,
            };
        }
        let run = self.run.saturating_add(1);
        let need = if self.on {
            p.clear_checks
        } else {
            p.raise_checks
        };
        if run >= need.max(1) {
            Track { on: seen, run: 0 }
        } else {
            Track { on: self.on, run }
        }
    }

    /// True when nothing is worth remembering (off, no run going).
    pub fn is_idle(self) -> bool {
        !self.on && self.run == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cool() -> Telemetry {
        Telemetry {
            temp_c: Reading::Value(60),
            slowdown_c: Reading::Value(90),
            shutdown_c: Reading::Value(95),
            power_mw: Reading::Value(200_000),
            power_limit_mw: Reading::Value(400_000),
            clock_events: Reading::Value(0x1), // GPU idle: not a throttle
            pcie_gen: Reading::Value((1, 4)),  // idle GPUs lower the generation
            pcie_width: Reading::Value((16, 16)),
            nvlink_errors: Reading::Value(3),
        }
    }

    fn seen(t: &Telemetry, p: &TelemetryPolicy) -> Vec<Signal> {
        signals(t, p)
            .into_iter()
            .filter(|(_, s)| *s == Some(true))
            .map(|(g, _)| g)
            .collect()
    }

    #[test]
    fn warm_is_near_the_slowdown_threshold_or_throttling_now() {
        let p = TelemetryPolicy::default();
        assert!(!warm(&cool(), &p), "60 C of 90 C, no throttle");
        let at = |temp| Telemetry {
            temp_c: Reading::Value(temp),
            ..cool()
        };
        assert!(!warm(&at(74), &p));
        assert!(warm(&at(75), &p), "15 C below the slowdown threshold");
        let capped = Telemetry {
            clock_events: Reading::Value(reason_bits::SW_POWER_CAP),
            ..cool()
        };
        assert!(warm(&capped, &p));
        let unread = Telemetry {
            temp_c: Reading::NotSupported,
            clock_events: Reading::NotSupported,
            ..cool()
        };
        assert!(!warm(&unread, &p), "missing telemetry is not evidence");
    }

    #[test]
    fn each_signal_from_its_evidence() {
        let p = TelemetryPolicy::default();
        assert!(seen(&cool(), &p).is_empty());
        let with = |f: fn(&mut Telemetry)| {
            let mut t = cool();
            f(&mut t);
            seen(&t, &p)
        };
        assert_eq!(with(|t| t.temp_c = Reading::Value(85)), [Signal::Thermal]);
        assert_eq!(
            with(|t| t.clock_events = Reading::Value(reason_bits::HW_THERMAL)),
            [Signal::Thermal]
        );
        assert_eq!(
            with(|t| t.power_mw = Reading::Value(400_000)),
            [Signal::PowerCapped]
        );
        assert_eq!(
            with(|t| t.clock_events = Reading::Value(reason_bits::SW_POWER_CAP)),
            [Signal::PowerCapped]
        );
        assert_eq!(
            with(|t| t.clock_events = Reading::Value(reason_bits::HW_SLOWDOWN)),
            [Signal::HwSlowdown]
        );
        assert_eq!(
            with(|t| t.pcie_width = Reading::Value((4, 16))),
            [Signal::PcieDegraded]
        );
        assert_eq!(
            with(|t| t.nvlink_errors = Reading::Value(100)),
            [Signal::NvlinkErrors]
        );
        let by_gen = TelemetryPolicy {
            pcie_gen_degraded: true,
            ..p
        };
        assert_eq!(seen(&cool(), &by_gen), [Signal::PcieDegraded]);
    }

    #[test]
    fn missing_telemetry_is_no_evidence() {
        let p = TelemetryPolicy::default();
        let none = signals(&Telemetry::default(), &p);
        assert!(none.iter().all(|(_, s)| s.is_none()), "{none:?}");
        // One source read clean is enough to say "not seen".
        let t = Telemetry {
            clock_events: Reading::Value(0),
            ..Telemetry::default()
        };
        assert_eq!(signals(&t, &p)[0], (Signal::Thermal, Some(false)));
        assert_eq!(signals(&t, &p)[3], (Signal::PcieDegraded, None));
    }

    #[test]
    fn hysteresis_raises_late_clears_later_and_ignores_gaps() {
        let p = TelemetryPolicy::default();
        let run = |seq: &[Option<bool>]| {
            let mut t = Track::default();
            seq.iter()
                .map(|&s| {
                    t = t.step(s, &p);
                    t.on
                })
                .collect::<Vec<_>>()
        };
        let (y, n) = (Some(true), Some(false));
        // One hot check is not sustained; two in a row are.
        assert_eq!(run(&[y, n, y, y]), [false, false, false, true]);
        // A gap neither raises nor breaks a run.
        assert_eq!(run(&[y, None, y]), [false, false, true]);
        // Clearing takes three clean checks in a row; a relapse restarts the count.
        assert_eq!(
            run(&[y, y, n, n, y, n, n, n]),
            [false, true, true, true, true, true, true, false]
        );
        assert!(Track::default().step(n, &p).is_idle());
    }

    #[test]
    fn tokens_round_trip() {
        for s in Signal::ALL {
            assert_eq!(Signal::from_token(s.token()), Some(s));
        }
        assert_eq!(Signal::from_token("xid_79"), None);
    }
}
