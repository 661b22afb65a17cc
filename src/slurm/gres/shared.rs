//! Shared GRES (`shard`, `mps`): a node's sharing records and a job's shares on a node, and
//! the one write the health re-pick makes before Slurm commits them.
//!
//! A shared GRES keeps one topology record per sharing device, each with its own share count
//! (`topo_gres_cnt_avail[t]`, `topo_gres_cnt_alloc[t]`) and the GPU it sits on
//! (`topo_gres_bitmap[t]`; gres.c `_sync_node_shared_to_sharing` builds one per GPU). A
//! job's selection on a node is a bitmap of record indices (`gres_bit_select[node]`) with the
//! shares per record: `gres_per_bit_select[node][t]` in 24.11; in 22.05, which has no such
//! array, every selected record carries `gres_per_node` shares (gres_ctld.c `_job_alloc`:
//! `gres_per_bit = gres_per_node`) and cons_tres selects one record (`_pick_specific_topo`).

use gputopo_core::GpuSet;

use super::{JobGres, NodeGres, array_get};
use crate::ffi;
use crate::slurm::SlurmError;
use crate::slurm::bitmap::{BitmapMut, BitmapRef, GpuIndex, NodeIndex};
use crate::slurm::gpu_bits::WriteGpuSet;

/// The shared GRES names: Slurm's two sharing plugins.
pub const SHARED: [&str; 2] = ["shard", "mps"];

/// One sharing record of a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharedRecord {
    /// The GPUs it sits on.
    pub gpus: GpuSet,
    /// Its shares (`topo_gres_cnt_avail[t]`).
    pub avail: u64,
    /// Shares other jobs hold (`topo_gres_cnt_alloc[t]`).
    pub alloc: u64,
    /// Its type id (`topo_type_id[t]`).
    pub type_id: u32,
}

impl NodeGres<'_> {
    /// The sharing records (`topo_*[0..topo_cnt]` of a `shard`/`mps` node state); empty when
    /// a count array is missing.
    pub fn shared_records(&self) -> Vec<SharedRecord> {
        let n = usize::from(self.ns.topo_cnt);
        (0..n)
            .map_while(|t| {
                // SAFETY: each topo_* array has topo_cnt entries when non-null
                // (gres.c _sync_node_shared_to_sharing sizes them together).
                let avail = unsafe { array_get(self.ns.topo_gres_cnt_avail, n, t) }.copied()?;
                // SAFETY: as above.
                let alloc = unsafe { array_get(self.ns.topo_gres_cnt_alloc, n, t) }.copied()?;
                // SAFETY: as above.
                let gpus = unsafe { array_get(self.ns.topo_gres_bitmap, n, t) }.copied();
                // SAFETY: as above.
                let type_id = unsafe { array_get(self.ns.topo_type_id, n, t) }.copied();
                Some(SharedRecord {
                    gpus: gpus.map(|p| self.bits(p)).unwrap_or_default(),
                    avail,
                    alloc,
                    type_id: type_id.unwrap_or(0),
                })
            })
            .collect()
    }
}

