//! Select ABI of Slurm 25.05 and 25.11 (12 `select_p_*`) and 26.05 (13), matching
//! `node_select_syms[]` and `slurm_select_ops_t` in src/interfaces/select.c (25.05.8, 25.11.7,
//! 26.05.3). Relative to 23.11: the state save/restore, job_init, step, nodeinfo
//! pack/alloc/get and every jobinfo entry point are gone (only slurmctld loads a select plugin
//! from 25.05); the remaining prototypes are unchanged. 26.05 adds
//! `void select_p_job_mem_reduce(job_record_t *)` between `job_resized` and `job_fini`.

use std::ffi::c_int;

use crate::ffi::{
    SLURM_ERROR, bitstr_t, job_record_t, node_record_t, resv_exc_t, will_run_data_t, xlist,
};

crate::forwarding_table! {
    stock StockSelect from crate::plugin::stock::select;
    forward fn select_p_node_init() -> c_int, fail = SLURM_ERROR;
    guarded fn select_p_job_test(
        job_ptr: *mut job_record_t, bitmap: *mut bitstr_t, min_nodes: u32, max_nodes: u32,
        req_nodes: u32, mode: u16, preemptee_candidates: *mut xlist,
        preemptee_job_list: *mut *mut xlist, resv_exc_ptr: *mut resv_exc_t,
        will_run_ptr: *mut will_run_data_t,
    ) -> c_int, fail = SLURM_ERROR
        => crate::plugin::steer::job_test(job_ptr, bitmap, min_nodes, max_nodes, req_nodes, mode, preemptee_candidates, resv_exc_ptr);
    forward fn select_p_job_begin(job_ptr: *mut job_record_t) -> c_int, fail = SLURM_ERROR;
    forward fn select_p_job_ready(job_ptr: *mut job_record_t) -> c_int, fail = SLURM_ERROR;
    forward fn select_p_job_expand(from_job_ptr: *mut job_record_t, to_job_ptr: *mut job_record_t) -> c_int, fail = SLURM_ERROR;
    forward fn select_p_job_resized(job_ptr: *mut job_record_t, node_ptr: *mut node_record_t) -> c_int, fail = SLURM_ERROR;
    #[cfg(select_abi = "26.05")]
    forward fn select_p_job_mem_reduce(job_ptr: *mut job_record_t) -> (), fail = ();
    forward fn select_p_job_fini(job_ptr: *mut job_record_t) -> c_int, fail = SLURM_ERROR;
    forward fn select_p_job_suspend(job_ptr: *mut job_record_t, indf_susp: bool) -> c_int, fail = SLURM_ERROR;
    forward fn select_p_job_resume(job_ptr: *mut job_record_t, indf_susp: bool) -> c_int, fail = SLURM_ERROR;
    forward fn select_p_select_nodeinfo_set_all() -> c_int, fail = SLURM_ERROR;
    hook fn select_p_select_nodeinfo_set(job_ptr: *mut job_record_t) -> c_int, fail = SLURM_ERROR
        => crate::plugin::steer::select_nodeinfo_set(job_ptr);
    hook fn select_p_reconfigure() -> c_int, fail = SLURM_ERROR
        => crate::plugin::select::reconfigure();
}
