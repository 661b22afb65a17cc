//! Telemetry exports: temperature and its thresholds, power and its enforced limit, clock-event
//! reasons, PCIe link generation and width, NVLink error counters, violation counters. Each answers from the GPU's
//! `Telemetry` fixture line (or its `NvLink ... Errors=`), and `NOT_SUPPORTED` where the fixture
//! says nothing, as an old board would.

use super::fixture::FakeTelemetry;
use super::{INVALID_ARGUMENT, NOT_SUPPORTED, Rc, device_of, guard, put};
use nvml_wrapper_sys::bindings::{
    nvmlDevice_t, nvmlNvLinkErrorCounter_t, nvmlPerfPolicyType_t, nvmlReturn_t,
    nvmlTemperatureSensors_t, nvmlTemperatureThresholds_t, nvmlViolationTime_t,
};
use std::ffi::{c_uint, c_ulonglong};

/// `NVML_TEMPERATURE_GPU`.
const SENSOR_GPU: nvmlTemperatureSensors_t = 0;
/// `NVML_TEMPERATURE_THRESHOLD_SHUTDOWN`, `..._SLOWDOWN`.
const THRESHOLD_SHUTDOWN: nvmlTemperatureThresholds_t = 0;
const THRESHOLD_SLOWDOWN: nvmlTemperatureThresholds_t = 1;
/// `NVML_NVLINK_ERROR_DL_REPLAY`: the fixture's `Errors=` count; the other counters read 0.
const COUNTER_REPLAY: nvmlNvLinkErrorCounter_t = 0;

/// Answers one telemetry field of `device` through `out`.
///
/// # Safety
/// `out` is null or valid for a write of `T`.
unsafe fn answer<T>(
    device: nvmlDevice_t,
    call: &str,
    out: *mut T,
    field: impl FnOnce(&FakeTelemetry) -> Option<T>,
) -> Rc {
    let g = device_of(device, call)?;
    let v = g.telemetry.as_ref().and_then(field).ok_or(NOT_SUPPORTED)?;
    // SAFETY: forwarded caller guarantee.
    unsafe { put(out, v) }
}

/// `nvmlDeviceGetTemperature` (the GPU sensor only).
///
/// # Safety
/// Valid out pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetTemperature(
    device: nvmlDevice_t,
    sensor: nvmlTemperatureSensors_t,
    temp: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        if sensor != SENSOR_GPU {
            return Err(INVALID_ARGUMENT);
        }
        // SAFETY: forwarded caller guarantee.
        unsafe { answer(device, "nvmlDeviceGetTemperature", temp, |t| t.temp_c) }
    })
}

/// `nvmlDeviceGetTemperatureThreshold` (shutdown and slowdown).
///
/// # Safety
/// Valid out pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetTemperatureThreshold(
    device: nvmlDevice_t,
    kind: nvmlTemperatureThresholds_t,
    temp: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let field = match kind {
            THRESHOLD_SHUTDOWN => |t: &FakeTelemetry| t.shutdown_c,
            THRESHOLD_SLOWDOWN => |t: &FakeTelemetry| t.slowdown_c,
            _ => return Err(NOT_SUPPORTED),
        };
        // SAFETY: forwarded caller guarantee.
        unsafe { answer(device, "nvmlDeviceGetTemperatureThreshold", temp, field) }
    })
}

/// `nvmlDeviceGetPowerUsage` (mW).
///
/// # Safety
/// Valid out pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPowerUsage(
    device: nvmlDevice_t,
    power: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        // SAFETY: forwarded caller guarantee.
        unsafe {
            answer(device, "nvmlDeviceGetPowerUsage", power, |t| {
                t.power_w.map(|w| w.saturating_mul(1000))
            })
        }
    })
}

/// `nvmlDeviceGetEnforcedPowerLimit` (mW).
///
/// # Safety
/// Valid out pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetEnforcedPowerLimit(
    device: nvmlDevice_t,
    limit: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        // SAFETY: forwarded caller guarantee.
        unsafe {
            answer(device, "nvmlDeviceGetEnforcedPowerLimit", limit, |t| {
                t.power_limit_w.map(|w| w.saturating_mul(1000))
            })
        }
    })
}

/// `nvmlDeviceGetCurrentClocksThrottleReasons` (the clock-event reasons mask).
///
/// # Safety
/// Valid out pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCurrentClocksThrottleReasons(
    device: nvmlDevice_t,
    reasons: *mut c_ulonglong,
) -> nvmlReturn_t {
    guard(|| {
        let call = "nvmlDeviceGetCurrentClocksThrottleReasons";
        // SAFETY: forwarded caller guarantee.
        unsafe { answer(device, call, reasons, |t| t.clock_events) }
    })
}

/// `nvmlDeviceGetViolationStatus`: the fixture's share of the time throttled, applied to the
/// time since the epoch (NVML's reference clock in µs), so two checks any time apart see
/// that share; `NOT_SUPPORTED` for a limit the fixture does not list.
///
/// # Safety
/// Valid out pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetViolationStatus(
    device: nvmlDevice_t,
    policy: nvmlPerfPolicyType_t,
    out: *mut nvmlViolationTime_t,
) -> nvmlReturn_t {
    guard(|| {
        let now_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        let call = "nvmlDeviceGetViolationStatus";
        // SAFETY: forwarded caller guarantee.
        unsafe {
            answer(device, call, out, |t| {
                let &(_, pct) = t.violations.iter().find(|v| v.0 == policy)?;
                Some(nvmlViolationTime_t {
                    referenceTime: now_us,
                    violationTime: now_us.saturating_mul(10).saturating_mul(u64::from(pct)),
                })
            })
        }
    })
}

/// Defines a PCIe link export answering one half of a (current, max) pair.
macro_rules! pcie_export {
    ($name:ident, $field:ident, $pick:expr) => {
        /// PCIe link query (see the module doc).
        ///
        /// # Safety
        /// Valid out pointer.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(device: nvmlDevice_t, out: *mut c_uint) -> nvmlReturn_t {
            guard(|| {
                // SAFETY: forwarded caller guarantee.
                unsafe { answer(device, stringify!($name), out, |t| t.$field.map($pick)) }
            })
        }
    };
}

pcie_export!(nvmlDeviceGetCurrPcieLinkGeneration, pcie_gen, |p| p.0);
pcie_export!(nvmlDeviceGetMaxPcieLinkGeneration, pcie_gen, |p| p.1);
pcie_export!(nvmlDeviceGetCurrPcieLinkWidth, pcie_width, |p| p.0);
pcie_export!(nvmlDeviceGetMaxPcieLinkWidth, pcie_width, |p| p.1);

/// `nvmlDeviceGetNvLinkErrorCounter`: the port's `Errors=` as replay errors, 0 for the other
/// counters; `NOT_SUPPORTED` for a port the fixture does not list.
///
/// # Safety
/// Valid out pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkErrorCounter(
    device: nvmlDevice_t,
    link: c_uint,
    counter: nvmlNvLinkErrorCounter_t,
    value: *mut c_ulonglong,
) -> nvmlReturn_t {
    guard(|| {
        let g = device_of(device, "nvmlDeviceGetNvLinkErrorCounter")?;
        let port = g
            .links
            .get(link as usize)
            .ok_or(INVALID_ARGUMENT)?
            .as_ref()
            .ok_or(NOT_SUPPORTED)?;
        let v = if counter == COUNTER_REPLAY {
            port.errors
        } else {
            0
        };
        // SAFETY: forwarded caller guarantee.
        unsafe { put(value, v) }
    })
}
