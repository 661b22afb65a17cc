//! Lock-scoped iteration over slurmctld's `job_list`: typed [`JobRecord`] views that cannot
//! outlive the lock, and no raw job pointers above this module.
//!
//! [`JobsLocked`] is the proof that the caller holds the slurmctld job lock: made from a
//! [`CtldLock`] the caller took (safe), or by an entry point that Slurm calls with the lock
//! held (unsafe, the caller vouches). Every [`JobRecord`] it hands out borrows it, so a record
//! cannot be kept past the lock. [`JobsLocked::walk`] is the recalculation's one walk of the
//! list: it shows each record to a closure and keeps the ones the closure wants, in a buffer
//! reused from pass to pass ([`JobBuf`]), for a second step over just those.

use std::marker::PhantomData;
use std::ptr::{self, NonNull};

use super::JobRecord;
use crate::ffi;
use crate::slurm::prio::CtldLock;

/// Proof that the slurmctld job lock is held for `'l` (write, if records are written).
#[derive(Debug)]
pub struct JobsLocked<'l> {
    _lock: PhantomData<&'l ()>,
}

impl<'l> JobsLocked<'l> {
    /// The job lock `lock` holds (write for [`CtldLocks::JobWriteNodePartRead`]).
    ///
    /// [`CtldLocks::JobWriteNodePartRead`]: crate::slurm::prio::CtldLocks::JobWriteNodePartRead
    pub fn new(_lock: &'l CtldLock) -> JobsLocked<'l> {
        JobsLocked { _lock: PhantomData }
    }

    /// The job lock Slurm holds around the current entry point.
    ///
    /// # Safety
    /// The caller is inside a Slurm call made with the slurmctld job lock held (write if any
    /// record is written) for all of `'l`.
    pub unsafe fn held_by_slurm() -> JobsLocked<'l> {
        JobsLocked { _lock: PhantomData }
    }

    /// Every record of `job_list`, in list order, each as a view that lives only for its
    /// call. Nothing outside slurmctld (no `job_list`).
    pub fn for_each(&self, mut f: impl FnMut(JobRecord<'_>)) {
        let Some(it) = JobListIter::open() else {
            return;
        };
        for p in it {
            // SAFETY: an element of job_list, a live record; the job lock is held for 'l
            // (this token), and no other view of it exists during the call.
            if let Some(job) = unsafe { JobRecord::from_raw(p.as_ptr()) } {
                f(job);
            }
        }
    }

    /// One walk of `job_list`: `keep` sees every record (for that call only) and says whether
    /// the record is wanted again; the kept ones are returned, in list order, in `buf`.
    ///
    /// The walk borrows the token exclusively until the kept records are dropped, so no other
    /// view of them can exist meanwhile.
    pub fn walk<'b>(
        &'b mut self,
        buf: &'b mut JobBuf,
        mut keep: impl FnMut(&mut JobRecord<'_>) -> bool,
    ) -> Kept<'b> {
        buf.ptrs.clear();
        if let Some(it) = JobListIter::open() {
            for p in it {
                // SAFETY: as in for_each.
                let Some(mut job) = (unsafe { JobRecord::from_raw(p.as_ptr()) }) else {
                    continue;
                };
                if keep(&mut job) {
                    buf.ptrs.push(p);
                }
            }
        }
        Kept { buf }
    }
}

/// Job records kept by [`JobsLocked::walk`], valid while its lock token is borrowed.
#[derive(Debug)]
pub struct Kept<'b> {
    buf: &'b mut JobBuf,
}

impl<'b> Kept<'b> {
    /// How many records were kept.
    pub fn len(&self) -> usize {
        self.buf.ptrs.len()
    }

    /// True when nothing was kept.
    pub fn is_empty(&self) -> bool {
        self.buf.ptrs.is_empty()
    }

    /// Each kept record once, in list order (consumes the set, so a record is never viewed
    /// twice); the views live as long as the walk's borrow of the lock token.
    pub fn for_each(self, mut f: impl FnMut(JobRecord<'b>)) {
        for &p in &self.buf.ptrs {
            // SAFETY: kept by `walk` under the same lock token, which `Kept` borrows, so the
            // record is still in job_list (only the lock holder removes records) and the lock
            // is held for 'b; each pointer is distinct and viewed once (self is consumed).
            if let Some(job) = unsafe { JobRecord::from_raw(p.as_ptr()) } {
                f(job);
            }
        }
    }
}

impl Drop for Kept<'_> {
    /// The pointers are only meaningful under the lock: none is left behind.
    fn drop(&mut self) {
        self.buf.ptrs.clear();
    }
}

/// The buffer [`JobsLocked::walk`] keeps records in; keep one and reuse it for every pass so
/// a pass allocates nothing once it has grown to the job count. Holds no pointer between
/// walks.
#[derive(Debug, Default)]
pub struct JobBuf {
    ptrs: Vec<NonNull<ffi::job_record_t>>,
}

/// An open iterator over slurmctld's `job_list`; destroyed on drop.
struct JobListIter(NonNull<ffi::listIterator>);

impl JobListIter {
    fn open() -> Option<JobListIter> {
        let list = crate::slurm::ctld::JOB_LIST
            .ptr()
            .map_or(ptr::null_mut(), |p| {
                // SAFETY: `list_t *job_list` in slurmctld; a pointer-sized read.
                unsafe { p.as_ptr().read() }
            });
        if list.is_null() {
            return None;
        }
        // SAFETY: the live job list (the job lock is held by the token's holder).
        let it = unsafe { ffi::slurm_list_iterator_create(list) };
        NonNull::new(it).map(JobListIter)
    }
}

impl Iterator for JobListIter {
    type Item = NonNull<ffi::job_record_t>;

    fn next(&mut self) -> Option<Self::Item> {
        // SAFETY: a live iterator, destroyed only in Drop.
        let e = unsafe { ffi::slurm_list_next(self.0.as_ptr()) };
        NonNull::new(e.cast())
    }
}

impl Drop for JobListIter {
    fn drop(&mut self) {
        // SAFETY: created in `open`, destroyed once here.
        unsafe { ffi::slurm_list_iterator_destroy(self.0.as_ptr()) };
    }
}
