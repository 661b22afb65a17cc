//! Telemetry: heat, power, clock throttling, PCIe link training and NVLink errors, and the
//! hysteresis that turns them into `degraded` verdicts without flapping.
//!
//! Why: a GPU that runs at 60 % clocks because it is hot or power-capped, or whose PCIe link
//! trained at x4, slows every multi-GPU job that lands on it (a job runs at its slowest GPU's
//! speed), yet none of this is a fault. So these signals make a GPU `degraded` (used last),
//! never `faulty`, and only once they are *sustained*: a signal must be seen in
//! `TelemetryRaiseChecks` health checks in a row to count, and then stays until
//! `TelemetryClearChecks` checks in a row did not see it. Power capping is what a GPU does
//! under full load (it runs at its enforced power limit, and the driver reports the SW power
//! cap), so `power_capped` needs `PowerCapRaiseChecks` checks in a row (default 10: ten
//! minutes at a 60 s `HealthCheckInterval`), longer than a burst of normal work at the limit
//! ([`TelemetryPolicy::for_signal`]); the HW power brake (an external signal, e.g. from the
//! power supply) is no load effect and counts as `hw_slowdown`. A check that could not read a signal
//! changes nothing (missing telemetry is not evidence either way; many boards do not support
//! every query).
//!
//! [`signals`] is the instantaneous rule, [`Track::step`] the hysteresis; the agent keeps one
//! [`Track`] per device and signal in its state file (`sticky::XidMemory`).

use super::Reading;
use super::violation::{Counter, Limit};

/// One sustained telemetry signal; each is a `degraded` reason (token in [`Signal::token`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Signal {
    /// Temperature within `ThermalMarginC` of the slowdown (or shutdown) threshold, or a
    /// thermal clock-event reason (HW thermal, SW thermal slowdown), or the thermal violation
    /// counter at `ViolationPercent` since the last check: `thermal`.
    Thermal,
    /// Power draw at `PowerCapPercent` of the enforced limit, or the SW power cap clock-event
    /// reason, or the power violation counter: `power_capped` (held to
    /// `PowerCapRaiseChecks`: normal under load).
    PowerCapped,
    /// The HW slowdown or HW power brake clock-event reason (the board's own protection, e.g.
    /// a failed fan, or an external power-brake signal), or the board-limit or reliability
    /// violation counter: `hw_slowdown`.
    HwSlowdown,
    /// The PCIe link is narrower (and, with `PcieGenDegraded=yes`, slower) than the widest
    /// (fastest) link this GPU has shown in its slot ([`Telemetry::pcie_best`]): `pcie_degraded`.
    /// Not "below the card's maximum": a card in a slot wired x8 reports x8 of x16 all its life
    /// (real A10G and Quadro P2000 reports), which is how the slot is built, not a fault.
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
    /// The widest and fastest link this GPU has shown in its slot, this check included: the
    /// agent's memory ([`super::sticky::XidMemory::step_pcie`]); `None` without one (then the
    /// link is no evidence).
    pub pcie_best: Option<Link>,
    /// NVLink replay + recovery + CRC errors over the GPU's active links (`NotSupported` on
    /// GPUs without NVLink).
    pub nvlink_errors: Reading<u64>,
    /// The violation counters the board supports, as read this check.
    pub violations: Vec<(Limit, Counter)>,
    /// Share of the time since the previous check each counter ran throttled, percent: the
    /// caller's memory of the previous counters ([`super::violation::shares`]); empty on a first
    /// check.
    pub throttled_pct: Vec<(Limit, u32)>,
}

/// A PCIe link: generation and width (lanes); 0 = never read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Link {
    /// PCIe generation (1 = 2.5 GT/s ... 5 = 32 GT/s).
    #[serde(rename = "g", default)]
    pub generation: u32,
    /// Lanes.
    #[serde(rename = "w", default)]
    pub width: u32,
}

impl Link {
    /// This check's link, where readable and trained (a current value of 0 is no reading).
    pub fn current(t: &Telemetry) -> Link {
        let cur = |r: &Reading<(u32, u32)>| r.value().map_or(0, |&(c, _)| c);
        Link {
            generation: cur(&t.pcie_gen),
            width: cur(&t.pcie_width),
        }
    }

    /// Each component the larger of the two.
    pub fn max(self, o: Link) -> Link {
        Link {
            generation: self.generation.max(o.generation),
            width: self.width.max(o.width),
        }
    }
}

