//! A running job's committed GPUs (`gres_list_alloc`) per node, as the preemption planner
//! reads them, and its shares of shared GRES, as the priority ledger charges them.

use gputopo_core::GpuSet;

use super::{GPU, SHARED, array_get, state_name};
use crate::ffi;
use crate::slurm::bitmap::{BitmapRef, GpuIndex};
use crate::slurm::gpu_bits::ReadGpuSet;
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

/// One job's shares of one sharing record on one of its nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharedAlloc {
    /// The shared GRES (`shard` or `mps`).
    pub name: &'static str,
    /// The job's node (its `i`-th node, as the GRES arrays count them).
    pub job_node: usize,
    /// The sharing record on that node (`topo_*[t]`, one per GPU).
    pub record: usize,
    /// The shares the job holds on it.
    pub shares: u64,
}

/// The shares a job holds of each sharing record (`shard`, `mps`) on each of its nodes, from
/// `gres_list_alloc`: the records set in `gres_bit_alloc[i]` with their shares,
/// `gres_per_bit_alloc[i][t]` where Slurm keeps it (23.11+), else the node's count
/// `gres_cnt_node_alloc[i]` spread over the set records (22.05: cons_tres picks one record).
/// Entries it cannot read (arrays missing or shorter than `node_cnt`) are left out.
///
/// # Safety
/// `list` is null or the live `gres_list_alloc` of a job record the caller may read during
/// the call (slurmctld job lock held).
pub unsafe fn job_alloc_shared(list: *mut ffi::xlist) -> Vec<SharedAlloc> {
    // SAFETY: elements of gres_list_alloc are gres_state_t of state type JOB (caller).
    let Some(list) = (unsafe { ListRef::<ffi::gres_state_t>::from_raw(list) }) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for s in list.iter().filter(|s| !s.gres_data.is_null()) {
        let Some(name) = SHARED.iter().copied().find(|n| *n == state_name(s)) else {
            continue;
        };
        // SAFETY: gres_data of a job gres_state_t is a gres_job_state_t, alive for the call.
        let js = unsafe { &*s.gres_data.cast::<ffi::gres_job_state_t>() };
        let n = js.node_cnt as usize;
        for job_node in 0..n {
            // SAFETY: gres_bit_alloc has node_cnt entries when non-null.
            let Some(&bits) = (unsafe { array_get(js.gres_bit_alloc, n, job_node) }) else {
                continue;
            };
            // SAFETY: a live bitmap owned by the job's gres state (null: none on that node).
            let Some(bits) = (unsafe { BitmapRef::<GpuIndex>::from_raw(bits) }) else {
                continue;
            };
            let set: Vec<usize> = bits.iter_set().map(|g| g.0).collect();
            // SAFETY: gres_cnt_node_alloc has node_cnt entries when non-null.
            let count = unsafe { array_get(js.gres_cnt_node_alloc, n, job_node) }.copied();
            for &record in &set {
                // SAFETY: as above; the per-bit row has bit_size(gres_bit_alloc[i]) entries.
                let shares = unsafe { per_bit_alloc(js, n, job_node, bits.len(), record) }
                    .or_else(|| count.map(|c| c / set.len() as u64))
                    .unwrap_or(0);
                out.push(SharedAlloc {
                    name,
                    job_node,
                    record,
                    shares,
                });
            }
        }
    }
    out
}

/// `gres_per_bit_alloc[i][t]` (23.11+), when Slurm filled it.
///
/// # Safety
/// `js` is a live job GRES state with `n` nodes; its per-bit rows have `width` entries.
#[cfg(not(select_abi = "22.05"))]
unsafe fn per_bit_alloc(
    js: &ffi::gres_job_state_t,
    n: usize,
    i: usize,
    width: usize,
    t: usize,
) -> Option<u64> {
    // SAFETY: gres_per_bit_alloc has node_cnt entries when non-null (caller).
    let row = unsafe { array_get(js.gres_per_bit_alloc, n, i) }.copied()?;
    // SAFETY: the row has `width` entries (caller).
    unsafe { array_get(row.cast_const(), width, t) }.copied()
}

/// 22.05 keeps no per-record shares.
///
/// # Safety
/// None needed; the signature matches the 23.11+ version.
#[cfg(select_abi = "22.05")]
unsafe fn per_bit_alloc(
    _js: &ffi::gres_job_state_t,
    _n: usize,
    _i: usize,
    _width: usize,
    _t: usize,
) -> Option<u64> {
    None
}
