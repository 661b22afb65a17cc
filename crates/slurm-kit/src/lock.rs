//! Named lock sets of slurmctld (`slurmctld_lock_t`) and of the association manager
//! (`assoc_mgr_lock_t`), held for a scope and released on drop, so no call site spells a lock
//! set as anonymous levels.
//!
//! Only code that runs outside Slurm's own locked calls may take them (a priority
//! recalculation thread, `priority_p_recover`): a `select_p_*` call runs with slurmctld's locks
//! already held, and taking them again would deadlock.

use crate::sys;

crate::ctld_symbol!(
    /// `void lock_slurmctld(slurmctld_lock_t)` (src/slurmctld/locks.h).
    LOCK_SLURMCTLD: fn(sys::slurmctld_lock_t) = "lock_slurmctld"
);
crate::ctld_symbol!(
    /// `void unlock_slurmctld(slurmctld_lock_t)` (src/slurmctld/locks.h).
    UNLOCK_SLURMCTLD: fn(sys::slurmctld_lock_t) = "unlock_slurmctld"
);

/// `slurmctld_lock_t` levels a priority recalculation takes: job write, node read, partition read.
#[derive(Debug, Clone, Copy)]
pub enum CtldLocks {
    /// `{ .job = WRITE, .node = READ, .part = READ }` (multifactor's `job_write_lock`).
    JobWriteNodePartRead,
    /// `{ .job = READ, .node = READ, .part = READ }` (22.05 factor list).
    JobNodePartRead,
}

/// An acquired slurmctld lock set; released on drop.
#[doc(alias = "slurmctld_lock_t")]
#[doc(alias = "lock_slurmctld")]
#[doc(alias = "unlock_slurmctld")]
#[derive(Debug)]
pub struct CtldLock {
    levels: sys::slurmctld_lock_t,
    unlock: unsafe extern "C" fn(sys::slurmctld_lock_t),
}

impl CtldLock {
    /// Takes the slurmctld locks; `None` outside slurmctld.
    pub fn acquire(which: CtldLocks) -> Option<CtldLock> {
        let (r, w, n) = (
            sys::lock_level_t_READ_LOCK,
            sys::lock_level_t_WRITE_LOCK,
            sys::lock_level_t_NO_LOCK,
        );
        let job = match which {
            CtldLocks::JobWriteNodePartRead => w,
            CtldLocks::JobNodePartRead => r,
        };
        let levels = sys::slurmctld_lock_t {
            conf: n,
            job,
            node: r,
            part: r,
            fed: n,
            // 26.05 added the select-node lock (src/slurmctld/locks.h); the priority loop
            // never calls into the select plugin.
            #[cfg(slurm_26_05)]
            select_node: n,
        };
        let (lock, unlock) = (LOCK_SLURMCTLD.get()?, UNLOCK_SLURMCTLD.get()?);
        // SAFETY: the struct is passed by value as slurmctld expects; released in Drop.
        unsafe { lock(levels) };
        Some(CtldLock { levels, unlock })
    }
}

impl Drop for CtldLock {
    fn drop(&mut self) {
        // SAFETY: releases exactly the locks `acquire` took.
        unsafe { (self.unlock)(self.levels) };
    }
}

/// An assoc_mgr lock set, named by what it lets the holder do; released on drop. Every set
/// also read-locks the TRES table (usage and factors are TRES-indexed) and nothing else.
#[doc(alias = "assoc_mgr_lock_t")]
#[doc(alias = "assoc_mgr_lock")]
#[derive(Debug)]
pub struct AssocLock(sys::assoc_mgr_lock_t);

impl AssocLock {
    /// Reads associations and QOS (shares, usage, factors): `{ .assoc = READ, .qos = READ,
    /// .tres = READ }`.
    pub fn read_assoc_qos() -> AssocLock {
        Self::acquire(false, false)
    }

    /// Writes associations (charging usage up the tree), reads QOS: `{ .assoc = WRITE,
    /// .qos = READ, .tres = READ }`.
    pub fn write_assoc() -> AssocLock {
        Self::acquire(true, false)
    }

    /// Writes associations and QOS (a job's usage charged to both): `{ .assoc = WRITE,
    /// .qos = WRITE, .tres = READ }`.
    pub fn write_assoc_qos() -> AssocLock {
        Self::acquire(true, true)
    }

    /// Takes assoc_mgr locks: `assoc`/`qos` at the given levels (others none).
    fn acquire(assoc_write: bool, qos_write: bool) -> AssocLock {
        let lvl = |w: bool| {
            if w {
                sys::lock_level_t_WRITE_LOCK
            } else {
                sys::lock_level_t_READ_LOCK
            }
        };
        let n = sys::lock_level_t_NO_LOCK;
        let mut l = sys::assoc_mgr_lock_t {
            assoc: lvl(assoc_write),
            file: n,
            qos: lvl(qos_write),
            res: n,
            tres: sys::lock_level_t_READ_LOCK,
            user: n,
            wckey: n,
        };
        // SAFETY: libslurmfull's assoc_mgr_lock with a valid lock-set struct.
        unsafe { sys::assoc_mgr_lock(&mut l) };
        AssocLock(l)
    }
}

impl Drop for AssocLock {
    fn drop(&mut self) {
        // SAFETY: releases the locks taken in `acquire`.
        unsafe { sys::assoc_mgr_unlock(&mut self.0) };
    }
}
