//! The other calls Slurm's `gpu/nvml` plugin makes: the NVML version, supported and
//! application clocks (printed at every detection, set for `--gpu-freq`) and running
//! processes (job accounting). Every GPU answers like an A100: one memory clock (1215 MHz),
//! graphics clocks 1410 down to 210 MHz in 15 MHz steps, no processes. Calls on a lost GPU
//! answer GPU_IS_LOST like every other.

#[allow(clippy::wildcard_imports)]
use super::*;

const MEM_MHZ: c_uint = 1215;
const GFX_MAX_MHZ: c_uint = 1410;
const GFX_MIN_MHZ: c_uint = 210;
const GFX_STEP_MHZ: c_uint = 15;
/// `NVML_CLOCK_GRAPHICS`, `NVML_CLOCK_SM`, `NVML_CLOCK_MEM`.
const CLOCK_GRAPHICS: u32 = 0;
const CLOCK_SM: u32 = 1;
const CLOCK_MEM: u32 = 2;

/// Copies `values` into the caller's array of `*count` entries, NVML style: INSUFFICIENT_SIZE
/// with the needed count when it is too small.
///
/// # Safety
/// `count` is a valid pointer; `out` is null or valid for `*count` entries.
unsafe fn put_list(count: *mut c_uint, out: *mut c_uint, values: &[c_uint]) -> Rc {
    if count.is_null() {
        return Err(INVALID_ARGUMENT);
    }
    // SAFETY: non-null and valid by the caller's guarantee.
    let room = unsafe { count.read() } as usize;
    // SAFETY: as above.
    unsafe { count.write(values.len() as c_uint) };
    if room < values.len() || out.is_null() {
        return Err(INSUFFICIENT_SIZE);
    }
    for (k, v) in values.iter().enumerate() {
        // SAFETY: k < values.len() <= room, the caller's array length.
        unsafe { out.add(k).write(*v) };
    }
    Ok(())
}

/// `nvmlSystemGetNVMLVersion`: `12.<driver>`.
///
/// # Safety
/// `version` is valid for `length` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetNVMLVersion(
    version: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    // SAFETY: forwarded caller guarantee.
    guard(|| unsafe { put_str(version, length, &format!("12.{}", node()?.driver)) })
}

/// `nvmlDeviceGetSupportedMemoryClocks`.
///
/// # Safety
/// `count` valid; `clocks` valid for `*count` entries.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetSupportedMemoryClocks(
    device: nvmlDevice_t,
    count: *mut c_uint,
    clocks: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        device_of(device, "nvmlDeviceGetSupportedMemoryClocks")?;
        // SAFETY: forwarded caller guarantee.
        unsafe { put_list(count, clocks, &[MEM_MHZ]) }
    })
}

/// `nvmlDeviceGetSupportedGraphicsClocks`: NOT_FOUND for a memory clock the GPU lacks.
///
/// # Safety
/// `count` valid; `clocks` valid for `*count` entries.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetSupportedGraphicsClocks(
    device: nvmlDevice_t,
    mem_mhz: c_uint,
    count: *mut c_uint,
    clocks: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        device_of(device, "nvmlDeviceGetSupportedGraphicsClocks")?;
        if mem_mhz != MEM_MHZ {
            return Err(NOT_FOUND);
        }
        let all: Vec<c_uint> = (0..)
            .map(|k| GFX_MAX_MHZ - k * GFX_STEP_MHZ)
            .take_while(|&f| f >= GFX_MIN_MHZ)
            .collect();
        // SAFETY: forwarded caller guarantee.
        unsafe { put_list(count, clocks, &all) }
    })
}

/// `nvmlDeviceGetApplicationsClock`: the default application clocks.
///
/// # Safety
/// Valid out pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetApplicationsClock(
    device: nvmlDevice_t,
    kind: u32,
    mhz: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        device_of(device, "nvmlDeviceGetApplicationsClock")?;
        let v = match kind {
            CLOCK_GRAPHICS | CLOCK_SM => GFX_MAX_MHZ,
            CLOCK_MEM => MEM_MHZ,
            _ => return Err(NOT_SUPPORTED),
        };
        // SAFETY: forwarded caller guarantee.
        unsafe { put(mhz, v) }
    })
}

/// `nvmlDeviceSetApplicationsClocks`: accepts a supported pair (nothing is kept).
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceSetApplicationsClocks(
    device: nvmlDevice_t,
    mem_mhz: c_uint,
    gfx_mhz: c_uint,
) -> nvmlReturn_t {
    guard(|| {
        device_of(device, "nvmlDeviceSetApplicationsClocks")?;
        let gfx_ok = (GFX_MIN_MHZ..=GFX_MAX_MHZ).contains(&gfx_mhz)
            && (GFX_MAX_MHZ - gfx_mhz) % GFX_STEP_MHZ == 0;
        if mem_mhz != MEM_MHZ || !gfx_ok {
            return Err(INVALID_ARGUMENT);
        }
        Ok(())
    })
}

/// `nvmlDeviceResetApplicationsClocks`.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceResetApplicationsClocks(device: nvmlDevice_t) -> nvmlReturn_t {
    guard(|| device_of(device, "nvmlDeviceResetApplicationsClocks").map(|_| ()))
}

/// `nvmlDeviceGetComputeRunningProcesses_v3`: none.
///
/// # Safety
/// `count` is a valid pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetComputeRunningProcesses_v3(
    device: nvmlDevice_t,
    count: *mut c_uint,
    _infos: *mut std::ffi::c_void,
) -> nvmlReturn_t {
    guard(|| {
        device_of(device, "nvmlDeviceGetComputeRunningProcesses_v3")?;
        // SAFETY: forwarded caller guarantee.
        unsafe { put(count, 0) }
    })
}

/// `nvmlDeviceGetGraphicsRunningProcesses_v3`: none.
///
/// # Safety
/// `count` is a valid pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGraphicsRunningProcesses_v3(
    device: nvmlDevice_t,
    count: *mut c_uint,
    _infos: *mut std::ffi::c_void,
) -> nvmlReturn_t {
    guard(|| {
        device_of(device, "nvmlDeviceGetGraphicsRunningProcesses_v3")?;
        // SAFETY: forwarded caller guarantee.
        unsafe { put(count, 0) }
    })
}

/// `nvmlDeviceGetProcessUtilization`: no samples (NOT_FOUND, as NVML answers an idle GPU).
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetProcessUtilization(
    device: nvmlDevice_t,
    _samples: *mut std::ffi::c_void,
    _count: *mut c_uint,
    _since: c_ulonglong,
) -> nvmlReturn_t {
    guard(|| {
        device_of(device, "nvmlDeviceGetProcessUtilization")?;
        Err(NOT_FOUND)
    })
}
