//! MIG exports, with the semantics NVML documents: a GPU without a MIG mode in the fixture is
//! not MIG-capable (`nvmlDeviceGetMigMode` answers NOT_SUPPORTED, the maximum MIG device count
//! is 0); MIG device handles exist only while MIG is enabled, numbered from 0 without gaps
//! (NOT_FOUND past the last one); a MIG device answers its GPU/compute instance ids, name,
//! UUID and attributes, a full GPU answers NOT_SUPPORTED for the instance ids. A lost parent
//! makes its MIG devices lost too. Slurm's `gpu/nvml` autodetection calls all of these.
//!
//! MIG handles are `MIG_BASE + 256 * gpu + k` (GPU handles are small: index + 1).

#[allow(clippy::wildcard_imports)]
use super::*;
use fixture::FakeMig;
use nvml_wrapper_sys::bindings::nvmlDeviceAttributes_t;

const MIG_BASE: usize = 1 << 16;
/// A100/H100: at most seven MIG devices per GPU.
const MAX_MIG: usize = 7;

fn mig_handle(gpu: usize, k: usize) -> nvmlDevice_t {
    std::ptr::without_provenance_mut::<nvmlDevice_st>(MIG_BASE + 256 * gpu + k)
}

/// (GPU index, MIG index) of a MIG handle; `None` for any other handle.
pub(crate) fn mig_index(h: nvmlDevice_t) -> Option<(usize, usize)> {
    let v = (h as usize).checked_sub(MIG_BASE)?;
    Some((v / 256, v % 256))
}

/// The parent GPU and MIG device behind a MIG handle (`None`: not a MIG handle).
pub(crate) fn mig_at(
    h: nvmlDevice_t,
    call: &str,
) -> Option<Result<(&'static FakeGpu, &'static FakeMig), nvmlReturn_t>> {
    let (gi, k) = mig_index(h)?;
    Some((|| {
        let (_, g) = gpu_at(handle(gi), call)?;
        if !g.mig.is_some_and(|m| m.current) {
            return Err(INVALID_ARGUMENT);
        }
        Ok((g, g.migs.get(k).ok_or(INVALID_ARGUMENT)?))
    })())
}

/// NVML's name of a MIG device: the parent's name, `MIG` and the profile.
pub(crate) fn mig_name(g: &FakeGpu, m: &FakeMig) -> String {
    format!("{} MIG {}", g.name, m.profile)
}

/// `nvmlDeviceGetMigMode`.
///
/// # Safety
/// Valid out pointers.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMigMode(
    device: nvmlDevice_t,
    current: *mut c_uint,
    pending: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let mode = device_of(device, "nvmlDeviceGetMigMode")?
            .mig
            .ok_or(NOT_SUPPORTED)?;
        // SAFETY: forwarded caller guarantee.
        unsafe { put(current, c_uint::from(mode.current)) }?;
        // SAFETY: forwarded caller guarantee.
        unsafe { put(pending, c_uint::from(mode.pending)) }
    })
}

/// `nvmlDeviceGetMaxMigDeviceCount`: 7 on a MIG-capable GPU with MIG enabled, else 0.
///
/// # Safety
/// Valid out pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMaxMigDeviceCount(
    device: nvmlDevice_t,
    count: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let g = device_of(device, "nvmlDeviceGetMaxMigDeviceCount")?;
        let n = if g.mig.is_some_and(|m| m.current) {
            MAX_MIG
        } else {
            0
        };
        // SAFETY: forwarded caller guarantee.
        unsafe { put(count, n as c_uint) }
    })
}

/// `nvmlDeviceGetMigDeviceHandleByIndex`.
///
/// # Safety
/// Valid out pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMigDeviceHandleByIndex(
    device: nvmlDevice_t,
    index: c_uint,
    mig: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    guard(|| {
        let (i, g) = gpu_at(device, "nvmlDeviceGetMigDeviceHandleByIndex")?;
        if !g.mig.is_some_and(|m| m.current) {
            return Err(NOT_SUPPORTED);
        }
        let k = index as usize;
        if k >= MAX_MIG {
            return Err(INVALID_ARGUMENT);
        }
        if k >= g.migs.len() {
            return Err(NOT_FOUND);
        }
        // SAFETY: forwarded caller guarantee.
        unsafe { put(mig, mig_handle(i, k)) }
    })
}

