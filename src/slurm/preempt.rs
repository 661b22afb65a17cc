//! The preemption candidates of a `select_p_job_test` call (`preemptee_candidates`): read
//! them, and reorder the list so cons_tres removes the chosen victims first.
//!
//! cons_tres walks the list in order, removing jobs from a simulated node state until the
//! preemptor fits (cons_tres/job_test.c `_run_now`); slurmctld sorted it by the preempt
//! plugin's priority. Only the order inside runs of jobs that are equal under every key Slurm
//! sorts by is changed by the caller, so a job is never preempted ahead of one Slurm ranks
//! before it.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_int, c_void};

use gputopo_core::steer::preempt::Offered;
use gputopo_core::steer::victims::mode;

use crate::ffi;
use crate::slurm::EntryPtr;
use crate::slurm::bitmap::{BitmapRef, NodeIndex};
use crate::slurm::list::ListRef;

/// One candidate as the planner sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CandidateJob {
    /// The record's address (its identity while the list is reordered).
    pub addr: usize,
    /// The core's view ([`Offered`]): job id, what Slurm's order depends on (partition
    /// tier, QOS by identity, node count: equal keys are interchangeable), its GPUs per node
    /// (empty when they could not be read), and whether Slurm suspends it to preempt it (a
    /// suspended job keeps its GPUs: [`gputopo_core::steer::victims::mode`]).
    pub offered: Offered,
}

/// The candidates in list order.
pub fn candidates(list: &EntryPtr<'_, ffi::xlist>) -> Vec<CandidateJob> {
    // SAFETY: EntryPtr vouches for the live preemptee_candidates list of this call; its
    // elements are job records, read under the job lock slurmctld holds for the call.
    let Some(list) = (unsafe { ListRef::<ffi::job_record_t>::from_raw(list.as_ptr()) }) else {
        return Vec::new();
    };
    let (kind, global) = crate::slurm::conf::preempt_mode();
    list.iter()
        .map(|j| {
            // SAFETY: part_ptr is null or the job's live partition record.
            let part = unsafe { j.part_ptr.as_ref() };
            let tier = part.map_or(0, |p| u32::from(p.priority_tier));
            let part_mode = part
                .map(|p| p.preempt_mode)
                .filter(|&m| u32::from(m) != ffi::NO_VAL16);
            // SAFETY: qos_ptr is null or the job's live QOS record.
            let qos_mode = unsafe { j.qos_ptr.as_ref() }.map_or(0, |q| q.preempt_mode);
            let mode = mode::job_mode(kind, global, part_mode, qos_mode);
            // SAFETY: node_bitmap is null or the job's live node bitmap.
            let nodes: Vec<NodeIndex> = unsafe { BitmapRef::<NodeIndex>::from_raw(j.node_bitmap) }
                .map(|b| b.iter_set().collect())
                .unwrap_or_default();
            // SAFETY: the job's live gres_list_alloc, read only.
            let gpus =
                unsafe { crate::slurm::gres::job_alloc_gpus(j.gres_list_alloc, nodes.len()) };
            let on = match gpus {
                Some(g) if !nodes.is_empty() => nodes.iter().map(|n| n.0).zip(g).collect(),
                _ => Vec::new(),
            };
            CandidateJob {
                addr: std::ptr::from_ref(j) as usize,
                offered: Offered {
                    job: j.job_id,
                    key: (tier, j.qos_ptr as usize as u64, j.node_cnt),
                    on,
                    keeps_gpus: mode::keeps_gpus(mode),
                },
            }
        })
        .collect()
}

thread_local! {
    /// The wanted position of each record while [`reorder`] sorts the list.
    static POSITION: RefCell<HashMap<usize, usize>> = RefCell::new(HashMap::new());
}

/// `list_sort` comparator: by the position [`reorder`] planned (unknown records last).
unsafe extern "C" fn by_position(x: *mut c_void, y: *mut c_void) -> c_int {
    // SAFETY: list_sort passes pointers to two element slots of the list being sorted.
    let a = unsafe { *(x as *const usize) };
    // SAFETY: as above.
    let b = unsafe { *(y as *const usize) };
    POSITION.with(|p| {
        let p = p.borrow();
        let pa = p.get(&a).copied().unwrap_or(usize::MAX);
        let pb = p.get(&b).copied().unwrap_or(usize::MAX);
        pa.cmp(&pb) as c_int
    })
}

/// Reorders `list` to `order` (positions into `cands`, as read by [`candidates`] from the
/// same list in this call). slurmctld hands the list to the select plugin for the call and
/// keeps using its order afterwards (cons_tres reorders it itself), so this is its contract.
pub fn reorder(list: &EntryPtr<'_, ffi::xlist>, cands: &[CandidateJob], order: &[usize]) {
    POSITION.with(|p| {
        let mut p = p.borrow_mut();
        p.clear();
        for (pos, &i) in order.iter().enumerate() {
            if let Some(c) = cands.get(i) {
                p.insert(c.addr, pos);
            }
        }
    });
    // SAFETY: EntryPtr vouches for the live list; the comparator reads element pointers only
    // and cannot panic.
    unsafe { ffi::slurm_list_sort(list.as_ptr(), Some(by_position)) };
    POSITION.with(|p| p.borrow_mut().clear());
}

