//! [`EntryPtr`]: a pointer Slurm passed to one of our entry points, valid for that call.
//!
//! A plugin's export macros are the only code that should create one (gputopo:
//! `plugin::export`): they vouch that Slurm handed the pointer to a `select_p_*`/`priority_p_*`
//! call and that the pointee outlives the call. Hooks receive `Option<EntryPtr<'call, T>>` and
//! build safe views from it (gputopo's `JobView::new`), so hook code needs no `unsafe`. The lifetime is generic in every hook, so a
//! hook cannot keep the pointer beyond the call.

use std::marker::PhantomData;
use std::ptr::NonNull;

/// A non-null pointer to a Slurm-owned `T`, valid for the entry-point call `'call`.
#[derive(Debug)]
pub struct EntryPtr<'call, T> {
    ptr: NonNull<T>,
    _call: PhantomData<&'call mut T>,
}

impl<T> EntryPtr<'_, T> {
    /// Wraps a pointer received from Slurm; null becomes `None`.
    ///
    /// # Safety
    /// `ptr` is null or points to a live, properly aligned `T` that Slurm keeps valid (and does
    /// not free) for the whole lifetime `'call`; in practice: an argument of the current
    /// entry-point call, which runs with the slurmctld locks that protect it held.
    pub unsafe fn new(ptr: *mut T) -> Option<Self> {
        NonNull::new(ptr).map(|ptr| Self {
            ptr,
            _call: PhantomData,
        })
    }

    /// The raw pointer, for the safe wrappers that dereference it.
    pub fn as_ptr(&self) -> *mut T {
        self.ptr.as_ptr()
    }
}
