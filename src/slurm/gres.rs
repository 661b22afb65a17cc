//! Safe views over Slurm's GRES state: a job's GPU requests ([`JobGres`]) and a node's GPUs
//! ([`NodeGres`]), as the select hook needs them.
//!
//! Only what the GPU re-pick reads and the one write it makes: replacing the indices
//! cons_tres selected for a job on a node (`gres_bit_select[node]`) before Slurm commits
//! them in `select_p_select_nodeinfo_set` (src/stepmgr/gres_stepmgr.c `_job_alloc` in 24.11,
//! src/slurmctld/gres_ctld.c in 22.05). Struct differences between releases (`alt_gres` in
//! 24.11 vs `alt_gres_ns` in 22.05) are absorbed here, in [`NodeGres::shared_in_use`].
//!
//! Every array access is bounds-checked against the size Slurm stores next to the array
//! (`total_node_cnt`, `topo_cnt`, `link_len`, `bit_size`), so a surprising state is an
//! `Err`/`None`, never a read out of bounds.

use std::ffi::CStr;

use gputopo_core::{GpuSet, WideSet};

use crate::ffi;
use crate::slurm::SlurmError;
use crate::slurm::bitmap::{BitIndex, Bitmap, BitmapMut, BitmapRef, GpuIndex, NodeIndex};
use crate::slurm::gpu_bits::{ReadGpuSet, WriteGpuSet};
use crate::slurm::list::ListRef;

mod alloc;
mod commit;
mod digest;
mod lookup;
mod reserved;
mod shared;
mod wide;
pub use alloc::{SharedAlloc, job_alloc_gpus, job_alloc_shared};
pub use lookup::node_gres;
pub use reserved::ResvGres;
pub use shared::{SHARED, SharedRecord};

/// The GRES name gputopo decides for.
pub const GPU: &str = "gpu";

/// A core of one node, in the node's core numbering (socket-major, as `Cores=` in gres.conf
/// after Slurm's translation), the index of `topo_core_bitmap` and of a job's cores on a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CoreIndex(pub usize);

impl BitIndex for CoreIndex {
    fn bit(self) -> usize {
        self.0
    }
    fn from_bit(bit: usize) -> Self {
        Self(bit)
    }
}

/// The name of a `gres_state_t` (`gpu`, `shard`, `mps`...), empty when unset.
fn state_name(state: &ffi::gres_state_t) -> &str {
    if state.gres_name.is_null() {
        return "";
    }
    // SAFETY: gres_name is a NUL-terminated string owned by the gres state, which outlives
    // the borrow of `state`.
    let name = unsafe { CStr::from_ptr(state.gres_name) };
    name.to_str().unwrap_or("")
}

/// Element `i` of a Slurm array of `len` elements, or `None` when null or out of range.
///
/// # Safety
/// `ptr` is null or points to at least `len` initialised `T`s that outlive `'a`.
unsafe fn array_get<'a, T>(ptr: *const T, len: usize, i: usize) -> Option<&'a T> {
    if ptr.is_null() || i >= len {
        return None;
    }
    // SAFETY: non-null and i < len, so `wrapping_add` stays within the caller-vouched array
    // and points to an initialised `T` that outlives 'a.
    unsafe { ptr.wrapping_add(i).as_ref() }
}

/// One GRES request of a job (`job_ptr->gres_list_req` element of state type JOB).
#[doc(alias = "gres_job_state_t")]
#[derive(Debug)]
pub struct JobGres<'a> {
    name: &'a str,
    js: *mut ffi::gres_job_state_t,
    _borrow: std::marker::PhantomData<&'a mut ffi::gres_job_state_t>,
}

/// The GRES requests of a job, in list order.
///
/// # Safety
/// `list` is null or the live `gres_list_req` of a job whose record the caller may read and
/// whose selection arrays it may rewrite during `'a` (a `select_p_*` call, under the
/// slurmctld job write lock).
pub unsafe fn job_requests<'a>(list: *mut ffi::xlist) -> Vec<JobGres<'a>> {
    // SAFETY: elements of gres_list_req are gres_state_t (src/interfaces/gres.c
    // gres_job_state_validate), alive for 'a per the caller.
    let Some(list) = (unsafe { ListRef::<ffi::gres_state_t>::from_raw(list) }) else {
        return Vec::new();
    };
    list.iter()
        .filter(|s| !s.gres_data.is_null())
        .map(|s| JobGres {
            name: state_name(s),
            js: s.gres_data.cast(),
            _borrow: std::marker::PhantomData,
        })
        .collect()
}