/// cons_tres's output list of victims for one `select_p_job_test` call (`List
/// *preemptee_job_list`). cons_tres creates it on a try that succeeds by preemption and
/// appends that try's victims; it never empties it. When gputopo asks cons_tres again in the
/// same call (an exclusion round, a wider tier, the give-up's release), the victims of the
/// earlier tries would be preempted too (issue 25 item 4), so before every try after the
/// first, and when the call does not succeed, the list is cut back to what it held when the
/// call began: only the final try's victims are preempted.
#[derive(Debug)]
pub struct PreempteeOut<'a> {
    slot: EntryPtr<'a, *mut ffi::xlist>,
    /// The list the caller passed in (usually none) and its length then.
    initial: (*mut ffi::xlist, usize),
}

impl<'a> PreempteeOut<'a> {
    /// Remembers what `slot` holds at the start of the call.
    pub fn new(slot: EntryPtr<'a, *mut ffi::xlist>) -> Self {
        // SAFETY: EntryPtr vouches for the live `List *` argument of this call.
        let list = unsafe { *slot.as_ptr() };
        let len = count(list);
        PreempteeOut {
            slot,
            initial: (list, len),
        }
    }

    /// Cuts the list back to its state at the start of the call.
    pub fn reset(&self) {
        // SAFETY: as in `new`.
        let list = unsafe { *self.slot.as_ptr() };
        let (was, len) = self.initial;
        if list.is_null() || count(list) <= len && list == was {
            return;
        }
        if list != was {
            // cons_tres created it (list_create(NULL): no destructor, the job records stay).
            // SAFETY: a list cons_tres allocated in this call, owned by nobody else yet.
            unsafe { ffi::slurm_list_destroy(list) };
            // SAFETY: as in `new`; the caller's pointer goes back to what it passed.
            unsafe { *self.slot.as_ptr() = was };
            return;
        }
        // SAFETY: a live list; the iterator is destroyed below.
        let it = unsafe { ffi::slurm_list_iterator_create(list) };
        for _ in 0..len {
            // SAFETY: a live iterator over `list`.
            unsafe { ffi::slurm_list_next(it) };
        }
        // SAFETY: a live iterator; list_remove drops the element the iterator is on.
        while !unsafe { ffi::slurm_list_next(it) }.is_null() {
            // SAFETY: as above (no destructor: the job record itself stays).
            unsafe { ffi::slurm_list_remove(it) };
        }
        // SAFETY: created above, used no more.
        unsafe { ffi::slurm_list_iterator_destroy(it) };
    }
}

fn count(list: *mut ffi::xlist) -> usize {
    if list.is_null() {
        return 0;
    }
    // SAFETY: a live list (the call's `List *` argument or one cons_tres made in it).
    let n = unsafe { ffi::slurm_list_count(list) };
    usize::try_from(n).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn append(list: *mut ffi::xlist, item: &mut u32) {
        // SAFETY: a live list made by the test; the item outlives it.
        unsafe { ffi::slurm_list_append(list, std::ptr::from_mut(item).cast()) };
    }

    /// Issue 25 item 4: the victims of an earlier try are not preempted with the final
    /// try's: the list cons_tres made goes, a caller's list is cut back to its length.
    #[test]
    fn victims_of_earlier_tries_are_dropped() {
        let (mut a, mut b, mut c) = (1u32, 2u32, 3u32);
        let mut slot: *mut ffi::xlist = std::ptr::null_mut();
        // SAFETY: `slot` lives for the test.
        let out = PreempteeOut::new(unsafe { EntryPtr::new(&raw mut slot) }.expect("non-null"));
        out.reset();
        assert!(slot.is_null());
        // SAFETY: plain list creation, destroyed by `reset`.
        slot = unsafe { ffi::slurm_list_create(None) };
        append(slot, &mut a);
        out.reset();
        assert!(
            slot.is_null(),
            "the list cons_tres created in the call is freed"
        );

        // SAFETY: plain list creation, destroyed below.
        let mine = unsafe { ffi::slurm_list_create(None) };
        append(mine, &mut a);
        let mut slot = mine;
        // SAFETY: `slot` lives for the test.
        let out = PreempteeOut::new(unsafe { EntryPtr::new(&raw mut slot) }.expect("non-null"));
        append(slot, &mut b);
        append(slot, &mut c);
        out.reset();
        assert_eq!(slot, mine);
        assert_eq!(count(slot), 1, "cut back to the caller's one entry");
        // SAFETY: the list made above, used no more.
        unsafe { ffi::slurm_list_destroy(mine) };
    }
}
