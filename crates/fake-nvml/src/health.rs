//! Health exports: ECC mode and counters, retired pages (both versions), row remapping.

#[allow(clippy::wildcard_imports)]
use super::*;

/// `nvmlDeviceGetEccMode`.
///
/// # Safety
/// Valid out pointers.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetEccMode(
    device: nvmlDevice_t,
    current: *mut nvmlEnableState_t,
    pending: *mut nvmlEnableState_t,
) -> nvmlReturn_t {
    guard(|| {
        let g = device_of(device, "nvmlDeviceGetEccMode")?;
        let on = g.ecc.ok_or(NOT_SUPPORTED)? as nvmlEnableState_t;
        // SAFETY: forwarded caller guarantee.
        unsafe { put(current, on)? };
        // SAFETY: forwarded caller guarantee.
        unsafe { put(pending, on) }
    })
}

/// `nvmlDeviceGetTotalEccErrors`.
///
/// # Safety
/// Valid out pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetTotalEccErrors(
    device: nvmlDevice_t,
    error_type: nvmlMemoryErrorType_t,
    counter: nvmlEccCounterType_t,
    counts: *mut c_ulonglong,
) -> nvmlReturn_t {
    guard(|| {
        let g = device_of(device, "nvmlDeviceGetTotalEccErrors")?;
        if g.ecc != Some(true) {
            return Err(NOT_SUPPORTED);
        }
        let row = g
            .ecc_counts
            .get(error_type as usize)
            .ok_or(INVALID_ARGUMENT)?;
        let v = *row.get(counter as usize).ok_or(INVALID_ARGUMENT)?;
        // SAFETY: forwarded caller guarantee.
        unsafe { put(counts, v) }
    })
}

/// `nvmlDeviceGetRetiredPagesPendingStatus`.
///
/// # Safety
/// Valid out pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetRetiredPagesPendingStatus(
    device: nvmlDevice_t,
    pending: *mut nvmlEnableState_t,
) -> nvmlReturn_t {
    guard(|| {
        let g = device_of(device, "nvmlDeviceGetRetiredPagesPendingStatus")?;
        if !g.retired_supported {
            return Err(NOT_SUPPORTED);
        }
        // SAFETY: forwarded caller guarantee.
        unsafe { put(pending, g.retired_pending as nvmlEnableState_t) }
    })
}

fn retired(
    device: nvmlDevice_t,
    cause: nvmlPageRetirementCause_t,
    count: *mut c_uint,
    out: &mut dyn FnMut(usize, u64) -> Rc,
    call: &str,
) -> Rc {
    let g = device_of(device, call)?;
    if !g.retired_supported {
        return Err(NOT_SUPPORTED);
    }
    let pages = g.retired.get(cause as usize).ok_or(INVALID_ARGUMENT)?;
    if count.is_null() {
        return Err(INVALID_ARGUMENT);
    }
    // SAFETY: non-null; the caller passes a valid in/out count.
    let room = unsafe { count.read() } as usize;
    // SAFETY: as above.
    unsafe { put(count, pages.len() as c_uint)? };
    if room < pages.len() {
        return Err(INSUFFICIENT_SIZE);
    }
    for (k, &a) in pages.iter().enumerate() {
        out(k, a)?;
    }
    Ok(())
}

/// `nvmlDeviceGetRetiredPages` (the count probe nvml-wrapper uses).
///
/// # Safety
/// `addresses` is valid for `*count` entries.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetRetiredPages(
    device: nvmlDevice_t,
    cause: nvmlPageRetirementCause_t,
    count: *mut c_uint,
    addresses: *mut c_ulonglong,
) -> nvmlReturn_t {
    guard(|| {
        // SAFETY: k < *count (checked by `retired`), within the caller's buffer.
        let mut out = |k: usize, a: u64| unsafe { put(addresses.wrapping_add(k), a) };
        retired(device, cause, count, &mut out, "nvmlDeviceGetRetiredPages")
    })
}

/// `nvmlDeviceGetRetiredPages_v2` (timestamps are 0).
///
/// # Safety
/// `addresses` and `timestamps` are valid for `*count` entries.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetRetiredPages_v2(
    device: nvmlDevice_t,
    cause: nvmlPageRetirementCause_t,
    count: *mut c_uint,
    addresses: *mut c_ulonglong,
    timestamps: *mut c_ulonglong,
) -> nvmlReturn_t {
    guard(|| {
        let mut out = |k: usize, a: u64| {
            // SAFETY: k < *count (checked by `retired`), within the caller's buffers.
            unsafe { put(addresses.wrapping_add(k), a)? };
            // SAFETY: as above.
            unsafe { put(timestamps.wrapping_add(k), 0) }
        };
        retired(
            device,
            cause,
            count,
            &mut out,
            "nvmlDeviceGetRetiredPages_v2",
        )
    })
}

/// `nvmlDeviceGetRemappedRows`.
///
/// # Safety
/// Valid out pointers.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetRemappedRows(
    device: nvmlDevice_t,
    corr: *mut c_uint,
    unc: *mut c_uint,
    pending: *mut c_uint,
    failure: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let g = device_of(device, "nvmlDeviceGetRemappedRows")?;
        let [c, u, p, f] = g.remap.ok_or(NOT_SUPPORTED)?;
        for (ptr, v) in [(corr, c), (unc, u), (pending, p), (failure, f)] {
            // SAFETY: forwarded caller guarantee.
            unsafe { put(ptr, v)? };
        }
        Ok(())
    })
}