impl JobGres<'_> {
    fn js(&self) -> &ffi::gres_job_state_t {
        // SAFETY: non-null gres_data of a job gres_state_t (checked in job_requests), alive for
        // 'a; the hook is the only code touching it during the select call.
        unsafe { &*self.js }
    }

    /// The GRES name (`gpu`).
    pub fn name(&self) -> &str {
        self.name
    }

    /// The requested type's id, `None` for an untyped request (`--gres=gpu:2`).
    pub fn type_id(&self) -> Option<u32> {
        let js = self.js();
        (!js.type_name.is_null()).then_some(js.type_id)
    }

    /// The requested type's name, for log lines.
    pub fn type_name(&self) -> Option<&str> {
        let js = self.js();
        if js.type_name.is_null() {
            return None;
        }
        // SAFETY: NUL-terminated string owned by the job gres state.
        unsafe { CStr::from_ptr(js.type_name) }.to_str().ok()
    }

    /// `--gpus=N` style per-job count (0 when not used).
    pub fn per_job(&self) -> u64 {
        self.js().gres_per_job
    }

    /// `--gres=gpu:N` / `--gpus-per-node` count (0 when not used).
    pub fn per_node(&self) -> u64 {
        self.js().gres_per_node
    }

    /// `--gpus-per-socket` count (0 when not used).
    pub fn per_socket(&self) -> u64 {
        self.js().gres_per_socket
    }

    fn select_len(&self) -> usize {
        self.js().total_node_cnt as usize
    }

    /// The GPUs cons_tres selected on `node` (`gres_bit_select[node]`), `None` when it
    /// selected none there or kept no bitmap.
    pub fn selected(&self, node: NodeIndex) -> Option<GpuSet> {
        self.selection(node).map(|b| b.to_gpu_set())
    }

    /// `gres_bit_select[node]`, borrowed.
    fn selection(&self, node: NodeIndex) -> Option<BitmapRef<'_, GpuIndex>> {
        let js = self.js();
        // SAFETY: gres_bit_select has total_node_cnt entries when non-null
        // (gres_select_filter.c allocates it with that size).
        let bits = unsafe { array_get(js.gres_bit_select, self.select_len(), node.0) }?;
        // SAFETY: a live bitmap owned by the job gres state during the borrow of `self`.
        unsafe { BitmapRef::<GpuIndex>::from_raw(*bits) }
    }

    /// `gres_bit_select[node]`'s size: the node's GPU count as cons_tres saw it.
    pub fn selected_width(&self, node: NodeIndex) -> Option<usize> {
        self.selection(node).map(|b| b.len())
    }

    /// `gres_cnt_node_select[node]`: how many GPUs the job gets on `node`.
    pub fn selected_count(&self, node: NodeIndex) -> u64 {
        let js = self.js();
        // SAFETY: gres_cnt_node_select has total_node_cnt entries when non-null.
        unsafe { array_get(js.gres_cnt_node_select, self.select_len(), node.0) }
            .copied()
            .unwrap_or(0)
    }

    /// Replaces the GPUs selected on `node` by `set`, before Slurm commits them.
    ///
    /// Invariant kept: the count (`gres_cnt_node_select[node]` and the number of set bits) and
    /// the bitmap's size do not change, so Slurm's commit (`_job_alloc`) and `total_gres`
    /// stay consistent. The caller guarantees `set` is free on the node.
    ///
    /// # Errors
    /// [`SlurmError::OutOfBounds`] when there is no selection bitmap for `node` or `set` does
    /// not fit it; [`SlurmError::UnexpectedValue`] when `set` has a different size than the
    /// current selection. Nothing is written then.
    pub fn write_selected(&mut self, node: NodeIndex, set: &WideSet) -> Result<(), SlurmError> {
        let old = self
            .selection(node)
            .map(|b| b.count())
            .ok_or(SlurmError::OutOfBounds {
                index: node.0,
                size: self.select_len(),
            })?;
        if old != set.len() {
            return Err(SlurmError::UnexpectedValue(set.len() as i64));
        }
        let js = self.js();
        // SAFETY: as in `selected`.
        let bits = unsafe { array_get(js.gres_bit_select, self.select_len(), node.0) }
            .copied()
            .unwrap_or(std::ptr::null_mut());
        // SAFETY: the live selection bitmap of this job on `node`; only the hook touches it
        // between cons_tres's return and the commit (select_nodes(), slurmctld job write lock).
        let mut bits =
            unsafe { BitmapMut::<GpuIndex>::from_raw(bits) }.ok_or(SlurmError::OutOfBounds {
                index: node.0,
                size: self.select_len(),
            })?;
        bits.write_wide_set(set)
    }
}

