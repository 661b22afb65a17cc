//! `nvmlDeviceGetGpuFabricInfo`: the GPU fabric's cluster UUID and clique id, from the fixture's
//! `Node ... FabricCluster=<32 hex digits> FabricClique=N` (every GPU of the node alike, as in
//! a GB200 NVL72 rack); `NOT_SUPPORTED` without them, as on boards without a multi-node fabric.

use super::{NOT_SUPPORTED, device_of, guard, node, put};
use nvml_wrapper_sys::bindings::{nvmlDevice_t, nvmlGpuFabricInfo_t, nvmlReturn_t};

/// `NVML_GPU_FABRIC_STATE_COMPLETED`.
const STATE_COMPLETED: u8 = 3;

/// `nvmlDeviceGetGpuFabricInfo`.
///
/// # Safety
/// Valid out pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGpuFabricInfo(
    device: nvmlDevice_t,
    info: *mut nvmlGpuFabricInfo_t,
) -> nvmlReturn_t {
    guard(|| {
        device_of(device, "nvmlDeviceGetGpuFabricInfo")?;
        let (cluster, clique) = node()?.fabric.ok_or(NOT_SUPPORTED)?;
        let v = nvmlGpuFabricInfo_t {
            clusterUuid: cluster,
            status: 0,
            cliqueId: clique,
            state: STATE_COMPLETED,
        };
        // SAFETY: forwarded caller guarantee.
        unsafe { put(info, v) }
    })
}
