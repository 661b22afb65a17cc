//! A running job's committed GPUs (`gres_list_alloc`) per node, as the preemption planner
//! reads them.

use gputopo_core::GpuSet;

use super::{GPU, array_get, state_name};
use crate::ffi;
use crate::slurm::bitmap::{BitmapRef, GpuIndex};
use crate::slurm::list::ListRef;

/// The GPUs a job holds on each of its nodes (`gres_bit_alloc[i]` of its `gpu` allocation
/// entries, typed ones merged; entry `i` is the job's `i`-th node), `node_cnt` entries (all
/// empty for a job without GPUs); `None` when a GPU entry's bitmaps cannot be read for every
/// node (its node count disagrees, or a bitmap array is missing).
///
/// # Safety
/// `list` is null or the live `gres_list_alloc` of a job record the caller may read during
/// the call (slurmctld job lock held, as in every `select_p_*` call).
pub unsafe fn job_alloc_gpus(list: *mut ffi::xlist, node_cnt: usize) -> Option<Vec<GpuSet>> {
    // SAFETY: elements of gres_list_alloc are gres_state_t of state type JOB, alive for the
    // call per the caller.
    let Some(list) = (unsafe { ListRef::<ffi::gres_state_t>::from_raw(list) }) else {
        return Some(vec![GpuSet::EMPTY; node_cnt]); // no GRES at all
    };
    let mut gpus: Option<Vec<GpuSet>> = None;
    for s in list
        .iter()
        .filter(|s| state_name(s) == GPU && !s.gres_data.is_null())
    {
        // SAFETY: gres_data of a job gres_state_t is a gres_job_state_t, alive for the call.
        let js = unsafe { &*s.gres_data.cast::<ffi::gres_job_state_t>() };
        if js.node_cnt as usize != node_cnt {
            return None;
        }
        let acc = gpus.get_or_insert_with(|| vec![GpuSet::EMPTY; node_cnt]);
        for (i, slot) in acc.iter_mut().enumerate() {
            // SAFETY: gres_bit_alloc has node_cnt entries when non-null.
            let bits = (unsafe { array_get(js.gres_bit_alloc, node_cnt, i) }).copied()?;
            // SAFETY: a live bitmap owned by the job's gres state (null: none on that node).
            if let Some(b) = unsafe { BitmapRef::<GpuIndex>::from_raw(bits) } {
                *slot = slot.union(b.to_gpu_set());
            }
        }
    }
    Some(gpus.unwrap_or_else(|| vec![GpuSet::EMPTY; node_cnt]))
}