impl JobGres<'_> {
    /// Gives a count-only selection its GPUs: on a node without GPU topology records,
    /// cons_tres selects only a count (`gres_cnt_node_select[node]`, no bitmap) and Slurm's
    /// commit takes the first free GPUs. Writing `set` (`width` bits, the node's GPU count)
    /// into `gres_bit_select[node]` makes the commit take exactly `set` instead (its
    /// "specific GRES already selected" branch), as for a node with topology.
    ///
    /// Invariant kept: `set` has `gres_cnt_node_select[node]` GPUs. The array and the bitmap
    /// come from Slurm's allocator (xcalloc, bit_alloc) and are freed by Slurm with the job's
    /// GRES state; an existing bitmap of another size is replaced (bit_free).
    ///
    /// # Errors
    /// [`SlurmError::OutOfBounds`] when `node` is beyond the job's node count or `set` does
    /// not fit `width`; [`SlurmError::UnexpectedValue`] when the count differs. Nothing is
    /// written then.
    pub fn write_count_only(
        &mut self,
        node: NodeIndex,
        width: usize,
        set: &WideSet,
    ) -> Result<(), SlurmError> {
        let n = self.select_len();
        if node.0 >= n || set.last().is_some_and(|g| g >= width) {
            return Err(SlurmError::OutOfBounds {
                index: node.0,
                size: n,
            });
        }
        if self.selected_count(node) != set.len() as u64 {
            return Err(SlurmError::UnexpectedValue(set.len() as i64));
        }
        // SAFETY: the job gres state is live and only the hook touches it during the select
        // call (see `job_requests`); no other reference to it exists while `js` is used.
        let js = unsafe { &mut *self.js };
        if js.gres_bit_select.is_null() {
            // SAFETY: Slurm's allocator, zeroed (`clear`), aborting on OOM (`try` false); the
            // array of total_node_cnt bitmap pointers that Slurm's gres code expects.
            let array = unsafe {
                ffi::slurm_xcalloc(
                    n,
                    std::mem::size_of::<*mut ffi::bitstr_t>(),
                    true,
                    false,
                    c"gputopo".as_ptr(),
                    0,
                    c"write_count_only".as_ptr(),
                )
            };
            js.gres_bit_select = array.cast();
        }
        let slot = js.gres_bit_select.wrapping_add(node.0);
        // SAFETY: gres_bit_select now has total_node_cnt entries and node.0 < total_node_cnt.
        let slot = unsafe { &mut *slot };
        let current = *slot;
        // SAFETY: the slot is null or a live bitmap owned by this job gres state.
        let fits =
            unsafe { BitmapRef::<GpuIndex>::from_raw(current) }.is_some_and(|b| b.len() == width);
        if !fits {
            if !slot.is_null() {
                // SAFETY: a bitmap from Slurm's allocator owned by this state (bit_free
                // wants a non-null one); it nulls the slot.
                unsafe { ffi::slurm_bit_free(slot) };
            }
            let bits = Bitmap::<GpuIndex>::new(width).ok_or(SlurmError::OutOfBounds {
                index: width,
                size: width,
            })?;
            *slot = bits.into_raw();
        }
        // SAFETY: the live selection bitmap of this job on `node`, borrowed only here.
        let mut bits =
            unsafe { BitmapMut::<GpuIndex>::from_raw(*slot) }.ok_or(SlurmError::OutOfBounds {
                index: node.0,
                size: n,
            })?;
        bits.write_wide_set(set)
    }
}

