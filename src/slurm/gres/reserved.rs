//! The GRES reservations of one `select_p_job_test` call ([`ResvGres`], read from 23.11+'s
//! `resv_exc_t`) and what they leave one GPU request on one node
//! ([`JobGres::reserved_on`]).
//!
//! Slurm's `job_test_resv` (src/slurmctld/reservation.c, 23.11 to 26.05) hands cons_tres
//! either `gres_list_inc` (the job runs in a reservation on part of a node: a copy of the
//! reservation's `gres_list_alloc`) or `gres_list_exc` (the GPUs of overlapping
//! reservations the job is not in). Their elements are job GRES states whose
//! `gres_bit_alloc[node]` (indexed by slurmctld node index, `node_cnt` entries: the
//! reservation's selection switched to allocation in `_switch_select_alloc_gres`) names the
//! reserved GPUs. cons_tres matches an element to a request by GRES and exact type id
//! (`gres_find_job_by_key_exact_type`) and reads it in `_can_use_gres_exc_topo`
//! (src/plugins/select/cons_tres/gres_sock_list.c); [`JobGres::reserved_on`] does the same.

use std::marker::PhantomData;

use gputopo_core::steer::reserved::Reserved;

use super::{JobGres, array_get, state_name};
use crate::ffi;
use crate::slurm::bitmap::{BitmapRef, GpuIndex, NodeIndex};
use crate::slurm::gpu_bits::ReadGpuSet;
use crate::slurm::list::ListRef;

/// The reservation GRES list of a `select_p_job_test` call, valid for the call `'a`.
#[derive(Debug, Clone, Copy)]
pub struct ResvGres<'a> {
    list: *mut ffi::xlist,
    /// `gres_list_inc` (the job is in the reservation) rather than `gres_list_exc`.
    inside: bool,
    _call: PhantomData<&'a ffi::xlist>,
}

impl ResvGres<'_> {
    /// Wraps a non-empty `gres_list_inc` (`inside`) or `gres_list_exc`; `None` for a null or
    /// empty list (no GPU constraint then, as in cons_tres).
    ///
    /// # Safety
    /// `list` is null or a live list of job `gres_state_t` elements that nobody changes
    /// during `'a` (an argument of the current `select_p_job_test` call).
    pub unsafe fn new(list: *mut ffi::xlist, inside: bool) -> Option<Self> {
        // SAFETY: the caller vouches for the list and its elements for 'a.
        let l = unsafe { ListRef::<ffi::gres_state_t>::from_raw(list) }?;
        (!l.is_empty()).then_some(Self {
            list,
            inside,
            _call: PhantomData,
        })
    }
}

