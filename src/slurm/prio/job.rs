//! A slurmctld job record as the priority math sees it, and the write-back of the result.
//!
//! Reading mirrors what multifactor's `set_priority_factors` reads; writing mirrors what
//! `_get_priority_internal` stores: `job_ptr->prio_factors` (weighted, xmalloc'ed, TRES arrays
//! xcalloc'ed), the per-partition array (22.05 and 23.11 `priority_array`, 24.05 `part_prio`, 25.05+
//! `prio_mult`), and
//! `job_ptr->priority`. The release differences are absorbed here (`cfg(priority_abi)`).

use std::ffi::CStr;

use gputopo_core::priority::recalc::{JobState, RunTimes};
use gputopo_core::priority::{
    AssocInput, JobInput, NO_CONSUME_VAL64, PartitionInput, QosInput, WeightedFactors,
};

use super::xmalloc::{borrow_array, capacity, read_array};
use crate::ffi;
use crate::slurm::list::ListRef;

mod charge;
mod gpus;
mod walk;
mod write;

pub use walk::{JobBuf, JobsLocked, Kept};

/// `prio_factors`' type: flat object in 22.05, `priority_factors_t` from 23.02.
#[cfg(priority_abi = "22.05")]
pub type JobFactors = ffi::priority_factors_object_t;
/// `prio_factors`' type: flat object in 22.05, `priority_factors_t` from 23.02.
#[cfg(not(priority_abi = "22.05"))]
pub type JobFactors = ffi::priority_factors_t;

/// The per-partition priority record: `priority_parts_t` in 24.05 (24.05.8
/// src/common/job_record.h:231-235), `priority_mult_t` from 24.11 (24.11.5 :233-237, the
/// partition × QOS array of multi-QOS jobs). 22.05 and 23.11 have none: a flat
/// `job_ptr->priority_array` (23.11.4 src/slurmctld/slurmctld.h:884).
#[cfg(all(slurm_24_05, not(slurm_24_11)))]
pub(super) type PrioMult = ffi::priority_parts_t;
/// See the 24.05 alias.
#[cfg(slurm_24_11)]
pub(super) type PrioMult = ffi::priority_mult_t;

/// `job_ptr->part_prio` (24.05 to 24.11), renamed `prio_mult` in 25.05 (same
/// `priority_mult_t *`, xmalloc'ed and owned by the job).
#[cfg(slurm_24_05)]
fn prio_mult_mut(job: &mut ffi::job_record_t) -> &mut *mut PrioMult {
    #[cfg(not(slurm_25_05))]
    let field = &mut job.part_prio;
    #[cfg(slurm_25_05)]
    let field = &mut job.prio_mult;
    field
}

/// Reads the field [`prio_mult_mut`] names.
#[cfg(slurm_24_05)]
fn prio_mult(job: &ffi::job_record_t) -> *mut PrioMult {
    #[cfg(not(slurm_25_05))]
    let p = job.part_prio;
    #[cfg(slurm_25_05)]
    let p = job.prio_mult;
    p
}

/// The partition-names string of [`PrioMult`]: `priority_array_parts` in 24.05 (24.05.8
/// job_record.h:234), `priority_array_names` from 24.11 (24.11.5 :236).
#[cfg(slurm_24_05)]
pub(super) fn array_names(pp: &mut PrioMult) -> &mut *mut std::ffi::c_char {
    #[cfg(not(slurm_24_11))]
    let names = &mut pp.priority_array_parts;
    #[cfg(slurm_24_11)]
    let names = &mut pp.priority_array_names;
    names
}

#[cfg(priority_abi = "22.05")]
type Details = ffi::job_details;
#[cfg(not(priority_abi = "22.05"))]
type Details = ffi::job_details_t;

