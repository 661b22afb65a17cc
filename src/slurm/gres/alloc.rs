//! A running job's committed GPUs (`gres_list_alloc`), as the preemption planner reads them.

use gputopo_core::GpuSet;

use super::{GPU, array_get, state_name};
use crate::ffi;
use crate::slurm::bitmap::{BitmapRef, GpuIndex};
use crate::slurm::list::ListRef;

/// The GPUs a one-node job holds (`gres_bit_alloc[0]` of its `gpu` allocation entries, typed
/// ones merged); `None` when it holds no GPU bitmap or runs on several nodes.
///
/// # Safety
/// `list` is null or the live `gres_list_alloc` of a job record the caller may read during
/// the call (slurmctld job lock held, as in every `select_p_*` call).
pub unsafe fn job_alloc_gpus(list: *mut ffi::xlist) -> Option<GpuSet> {
    // SAFETY: elements of gres_list_alloc are gres_state_t of state type JOB, alive for the
    // call per the caller.
    let list = unsafe { ListRef::<ffi::gres_state_t>::from_raw(list) }?;
    let mut gpus: Option<GpuSet> = None;
    for s in list
        .iter()
        .filter(|s| state_name(s) == GPU && !s.gres_data.is_null())
    {
        // SAFETY: gres_data of a job gres_state_t is a gres_job_state_t, alive for the call.
        let js = unsafe { &*s.gres_data.cast::<ffi::gres_job_state_t>() };
        if js.node_cnt != 1 {
            return None;
        }
        // SAFETY: gres_bit_alloc has node_cnt (= 1) entries when non-null.
        let bits = unsafe { array_get(js.gres_bit_alloc, 1, 0) }.copied()?;
        // SAFETY: a live bitmap owned by the job's gres state.
        let set = unsafe { BitmapRef::<GpuIndex>::from_raw(bits) }?.to_gpu_set();
        gpus = Some(gpus.unwrap_or_default().union(set));
    }
    gpus
}
