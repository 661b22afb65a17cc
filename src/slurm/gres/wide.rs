//! The GRES views at any width: nodes beyond the topology model's 32 GPUs, where only
//! health applies (`crate::plugin::select::steer::wide`).

use gputopo_core::WideSet;

use super::{CoreIndex, JobGres, NodeGres};
use crate::ffi;
use crate::slurm::bitmap::{BitmapRef, GpuIndex, NodeIndex};
use crate::slurm::gpu_bits::ReadGpuSet;

impl JobGres<'_> {
    /// [`Self::selected`] at any width.
    pub fn selected_wide(&self, node: NodeIndex) -> Option<WideSet> {
        self.selection(node).map(|b| b.to_wide_set())
    }
}

impl<'a> NodeGres<'a> {
    fn wide_bits(&self, ptr: *mut ffi::bitstr_t) -> WideSet {
        // SAFETY: a bitmap owned by this node gres state, alive for 'a.
        unsafe { BitmapRef::<GpuIndex>::from_raw(ptr) }
            .map(|b| b.to_wide_set())
            .unwrap_or_default()
    }

    /// [`Self::allocated`] and [`Self::shared_in_use`] together, at any width.
    pub fn busy_wide(&self) -> WideSet {
        let shared = self
            .alt_state()
            .map(|alt| self.wide_bits(alt.gres_bit_alloc))
            .unwrap_or_default();
        self.wide_bits(self.ns.gres_bit_alloc).union(&shared)
    }

    /// (type id, GPUs, cores bound to them) per topology record, at any width.
    pub fn records_wide(&self) -> Vec<(u32, WideSet, Option<BitmapRef<'a, CoreIndex>>)> {
        self.topo_raw()
            .into_iter()
            .map(|(g, cores, type_id)| {
                let gpus = g.map(|p| self.wide_bits(p)).unwrap_or_default();
                (type_id, gpus, cores)
            })
            .collect()
    }
}