// Job state bits (slurm/slurm.h, identical in 22.05 and 24.11; SLURM_BIT() macros that bindgen
// cannot evaluate).
const JOB_COMPLETING: u32 = 1 << 15;
const JOB_RESIZING: u32 = 1 << 13;
const JOB_POWER_UP_NODE: u32 = 1 << 18;
const JOB_REVOKED: u32 = 1 << 19;
// `enum job_states` order (slurm.h): PENDING, RUNNING, SUSPENDED, ...
const JOB_PENDING: u32 = 0;
const JOB_RUNNING: u32 = 1;
const JOB_SUSPENDED: u32 = 2;

/// A job record, borrowed while the caller holds the job lock Slurm requires.
#[derive(Debug)]
pub struct JobRecord<'a> {
    job: &'a mut ffi::job_record_t,
}

fn cstr(p: *const std::ffi::c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        // SAFETY: NUL-terminated string owned by the record.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

impl<'a> JobRecord<'a> {
    /// Wraps a job pointer.
    ///
    /// # Safety
    /// `job` is a live `job_record_t` and the caller holds the slurmctld job write lock (or
    /// read lock for read-only use) for `'a`.
    unsafe fn from_raw(job: *mut ffi::job_record_t) -> Option<JobRecord<'a>> {
        // SAFETY: caller contract.
        unsafe { job.as_mut() }.map(|job| JobRecord { job })
    }

    /// Wraps the job pointer of an entry-point call (Slurm holds the job write lock during
    /// `priority_p_set` and `priority_p_job_end`).
    pub fn from_entry(job: crate::slurm::EntryPtr<'a, ffi::job_record_t>) -> JobRecord<'a> {
        // SAFETY: EntryPtr vouches for a live record for 'a; the caller of the entry point
        // holds the job write lock for the whole call.
        let job = unsafe { &mut *job.as_ptr() };
        JobRecord { job }
    }

    /// `direct_set_prio` with a non-zero priority: the formula is bypassed.
    pub fn input_is_direct(&self) -> bool {
        self.job.direct_set_prio != 0 && self.job.priority > 0
    }

    /// The unweighted fair-share factor of the job's association as multifactor's
    /// `_get_fairshare_priority` reads it: Fair Tree's `fs_factor`, or classic
    /// `calc_fs_factor(usage_efctv, shares_norm)` of the fs association (USE_PARENT → parent).
    /// Caller holds the assoc_mgr read lock.
    pub fn assoc_fs_factor(&self, fair_tree: bool, damp: u16) -> f64 {
        // SAFETY: association records and usage live in assoc_mgr (read lock held by caller).
        let Some(a) = (unsafe { self.job.assoc_ptr.as_ref() }) else {
            return 0.0;
        };
        // SAFETY: as above.
        let Some(u) = (unsafe { a.usage.as_ref() }) else {
            return 0.0;
        };
        if fair_tree {
            return u.fs_factor;
        }
        let fs = if a.shares_raw == gputopo_core::priority::FS_USE_PARENT {
            // SAFETY: as above.
            let parent = unsafe { u.fs_assoc_ptr.as_ref() };
            // SAFETY: as above.
            parent
                .and_then(|p| unsafe { p.usage.as_ref() })
                .unwrap_or(u)
        } else {
            u
        };
        // SAFETY: `usage_efctv` is a long double field of a live usage record.
        let ue = unsafe { super::long_double::get(&fs.usage_efctv) };
        gputopo_core::priority::classic::calc_fs_factor(ue, fs.shares_norm, damp)
    }

    /// The raw pointer (for list/ptr comparisons).
    pub fn as_ptr(&self) -> *const ffi::job_record_t {
        self.job
    }

    fn details(&self) -> Option<&Details> {
        // SAFETY: details is owned by the job record (same lock).
        unsafe { self.job.details.as_ref() }
    }

    /// Job id.
    pub fn id(&self) -> u32 {
        self.job.job_id
    }
    /// Submitting user.
    pub fn user_id(&self) -> u32 {
        self.job.user_id
    }
    /// Current priority (0 = held).
    pub fn priority(&self) -> u32 {
        self.job.priority
    }
    /// Account name (empty without accounting).
    pub fn account(&self) -> String {
        cstr(self.job.account)
    }
    /// `IS_JOB_PENDING`.
    pub fn is_pending(&self) -> bool {
        self.job.job_state & ffi::JOB_STATE_BASE == JOB_PENDING
    }
    /// `IS_JOB_RUNNING`.
    pub fn is_running(&self) -> bool {
        self.job.job_state & ffi::JOB_STATE_BASE == JOB_RUNNING
    }
    /// `IS_JOB_FINISHED`: completed, cancelled, failed, timed out, ... (base state past
    /// SUSPENDED).
    pub fn is_finished(&self) -> bool {
        self.job.job_state & ffi::JOB_STATE_BASE > JOB_SUSPENDED
    }
    /// `IS_JOB_POWER_UP_NODE`.
    pub fn is_power_up(&self) -> bool {
        self.job.job_state & JOB_POWER_UP_NODE != 0
    }
    /// `IS_JOB_REVOKED`.
    pub fn is_revoked(&self) -> bool {
        self.job.job_state & JOB_REVOKED != 0
    }
    /// `IS_JOB_FINISHED || IS_JOB_COMPLETING || IS_JOB_RESIZING`.
    pub fn is_ending(&self) -> bool {
        self.is_finished() || self.job.job_state & (JOB_COMPLETING | JOB_RESIZING) != 0
    }
    /// Whether the job has a details record (multifactor returns 0 without one).
    pub fn has_details(&self) -> bool {
        self.details().is_some()
    }
    /// `details->submit_time` and `details->begin_time`.
    pub fn submit_and_begin(&self) -> (i64, i64) {
        self.details()
            .map_or((0, 0), |d| (d.submit_time, d.begin_time))
    }
    /// `start_time`, `end_time`, `time_limit` (minutes).
    pub fn run_times(&self) -> (i64, i64, u32) {
        (self.job.start_time, self.job.end_time, self.job.time_limit)
    }
    /// `billable_tres` (set at allocation).
    pub fn billable_tres(&self) -> f64 {
        self.job.billable_tres
    }
    /// `tres_alloc_cnt[i]`, if allocated and consumed.
    pub fn tres_alloc(&self, i: usize, tres_cnt: usize) -> Option<u64> {
        // SAFETY: tres_alloc_cnt is null or xmalloc'ed and owned by the job (job lock held).
        if i >= tres_cnt || i >= unsafe { capacity(self.job.tres_alloc_cnt) } {
            return None;
        }
        let slot = self.job.tres_alloc_cnt.wrapping_add(i);
        // SAFETY: i is inside the allocation (checked above).
        let v = unsafe { slot.read() };
        (v != NO_CONSUME_VAL64).then_some(v)
    }

    /// The state bits the pass's rules look at ([`gputopo_core::priority::recalc`]).
    pub fn state(&self) -> JobState {
        JobState {
            pending: self.is_pending(),
            running: self.is_running(),
            finished: self.is_finished(),
            ending: self.is_ending(),
            power_up: self.is_power_up(),
            revoked: self.is_revoked(),
            priority: self.job.priority,
        }
    }

    /// `start_time`/`end_time` and whether it runs, as the ledger charges them.
    pub fn charge_times(&self) -> RunTimes {
        RunTimes {
            start: self.job.start_time,
            end: self.job.end_time,
            running: self.is_running(),
        }
    }

    /// The part of the record multifactor reads, borrowing the record's arrays (no copy, no
    /// allocation: `buf` holds the partition and QOS lists of multi-partition/QOS jobs and
    /// keeps its capacity from job to job). `accrue_override` replaces
    /// `details->accrue_time` (gputopo's age-from-eligible-time extension); `fairshare` is the
    /// unweighted fair-share factor for this job's association.
    pub fn input<'b>(
        &'b self,
        tres_cnt: usize,
        accrue_override: Option<i64>,
        fairshare: f64,
        buf: &'b mut InputBuf<'a>,
    ) -> JobInput<'b> {
        let d = self.details();
        let job = &*self.job;
        buf.partitions.clear();
        buf.qos.clear();
        // SAFETY: part/qos/assoc records outlive jobs referencing them (part/assoc read locks).
        let part = unsafe { job.part_ptr.as_ref() }.map(|p| partition(p, tres_cnt));
        // SAFETY: part_ptr_list holds part_record_t pointers (job lock + part read lock).
        if let Some(list) = unsafe { ListRef::<ffi::part_record_t>::from_raw(job.part_ptr_list) } {
            buf.partitions
                .extend(list.iter().map(|p| partition(p, tres_cnt)));
        }
        // Multi-QOS jobs exist from 24.11 (24.11.5 job_record.h:411; no qos_list in 24.05.8).
        #[cfg(slurm_24_11)]
        // SAFETY: qos_list holds slurmdb_qos_rec_t pointers (assoc_mgr QOS read lock by caller).
        if let Some(l) = unsafe { ListRef::<ffi::slurmdb_qos_rec_t>::from_raw(job.qos_list) } {
            buf.qos.extend(l.iter().map(qos));
        }
        JobInput {
            direct_priority: (job.direct_set_prio != 0).then_some(job.priority),
            accrue_time: accrue_override.unwrap_or_else(|| d.map_or(0, |d| d.accrue_time)),
            total_cpus: job.total_cpus,
            max_cpus: d.map_or(gputopo_core::priority::NO_VAL, |d| d.max_cpus),
            min_cpus: d.map_or(0, |d| d.min_cpus),
            min_nodes: d.map_or(1, |d| d.min_nodes),
            time_limit_mins: job.time_limit,
            partition: part,
            partitions: &buf.partitions,
            // SAFETY: see above.
            qos: unsafe { job.qos_ptr.as_ref() }.map(qos),
            qos_list: &buf.qos,
            // SAFETY: see above.
            assoc: unsafe { job.assoc_ptr.as_ref() }.map(|a| AssocInput {
                priority: a.priority,
                // SAFETY: usage is allocated with the association.
                priority_norm: unsafe { a.usage.as_ref() }.map_or(0.0, |u| u.priority_norm),
                fairshare,
            }),
            tres_alloc: u64_array(job.tres_alloc_cnt, tres_cnt),
            tres_req: u64_array(job.tres_req_cnt, tres_cnt),
            site_factor: job.site_factor,
            nice: d.map_or(gputopo_core::priority::NICE_OFFSET, |d| d.nice),
        }
    }

    /// The job's current per-partition/QOS array as the formula's previous values (INCR_ONLY),
    /// at most `len` entries: what the allocation holds (by xmalloc's size, never by `len`;
    /// the core treats missing entries as 0). 24.11 starts from zeros where multifactor
    /// reallocates (no array, or partitions changed since it was made).
    pub fn current_array(&self, len: usize, last_part_update: i64) -> Option<&[u32]> {
        #[cfg(not(slurm_24_05))]
        let arr = {
            let _ = last_part_update;
            self.job.priority_array
        };
        #[cfg(slurm_24_05)]
        // SAFETY: part_prio is null or xmalloc'ed and owned by the job.
        let arr = unsafe { prio_mult(self.job).as_ref() }
            .filter(|p| p.last_update >= last_part_update)
            .map_or(std::ptr::null_mut(), |p| p.priority_array);
        // SAFETY: null or an xmalloc'ed array owned by the job (job lock held while `self` is
        // borrowed; only `&mut self` methods replace it).
        unsafe { borrow_array(arr, len) }
    }

    /// Sorts `part_ptr_list` by partition tier where multifactor does before computing: 22.05
    /// and 23.11 on every computation (23.11.4 priority_multifactor.c:628), 24.05 only when it
    /// (re)makes the array (24.05.8 :702-715: no array yet, or partitions changed since).
    /// From 24.11 slurmctld keeps the list sorted (24.11.5 partition_mgr.c:749).
    pub fn sort_partitions(&mut self, last_part_update: i64) {
        #[cfg(all(slurm_24_05, not(slurm_24_11)))]
        // SAFETY: part_prio is null or xmalloc'ed and owned by the job.
        let stale = unsafe { prio_mult(self.job).as_ref() }
            .is_none_or(|p| p.priority_array.is_null() || p.last_update < last_part_update);
        #[cfg(not(slurm_24_05))]
        let stale = {
            let _ = last_part_update;
            true
        };
        #[cfg(not(slurm_24_11))]
        if stale && !self.job.part_ptr_list.is_null() {
            // SAFETY: libslurmfull's list_sort with its own comparator for part_record_t lists.
            unsafe {
                ffi::slurm_list_sort(self.job.part_ptr_list, Some(ffi::priority_sort_part_tier))
            };
        }
        #[cfg(slurm_24_11)]
        let _ = last_part_update;
    }

    /// The weighted factors stored in `prio_factors`, if any.
    pub fn stored_factors(&self) -> Option<WeightedFactors> {
        // SAFETY: prio_factors is null or an xmalloc'ed JobFactors owned by the job.
        let pf = unsafe { self.job.prio_factors.as_ref() }?;
        // SAFETY: priority_tres is null or xmalloc'ed with the factors (read by its size).
        let tres =
            unsafe { read_array(pf.priority_tres, pf.tres_cnt as usize) }.unwrap_or_default();
        Some(WeightedFactors {
            age: pf.priority_age,
            assoc: pf.priority_assoc,
            fairshare: pf.priority_fs,
            job_size: pf.priority_js,
            partition: pf.priority_part,
            qos: pf.priority_qos,
            tres,
            site: pf.priority_site,
            nice: pf.nice,
        })
    }

    /// The raw record, for the sprio list builder in this module's sibling.
    pub(super) fn record(&self) -> &ffi::job_record_t {
        self.job
    }
}

