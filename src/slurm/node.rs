//! Read-only views of slurmctld's node records ([`NodeView`]): name, `Extra`, core layout and
//! GPU GRES state, by node-table index.
//!
//! `node_record_table_ptr`/`node_record_count` are defined in libslurmfull
//! (src/common/node_conf.c), so they link normally and exist in every process; outside
//! slurmctld the table is simply empty. Entries may be NULL (nodes removed by a reconfigure),
//! which become `None`. Callers are `select_p_*` hooks, which run with the slurmctld node lock
//! held, so the records do not change under the view.

use std::ffi::CStr;

use crate::ffi;
use crate::slurm::EntryPtr;
use crate::slurm::bitmap::{BitmapMut, NodeIndex};
use crate::slurm::gres::{self, NodeGres};
use crate::slurm::job::JobView;

/// One node record, borrowed for a `select_p_*` call.
#[doc(alias = "node_record_t")]
#[derive(Debug, Clone, Copy)]
pub struct NodeView<'a> {
    rec: &'a ffi::node_record_t,
    index: NodeIndex,
}

/// Number of entries in the node table.
pub fn table_len() -> usize {
    // Taking the static's address needs no `unsafe`; reading through it does.
    let count = &raw const ffi::node_record_count;
    // SAFETY: a plain read of libslurmfull's int; written only by slurmctld's main thread
    // under the node write lock, which the calling select hook holds (or excludes).
    let n = unsafe { count.read() };
    usize::try_from(n).unwrap_or(0)
}

/// The node at `index` of slurmctld's node table (`node_record_table_ptr[index]`).
///
/// # Safety
/// The caller holds the slurmctld node lock (every `select_p_*` hook runs with it; the
/// priority pass takes it for reading); the view must not outlive that lock.
pub unsafe fn by_index<'a>(index: NodeIndex) -> Option<NodeView<'a>> {
    if index.0 >= table_len() {
        return None;
    }
    let table = &raw const ffi::node_record_table_ptr;
    // SAFETY: plain read of the table pointer (see table_len).
    let table = unsafe { table.read() };
    if table.is_null() {
        return None;
    }
    // SAFETY: the table has node_record_count entries; index was checked against it, so the
    // entry read is in bounds and initialised.
    let rec = unsafe { *table.wrapping_add(index.0) };
    // SAFETY: a non-null entry is a live node record for the duration of the hook.
    let rec = unsafe { rec.as_ref() }?;
    Some(NodeView { rec, index })
}

/// The node at `index`, viewed during the select call in which `job` was handed to us.
///
/// A [`JobView`] exists only inside a `select_p_*` entry point, which slurmctld calls with
/// its node lock held: that is what makes this safe.
pub fn view<'call>(_in_call: &JobView<'call>, index: NodeIndex) -> Option<NodeView<'call>> {
    // SAFETY: inside a select call (proved by the JobView borrow), see by_index.
    unsafe { by_index(index) }
}

/// The candidate node bitmap of a `select_p_job_test` call, for reading and narrowing.
pub fn candidates<'call>(
    bitmap: &EntryPtr<'call, ffi::bitstr_t>,
) -> Option<BitmapMut<'call, NodeIndex>> {
    // SAFETY: EntryPtr vouches that the bitmap argument is live for the call; slurmctld
    // passes a copy it owns ("select_g_job_test() is destructive"), so only we touch it.
    unsafe { BitmapMut::from_raw(bitmap.as_ptr()) }
}

fn c_str<'a>(p: *const std::ffi::c_char) -> Option<&'a str> {
    if p.is_null() {
        return None;
    }
    // SAFETY: NUL-terminated string owned by the node record (xstrdup'd by slurmctld).
    unsafe { CStr::from_ptr(p) }.to_str().ok()
}

impl<'a> NodeView<'a> {
    /// Its index in the node table (the bit in node bitmaps).
    pub fn index(&self) -> NodeIndex {
        self.index
    }

    /// `NodeName`.
    pub fn name(&self) -> &'a str {
        c_str(self.rec.name).unwrap_or("?")
    }

    /// The node's `Extra` string (where the agent publishes GPU health), if set.
    ///
    /// Bytes that are not UTF-8 are replaced (U+FFFD), never dropped: a corrupted value must
    /// read as a bad value (the last good health stays), not as an empty one.
    pub fn extra(&self) -> Option<std::borrow::Cow<'a, str>> {
        if self.rec.extra.is_null() {
            return None;
        }
        // SAFETY: a non-null NUL-terminated string owned by the node record (xstrdup'd by
        // slurmctld), not modified during the hook (node lock held).
        Some(unsafe { CStr::from_ptr(self.rec.extra) }.to_string_lossy())
    }

    /// The node's `Extra` as bytes, unchecked: for comparing with a copy kept from an earlier
    /// call ([`Self::extra`] checks UTF-8, which a per-call comparison does not need).
    pub fn extra_bytes(&self) -> Option<&'a [u8]> {
        if self.rec.extra.is_null() {
            return None;
        }
        // SAFETY: as in `extra`: a live NUL-terminated string owned by the node record.
        Some(unsafe { CStr::from_ptr(self.rec.extra) }.to_bytes())
    }

    /// When the node's slurmd last registered (`slurmd_start_time`) and booted
    /// (`boot_time`): a registration rebuilds the node's GRES state, sometimes in place.
    pub fn registration(&self) -> (ffi::time_t, ffi::time_t) {
        (self.rec.slurmd_start_time, self.rec.boot_time)
    }

    /// Slurm's scheduling weight of the node (`sched_weight`: `Weight=` shifted left by 8
    /// plus Slurm's own low bits), set by slurmctld before it calls the select plugin; cons_tres
    /// fills nodes of lower weight first.
    pub fn sched_weight(&self) -> u64 {
        self.rec.sched_weight
    }

    /// `RestrictedCoresPerGPU` (24.11+; 0 when unset, and always before 24.11): cores per GPU
    /// that only GPU jobs may use, reserved by cons_tres for the GPUs it picks.
    pub fn restricted_cores_per_gpu(&self) -> u16 {
        #[cfg(slurm_24_11)]
        return self.rec.res_cores_per_gpu;
        #[cfg(not(slurm_24_11))]
        0
    }

    /// Cores per socket (slurm.conf `CoresPerSocket`), at least 1.
    pub fn cores_per_socket(&self) -> usize {
        usize::from(self.rec.cores).max(1)
    }

    /// The node's GRES state named `name` (`gpu`).
    pub fn gres(&self, name: &str) -> Option<NodeGres<'a>> {
        // SAFETY: the node's live gres_list, not modified during the hook (node lock held).
        unsafe { gres::node_gres(self.rec.gres_list, name) }
    }

    /// The node's GPUs (`gres/gpu` state).
    pub fn gpus(&self) -> Option<NodeGres<'a>> {
        self.gres(gres::GPU)
    }
}
