//! The GPUs a job held, as the usage ledger (no slurmdbd) charges them: in GPU equivalents
//! (`gputopo_core::priority::gpu_count`), whole GPUs plus the part of a GPU each share of
//! shared GRES (`shard`, `mps`) is.

use std::ffi::CStr;

use gputopo_core::priority::gpu_count::{GpuRequest, SharedHeld, charged_gpus, shared_gpu_share};

use super::JobRecord;
use crate::ffi;
use crate::slurm::bitmap::{BitmapRef, NodeIndex};
use crate::slurm::gres::job_alloc_shared;
use crate::slurm::list::ListRef;
use crate::slurm::node;

impl JobRecord<'_> {
    /// GPUs allocated to the job, from `gres_list_alloc` (the GRES named `gpu`, all types):
    /// without slurmdbd `gres/gpu` is not a TRES, so `tres_alloc_cnt` cannot say.
    pub fn allocated_gpus(&self) -> u64 {
        // SAFETY: the job's allocated GRES list (job lock held).
        unsafe { gpu_records(self.job.gres_list_alloc) }
            .map(|d| {
                if d.total_gres >= NOT_A_COUNT {
                    0
                } else {
                    d.total_gres
                }
            })
            .sum()
    }

    /// The GPUs to charge for this job: [`Self::allocated_gpus`], or what its request implies
    /// where Slurm has zeroed the allocation (see [`charged_gpus`]).
    pub fn gpus_to_charge(&self) -> u64 {
        let allocated = self.allocated_gpus();
        if allocated > 0 {
            return allocated;
        }
        let tasks = self.details().map_or(1, |d| u64::from(d.num_tasks));
        let nodes = u64::from(self.job.node_cnt);
        // SAFETY: the job's requested GRES list (job lock held).
        let requests: Vec<GpuRequest> = unsafe { gpu_records(self.job.gres_list_req) }
            .map(|d| GpuRequest {
                per_job: d.gres_per_job,
                per_node: d.gres_per_node,
                per_task: d.gres_per_task,
                per_socket: d.gres_per_socket,
                nodes,
                tasks,
            })
            .collect();
        charged_gpus(allocated, &requests)
    }

    /// The GPU equivalents of the job's shared GRES: each share it holds of a sharing record
    /// as the part of that record's GPU it is (`held / topo_gres_cnt_avail[t]` on the node).
    /// Caller holds the slurmctld job lock and the node lock (read): the recalculation pass,
    /// or `select_p_job_fini` (its callers hold both for writing).
    pub fn shared_gpu_share(&self) -> f64 {
        // SAFETY: the job's allocated GRES list (job lock held).
        let held = unsafe { job_alloc_shared(self.job.gres_list_alloc) };
        if held.is_empty() {
            return 0.0;
        }
        let nodes = self.job_nodes();
        let held: Vec<SharedHeld> = held
            .iter()
            .filter_map(|h| {
                let node = *nodes.get(h.job_node)?;
                // SAFETY: a node of the job's allocation; the caller holds the node lock.
                let view = unsafe { node::by_index(node) }?;
                let record = *view.gres(h.name)?.shared_records().get(h.record)?;
                Some(SharedHeld {
                    held: h.shares,
                    avail: record.avail,
                })
            })
            .collect();
        shared_gpu_share(&held)
    }

    /// The job's nodes in the order its GRES arrays count them (`job_resrcs->node_bitmap`,
    /// which stays whole while the job completes; `node_bitmap` otherwise).
    fn job_nodes(&self) -> Vec<NodeIndex> {
        // SAFETY: job_resrcs is null or the job's live job_resources_t (job lock held).
        let bitmap =
            unsafe { self.job.job_resrcs.as_ref() }.map_or(self.job.node_bitmap, |r| r.node_bitmap);
        // SAFETY: a live bitmap owned by the job (job lock held).
        unsafe { BitmapRef::<NodeIndex>::from_raw(bitmap) }
            .map(|b| b.iter_set().collect())
            .unwrap_or_default()
    }
}

/// `NO_CONSUME_VAL64` (slurm.h); it and the two values above it mark "no count".
const NOT_A_COUNT: u64 = 0xffff_ffff_ffff_fffd;

/// The GPU records (`gres_name` "gpu") of a job GRES list.
///
/// # Safety
/// `list` is null or a job's GRES list (`gres_list_req`/`gres_list_alloc`), job lock held.
unsafe fn gpu_records<'a>(
    list: *mut ffi::xlist,
) -> impl Iterator<Item = &'a ffi::gres_job_state_t> {
    // SAFETY: caller contract.
    let list = unsafe { ListRef::<ffi::gres_state_t>::from_raw(list) };
    list.into_iter().flat_map(|l| l.iter()).filter_map(|g| {
        // SAFETY: NUL-terminated GRES name (or NULL).
        let gpu =
            !g.gres_name.is_null() && unsafe { CStr::from_ptr(g.gres_name) }.to_bytes() == b"gpu";
        // SAFETY: a job GRES record's data is its gres_job_state_t.
        gpu.then(|| unsafe { g.gres_data.cast::<ffi::gres_job_state_t>().as_ref() })
            .flatten()
    })
}
