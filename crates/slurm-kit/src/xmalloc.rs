//! Slurm's allocator (`src/common/xmalloc.c`) for memory a plugin hands to slurmctld.
//!
//! Everything a plugin stores in a job record (gputopo's priority role: factors, TRES arrays,
//! priority arrays) must be freed by slurmctld with `xfree`, so it comes from `slurm_xcalloc`. Arrays that slurmctld
//! allocated itself are never trusted to have the length the formula wants: slurmctld copies
//! `priority_array` with `list_count(part_ptr_list)` entries when it splits a job array (22.05
//! `_job_rec_copy`; 24.11 as well, ignoring the QOS dimension), and reloads it from the state
//! file with whatever length was saved. Their real length is the size xmalloc recorded in front
//! of every allocation (`xsize`), and that is the only length used here.

use std::ffi::c_void;
use std::ptr;

use crate::sys;

unsafe extern "C" {
    /// `size_t slurm_xsize(void *)` (libslurmfull, a strong alias of `xsize`; xmalloc.h only
    /// declares the unprefixed name, so bindgen does not see it): the byte size xmalloc stored
    /// in the two words before the pointer it returned.
    fn slurm_xsize(item: *mut c_void) -> usize;
}

/// `n` zeroed elements of `size` bytes from Slurm's allocator (aborts on OOM like xmalloc).
#[doc(alias = "slurm_xcalloc")]
pub fn xcalloc(n: usize, size: usize) -> *mut c_void {
    // SAFETY: Slurm's allocator; `clear = true`, `try = false`; no other preconditions.
    unsafe {
        sys::slurm_xcalloc(
            n.max(1),
            size,
            true,
            false,
            // The file, line and function xmalloc names in its out-of-memory message.
            c"slurm-kit".as_ptr(),
            0,
            c"xcalloc".as_ptr(),
        )
    }
}

/// Frees `*p` with Slurm's allocator and nulls it.
///
/// # Safety
/// `*p` is null or a live allocation of Slurm's allocator that nothing else uses any more.
#[doc(alias = "slurm_xfree")]
pub unsafe fn xfree<T>(p: &mut *mut T) {
    let mut v = p.cast::<c_void>();
    // SAFETY: caller contract (job record fields are only ever set with xmalloc);
    // slurm_xfree accepts null and nulls what it frees.
    unsafe { sys::slurm_xfree(&mut v) };
    *p = ptr::null_mut();
}

/// How many `T` the xmalloc'ed array `p` holds (0 for null), from xmalloc's own record.
///
/// # Safety
/// `p` is null or a live allocation of Slurm's allocator.
#[doc(alias = "xsize")]
#[doc(alias = "slurm_xsize")]
pub unsafe fn capacity<T>(p: *const T) -> usize {
    if p.is_null() {
        return 0;
    }
    // SAFETY: caller contract: xmalloc keeps the size just before the returned pointer.
    let bytes = unsafe { slurm_xsize(p.cast_mut().cast()) };
    bytes / size_of::<T>()
}

/// The first `len` entries of the xmalloc'ed array `p`, zero-padded where the allocation is
/// shorter; `None` for null. Never reads past the allocation.
///
/// # Safety
/// `p` is null or a live allocation of Slurm's allocator that nobody writes concurrently.
pub unsafe fn read_array<T: Copy + Default>(p: *const T, len: usize) -> Option<Vec<T>> {
    if p.is_null() {
        return None;
    }
    // SAFETY: caller contract.
    let have = unsafe { capacity(p) }.min(len);
    let mut out = vec![T::default(); len];
    // SAFETY: `have` entries lie inside the allocation (capacity from xmalloc).
    out[..have].copy_from_slice(unsafe { std::slice::from_raw_parts(p, have) });
    Some(out)
}

/// The xmalloc'ed array `p` as a slice of at most `len` entries (fewer where the allocation is
/// shorter: the core reads a missing entry as 0); `None` for null. Never past the allocation,
/// and no copy: the recalculation borrows Slurm's arrays for every job of every pass.
///
/// # Safety
/// `p` is null or a live allocation of Slurm's allocator that nobody writes or frees for `'a`
/// (the caller holds the lock that protects it for `'a`).
pub unsafe fn borrow_array<'a, T>(p: *const T, len: usize) -> Option<&'a [T]> {
    if p.is_null() {
        return None;
    }
    // SAFETY: caller contract.
    let have = unsafe { capacity(p) }.min(len);
    // SAFETY: `have` entries lie inside the allocation (capacity from xmalloc), which lives
    // and stays unchanged for 'a (caller contract).
    Some(unsafe { std::slice::from_raw_parts(p, have) })
}

/// Stores `values` in `*slot`, reallocating unless the current allocation has exactly
/// `values.len()` entries (so what Slurm later reads by its own count is always in bounds).
///
/// # Safety
/// `*slot` is null or a live allocation of Slurm's allocator owned by the record being written
/// (caller holds the lock that protects it).
pub unsafe fn store_u32s(slot: &mut *mut u32, values: &[u32]) {
    // SAFETY: caller contract.
    if slot.is_null() || unsafe { capacity(*slot) } != values.len() {
        // SAFETY: caller contract: null or Slurm's allocation, about to be replaced.
        unsafe { xfree(slot) };
        *slot = xcalloc(values.len(), size_of::<u32>()).cast();
    }
    // SAFETY: the allocation has at least values.len() entries (checked or just made).
    unsafe { ptr::copy_nonoverlapping(values.as_ptr(), *slot, values.len()) };
}
