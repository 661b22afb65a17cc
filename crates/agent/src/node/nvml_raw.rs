//! The NVML calls that nvml-wrapper cannot make for us, made raw. This is the only `unsafe`
//! in the agent crate (the crate denies `unsafe_code`; this module alone allows it).
//!
//! - `nvmlDeviceGetNvLinkRemoteDeviceType`: nvml-wrapper 0.13's `NvLink::remote_device_type`
//!   writes the answer into a temporary and always returns `Unknown`, so NVSwitch links could
//!   not be told from GPU links.
//! - `nvmlDeviceGetRemappedRows`: not wrapped by nvml-wrapper at all.
//! - `nvmlDeviceGetGpuFabricInfo`: not wrapped either (the multi-node NVLink fabric's cluster
//!   UUID and clique id, for the node's NVLink domain).
//! - `nvmlDeviceGetGpuInstanceId`, `nvmlDeviceGetComputeInstanceId`: not wrapped (a MIG
//!   device's instance ids, which tie Slurm's MIG records to it).
//!
//! All use symbols that `NvmlLib` already resolved (a missing symbol is an error value, not a
//! crash) and a device handle that a live `Device` borrows from the live `Nvml`.
#![allow(unsafe_code)]

use nvml_wrapper::Device;
use nvml_wrapper::Nvml;
use nvml_wrapper::error::{NvmlError, nvml_try};
use nvml_wrapper_sys::bindings::{NVML_GPU_FABRIC_STATE_COMPLETED, nvmlGpuFabricInfo_t};
use std::ffi::c_uint;

/// What is at the far end of an NVLink (`nvmlIntNvLinkDeviceType_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RemoteKind {
    /// Another GPU (0).
    Gpu,
    /// An IBM NPU (1).
    IbmNpu,
    /// An NVSwitch (2).
    Switch,
    /// Anything else (0xFF = unknown).
    Unknown,
}

fn symbol<T: Copy, E: std::fmt::Display>(s: &Result<T, E>, name: &str) -> Result<T, NvmlError> {
    s.as_ref()
        .map(|f| *f)
        .map_err(|e| NvmlError::FailedToLoadSymbol(format!("{name}: {e}")))
}

/// The device type at the far end of `link` of `device`.
///
/// # Errors
/// NVML's error (`NotSupported`, `GpuLost`, `InvalidArg` ...) or a missing symbol.
pub fn remote_device_type(
    nvml: &Nvml,
    device: &Device<'_>,
    link: u32,
) -> Result<RemoteKind, NvmlError> {
    let f = symbol(
        &nvml.lib().nvmlDeviceGetNvLinkRemoteDeviceType,
        "nvmlDeviceGetNvLinkRemoteDeviceType",
    )?;
    let mut kind: c_uint = 0xFF; // nvmlIntNvLinkDeviceType_t
    // SAFETY: `device` borrows the live `Nvml` it came from, so its handle is valid; the symbol's
    // C signature is the one nvml-wrapper-sys generated from nvml.h; `kind` is a valid out
    // pointer for the duration of the call.
    let rc = unsafe { f(device.handle(), link as c_uint, &mut kind) };
    nvml_try(rc)?;
    Ok(match kind {
        0 => RemoteKind::Gpu,
        1 => RemoteKind::IbmNpu,
        2 => RemoteKind::Switch,
        _ => RemoteKind::Unknown,
    })
}

/// `nvmlDeviceGetRemappedRows`: (correctable rows, uncorrectable rows, pending, failure).
///
/// # Errors
/// NVML's error (`NotSupported` before Ampere, `GpuLost` ...) or a missing symbol.
pub fn remapped_rows(
    nvml: &Nvml,
    device: &Device<'_>,
) -> Result<(u32, u32, bool, bool), NvmlError> {
    let f = symbol(
        &nvml.lib().nvmlDeviceGetRemappedRows,
        "nvmlDeviceGetRemappedRows",
    )?;
    let (mut corr, mut unc, mut pending, mut failure): (c_uint, c_uint, c_uint, c_uint) =
        (0, 0, 0, 0);
    // SAFETY: as above: a live handle, the generated C signature, four valid out pointers.
    let rc = unsafe {
        f(
            device.handle(),
            &mut corr,
            &mut unc,
            &mut pending,
            &mut failure,
        )
    };
    nvml_try(rc)?;
    Ok((corr, unc, pending != 0, failure != 0))
}

/// `nvmlDeviceGetGpuFabricInfo`: the fabric's cluster UUID (hex) and clique id, `None` while
/// the GPU's fabric registration is not complete (or failed).
///
/// # Errors
/// NVML's error (`NotSupported` without a multi-node fabric, `GpuLost` ...) or a missing symbol.
pub fn fabric_info(nvml: &Nvml, device: &Device<'_>) -> Result<Option<(String, u32)>, NvmlError> {
    let f = symbol(
        &nvml.lib().nvmlDeviceGetGpuFabricInfo,
        "nvmlDeviceGetGpuFabricInfo",
    )?;
    let mut info = nvmlGpuFabricInfo_t {
        clusterUuid: [0; 16],
        status: 0,
        cliqueId: 0,
        state: 0,
    };
    // SAFETY: as above: a live handle, the generated C signature, a valid out pointer to a
    // struct of the version-1 layout this symbol fills.
    let rc = unsafe { f(device.handle(), &mut info) };
    nvml_try(rc)?;
    if info.state != NVML_GPU_FABRIC_STATE_COMPLETED as u8 || info.status != 0 {
        return Ok(None);
    }
    let uuid: String = info
        .clusterUuid
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok(Some((uuid, info.cliqueId)))
}

/// The GPU instance and compute instance ids of MIG device `mig`.
///
/// # Errors
/// NVML's error (`NotSupported` for a device that is not a MIG device) or a missing symbol.
pub fn instance_ids(nvml: &Nvml, mig: &Device<'_>) -> Result<(u32, u32), NvmlError> {
    let gi_of = symbol(
        &nvml.lib().nvmlDeviceGetGpuInstanceId,
        "nvmlDeviceGetGpuInstanceId",
    )?;
    let ci_of = symbol(
        &nvml.lib().nvmlDeviceGetComputeInstanceId,
        "nvmlDeviceGetComputeInstanceId",
    )?;
    let (mut gi, mut ci): (c_uint, c_uint) = (0, 0);
    // SAFETY: `mig` borrows the live `Nvml` it came from, so its handle is valid; the symbol's
    // C signature is the one nvml-wrapper-sys generated from nvml.h; `gi` is a valid out pointer.
    nvml_try(unsafe { gi_of(mig.handle(), &mut gi) })?;
    // SAFETY: as above, with `ci` the out pointer.
    nvml_try(unsafe { ci_of(mig.handle(), &mut ci) })?;
    Ok((gi, ci))
}
