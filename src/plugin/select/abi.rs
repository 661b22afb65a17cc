//! The select plugin's entry-point table: every `select_p_*` of `node_select_syms[]`, in that
//! order, with the prototype of the release's `slurm_select_ops_t`, and per line whether it is
//! forwarded to the stock cons_tres or hooked: a hook line calls the
//! [`SelectHooks`] method it names on [`Steer`], gputopo's implementation
//! (`crate::forwarding_table!`). No logic lives here.
//!
//! One table for every release; a line that not every release has carries the `cfg` of the
//! releases that do (slurm-kit's `build.rs` emits `select_abi` and the milestones from the tree's
//! `SLURM_VERSION_NUMBER`):
//! - 22.05 (36 symbols, src/common/select.c): also job_signal, jobinfo_sprint,
//!   jobinfo_xstrdup, update_node_config, resv_test; job_test takes `exc_core_bitmap`.
//! - 23.11 to 24.11 (31, src/interfaces/select.c): job_test takes `resv_exc_t *`; from 24.11
//!   also `will_run_data_t *` (`select_abi = "24.11"`; 23.11.4 src/interfaces/select.h:58-66 and
//!   24.05.8 src/interfaces/select.c:57-65 end at `resv_exc_t *`, 24.11.5 select.c:57-66 does not).
//! - from 25.05 (12; 13 in 26.05): only slurmctld loads a select plugin, so the state
//!   save/restore, job_init, step, nodeinfo pack/alloc/get and every jobinfo entry point are
//!   gone (`not(slurm_25_05)`); 26.05 adds `void select_p_job_mem_reduce(job_record_t *)`.
//!
//! `tests/abi.rs` checks the exported set against the tree's `node_select_syms[]`.

use std::ffi::c_int;
#[cfg(not(slurm_25_05))]
use std::ffi::{c_char, c_void};
#[cfg(not(slurm_25_05))]
use std::ptr::null_mut;

#[cfg(select_abi = "22.05")]
use crate::ffi::resv_desc_msg_t;
#[cfg(not(select_abi = "22.05"))]
use crate::ffi::resv_exc_t;
#[cfg(not(any(select_abi = "22.05", select_abi = "23.11")))]
use crate::ffi::will_run_data_t;
use crate::ffi::{SLURM_ERROR, bitstr_t, job_record_t, node_record_t, xlist};
#[cfg(not(slurm_25_05))]
use crate::ffi::{
    buf_t, node_states, select_jobdata_type, select_jobinfo_t, select_nodedata_type,
    select_nodeinfo_t, select_plugindata_info, step_record_t,
};
use crate::plugin::select::hooks::{SelectHooks, SelectMode};
use crate::plugin::select::steer::Steer;