impl JobGres<'_> {
    /// What `resv` leaves this request on `node`, whose GPU bitmaps are `width` bits wide.
    pub fn reserved_on(&self, resv: &ResvGres<'_>, node: NodeIndex, width: usize) -> Reserved {
        // SAFETY: ResvGres::new's caller vouched for the list during the call.
        let Some(list) = (unsafe { ListRef::<ffi::gres_state_t>::from_raw(resv.list) }) else {
            return Reserved::Free;
        };
        let type_id = self.js().type_id;
        let entry = list.iter().find_map(|s| {
            if s.gres_data.is_null() || state_name(s) != self.name() {
                return None;
            }
            // SAFETY: gres_data of a job gres_state_t is a gres_job_state_t, alive for the
            // call (reservation lists hold job states: gres_job_state_list_dup).
            let js = unsafe { &*s.gres_data.cast::<ffi::gres_job_state_t>() };
            (js.type_id == type_id).then_some(js)
        });
        let Some(js) = entry else {
            return Reserved::Free;
        };
        // SAFETY: gres_bit_alloc has node_cnt entries when non-null (gres.c
        // gres_job_state_dup, reservation.c _combine_gres_list_exc).
        let bits = unsafe { array_get(js.gres_bit_alloc, js.node_cnt as usize, node.0) }
            .copied()
            .unwrap_or(std::ptr::null_mut());
        // SAFETY: a live bitmap owned by the reservation's GRES state during the call.
        let held = unsafe { BitmapRef::<GpuIndex>::from_raw(bits) };
        match (held, resv.inside) {
            (None, true) => Reserved::Only(gputopo_core::GpuSet::EMPTY),
            (None, false) => Reserved::Free,
            (Some(b), _) if b.len() != width => Reserved::Unknown,
            (Some(b), true) => Reserved::Only(b.to_gpu_set()),
            (Some(b), false) => Reserved::Except(b.to_gpu_set()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slurm::bitmap::Bitmap;
    use crate::slurm::gres::{GPU, job_requests};
    use gputopo_core::GpuSet;

    /// A list (no element destructor) of `states`, which outlive it.
    fn list_of(states: &mut [ffi::gres_state_t]) -> *mut ffi::xlist {
        // SAFETY: a list without destructor; its elements are owned by the caller.
        let list = unsafe { ffi::slurm_list_create(None) };
        for s in states {
            // SAFETY: live list; the element outlives it.
            unsafe { ffi::slurm_list_append(list, std::ptr::from_mut(s).cast()) };
        }
        list
    }

    fn state(name: &std::ffi::CStr, js: &mut ffi::gres_job_state_t) -> ffi::gres_state_t {
        // SAFETY: plain C struct of integers and pointers: all-zero is a valid value.
        let mut s: ffi::gres_state_t = unsafe { std::mem::zeroed() };
        s.gres_name = name.as_ptr().cast_mut();
        s.gres_data = std::ptr::from_mut(js).cast();
        s
    }

    /// `reserved_on` reads the matching reservation entry's `gres_bit_alloc[node]` the way
    /// cons_tres does: only those GPUs inside, all but those outside; a missing bitmap is
    /// nothing inside and no constraint outside; another type id or an odd size is not read.
    #[test]
    fn reserved_on_reads_the_reservations_bitmap_per_node() {
        let mut held = Bitmap::<GpuIndex>::new(8).expect("bitmap");
        for g in 4..8 {
            held.set(GpuIndex(g)).expect("in range");
        }
        let mut per_node = [held.into_raw(), std::ptr::null_mut()];
        // SAFETY: as above.
        let mut resv_js: ffi::gres_job_state_t = unsafe { std::mem::zeroed() };
        resv_js.node_cnt = 2;
        resv_js.gres_bit_alloc = per_node.as_mut_ptr();
        // SAFETY: as above.
        let mut job_js: ffi::gres_job_state_t = unsafe { std::mem::zeroed() };
        let (gpu, typed) = (c"gpu", c"v100");
        // SAFETY: as above.
        let mut typed_js: ffi::gres_job_state_t = unsafe { std::mem::zeroed() };
        typed_js.type_id = 7;
        typed_js.type_name = typed.as_ptr().cast_mut();
        let mut resv = [state(gpu, &mut resv_js)];
        let mut job = [state(gpu, &mut job_js), state(gpu, &mut typed_js)];
        let (resv_list, job_list) = (list_of(&mut resv), list_of(&mut job));
        // SAFETY: live lists of gres_state_t whose data are gres_job_state_t.
        let reqs = unsafe { job_requests(job_list) };
        assert_eq!(reqs[0].name(), GPU);
        let four = GpuSet::parse_list("4-7").unwrap();
        // SAFETY: as above.
        let inside = unsafe { ResvGres::new(resv_list, true) }.expect("non-empty");
        // SAFETY: as above.
        let outside = unsafe { ResvGres::new(resv_list, false) }.expect("non-empty");
        let on = |r: &ResvGres<'_>, i: usize, node: usize, width: usize| {
            reqs[i].reserved_on(r, NodeIndex(node), width)
        };
        assert_eq!(on(&inside, 0, 0, 8), Reserved::Only(four));
        assert_eq!(on(&inside, 0, 1, 8), Reserved::Only(GpuSet::EMPTY));
        assert_eq!(on(&inside, 0, 9, 8), Reserved::Only(GpuSet::EMPTY));
        assert_eq!(on(&outside, 0, 0, 8), Reserved::Except(four));
        assert_eq!(on(&outside, 0, 1, 8), Reserved::Free);
        assert_eq!(on(&inside, 0, 0, 16), Reserved::Unknown);
        assert_eq!(on(&inside, 1, 0, 8), Reserved::Free, "other type id");
        // SAFETY: an empty list and null are no constraint.
        let empty = unsafe { ffi::slurm_list_create(None) };
        // SAFETY: as above.
        assert!(unsafe { ResvGres::new(empty, true) }.is_none());
        // SAFETY: null is no list.
        assert!(unsafe { ResvGres::new(std::ptr::null_mut(), false) }.is_none());
        drop(reqs);
        for l in [resv_list, job_list, empty] {
            // SAFETY: no view is used after this; the lists have no element destructor.
            unsafe { ffi::slurm_list_destroy(l) };
        }
        // SAFETY: allocated above with slurm_bit_alloc, no longer referenced.
        unsafe { ffi::slurm_bit_free(&mut per_node[0]) };
    }
}
