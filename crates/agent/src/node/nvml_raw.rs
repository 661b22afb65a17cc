//! The two NVML calls that nvml-wrapper cannot make for us, made raw. This is the only `unsafe`
//! in the agent crate (the crate denies `unsafe_code`; this module alone allows it).
//!
//! - `nvmlDeviceGetNvLinkRemoteDeviceType`: nvml-wrapper 0.13's `NvLink::remote_device_type`
//!   writes the answer into a temporary and always returns `Unknown`, so NVSwitch links could
//!   not be told from GPU links.
//! - `nvmlDeviceGetRemappedRows`: not wrapped by nvml-wrapper at all.
//!
//! Both use symbols that `NvmlLib` already resolved (a missing symbol is an error value, not a
//! crash) and a device handle that a live `Device` borrows from the live `Nvml`.
#![allow(unsafe_code)]

use nvml_wrapper::Device;
use nvml_wrapper::Nvml;
use nvml_wrapper::error::{NvmlError, nvml_try};
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
