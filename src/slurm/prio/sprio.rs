//! The list `priority_p_get_priority_factors_list` returns to slurmctld for `sprio`.
//!
//! Mirrors multifactor: one row per (partition × QOS) of every pending job whose priority is
//! not 0 and that is eligible (`begin_time`, or `submit_time` with ACCRUE_ALWAYS, not in the
//! future); running jobs too with CALCULATE_RUNNING. Rows of multi-partition/QOS jobs recompute
//! the partition, TRES and QOS terms ([`gputopo_core::priority::multifactor::sprio_row`]).
//! 22.05: flat `priority_factors_object_t`, request filters (jobs, users, partitions) applied
//! here (23.11 too). 23.02+: nested `prio_factors`; from 24.05 filtering is the client's. Objects and strings are
//! xmalloc'ed; the list's destructor is Slurm's `slurm_destroy_priority_factors_object`.

use std::ffi::{CStr, c_void};
use std::ptr;

use gputopo_core::priority::multifactor::sprio_row;
use gputopo_core::priority::recalc::{eligible_time, listed};
use gputopo_core::priority::{PartitionInput, PriorityConfig, QosInput, WeightedFactors};

use super::job::{InputBuf, JobRecord, JobsLocked};
use super::xmalloc::xcalloc;
use crate::ffi;
use crate::slurm::list::ListRef;

/// Request filters (22.05 and 23.11, whose factor list still takes the request: 23.11.4
/// priority_multifactor.c:1928-1930, applied by `_filter_job` :1463; 24.05+ passes none).
#[derive(Debug, Default)]
pub struct Filter {
    /// Job ids to keep (empty = all).
    pub jobs: Vec<u32>,
    /// Uids to keep (empty = all).
    pub users: Vec<u32>,
    /// Partition names to keep (empty = all).
    pub partitions: Vec<String>,
}

impl Filter {
    /// Reads the 22.05/23.11 request of the current RPC.
    #[cfg(any(priority_abi = "22.05", priority_abi = "23.11"))]
    pub fn from_entry(
        req: Option<crate::slurm::EntryPtr<'_, ffi::priority_factors_request_msg_t>>,
    ) -> Filter {
        // SAFETY: EntryPtr vouches for the live request of this call.
        unsafe { Self::from_request(req.map_or(ptr::null_mut(), |r| r.as_ptr().cast())) }
    }

    /// Reads a 22.05/23.11 `priority_factors_request_msg_t`.
    ///
    /// # Safety
    /// `req` is null or the live request of the current RPC.
    pub unsafe fn from_request(req: *mut c_void) -> Filter {
        #[cfg(any(priority_abi = "22.05", priority_abi = "23.11"))]
        let mut f = Filter::default();
        #[cfg(not(any(priority_abi = "22.05", priority_abi = "23.11")))]
        let f = Filter::default();
        #[cfg(any(priority_abi = "22.05", priority_abi = "23.11"))]
        {
            // SAFETY: caller contract.
            let Some(r) = (unsafe { req.cast::<ffi::priority_factors_request_msg_t>().as_ref() })
            else {
                return f;
            };
            // SAFETY: lists of uint32_t built by the RPC unpacker.
            if let Some(l) = unsafe { ListRef::<u32>::from_raw(r.job_id_list) } {
                f.jobs = l.iter().copied().collect();
            }
            // SAFETY: as above.
            if let Some(l) = unsafe { ListRef::<u32>::from_raw(r.uid_list) } {
                f.users = l.iter().copied().collect();
            }
            if !r.partitions.is_null() {
                // SAFETY: NUL-terminated request string.
                let s = unsafe { CStr::from_ptr(r.partitions) }
                    .to_string_lossy()
                    .into_owned();
                f.partitions = s
                    .split(',')
                    .filter(|p| !p.is_empty())
                    .map(str::to_string)
                    .collect();
            }
        }
        #[cfg(not(any(priority_abi = "22.05", priority_abi = "23.11")))]
        let _ = req;
        f
    }
}

