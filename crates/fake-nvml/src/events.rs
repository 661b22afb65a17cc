//! XID event sets: created, registered per device, waited on; each queued XID is delivered
//! once by `nvmlEventSetWait_v2`.

#[allow(clippy::wildcard_imports)]
use super::*;

fn set_index(set: nvmlEventSet_t) -> Result<usize, nvmlReturn_t> {
    (set as usize).checked_sub(1).ok_or(INVALID_ARGUMENT)
}

fn with_sets<T>(
    f: impl FnOnce(&mut EventSets) -> Result<T, nvmlReturn_t>,
) -> Result<T, nvmlReturn_t> {
    let mut sets = SETS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    f(&mut sets)
}

/// `nvmlEventSetCreate`.
///
/// # Safety
/// Valid out pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlEventSetCreate(set: *mut nvmlEventSet_t) -> nvmlReturn_t {
    guard(|| {
        node()?;
        let id = with_sets(|s| {
            s.push(Some(VecDeque::new()));
            Ok(s.len())
        })?;
        // SAFETY: forwarded caller guarantee.
        unsafe { put(set, std::ptr::without_provenance_mut::<nvmlEventSet_st>(id)) }
    })
}

/// `nvmlEventSetFree`.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlEventSetFree(set: nvmlEventSet_t) -> nvmlReturn_t {
    guard(|| {
        let i = set_index(set)?;
        with_sets(|s| {
            s.get_mut(i)
                .and_then(Option::take)
                .map(|_| ())
                .ok_or(INVALID_ARGUMENT)
        })
    })
}

/// `nvmlDeviceGetSupportedEventTypes`.
///
/// # Safety
/// Valid out pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetSupportedEventTypes(
    device: nvmlDevice_t,
    types: *mut c_ulonglong,
) -> nvmlReturn_t {
    guard(|| {
        let g = device_of(device, "nvmlDeviceGetSupportedEventTypes")?;
        let t = if g.events { EVENT_XID | EVENT_ECC } else { 0 };
        // SAFETY: forwarded caller guarantee.
        unsafe { put(types, t) }
    })
}

/// `nvmlDeviceRegisterEvents`: queues the GPU's fixture XIDs when XID events are requested.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceRegisterEvents(
    device: nvmlDevice_t,
    types: c_ulonglong,
    set: nvmlEventSet_t,
) -> nvmlReturn_t {
    guard(|| {
        let (i, g) = gpu_at(device, "nvmlDeviceRegisterEvents")?;
        if !g.events {
            return Err(NOT_SUPPORTED);
        }
        let k = set_index(set)?;
        with_sets(|s| {
            let q = s
                .get_mut(k)
                .and_then(Option::as_mut)
                .ok_or(INVALID_ARGUMENT)?;
            if types & EVENT_XID != 0 {
                q.extend(g.xids.iter().map(|&x| (i, x)));
            }
            Ok(())
        })
    })
}

/// `nvmlEventSetWait_v2`: the next queued XID, else sleeps `timeout_ms` (at most 10 s) and
/// answers `NVML_ERROR_TIMEOUT`.
///
/// # Safety
/// Valid out pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlEventSetWait_v2(
    set: nvmlEventSet_t,
    data: *mut nvmlEventData_t,
    timeout_ms: c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let k = set_index(set)?;
        let next = with_sets(|s| {
            Ok(s.get_mut(k)
                .and_then(Option::as_mut)
                .ok_or(INVALID_ARGUMENT)?
                .pop_front())
        })?;
        match next {
            Some((i, xid)) => {
                let ev = nvmlEventData_t {
                    device: handle(i),
                    eventType: EVENT_XID,
                    eventData: xid,
                    gpuInstanceId: u32::MAX,
                    computeInstanceId: u32::MAX,
                };
                // SAFETY: forwarded caller guarantee.
                unsafe { put(data, ev) }
            }
            None => {
                std::thread::sleep(std::time::Duration::from_millis(
                    timeout_ms.min(10_000).into(),
                ));
                Err(TIMEOUT)
            }
        }
    })
}