/// Buffers [`JobRecord::input`] fills for multi-partition and multi-QOS jobs; one per pass,
/// reused for every job.
#[derive(Debug, Default)]
pub struct InputBuf<'a> {
    partitions: Vec<PartitionInput<'a>>,
    qos: Vec<QosInput>,
}

fn u64_array<'a>(p: *const u64, n: usize) -> Option<&'a [u64]> {
    // SAFETY: Slurm's TRES arrays are xmalloc'ed (normally slurmctld_tres_cnt entries; read by
    // their allocated size, not by n) and owned by records that live while the lock is held.
    (n > 0).then(|| unsafe { borrow_array(p, n) }).flatten()
}

fn partition<'a>(p: &'a ffi::part_record_t, tres_cnt: usize) -> PartitionInput<'a> {
    PartitionInput {
        priority_job_factor: p.priority_job_factor,
        norm_priority: p.norm_priority,
        max_time_mins: p.max_time,
        tres_cnt: u64_array(p.tres_cnt, tres_cnt),
    }
}

fn qos(q: &ffi::slurmdb_qos_rec_t) -> QosInput {
    QosInput {
        priority: q.priority,
        // SAFETY: QOS usage is allocated with the record.
        norm_priority: unsafe { q.usage.as_ref() }.map_or(0.0, |u| u.norm_priority),
    }
}

/// Whether slurmctld has created `job_list` yet (22.05 initialises the priority plugin before
/// it reads the job state; a pass before that would see no running jobs).
pub fn job_list_exists() -> bool {
    crate::slurm::ctld::JOB_LIST.ptr().is_some_and(|p| {
        // SAFETY: `list_t *job_list` in slurmctld; a pointer-sized read.
        !unsafe { p.as_ptr().read() }.is_null()
    })
}