/// One topology record of a node's GPU GRES (one gres.conf line after Slurm's merge).
#[derive(Debug)]
pub struct TopoRecord<'a> {
    /// The GPUs it covers (`topo_gres_bitmap[i]`).
    pub gpus: GpuSet,
    /// The cores bound to them (`topo_core_bitmap[i]`); `None` = any core.
    pub cores: Option<BitmapRef<'a, CoreIndex>>,
    /// Type id (`topo_type_id[i]`), compared with [`JobGres::type_id`].
    pub type_id: u32,
}

/// A node's GPU GRES state in slurmctld (`node_ptr->gres_list` element named `gpu`).
#[doc(alias = "gres_node_state_t")]
#[derive(Debug)]
pub struct NodeGres<'a> {
    ns: &'a ffi::gres_node_state_t,
}

/// [`NodeGres::content_key`]: a few words of a node's GRES state, compared for equality.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContentKey([u64; 8]);

impl<'a> NodeGres<'a> {
    /// Identity of this GRES state object (its address): slurmctld replaces the object when
    /// it rebuilds the node's GRES state (registration, reconfigure), so a cache keyed on it
    /// notices.
    pub fn id(&self) -> usize {
        std::ptr::from_ref(self.ns) as usize
    }

    /// The shape of what the topology model is built from: the GPU count, the number of
    /// topology records and of `Links=` rows, and where Slurm keeps their arrays. slurmctld
    /// edits a node's GRES state in place (re-registration, `scontrol update Gres=`), so its
    /// address alone does not tell a change; those edits change a count or reallocate an
    /// array. Reads a few words and is compared as it is, not hashed: it runs for every
    /// candidate on every call (hashing it cost more than the rest of the cache lookup).
    /// (Edits that keep every count and array, a re-registration with a new gres.conf of
    /// the same shape, come with a new registration time, which the cache also compares.)
    pub fn content_key(&self) -> ContentKey {
        ContentKey([
            self.count() as u64,
            self.ns.gres_cnt_config,
            self.ns.topo_cnt as u64,
            self.ns.link_len as u64,
            self.ns.topo_gres_bitmap as usize as u64,
            self.ns.topo_core_bitmap as usize as u64,
            self.ns.topo_type_id as usize as u64,
            self.ns.links_cnt as usize as u64,
        ])
    }

    /// GPUs Slurm can allocate on the node (`gres_cnt_avail`).
    pub fn count(&self) -> usize {
        usize::try_from(self.ns.gres_cnt_avail).unwrap_or(0)
    }

    /// True when the node has more GPUs than the core's [`GpuSet`] models (such a node is
    /// read for health only).
    pub fn is_wide(&self) -> bool {
        self.count() > gputopo_core::gpuset::MAX_GPUS
    }

    fn bits(&self, ptr: *mut ffi::bitstr_t) -> GpuSet {
        // SAFETY: a bitmap owned by this node gres state, alive for 'a.
        unsafe { BitmapRef::<GpuIndex>::from_raw(ptr) }
            .map(|b| b.to_gpu_set())
            .unwrap_or_default()
    }

    /// GPUs allocated to jobs (`gres_bit_alloc`).
    pub fn allocated(&self) -> GpuSet {
        self.bits(self.ns.gres_bit_alloc)
    }

    /// GPUs whose sharing GRES (`shard`/`mps`) is allocated: cons_tres does not give them
    /// to a whole-GPU request (cons_tres/gres_sock_list.c `_build_sock_gres_by_topo`).
    /// Inlined: read for every candidate on every call, and most nodes have no sharing GRES
    /// (a null pointer, no bitmap to read).
    #[inline]
    pub fn shared_in_use(&self) -> GpuSet {
        match self.alt_state() {
            Some(alt) if !alt.gres_bit_alloc.is_null() => self.bits(alt.gres_bit_alloc),
            _ => GpuSet::EMPTY,
        }
    }