fn name(p: *const std::ffi::c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        // SAFETY: NUL-terminated record name.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

/// Builds the factor list from every job. `jobs` proves the job lock; the caller also holds
/// the node and partition read locks. Returns null when no job qualifies (as multifactor
/// does).
pub fn factors_list(
    jobs: &JobsLocked<'_>,
    cfg: &PriorityConfig,
    uid: u32,
    filter: &Filter,
    now: i64,
) -> *mut ffi::xlist {
    let tres_cnt = super::tres_count();
    let private = super::private_jobs() && !super::is_operator(uid);
    // SAFETY: slurm's destructor for these objects; list freed by the caller (FREE_NULL_LIST).
    let list = unsafe { ffi::slurm_list_create(Some(ffi::slurm_destroy_priority_factors_object)) };
    let mut count = 0usize;
    jobs.for_each(|job| {
        let (submit, begin) = job.submit_and_begin();
        let eligible = eligible_time(cfg.flags, submit, begin);
        if !listed(cfg.flags, &job.state(), eligible, now, job.has_details()) {
            return;
        }
        if private && job.user_id() != uid {
            return;
        }
        if (!filter.jobs.is_empty() && !filter.jobs.contains(&job.id()))
            || (!filter.users.is_empty() && !filter.users.contains(&job.user_id()))
        {
            return;
        }
        count += rows(cfg, &job, tres_cnt, filter, list);
    });
    if count == 0 {
        let mut l = list;
        // SAFETY: created above and empty.
        unsafe { ffi::slurm_list_destroy(l) };
        l = ptr::null_mut();
        return l;
    }
    list
}

/// [`factors_list`] from `priority_p_get_priority_factors_list` (23.02+), which slurmctld
/// calls with the job, node and partition read locks held (proc_req.c
/// `_slurm_rpc_get_priority_factors`); call it from nowhere else.
pub fn factors_list_under_slurm_lock(
    cfg: &PriorityConfig,
    uid: u32,
    filter: &Filter,
    now: i64,
) -> *mut ffi::xlist {
    // SAFETY: this entry point's caller holds the job read lock for the whole call, and the
    // list only reads records.
    let jobs = unsafe { JobsLocked::held_by_slurm() };
    factors_list(&jobs, cfg, uid, filter, now)
}

/// Appends one job's rows; returns how many.
fn rows(
    cfg: &PriorityConfig,
    job: &JobRecord<'_>,
    tres_cnt: usize,
    filter: &Filter,
    list: *mut ffi::xlist,
) -> usize {
    let rec = job.record();
    let mut buf = InputBuf::default();
    let input = job.input(tres_cnt, None, 0.0, &mut buf);
    let stored = job.stored_factors().unwrap_or_default();
    // (partition record, its input, is_multi)
    let mut parts: Vec<(*mut ffi::part_record_t, Option<PartitionInput>)> = Vec::new();
    // SAFETY: part_ptr_list holds part_record_t pointers (part read lock held).
    if let Some(l) = unsafe { ListRef::<ffi::part_record_t>::from_raw(rec.part_ptr_list) } {
        for (p, pin) in l.iter().zip(input.partitions.iter()) {
            parts.push((p as *const _ as *mut _, Some(*pin)));
        }
    } else if !rec.part_ptr.is_null() {
        parts.push((rec.part_ptr, None));
    } else {
        return 0;
    }
    // One row per partition × QOS of multi-QOS jobs (24.11+; 24.05.8 and 23.11.4 have no
    // qos_list: one row per partition, 24.05.8 priority_multifactor.c:1968-1987, 23.11.4 :2011-2030).
    #[cfg(slurm_24_11)]
    let qos: Vec<(*mut ffi::slurmdb_qos_rec_t, Option<QosInput>)> =
        // SAFETY: qos_list holds QOS records (assoc_mgr keeps them alive).
        match unsafe { ListRef::<ffi::slurmdb_qos_rec_t>::from_raw(rec.qos_list) } {
            Some(l) => l.iter().zip(input.qos_list.iter()).map(|(q, qi)| (q as *const _ as *mut _, Some(*qi))).collect(),
            None => vec![(rec.qos_ptr, None)],
        };
    #[cfg(not(slurm_24_11))]
    let qos: Vec<(*mut ffi::slurmdb_qos_rec_t, Option<QosInput>)> = vec![(rec.qos_ptr, None)];
    let mut n = 0;
    for (part, pin) in &parts {
        // SAFETY: live partition record.
        let pname = unsafe { part.as_ref() }.map_or(ptr::null_mut(), |p| p.name);
        if !filter.partitions.is_empty() && !filter.partitions.contains(&name(pname)) {
            continue;
        }
        for (q, qin) in &qos {
            let row = sprio_row(cfg, &input, &stored, pin.as_ref(), *qin);
            append(rec, pname, *q, pin.is_some(), &row, list);
            n += 1;
        }
    }
    n
}

#[cfg(not(priority_abi = "22.05"))]
fn append(
    rec: &ffi::job_record_t,
    part: *mut std::ffi::c_char,
    qos: *mut ffi::slurmdb_qos_rec_t,
    _multi_part: bool,
    row: &WeightedFactors,
    list: *mut ffi::xlist,
) {
    let obj = xcalloc(1, size_of::<ffi::priority_factors_object_t>())
        .cast::<ffi::priority_factors_object_t>();
    // SAFETY: just allocated, zeroed.
    let o = unsafe { &mut *obj };
    // SAFETY: xstrdup of NUL-terminated strings (or NULL); freed by the list destructor.
    unsafe {
        o.account = ffi::slurm_xstrdup(rec.account);
    }
    // 26.05 identifies the job by its step id (`obj->step_id = job_ptr->step_id`).
    #[cfg(not(slurm_26_05))]
    {
        o.job_id = rec.job_id;
    }
    #[cfg(slurm_26_05)]
    {
        o.step_id = rec.step_id;
    }
    // SAFETY: as above.
    o.partition = unsafe { ffi::slurm_xstrdup(part) };
    // SAFETY: live QOS record (or null).
    let qname = unsafe { qos.as_ref() }.map_or(ptr::null_mut(), |q| q.name);
    // SAFETY: as above.
    o.qos = unsafe { ffi::slurm_xstrdup(qname) };
    o.user_id = rec.user_id;
    if rec.direct_set_prio != 0 {
        o.direct_prio = f64::from(rec.priority);
    } else {
        let pf = xcalloc(1, size_of::<ffi::priority_factors_t>()).cast::<ffi::priority_factors_t>();
        // SAFETY: deep copy of the job's factors into the fresh struct (Slurm's own copier).
        unsafe { ffi::slurm_copy_priority_factors(pf, rec.prio_factors) };
        // SAFETY: allocated above.
        write_row(unsafe { &mut *pf }, row);
        o.prio_factors = pf;
    }
    // SAFETY: list created with the matching destructor.
    unsafe { ffi::slurm_list_append(list, obj.cast()) };
}

#[cfg(priority_abi = "22.05")]
fn append(
    rec: &ffi::job_record_t,
    part: *mut std::ffi::c_char,
    _qos: *mut ffi::slurmdb_qos_rec_t,
    multi_part: bool,
    row: &WeightedFactors,
    list: *mut ffi::xlist,
) {
    let obj = xcalloc(1, size_of::<ffi::priority_factors_object_t>())
        .cast::<ffi::priority_factors_object_t>();
    // SAFETY: just allocated, zeroed.
    let o = unsafe { &mut *obj };
    if rec.direct_set_prio != 0 && !multi_part {
        o.direct_prio = f64::from(rec.priority);
    } else {
        // SAFETY: Slurm's copier (deep-copies the TRES arrays) from the job's factors.
        unsafe { ffi::slurm_copy_priority_factors_object(obj, rec.prio_factors) };
        write_row(o, row);
    }
    o.job_id = rec.job_id;
    // Borrowed, as multifactor does: 22.05's destructor does not free `partition`.
    o.partition = part;
    o.user_id = rec.user_id;
    // SAFETY: list created with the matching destructor.
    unsafe { ffi::slurm_list_append(list, obj.cast()) };
}

/// Writes a row's recomputed terms (partition, QOS, TRES) into the copied factors.
fn write_row(pf: &mut super::job::JobFactors, row: &WeightedFactors) {
    pf.priority_part = row.partition;
    pf.priority_qos = row.qos;
    if !pf.priority_tres.is_null() {
        for (i, v) in row.tres.iter().enumerate().take(pf.tres_cnt as usize) {
            let slot = pf.priority_tres.wrapping_add(i);
            // SAFETY: priority_tres has tres_cnt doubles (deep copy).
            unsafe { slot.write(*v) };
        }
    }
}
