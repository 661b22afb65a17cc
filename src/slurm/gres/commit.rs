//! Whether Slurm's commit of a job's GPU selection will take anything on a node.

use super::{JobGres, array_get};
use crate::slurm::bitmap::NodeIndex;

impl JobGres<'_> {
    /// True when a `--gres=gpu:N` (per-node) request was given no GPU on `node` by a
    /// successful RUN_NOW `select_p_job_test`, so that Slurm's commit will reject it: a new
    /// allocation (no `gres_cnt_node_alloc` / `gres_bit_alloc` yet) with `total_node_cnt` set
    /// takes `gres_cnt_node_select[node]`, and when that is 0 `_job_alloc` logs "no resources
    /// selected" and returns SLURM_ERROR without recording any GPU in the node's
    /// `gres_bit_alloc` (23.11.4 src/slurmctld/gres_ctld.c:352-376), yet the job starts.
    ///
    /// Slurm 23.11.4's cons_tres does this after a slurmctld restart for jobs it places on a
    /// node that has not re-registered (stock cons_tres alike). The job then runs on GPUs no
    /// one sees as taken: a later job gets them, and at the next restart or reconfigure the
    /// recovery gives the first job the first free GPUs, the same ones (a GPU on two jobs).
    pub fn commit_would_take_none(&self, node: NodeIndex) -> bool {
        let js = self.js();
        if js.gres_per_node == 0 || js.total_node_cnt == 0 {
            return false;
        }
        if !js.gres_cnt_node_alloc.is_null() || !js.gres_bit_alloc.is_null() {
            return false; // not a new allocation: the commit reads those instead
        }
        // SAFETY: gres_cnt_node_select has total_node_cnt entries when non-null
        // (gres_select_filter.c allocates it with that size).
        let count = unsafe { array_get(js.gres_cnt_node_select, self.select_len(), node.0) };
        count.is_none_or(|&c| c == 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi;

    fn request(js: &mut ffi::gres_job_state_t) -> JobGres<'_> {
        JobGres {
            name: "gpu",
            js: std::ptr::from_mut(js),
            _borrow: std::marker::PhantomData,
        }
    }

    /// Only a new per-node request whose count on the node is 0 (or has no count array) is
    /// caught; per-job requests and existing allocations are left to Slurm.
    #[test]
    fn an_empty_per_node_selection_is_caught() {
        // SAFETY: a plain C struct of integers and pointers: all-zero is a valid value.
        let mut js: ffi::gres_job_state_t = unsafe { std::mem::zeroed() };
        js.gres_per_node = 2;
        js.total_node_cnt = 2;
        let mut counts = [2u64, 0];
        js.gres_cnt_node_select = counts.as_mut_ptr();
        assert!(!request(&mut js).commit_would_take_none(NodeIndex(0)));
        assert!(request(&mut js).commit_would_take_none(NodeIndex(1)));
        js.gres_cnt_node_select = std::ptr::null_mut();
        assert!(request(&mut js).commit_would_take_none(NodeIndex(0)));
        let mut alloc = [2u64, 2];
        js.gres_cnt_node_alloc = alloc.as_mut_ptr();
        assert!(!request(&mut js).commit_would_take_none(NodeIndex(1)));
        js.gres_cnt_node_alloc = std::ptr::null_mut();
        js.gres_per_node = 0;
        js.gres_per_job = 2;
        assert!(!request(&mut js).commit_would_take_none(NodeIndex(1)));
    }
}