impl JobGres<'_> {
    /// True for a `shard` or `mps` request.
    pub fn is_shared(&self) -> bool {
        SHARED.contains(&self.name())
    }

    /// The live selection bitmap of this request on `node`, `None` when there is none.
    fn select_bits(&self, node: NodeIndex) -> Option<*mut ffi::bitstr_t> {
        let js = self.js();
        // SAFETY: gres_bit_select has total_node_cnt entries when non-null.
        unsafe { array_get(js.gres_bit_select, self.select_len(), node.0) }
            .copied()
            .filter(|p| !p.is_null())
    }

    /// The job's shares per sharing record on `node` as cons_tres selected them; `None`
    /// when it selected none there or the arrays do not agree.
    pub fn shared_selected(&self, node: NodeIndex) -> Option<Vec<u64>> {
        let raw = self.select_bits(node)?;
        // SAFETY: a live bitmap owned by the job gres state during the select call.
        let bits = unsafe { BitmapRef::<GpuIndex>::from_raw(raw) }?;
        let width = bits.len();
        let set: Vec<usize> = bits.iter_set().map(|g| g.0).collect();
        let count = self.selected_count(node);
        let mut shares = vec![0u64; width];
        match self.per_bit_select(node, width) {
            Some(per) => {
                for &t in &set {
                    shares[t] = per[t];
                }
            }
            None => {
                let each = count.checked_div(set.len() as u64)?;
                for &t in &set {
                    shares[t] = each;
                }
            }
        }
        (shares.iter().sum::<u64>() == count).then_some(shares)
    }

    /// Replaces the job's shares on `node` by `shares` (per record), before Slurm commits.
    ///
    /// Invariant kept: the total (`gres_cnt_node_select[node]`) and the bitmap's size do not
    /// change; in 22.05 every chosen record carries the same shares as before (the commit
    /// gives each selected record `gres_per_node`).
    ///
    /// # Errors
    /// [`SlurmError::OutOfBounds`] when there is no selection on `node` or `shares` does not
    /// fit it; [`SlurmError::UnexpectedValue`] when the total or the per-record shape differs.
    /// Nothing is written then.
    pub fn write_shared(&mut self, node: NodeIndex, shares: &[u64]) -> Result<(), SlurmError> {
        let old = self.shared_selected(node).ok_or(SlurmError::OutOfBounds {
            index: node.0,
            size: self.select_len(),
        })?;
        if old.len() != shares.len() {
            return Err(SlurmError::OutOfBounds {
                index: shares.len(),
                size: old.len(),
            });
        }
        let total: u64 = shares.iter().sum();
        if total != old.iter().sum::<u64>() {
            return Err(SlurmError::UnexpectedValue(total as i64));
        }
        let width = shares.len();
        let has_per_bit = self.per_bit_select(node, width).is_some();
        if !has_per_bit {
            let each = old.iter().copied().find(|s| *s > 0).unwrap_or(0);
            if let Some(bad) = shares.iter().find(|s| **s != 0 && **s != each) {
                return Err(SlurmError::UnexpectedValue(*bad as i64));
            }
        }
        let set: GpuSet = (0..width).filter(|&t| shares[t] > 0).collect();
        let raw = self.select_bits(node).ok_or(SlurmError::OutOfBounds {
            index: node.0,
            size: self.select_len(),
        })?;
        // SAFETY: the live selection bitmap of this job on `node`; only the hook touches it
        // between cons_tres's return and the commit (slurmctld job write lock).
        let mut bits =
            unsafe { BitmapMut::<GpuIndex>::from_raw(raw) }.ok_or(SlurmError::OutOfBounds {
                index: node.0,
                size: self.select_len(),
            })?;
        bits.write_gpu_set(set)?;
        if has_per_bit {
            self.write_per_bit_select(node, shares);
        }
        Ok(())
    }
}

#[cfg(not(select_abi = "22.05"))]
impl JobGres<'_> {
    /// `gres_per_bit_select[node]` (`width` entries), when cons_tres filled it.
    fn per_bit_select(&self, node: NodeIndex, width: usize) -> Option<Vec<u64>> {
        let js = self.js();
        // SAFETY: gres_per_bit_select has total_node_cnt entries when non-null
        // (gres_select_filter.c _init_gres_per_bit_select).
        let row =
            unsafe { array_get(js.gres_per_bit_select, self.select_len(), node.0) }.copied()?;
        (0..width)
            // SAFETY: the row has bit_size(gres_bit_select[node]) = `width` entries.
            .map(|t| unsafe { array_get(row.cast_const(), width, t) }.copied())
            .collect()
    }

    /// Writes `shares` into `gres_per_bit_select[node]` (checked to exist with this width).
    fn write_per_bit_select(&mut self, node: NodeIndex, shares: &[u64]) {
        if self.per_bit_select(node, shares.len()).is_none() {
            return;
        }
        // SAFETY: the job gres state is live and only the hook touches it during the select
        // call (see `job_requests`).
        let js = unsafe { &mut *self.js };
        let row = js.gres_per_bit_select.wrapping_add(node.0);
        // SAFETY: checked above: the array and its row exist, with shares.len() entries.
        let row = unsafe { *row };
        for (t, s) in shares.iter().enumerate() {
            let slot = row.wrapping_add(t);
            // SAFETY: t < shares.len() = the row's length.
            unsafe { *slot = *s };
        }
    }
}

#[cfg(select_abi = "22.05")]
impl JobGres<'_> {
    /// 22.05 has no per-record shares: each selected record carries `gres_per_node`.
    fn per_bit_select(&self, _node: NodeIndex, _width: usize) -> Option<Vec<u64>> {
        None
    }

    fn write_per_bit_select(&mut self, _node: NodeIndex, _shares: &[u64]) {}
}
