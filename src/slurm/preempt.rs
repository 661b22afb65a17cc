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
