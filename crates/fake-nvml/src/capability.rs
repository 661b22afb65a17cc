//! Capability exports: total memory and CUDA compute capability, from the fixture's `Gpu ...
//! MemMiB= Cc=` (`NOT_SUPPORTED` when the fixture leaves them out), for the agent's capability
//! labels.

use super::{INVALID_ARGUMENT, NOT_SUPPORTED};
use super::{device_of, guard, put};
use nvml_wrapper_sys::bindings::{nvmlDevice_t, nvmlMemory_v2_t, nvmlReturn_t};
use std::ffi::c_int;

/// `nvmlDeviceGetMemoryInfo_v2` (all memory free).
///
/// # Safety
/// Valid out pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo_v2(
    device: nvmlDevice_t,
    memory: *mut nvmlMemory_v2_t,
) -> nvmlReturn_t {
    guard(|| {
        let g = device_of(device, "nvmlDeviceGetMemoryInfo_v2")?;
        let total = g.mem_mib.ok_or(NOT_SUPPORTED)? << 20;
        if memory.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        // SAFETY: non-null, and the caller passes a struct to fill (its version is ignored).
        let version = unsafe { (*memory).version };
        let info = nvmlMemory_v2_t {
            version,
            total,
            reserved: 0,
            free: total,
            used: 0,
        };
        // SAFETY: forwarded caller guarantee.
        unsafe { put(memory, info) }
    })
}

/// `nvmlDeviceGetCudaComputeCapability`.
///
/// # Safety
/// Valid out pointers.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCudaComputeCapability(
    device: nvmlDevice_t,
    major: *mut c_int,
    minor: *mut c_int,
) -> nvmlReturn_t {
    guard(|| {
        let g = device_of(device, "nvmlDeviceGetCudaComputeCapability")?;
        let (a, b) = g.cc.ok_or(NOT_SUPPORTED)?;
        // SAFETY: forwarded caller guarantee.
        unsafe { put(major, a as c_int) }?;
        // SAFETY: forwarded caller guarantee.
        unsafe { put(minor, b as c_int) }
    })
}