    #[cfg(select_abi = "22.05")]
    #[inline]
    fn alt_state(&self) -> Option<&'a ffi::gres_node_state_t> {
        // SAFETY: alt_gres_ns is null or the node's other (sharing) gres state, alive for 'a.
        unsafe { self.ns.alt_gres_ns.as_ref() }
    }

    #[cfg(not(select_abi = "22.05"))]
    #[inline]
    fn alt_state(&self) -> Option<&'a ffi::gres_node_state_t> {
        // SAFETY: alt_gres is null or the node's sharing gres_state_t, alive for 'a.
        let state = unsafe { self.ns.alt_gres.as_ref() }?;
        // SAFETY: its gres_data is that state's gres_node_state_t.
        unsafe { state.gres_data.cast::<ffi::gres_node_state_t>().as_ref() }
    }

    /// The topology records (`topo_*[0..topo_cnt]`).
    pub fn topo(&self) -> Vec<TopoRecord<'a>> {
        self.topo_raw()
            .into_iter()
            .map(|(g, cores, type_id)| TopoRecord {
                gpus: g.map(|p| self.bits(p)).unwrap_or_default(),
                cores,
                type_id,
            })
            .collect()
    }

    /// (GPU bitmap, core bitmap, type id) per topology record.
    #[allow(clippy::type_complexity)]
    fn topo_raw(
        &self,
    ) -> Vec<(
        Option<*mut ffi::bitstr_t>,
        Option<BitmapRef<'a, CoreIndex>>,
        u32,
    )> {
        let n = usize::from(self.ns.topo_cnt);
        (0..n)
            .map(|i| {
                // SAFETY: each topo_* array has topo_cnt entries when non-null
                // (gres.c _node_config_init / gres_node_config_validate).
                let gbits = unsafe { array_get(self.ns.topo_gres_bitmap, n, i) }.copied();
                // SAFETY: as above.
                let cbits = unsafe { array_get(self.ns.topo_core_bitmap, n, i) }.copied();
                // SAFETY: as above.
                let type_id = unsafe { array_get(self.ns.topo_type_id, n, i) }.copied();
                // SAFETY: a core bitmap owned by this node gres state, alive for 'a.
                let cores = cbits.and_then(|p| unsafe { BitmapRef::from_raw(p) });
                (gbits, cores, type_id.unwrap_or(0))
            })
            .collect()
    }

    /// GPUs of type `type_id` (all GPUs for `None`), as cons_tres matches types.
    pub fn of_type(&self, type_id: Option<u32>) -> GpuSet {
        self.topo()
            .iter()
            .filter(|t| type_id.is_none_or(|id| id == t.type_id))
            .fold(GpuSet::EMPTY, |acc, t| acc.union(t.gpus))
    }

    /// GPUs whose cores intersect `cores` (GPUs without core binding count as near).
    pub fn near_cores(&self, cores: &[CoreIndex]) -> GpuSet {
        self.topo()
            .iter()
            .filter(|t| match &t.cores {
                None => true,
                Some(b) => cores.iter().any(|c| b.contains(*c)),
            })
            .fold(GpuSet::EMPTY, |acc, t| acc.union(t.gpus))
    }

    /// Per-GPU core lists (`Cores=`), by GPU index, for the topology model.
    pub fn gpu_cores(&self) -> Vec<Vec<u32>> {
        let mut out = vec![Vec::new(); self.count().min(gputopo_core::gpuset::MAX_GPUS)];
        for t in self.topo() {
            let cores: Vec<u32> = t
                .cores
                .as_ref()
                .map(|b| b.iter_set().map(|c| c.0 as u32).collect())
                .unwrap_or_default();
            for g in t.gpus.iter() {
                if let Some(slot) = out.get_mut(g) {
                    slot.clone_from(&cores);
                }
            }
        }
        out
    }

    /// The `Links=` matrix (`links_cnt`, `link_len`×`link_len`, -1 on the diagonal), `None`
    /// when Slurm has none or its size differs from the GPU count (Slurm then ignores it too).
    pub fn links(&self) -> Option<Vec<Vec<i32>>> {
        let n = usize::try_from(self.ns.link_len).ok()?;
        if n == 0 || n != self.count() || self.ns.links_cnt.is_null() {
            return None;
        }
        (0..n)
            .map(|a| {
                // SAFETY: links_cnt has link_len rows (gres.c _links_str2array callers).
                let row = unsafe { array_get(self.ns.links_cnt.cast_const(), n, a) }.copied()?;
                // SAFETY: each row has link_len ints.
                (0..n)
                    .map(|b| unsafe { array_get(row.cast_const(), n, b) }.copied())
                    .collect::<Option<Vec<i32>>>()
            })
            .collect()
    }
}