crate::forwarding_table! {
    stock StockSelect;
    hooks SelectHooks = Steer;
    // What a caught panic in any select_p_* leaves (docs/operations.md quotes this line).
    degraded "select/gputopo forwards to select/cons_tres from now on and withholds the nodes with a GPU published faulty or drained";
    #[cfg(not(slurm_25_05))]
    forward fn select_p_state_save(dir_name: *mut c_char) -> c_int, fail = SLURM_ERROR;
    #[cfg(not(slurm_25_05))]
    forward fn select_p_state_restore(dir_name: *mut c_char) -> c_int, fail = SLURM_ERROR;
    #[cfg(not(slurm_25_05))]
    forward fn select_p_job_init(job_list: *mut xlist) -> c_int, fail = SLURM_ERROR;
    forward fn select_p_node_init() -> c_int, fail = SLURM_ERROR;
    #[cfg(select_abi = "22.05")]
    guarded fn select_p_job_test(
        job_ptr: *mut job_record_t, bitmap: *mut bitstr_t, min_nodes: u32, max_nodes: u32,
        req_nodes: u32, mode: SelectMode, preemptee_candidates: *mut xlist,
        preemptee_job_list: *mut *mut xlist, exc_core_bitmap: *mut bitstr_t,
    ) -> c_int, fail = SLURM_ERROR
        => job_test(job_ptr, bitmap, min_nodes, max_nodes, req_nodes, mode, preemptee_candidates, preemptee_job_list, exc_core_bitmap);
    // 23.11 and 24.05: no will_run_data_t (see the module docs).
    #[cfg(select_abi = "23.11")]
    guarded fn select_p_job_test(
        job_ptr: *mut job_record_t, bitmap: *mut bitstr_t, min_nodes: u32, max_nodes: u32,
        req_nodes: u32, mode: SelectMode, preemptee_candidates: *mut xlist,
        preemptee_job_list: *mut *mut xlist, resv_exc_ptr: *mut resv_exc_t,
    ) -> c_int, fail = SLURM_ERROR
        => job_test(job_ptr, bitmap, min_nodes, max_nodes, req_nodes, mode, preemptee_candidates, preemptee_job_list, resv_exc_ptr);
    #[cfg(not(any(select_abi = "22.05", select_abi = "23.11")))]
    guarded fn select_p_job_test(
        job_ptr: *mut job_record_t, bitmap: *mut bitstr_t, min_nodes: u32, max_nodes: u32,
        req_nodes: u32, mode: SelectMode, preemptee_candidates: *mut xlist,
        preemptee_job_list: *mut *mut xlist, resv_exc_ptr: *mut resv_exc_t,
        will_run_ptr: *mut will_run_data_t,
    ) -> c_int, fail = SLURM_ERROR
        => job_test(job_ptr, bitmap, min_nodes, max_nodes, req_nodes, mode, preemptee_candidates, preemptee_job_list, resv_exc_ptr);
    forward fn select_p_job_begin(job_ptr: *mut job_record_t) -> c_int, fail = SLURM_ERROR;
    forward fn select_p_job_ready(job_ptr: *mut job_record_t) -> c_int, fail = SLURM_ERROR;
    forward fn select_p_job_expand(from_job_ptr: *mut job_record_t, to_job_ptr: *mut job_record_t) -> c_int, fail = SLURM_ERROR;
    forward fn select_p_job_resized(job_ptr: *mut job_record_t, node_ptr: *mut node_record_t) -> c_int, fail = SLURM_ERROR;
    #[cfg(select_abi = "22.05")]
    forward fn select_p_job_signal(job_ptr: *mut job_record_t, signal: c_int) -> c_int, fail = SLURM_ERROR;
    #[cfg(slurm_26_05)]
    forward fn select_p_job_mem_reduce(job_ptr: *mut job_record_t) -> (), fail = ();
    // The usage ledger notes the ending job first (src/plugin/priority/ended.rs).
    hook fn select_p_job_fini(job_ptr: *mut job_record_t) -> c_int, fail = SLURM_ERROR
        => job_fini(job_ptr);
    forward fn select_p_job_suspend(job_ptr: *mut job_record_t, indf_susp: bool) -> c_int, fail = SLURM_ERROR;
    forward fn select_p_job_resume(job_ptr: *mut job_record_t, indf_susp: bool) -> c_int, fail = SLURM_ERROR;
    #[cfg(not(slurm_25_05))]
    forward fn select_p_step_pick_nodes(
        job_ptr: *mut job_record_t, step_jobinfo: *mut select_jobinfo_t, node_count: u32,
        avail_nodes: *mut *mut bitstr_t,
    ) -> *mut bitstr_t, fail = null_mut();
    #[cfg(not(slurm_25_05))]
    forward fn select_p_step_start(step_ptr: *mut step_record_t) -> c_int, fail = SLURM_ERROR;
    #[cfg(not(slurm_25_05))]
    forward fn select_p_step_finish(step_ptr: *mut step_record_t, killing_step: bool) -> c_int, fail = SLURM_ERROR;
    #[cfg(not(slurm_25_05))]
    forward fn select_p_select_nodeinfo_pack(nodeinfo: *mut select_nodeinfo_t, buffer: *mut buf_t, protocol_version: u16) -> c_int, fail = SLURM_ERROR;
    #[cfg(not(slurm_25_05))]
    forward fn select_p_select_nodeinfo_unpack(nodeinfo: *mut *mut select_nodeinfo_t, buffer: *mut buf_t, protocol_version: u16) -> c_int, fail = SLURM_ERROR;
    #[cfg(not(slurm_25_05))]
    forward fn select_p_select_nodeinfo_alloc() -> *mut select_nodeinfo_t, fail = null_mut();
    #[cfg(not(slurm_25_05))]
    forward fn select_p_select_nodeinfo_free(nodeinfo: *mut select_nodeinfo_t) -> c_int, fail = SLURM_ERROR;
    forward fn select_p_select_nodeinfo_set_all() -> c_int, fail = SLURM_ERROR;
    hook fn select_p_select_nodeinfo_set(job_ptr: *mut job_record_t) -> c_int, fail = SLURM_ERROR
        => select_nodeinfo_set(job_ptr);
    #[cfg(not(slurm_25_05))]
    forward fn select_p_select_nodeinfo_get(nodeinfo: *mut select_nodeinfo_t, dinfo: select_nodedata_type, state: node_states, data: *mut c_void) -> c_int, fail = SLURM_ERROR;
    // cons_tres 23.11 to 24.11 defines this as `int (void)` returning 0; the ops type is a
    // pointer (NULL).
    #[cfg(not(slurm_25_05))]
    forward fn select_p_select_jobinfo_alloc() -> *mut select_jobinfo_t, fail = null_mut();
    #[cfg(not(slurm_25_05))]
    forward fn select_p_select_jobinfo_free(jobinfo: *mut select_jobinfo_t) -> c_int, fail = SLURM_ERROR;
    #[cfg(not(slurm_25_05))]
    forward fn select_p_select_jobinfo_set(jobinfo: *mut select_jobinfo_t, data_type: select_jobdata_type, data: *mut c_void) -> c_int, fail = SLURM_ERROR;
    #[cfg(not(slurm_25_05))]
    forward fn select_p_select_jobinfo_get(jobinfo: *mut select_jobinfo_t, data_type: select_jobdata_type, data: *mut c_void) -> c_int, fail = SLURM_ERROR;
    #[cfg(not(slurm_25_05))]
    forward fn select_p_select_jobinfo_copy(jobinfo: *mut select_jobinfo_t) -> *mut select_jobinfo_t, fail = null_mut();
    #[cfg(not(slurm_25_05))]
    forward fn select_p_select_jobinfo_pack(jobinfo: *mut select_jobinfo_t, buffer: *mut buf_t, protocol_version: u16) -> c_int, fail = SLURM_ERROR;
    #[cfg(not(slurm_25_05))]
    forward fn select_p_select_jobinfo_unpack(jobinfo_pptr: *mut *mut select_jobinfo_t, buffer: *mut buf_t, protocol_version: u16) -> c_int, fail = SLURM_ERROR;
    #[cfg(select_abi = "22.05")]
    forward fn select_p_select_jobinfo_sprint(jobinfo: *mut select_jobinfo_t, buf: *mut c_char, size: usize, mode: c_int) -> *mut c_char, fail = null_mut();
    #[cfg(select_abi = "22.05")]
    forward fn select_p_select_jobinfo_xstrdup(jobinfo: *mut select_jobinfo_t, mode: c_int) -> *mut c_char, fail = null_mut();
    #[cfg(not(slurm_25_05))]
    forward fn select_p_get_info_from_plugin(dinfo: select_plugindata_info, job_ptr: *mut job_record_t, data: *mut c_void) -> c_int, fail = SLURM_ERROR;
    #[cfg(select_abi = "22.05")]
    forward fn select_p_update_node_config(index: c_int) -> c_int, fail = SLURM_ERROR;
    // Guarded: after a panic too, gputopo.conf and the persisted health are read again.
    guarded fn select_p_reconfigure() -> c_int, fail = SLURM_ERROR
        => reconfigure();
    #[cfg(select_abi = "22.05")]
    forward fn select_p_resv_test(
        resv_desc_ptr: *mut resv_desc_msg_t, node_cnt: u32, avail_bitmap: *mut bitstr_t,
        core_bitmap: *mut *mut bitstr_t,
    ) -> *mut bitstr_t, fail = null_mut();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::select::stock;

    /// Needs the installed Slurm of the build tree (the one the crate links against).
    #[test]
    fn the_stock_plugin_has_every_entry_point_of_the_table() {
        let lib = stock::library().expect("stock plugin loads and matches our release");
        let table = StockSelect::load(lib).expect("every select_p_* of the table resolves");
        assert!(std::ptr::eq(table, StockSelect::get().expect("loaded")));
    }
}
