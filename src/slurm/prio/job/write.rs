//! Writing a job record back: `prio_factors`, the per-partition/QOS priority array and
//! `job_ptr->priority` (what multifactor's `_get_priority_internal` stores).

use std::ptr;

use gputopo_core::priority::{JobPriority, WeightedFactors};

use super::super::xmalloc::{capacity, store_u32s, xcalloc, xfree};
use super::{JobFactors, JobRecord};

impl JobRecord<'_> {
    /// Frees and zeroes `prio_factors` (direct priority or no details).
    pub fn clear_factors(&mut self) {
        // SAFETY: prio_factors is null or an xmalloc'ed JobFactors owned by the job.
        if let Some(f) = unsafe { self.job.prio_factors.as_mut() } {
            // SAFETY: null or xmalloc'ed, owned by the job (its lock is held).
            unsafe { xfree(&mut f.tres_weights) };
            // SAFETY: null or xmalloc'ed, owned by the job (its lock is held).
            unsafe { xfree(&mut f.priority_tres) };
            // SAFETY: plain-old-data struct; all-zero is its memset state in multifactor.
            unsafe { ptr::write_bytes(f as *mut JobFactors, 0, 1) };
        }
    }

    /// Stores weighted factors in `prio_factors` (what sprio shows). Every pass writes every
    /// pending job's factors, so the TRES arrays are reused where xmalloc's own record says
    /// they are large enough, instead of freed and allocated again.
    pub fn store_factors(&mut self, f: &WeightedFactors, tres_weights: Option<&[f64]>) {
        if self.job.prio_factors.is_null() {
            self.job.prio_factors = xcalloc(1, size_of::<JobFactors>()).cast();
        }
        // SAFETY: null (allocation failed) or xmalloc'ed, owned by the job (its lock is held).
        let Some(pf) = (unsafe { self.job.prio_factors.as_mut() }) else {
            return;
        };
        let (mut prio_tres, mut weights) = (pf.priority_tres, pf.tres_weights);
        let n = tres_weights.map_or(0, <[f64]>::len);
        // SAFETY: null or an xmalloc'ed array owned by the job.
        let have_tres = unsafe { capacity(prio_tres) };
        // SAFETY: as above.
        let have_weights = unsafe { capacity(weights) };
        let reuse = n > 0 && have_tres >= n && have_weights >= n;
        if !reuse {
            // SAFETY: null or xmalloc'ed, owned by the job (its lock is held).
            unsafe { xfree(&mut prio_tres) };
            // SAFETY: as above.
            unsafe { xfree(&mut weights) };
        }
        // SAFETY: plain-old-data struct; all-zero is its memset state in multifactor (the
        // array pointers were saved above and are stored again below).
        unsafe { ptr::write_bytes(pf as *mut JobFactors, 0, 1) };
        pf.priority_age = f.age;
        pf.priority_assoc = f.assoc;
        pf.priority_fs = f.fairshare;
        pf.priority_js = f.job_size;
        pf.priority_part = f.partition;
        pf.priority_qos = f.qos;
        pf.priority_site = f.site;
        pf.nice = f.nice;
        let Some(w) = tres_weights.filter(|w| !w.is_empty()) else {
            return;
        };
        if !reuse {
            prio_tres = xcalloc(n, size_of::<f64>()).cast();
            weights = xcalloc(n, size_of::<f64>()).cast();
        }
        if prio_tres.is_null() || weights.is_null() {
            // SAFETY: null or just allocated, owned by the job.
            unsafe { xfree(&mut prio_tres) };
            // SAFETY: as above.
            unsafe { xfree(&mut weights) };
            return;
        }
        let m = f.tres.len().min(n);
        // SAFETY: both arrays hold at least n doubles (checked or just allocated).
        unsafe { ptr::copy_nonoverlapping(f.tres.as_ptr(), prio_tres, m) };
        // The tail past the computed factors is zero, as in a fresh xcalloc.
        let tail = prio_tres.wrapping_add(m);
        // SAFETY: as above: m <= n, so [m, n) lies inside the array.
        unsafe { ptr::write_bytes(tail, 0, n - m) };
        // SAFETY: as above.
        unsafe { ptr::copy_nonoverlapping(w.as_ptr(), weights, n) };
        pf.priority_tres = prio_tres;
        pf.tres_weights = weights;
        pf.tres_cnt = n as u32;
    }

    /// Stores the per-partition/QOS array (or frees a stale one) as `_get_priority_internal`.
    pub fn store_array(&mut self, array: Option<&[u32]>, now: i64, last_part_update: i64) {
        #[cfg(not(slurm_24_05))]
        {
            let _ = (now, last_part_update);
            if let Some(a) = array {
                // SAFETY: null or xmalloc'ed by Slurm or by us; owned by the job.
                unsafe { store_u32s(&mut self.job.priority_array, a) };
            }
        }
        #[cfg(slurm_24_05)]
        {
            let parts = self.job.part_ptr_list;
            let slot = super::prio_mult_mut(self.job);
            let Some(a) = array else {
                // SAFETY: part_prio is null or xmalloc'ed and owned by the job.
                if let Some(pp) = unsafe { slot.as_mut() } {
                    // SAFETY: null or xmalloc'ed, owned by the job (its lock is held).
                    unsafe { xfree(&mut pp.priority_array) };
                    // SAFETY: null or xmalloc'ed, owned by the job (its lock is held).
                    unsafe { xfree(super::array_names(pp)) };
                }
                // SAFETY: null or xmalloc'ed, owned by the job (its lock is held).
                unsafe { xfree(slot) };
                return;
            };
            if slot.is_null() {
                *slot = xcalloc(1, size_of::<super::PrioMult>()).cast();
            }
            // SAFETY: just ensured non-null; owned by the job.
            let Some(pp) = (unsafe { slot.as_mut() }) else {
                return;
            };
            if pp.priority_array.is_null() || pp.last_update < last_part_update {
                if !parts.is_null() {
                    // SAFETY: null or xmalloc'ed, owned by the job (its lock is held).
                    unsafe { xfree(super::array_names(pp)) };
                    if let Some(part_list_to_xstr) = crate::slurm::prio::PART_LIST_TO_XSTR.get() {
                        // SAFETY: the job's partition list, part read lock held.
                        *super::array_names(pp) = unsafe { part_list_to_xstr(parts) };
                    }
                }
                // SAFETY: null or xmalloc'ed, owned by the job (its lock is held).
                unsafe { xfree(&mut pp.priority_array) };
                pp.last_update = now as crate::ffi::time_t;
            }
            // SAFETY: null or xmalloc'ed (Slurm's split copy has only list_count(parts)
            // entries: store_u32s reallocates by xmalloc's size); owned by the job.
            unsafe { store_u32s(&mut pp.priority_array, a) };
        }
    }

    /// Stores the result of [`gputopo_core::priority::job_priority`].
    pub fn store(
        &mut self,
        p: &JobPriority,
        tres_weights: Option<&[f64]>,
        now: i64,
        last_part_update: i64,
    ) {
        self.store_factors(&p.factors, tres_weights);
        let array = (!p.array.is_empty()).then_some(p.array.as_slice());
        self.store_array(array, now, last_part_update);
    }

    /// Sets `job_ptr->priority`.
    pub fn set_priority(&mut self, p: u32) {
        self.job.priority = p;
    }
}
