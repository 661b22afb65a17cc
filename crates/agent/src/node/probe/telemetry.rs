//! One GPU's telemetry through nvml-wrapper (`gputopo_core::health::telemetry` judges it):
//! temperature and thresholds, power and the enforced limit, clock-event reasons, PCIe link
//! generation and width, the NVLink error counters of its active links, and the violation
//! counters (`gputopo_core::health::violation`). nvml-wrapper has
//! every call, so nothing here is raw. A query the board does not support is `NotSupported`,
//! which is no evidence.

use super::reading;
use gputopo_core::health::Reading;
use gputopo_core::health::telemetry::Telemetry;
use gputopo_core::health::violation::{Counter, Limit};
use nvml_wrapper::Device;
use nvml_wrapper::enum_wrappers::device::{
    PerformancePolicy, TemperatureSensor, TemperatureThreshold,
};
use nvml_wrapper::enum_wrappers::nv_link::ErrorCounter;

/// Reads `dev`'s telemetry; sets `lost` when a call says the GPU is lost.
pub(super) fn read(dev: &Device<'_>, lost: &mut bool) -> Telemetry {
    let gen_cur = reading(dev.current_pcie_link_gen(), lost);
    let gen_max = reading(dev.max_pcie_link_gen(), lost);
    let width_cur = reading(dev.current_pcie_link_width(), lost);
    let width_max = reading(dev.max_pcie_link_width(), lost);
    Telemetry {
        temp_c: reading(dev.temperature(TemperatureSensor::Gpu), lost),
        slowdown_c: reading(
            dev.temperature_threshold(TemperatureThreshold::Slowdown),
            lost,
        ),
        shutdown_c: reading(
            dev.temperature_threshold(TemperatureThreshold::Shutdown),
            lost,
        ),
        power_mw: reading(dev.power_usage(), lost),
        power_limit_mw: reading(dev.enforced_power_limit(), lost),
        clock_events: reading(dev.current_throttle_reasons().map(|r| r.bits()), lost),
        pcie_gen: gen_cur.zip(gen_max),
        pcie_width: width_cur.zip(width_max),
        pcie_best: None,
        nvlink_errors: nvlink_errors(dev, lost),
        violations: violations(dev, lost),
        throttled_pct: Vec::new(),
    }
}

/// The violation counters the board supports (`nvmlDeviceGetViolationStatus`, one call per
/// limit); one that is not supported or fails is left out, as no evidence.
fn violations(dev: &Device<'_>, lost: &mut bool) -> Vec<(Limit, Counter)> {
    Limit::ALL
        .into_iter()
        .filter_map(|l| {
            let v = reading(dev.violation_status(policy(l)), lost);
            let v = v.value()?;
            Some((
                l,
                Counter {
                    at_us: v.reference_time,
                    ns: v.violation_time,
                },
            ))
        })
        .collect()
}

/// nvml-wrapper's name of a limit.
fn policy(l: Limit) -> PerformancePolicy {
    match l {
        Limit::Power => PerformancePolicy::Power,
        Limit::Thermal => PerformancePolicy::Thermal,
        Limit::SyncBoost => PerformancePolicy::SyncBoost,
        Limit::BoardLimit => PerformancePolicy::BoardLimit,
        Limit::LowUtilization => PerformancePolicy::LowUtilization,
        Limit::Reliability => PerformancePolicy::Reliability,
    }
}

/// Replay + recovery + CRC-flit errors summed over the active links; `NotSupported` on a GPU
/// without NVLink (or without an active one).
fn nvlink_errors(dev: &Device<'_>, lost: &mut bool) -> Reading<u64> {
    let ports = match super::active_links(dev) {
        Ok(p) => p,
        Err(e) => return reading(Err(e), lost),
    };
    let mut total: Option<u64> = None;
    for l in ports {
        let link = dev.link_wrapper_for(l);
        for c in [
            ErrorCounter::DlReplay,
            ErrorCounter::DlRecovery,
            ErrorCounter::DlCrcFlit,
        ] {
            match reading(link.error_counter(c), lost) {
                Reading::Value(n) => total = Some(total.unwrap_or(0).saturating_add(n)),
                Reading::NotSupported => {}
                other => return other,
            }
        }
    }
    total.map_or(Reading::NotSupported, Reading::Value)
}
