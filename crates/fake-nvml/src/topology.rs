//! Topology exports: NVLink state, remote PCI info and device type, common PCIe ancestor.

#[allow(clippy::wildcard_imports)]
use super::*;

fn link_of(
    device: nvmlDevice_t,
    link: c_uint,
    call: &str,
) -> Result<&'static fixture::Remote, nvmlReturn_t> {
    let g = device_of(device, call)?;
    g.links
        .get(link as usize)
        .ok_or(INVALID_ARGUMENT)?
        .as_ref()
        .ok_or(NOT_SUPPORTED)
}

/// `nvmlDeviceGetNvLinkState`: active for every port the fixture lists without `Down=yes`.
///
/// # Safety
/// Valid out pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkState(
    device: nvmlDevice_t,
    link: c_uint,
    active: *mut nvmlEnableState_t,
) -> nvmlReturn_t {
    guard(|| {
        let g = device_of(device, "nvmlDeviceGetNvLinkState")?;
        let on = g
            .links
            .get(link as usize)
            .ok_or(INVALID_ARGUMENT)?
            .as_ref()
            .is_some_and(|r| r.active);
        if !on && g.links.iter().all(Option::is_none) {
            return Err(NOT_SUPPORTED);
        }
        // SAFETY: forwarded caller guarantee.
        unsafe { put(active, on as nvmlEnableState_t) }
    })
}

/// `nvmlDeviceGetNvLinkRemotePciInfo_v2`.
///
/// # Safety
/// Valid out pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkRemotePciInfo_v2(
    device: nvmlDevice_t,
    link: c_uint,
    pci: *mut nvmlPciInfo_t,
) -> nvmlReturn_t {
    guard(|| {
        let r = link_of(device, link, "nvmlDeviceGetNvLinkRemotePciInfo_v2")?;
        // SAFETY: forwarded caller guarantee.
        unsafe { put(pci, pci_info(&r.bus_id)) }
    })
}

/// `nvmlDeviceGetNvLinkRemoteDeviceType`.
///
/// # Safety
/// Valid out pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkRemoteDeviceType(
    device: nvmlDevice_t,
    link: c_uint,
    kind: *mut nvmlIntNvLinkDeviceType_t,
) -> nvmlReturn_t {
    guard(|| {
        let r = link_of(device, link, "nvmlDeviceGetNvLinkRemoteDeviceType")?;
        // SAFETY: forwarded caller guarantee.
        unsafe { put(kind, r.kind as nvmlIntNvLinkDeviceType_t) }
    })
}

/// `nvmlDeviceGetTopologyCommonAncestor`.
///
/// # Safety
/// Valid out pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetTopologyCommonAncestor(
    device1: nvmlDevice_t,
    device2: nvmlDevice_t,
    path: *mut nvmlGpuTopologyLevel_t,
) -> nvmlReturn_t {
    guard(|| {
        let (a, _) = gpu_at(device1, "nvmlDeviceGetTopologyCommonAncestor")?;
        let (b, _) = gpu_at(device2, "nvmlDeviceGetTopologyCommonAncestor")?;
        let l = node()?.pcie(a, b).ok_or(INVALID_ARGUMENT)?;
        // SAFETY: forwarded caller guarantee.
        unsafe { put(path, l.nvml_value() as nvmlGpuTopologyLevel_t) }
    })
}