/// `nvmlDeviceGetDeviceHandleFromMigDeviceHandle`.
///
/// # Safety
/// Valid out pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetDeviceHandleFromMigDeviceHandle(
    mig: nvmlDevice_t,
    device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    guard(|| {
        let call = "nvmlDeviceGetDeviceHandleFromMigDeviceHandle";
        mig_at(mig, call).ok_or(NOT_SUPPORTED)??;
        let (i, _) = mig_index(mig).ok_or(NOT_SUPPORTED)?;
        // SAFETY: forwarded caller guarantee.
        unsafe { put(device, handle(i)) }
    })
}

/// `nvmlDeviceIsMigDeviceHandle`.
///
/// # Safety
/// Valid out pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceIsMigDeviceHandle(
    device: nvmlDevice_t,
    is_mig: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let yes = match mig_at(device, "nvmlDeviceIsMigDeviceHandle") {
            Some(r) => r.map(|_| true)?,
            None => device_of(device, "nvmlDeviceIsMigDeviceHandle").map(|_| false)?,
        };
        // SAFETY: forwarded caller guarantee.
        unsafe { put(is_mig, c_uint::from(yes)) }
    })
}

/// `nvmlDeviceGetGpuInstanceId`: NOT_SUPPORTED for a full GPU.
///
/// # Safety
/// Valid out pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceId(
    device: nvmlDevice_t,
    id: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| instance_id(device, "nvmlDeviceGetGpuInstanceId", id, |m| m.gi))
}

/// `nvmlDeviceGetComputeInstanceId`: NOT_SUPPORTED for a full GPU.
///
/// # Safety
/// Valid out pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetComputeInstanceId(
    device: nvmlDevice_t,
    id: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| instance_id(device, "nvmlDeviceGetComputeInstanceId", id, |m| m.ci))
}

fn instance_id(
    device: nvmlDevice_t,
    call: &str,
    out: *mut c_uint,
    pick: impl Fn(&FakeMig) -> u32,
) -> Rc {
    let Some(r) = mig_at(device, call) else {
        device_of(device, call)?;
        return Err(NOT_SUPPORTED);
    };
    let (_, m) = r?;
    // SAFETY: the exports' callers pass a valid out pointer (NVML calling convention).
    unsafe { put(out, pick(m)) }
}

/// `nvmlDeviceGetAttributes_v2`: a MIG device's slices and memory; a MIG-capable GPU's whole
/// (seven slices); NOT_SUPPORTED on a GPU that is not MIG-capable.
///
/// # Safety
/// Valid out pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetAttributes_v2(
    device: nvmlDevice_t,
    attributes: *mut nvmlDeviceAttributes_t,
) -> nvmlReturn_t {
    guard(|| {
        let call = "nvmlDeviceGetAttributes_v2";
        let (gpu_slices, compute_slices, mem_mib) = match mig_at(device, call) {
            Some(r) => {
                let (_, m) = r?;
                (m.gpu_slices, m.compute_slices, m.mem_mib)
            }
            None => {
                let g = device_of(device, call)?;
                g.mig.ok_or(NOT_SUPPORTED)?;
                (7, 7, g.mem_mib.unwrap_or(40_960))
            }
        };
        let a = nvmlDeviceAttributes_t {
            multiprocessorCount: 14 * compute_slices,
            sharedCopyEngineCount: gpu_slices,
            sharedDecoderCount: gpu_slices / 2,
            sharedEncoderCount: 0,
            sharedJpegCount: gpu_slices / 7,
            sharedOfaCount: gpu_slices / 7,
            gpuInstanceSliceCount: gpu_slices,
            computeInstanceSliceCount: compute_slices,
            memorySizeMB: mem_mib,
        };
        // SAFETY: forwarded caller guarantee.
        unsafe { put(attributes, a) }
    })
}