/// Telemetry thresholds (`gputopo.conf`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TelemetryPolicy {
    /// `thermal` within this many °C of the slowdown/shutdown threshold. Default 5.
    pub thermal_margin_c: u32,
    /// `power_capped` at this share of the enforced limit, in percent; 0 = only the clock-event
    /// reasons count. Default 100.
    pub power_cap_percent: u32,
    /// A PCIe generation below the fastest this GPU has shown counts too. Default no: GPUs
    /// lower the generation themselves when idle to save power.
    pub pcie_gen_degraded: bool,
    /// `nvlink_errors` at this many errors; 0 = off. Default 100.
    pub nvlink_errors_degraded: u64,
    /// A violation counter throttled at least this share of the time since the previous
    /// check, in percent, is seen as its signal ([`violation`]); 0 = off. Default 50.
    pub violation_percent: u32,
    /// Checks in a row a GPU must be seen warm ([`warm`]) before it is published in `w`.
    /// Default 1: `w` is only a preference, so it may come at once.
    pub warm_raise_checks: u32,
    /// Checks in a row not warm before it leaves `w`. Default 3, so a GPU whose temperature
    /// hovers at the edge does not change `Extra` at every check.
    pub warm_clear_checks: u32,
    /// Checks in a row a signal must be seen to count. Default 2.
    pub raise_checks: u32,
    /// Checks in a row `power_capped` must be seen to count (a GPU under full load runs at
    /// its power limit). Default 10.
    pub power_cap_raise_checks: u32,
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
            violation_percent: 50,
            warm_raise_checks: 1,
            warm_clear_checks: 3,
            raise_checks: 2,
            power_cap_raise_checks: 10,
            clear_checks: 3,
        }
    }
}

impl TelemetryPolicy {
    /// The policy [`Track::step`] applies to `signal`: `PowerCapRaiseChecks` in place of
    /// `TelemetryRaiseChecks` for [`Signal::PowerCapped`].
    pub fn for_signal(&self, signal: Signal) -> TelemetryPolicy {
        match signal {
            Signal::PowerCapped => TelemetryPolicy {
                raise_checks: self.power_cap_raise_checks,
                ..*self
            },
            _ => *self,
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
    // Below what this GPU has shown before in this slot, not below its maximum (see
    // Signal::PcieDegraded); no memory, no evidence.
    let below = |r: &Reading<(u32, u32)>, best: fn(Link) -> u32| {
        let best = best(t.pcie_best?);
        r.value().map(|&(cur, _)| cur > 0 && cur < best)
    };
    let width = below(&t.pcie_width, |l| l.width);
    let pcie = if p.pcie_gen_degraded {
        or(width, below(&t.pcie_gen, |l| l.generation))
    } else {
        width
    };
    let nvlink = t
        .nvlink_errors
        .value()
        .filter(|_| p.nvlink_errors_degraded > 0)
        .map(|&n| n >= p.nvlink_errors_degraded);
    let violated = |limits: &[Limit]| {
        t.throttled_pct
            .iter()
            .filter(|(l, _)| p.violation_percent > 0 && limits.contains(l))
            .map(|&(_, pct)| Some(pct >= p.violation_percent))
            .fold(None, or)
    };
    [
        (
            Signal::Thermal,
            or(
                or(hot, bits(b::SW_THERMAL | b::HW_THERMAL)),
                violated(&[Limit::Thermal]),
            ),
        ),
        (
            Signal::PowerCapped,
            or(or(power, bits(b::SW_POWER_CAP)), violated(&[Limit::Power])),
        ),
        (
            Signal::HwSlowdown,
            or(
                bits(b::HW_SLOWDOWN | b::HW_POWER_BRAKE),
                violated(&[Limit::BoardLimit, Limit::Reliability]),
            ),
        ),
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
/// the same cards. Unreadable telemetry is not warm. The agent publishes it through its own
/// hysteresis ([`warm_seen`], [`warm_policy`]).
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

/// This check's [`warm`] as hysteresis evidence: `None` when neither the temperature nor the
/// clock-event reasons nor a violation share could be read (no evidence either way).
pub fn warm_seen(t: &Telemetry, p: &TelemetryPolicy) -> Option<bool> {
    let readable = t.temp_c.value().is_some()
        || t.clock_events.value().is_some()
        || !t.throttled_pct.is_empty();
    readable.then(|| warm(t, p))
}

/// The policy [`Track::step`] applies to the warm set: `WarmRaiseChecks`/`WarmClearChecks`
/// in place of the signals' counts.
pub fn warm_policy(p: &TelemetryPolicy) -> TelemetryPolicy {
    TelemetryPolicy {
        raise_checks: p.warm_raise_checks,
        clear_checks: p.warm_clear_checks,
        ..*p
    }
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
mod tests;
