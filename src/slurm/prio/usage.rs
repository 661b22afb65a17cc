//! Association and QOS usage records, written the way multifactor writes them (22.05.8 and
//! 24.11.5 priority_multifactor.c): `_apply_new_usage` and its `_handle_*_tres_run_secs`,
//! `_init_grp_used_tres_run_secs`, `_apply_decay`, `_reset_usage`.
//!
//! The amounts come from [`gputopo_core::priority::usage`]; this file only finds the records
//! (the job's QOS, its partition's QOS when another one, its association and every parent up
//! to root) and adds, subtracts, scales or clears their fields under the same assoc_mgr locks
//! multifactor takes (association and QOS write, TRES read). `long double` fields change
//! through [`super::long_double`], in C. Arrays are bounded by `slurmctld_tres_cnt`, the
//! record's own `tres_cnt` and the size xmalloc recorded for them, whichever is smallest.

use std::ffi::{CStr, c_char};

use gputopo_core::priority::usage::{self as rules, Charge};

use super::job::{JobRecord, JobsLocked};
use super::xmalloc::capacity;
use super::{AssocLock, long_double};
use crate::ffi;
use crate::slurm::list::ListRef;

type Assoc = ffi::slurmdb_assoc_rec_t;
type Qos = ffi::slurmdb_qos_rec_t;

/// `QOS_FLAG_NO_DECAY` (slurm/slurmdb.h, `SLURM_BIT(8)` in 22.05 to 26.05).
const QOS_FLAG_NO_DECAY: u32 = 1 << 8;

crate::ctld_symbol!(
    /// `double calc_job_billable_tres(job_record_t *, time_t, bool assoc_mgr_locked)`
    /// (src/slurmctld/slurmctld.h, 22.05.8 and 24.11.5): the job's billing TRES, recomputed
    /// after a resize.
    CALC_JOB_BILLABLE_TRES: fn(*mut ffi::job_record_t, ffi::time_t, bool) -> f64 =
        "calc_job_billable_tres"
);
#[cfg(slurm_24_05)]
crate::ctld_symbol!(
    /// `slurmdb_used_limits_t *acct_policy_get_acct_used_limits(list_t **, char *acct)`
    /// (src/slurmctld/acct_policy.h).
    ACCT_USED_LIMITS: fn(*mut *mut ffi::xlist, *mut c_char) -> *mut ffi::slurmdb_used_limits_t =
        "acct_policy_get_acct_used_limits"
);
#[cfg(slurm_24_05)]
crate::ctld_symbol!(
    /// `slurmdb_used_limits_t *acct_policy_get_user_used_limits(list_t **, uint32_t uid)`
    /// (src/slurmctld/acct_policy.h).
    USER_USED_LIMITS: fn(*mut *mut ffi::xlist, u32) -> *mut ffi::slurmdb_used_limits_t =
        "acct_policy_get_user_used_limits"
);

/// `_apply_new_usage(job, start_period, end_period, adjust_for_end)`: charges the job's
/// window to its QOS, partition QOS and association chain. Returns false (nothing done) when
/// its end was charged already. Caller holds the slurmctld job write lock; this takes the
/// assoc_mgr locks.
pub fn apply_new_usage(
    job: &mut JobRecord<'_>,
    start_period: i64,
    end_period: i64,
    adjust_for_end: bool,
    decay_factor: f64,
    tres_cnt: usize,
    enforce_limits: bool,
) -> bool {
    if job.end_charged() {
        return false;
    }
    let _locks = AssocLock::write_assoc_qos();
    let charged = job.charged_job();
    let window_start = rules::charge_window_start(&charged, start_period);
    let billable = billable_tres(job, window_start);
    let Some(charge) = rules::job_charge(
        &charged,
        start_period,
        end_period,
        adjust_for_end,
        billable,
        decay_factor,
    ) else {
        return false;
    };
    if adjust_for_end {
        job.mark_end_charged();
    }
    let alloc = job.tres_alloc_all(tres_cnt).unwrap_or_default();
    let deltas: Vec<u64> = alloc
        .iter()
        .map(|&a| rules::tres_released(charge.run_secs_released, a))
        .collect();
    let to = Tres {
        alloc,
        deltas: &deltas,
        enforce_limits,
    };
    let targets = job.targets();
    let who = Who::of(job);
    for qos in [targets.qos, targets.part_qos] {
        // SAFETY: QOS records of assoc_mgr, alive while jobs reference them; assoc_mgr QOS
        // write lock held.
        if let Some(q) = unsafe { qos.as_mut() } {
            charge_qos(q, &charge, &to, &who);
        }
    }
    let mut a = targets.assoc;
    // SAFETY: the association chain of a job, up to root (null parent); assoc write lock held.
    while let Some(rec) = unsafe { a.as_mut() } {
        // SAFETY: usage is allocated with the association.
        let Some(u) = (unsafe { rec.usage.as_mut() }) else {
            break;
        };
        u.grp_used_wall += charge.decayed.wall;
        // SAFETY: long double field of a live usage record; write lock held.
        unsafe { long_double::add(&mut u.usage_raw, charge.decayed.billing) };
        if enforce_limits {
            let raw = Some(charge.decayed.tres_factor);
            assoc_tres_run_secs(u, rec.id, raw, &to, &who);
        }
        a = u.parent_assoc_ptr;
    }
    true
}

/// `_init_grp_used_tres_run_secs(last_ran)`: after a start (Slurm re-added every running
/// job's whole `tres × time limit`) or a reconfigure, takes out what passes up to `last_ran`
/// released already. Only with `AccountingStorageEnforce=limits`. Caller holds the slurmctld
/// job lock (read is enough).
pub fn init_grp_used_tres_run_secs(jobs: &JobsLocked<'_>, last_ran: i64, tres_cnt: usize) {
    let _locks = AssocLock::write_assoc_qos();
    jobs.for_each(|job| {
        let Some(factor) =
            rules::restart_release_factor(&job.charged_job(), job.is_running(), last_ran)
        else {
            return;
        };
        let alloc = job.tres_alloc_all(tres_cnt).unwrap_or_default();
        let deltas: Vec<u64> = alloc
            .iter()
            .map(|&a| rules::restart_tres_released(factor, a))
            .collect();
        let to = Tres {
            alloc,
            deltas: &deltas,
            enforce_limits: true,
        };
        let targets = job.targets();
        let who = Who::of(&job);
        for qos in [targets.qos, targets.part_qos] {
            // SAFETY: as in apply_new_usage.
            if let Some(q) = unsafe { qos.as_mut() } {
                qos_tres_run_secs(q, None, &to, &who);
            }
        }
        let mut a = targets.assoc;
        // SAFETY: as in apply_new_usage.
        while let Some(rec) = unsafe { a.as_mut() } {
            // SAFETY: usage is allocated with the association.
            let Some(u) = (unsafe { rec.usage.as_mut() }) else {
                break;
            };
            assoc_tres_run_secs(u, rec.id, None, &to, &who);
            a = u.parent_assoc_ptr;
        }
    });
}

/// `_apply_decay(real_decay)`: scales every association's usage (and its `leaf_usage`, the
/// usage of removed users kept for fair share) and every QOS's without `NoDecay`.
pub fn apply_decay(real_decay: f64, tres_cnt: usize) {
    let _locks = AssocLock::write_assoc_qos();
    for_each_assoc(|a| {
        for u in assoc_usages(a) {
            u.fields().scale(tres_cnt, real_decay);
        }
    });
    for_each_qos(|q| {
        if q.flags & QOS_FLAG_NO_DECAY != 0 {
            return;
        }
        // SAFETY: usage record of a live QOS (QOS write lock held).
        if let Some(u) = unsafe { q.usage.as_mut() } {
            u.fields().scale(tres_cnt, real_decay);
        }
    });
}

/// `_reset_usage()` (`PriorityUsageResetPeriod`): clears every association's and QOS's
/// usage and drops the associations' separate `leaf_usage`.
pub fn reset_usage(tres_cnt: usize) {
    let _locks = AssocLock::write_assoc_qos();
    for_each_assoc(|a| {
        // SAFETY: usage record of a live association (write lock held).
        if let Some(u) = unsafe { a.usage.as_mut() } {
            u.fields().clear(tres_cnt);
        }
        if !a.leaf_usage.is_null() && a.leaf_usage != a.usage {
            // SAFETY: a separate usage record owned by the association (assoc_mgr allocates
            // it for removed users' usage); freed with Slurm's own destructor, as multifactor.
            unsafe { ffi::slurmdb_destroy_assoc_usage(a.leaf_usage.cast()) };
            a.leaf_usage = std::ptr::null_mut();
        }
    });
    for_each_qos(|q| {
        // SAFETY: usage record of a live QOS (QOS write lock held).
        if let Some(u) = unsafe { q.usage.as_mut() } {
            u.fields().clear(tres_cnt);
        }
    });
}

/// An association's usage records: `usage`, and `leaf_usage` when it is a separate record.
fn assoc_usages(a: &mut Assoc) -> impl Iterator<Item = &mut ffi::slurmdb_assoc_usage> {
    let leaf = (a.leaf_usage != a.usage).then_some(a.leaf_usage);
    [Some(a.usage), leaf]
        .into_iter()
        .flatten()
        // SAFETY: null or usage records owned by the association (write lock held by the
        // caller); the two are distinct, so no two mutable borrows alias.
        .filter_map(|u| unsafe { u.as_mut() })
}

/// The usage fields multifactor charges, decays and clears, which an association's and a
/// QOS's usage record both have (`slurmdb_assoc_usage_t`, `slurmdb_qos_usage_t`).
struct UsageFields<'a> {
    raw: &'a mut u128,
    tres_raw: *mut u128,
    tres_cnt: u32,
    wall: &'a mut f64,
}

/// Both usage record types.
trait HasUsage {
    /// The record's [`UsageFields`] (caller holds its assoc_mgr write lock).
    fn fields(&mut self) -> UsageFields<'_>;
}

macro_rules! has_usage {
    ($($t:ty),*) => {$(
        impl HasUsage for $t {
            fn fields(&mut self) -> UsageFields<'_> {
                UsageFields {
                    raw: &mut self.usage_raw,
                    tres_raw: self.usage_tres_raw,
                    tres_cnt: self.tres_cnt,
                    wall: &mut self.grp_used_wall,
                }
            }
        }
    )*};
}
has_usage!(ffi::slurmdb_assoc_usage, ffi::slurmdb_qos_usage_t);

impl UsageFields<'_> {
    /// `usage_raw *= f; usage_tres_raw[..] *= f; grp_used_wall *= f` (`_apply_decay`).
    fn scale(self, tres_cnt: usize, f: f64) {
        let n = long_doubles(self.tres_raw, self.tres_cnt, tres_cnt);
        // SAFETY: the record's own long double field; its write lock is held.
        unsafe { long_double::scale(self.raw, 1, f) };
        // SAFETY: `n` entries lie inside the record's TRES array; write lock held.
        unsafe { long_double::scale(self.tres_raw, n, f) };
        *self.wall *= f;
    }

    /// `usage_raw = 0; usage_tres_raw[..] = 0; grp_used_wall = 0` (`_reset_usage`).
    fn clear(self, tres_cnt: usize) {
        let n = long_doubles(self.tres_raw, self.tres_cnt, tres_cnt);
        // SAFETY: as in `scale`.
        unsafe { long_double::set(self.raw, 0.0) };
        // SAFETY: as in `scale`.
        unsafe { long_double::zero(self.tres_raw, n) };
        *self.wall = 0.0;
    }
}

/// The job's TRES as one charge applies them: allocated counts, run-seconds to release per
/// TRES, and whether limits are enforced (else TRES usage is not charged at all: multifactor's
/// `_handle_*_tres_run_secs` return at once).
struct Tres<'a> {
    alloc: &'a [u64],
    deltas: &'a [u64],
    enforce_limits: bool,
}

/// Who is charged, for 24.11's per-account and per-user QOS run-seconds and for log lines.
#[cfg_attr(not(slurm_24_05), allow(dead_code))]
struct Who {
    job_id: u32,
    uid: u32,
    acct: *mut c_char,
    has_assoc: bool,
}

impl Who {
    fn of(job: &JobRecord<'_>) -> Who {
        let assoc = job.targets().assoc;
        Who {
            job_id: job.id(),
            uid: job.user_id(),
            // SAFETY: the job's association record (assoc lock held by the caller).
            acct: unsafe { assoc.as_ref() }.map_or(std::ptr::null_mut(), |a| a.acct),
            has_assoc: !assoc.is_null(),
        }
    }
}

/// A QOS's share of `_apply_new_usage`: wall and billing usage (undecayed with `NoDecay`),
/// then its TRES.
fn charge_qos(q: &mut Qos, charge: &Charge, to: &Tres<'_>, who: &Who) {
    let amount = charge.for_qos(q.flags & QOS_FLAG_NO_DECAY != 0);
    // SAFETY: usage is allocated with the QOS record (QOS write lock held).
    let Some(u) = (unsafe { q.usage.as_mut() }) else {
        return;
    };
    u.grp_used_wall += amount.wall;
    // SAFETY: long double field of a live usage record; write lock held.
    unsafe { long_double::add(&mut u.usage_raw, amount.billing) };
    if to.enforce_limits {
        qos_tres_run_secs(q, Some(amount.tres_factor), to, who);
    }
}

/// `_handle_qos_tres_run_secs`: per TRES but energy, `usage_tres_raw += factor × alloc`
/// (`raw_factor` given) and the run-seconds released from the QOS and, from 24.05, from its
/// per-account and per-user records (created if missing, as Slurm's own lookups do).
fn qos_tres_run_secs(q: &mut Qos, raw_factor: Option<f64>, to: &Tres<'_>, who: &Who) {
    #[cfg(slurm_24_05)]
    if !who.has_assoc {
        return;
    }
    let name = q.name;
    // SAFETY: usage is allocated with the QOS record (QOS write lock held).
    let Some(u) = (unsafe { q.usage.as_mut() }) else {
        return;
    };
    let n = to.alloc.len().min(u.tres_cnt as usize);
    add_tres_raw(u.usage_tres_raw, n, raw_factor, to);
    release(u.grp_used_tres_run_secs, to, || {
        format!(
            "job {}: QOS {} grp_used_tres_run_secs",
            who.job_id,
            cstr(name)
        )
    });
    #[cfg(slurm_24_05)]
    {
        let acct = used_limits_acct(&mut u.acct_limit_list, who.acct);
        let user = used_limits_user(&mut u.user_limit_list, who.uid);
        for (limits, what) in [(acct, "account"), (user, "user")] {
            // SAFETY: a used-limits record of this QOS (created by Slurm's lookup, alive in
            // its list; QOS write lock held).
            if let Some(l) = unsafe { limits.as_mut() } {
                release(l.tres_run_secs, to, || {
                    format!(
                        "job {}: QOS {} {what} used limit tres_run_secs",
                        who.job_id,
                        cstr(name)
                    )
                });
            }
        }
    }
}

/// `_handle_assoc_tres_run_secs`: as for a QOS, on one association's usage.
fn assoc_tres_run_secs(
    u: &mut ffi::slurmdb_assoc_usage,
    id: u32,
    raw_factor: Option<f64>,
    to: &Tres<'_>,
    who: &Who,
) {
    let n = to.alloc.len().min(u.tres_cnt as usize);
    add_tres_raw(u.usage_tres_raw, n, raw_factor, to);
    release(u.grp_used_tres_run_secs, to, || {
        format!("job {}: assoc {id} grp_used_tres_run_secs", who.job_id)
    });
}

/// `usage_tres_raw[i] += (long double) factor * (long double) alloc[i]` for the TRES
/// [`rules::tres_charged`] names (adding multifactor's zeros elsewhere changes nothing).
fn add_tres_raw(raw: *mut u128, n: usize, factor: Option<f64>, to: &Tres<'_>) {
    let Some(f) = factor else { return };
    // SAFETY: null or the record's xmalloc'ed usage_tres_raw (lock held).
    let n = n.min(unsafe { capacity(raw) });
    for (i, &alloc) in to.alloc.iter().enumerate().take(n) {
        if rules::tres_charged(i, alloc) {
            // SAFETY: i < n, inside the array; write lock held.
            unsafe { long_double::add_product(raw.wrapping_add(i), f, alloc) };
        }
    }
}

/// Subtracts each TRES's run-seconds (energy excepted) from `secs`, leaving 0 on underflow
/// with multifactor's error line.
fn release(secs: *mut u64, to: &Tres<'_>, what: impl Fn() -> String) {
    // SAFETY: null or an xmalloc'ed run-seconds array of a usage record (lock held).
    let n = to.deltas.len().min(unsafe { capacity(secs) });
    for (i, &delta) in to.deltas.iter().enumerate().take(n) {
        if i == rules::TRES_ENERGY {
            continue;
        }
        let slot = secs.wrapping_add(i);
        // SAFETY: i < n, inside the array; write lock held.
        let have = unsafe { slot.read() };
        let (left, underflow) = rules::release_run_secs(have, delta);
        if underflow {
            log::error!(
                "{} underflow for TRES {}, tried to remove {delta} seconds when only {have} remained.",
                what(),
                tres_name(i)
            );
        }
        // SAFETY: as above.
        unsafe { slot.write(left) };
    }
}

/// How many `long double`s of `raw` may be touched: `slurmctld_tres_cnt`, the record's
/// `tres_cnt` and the allocation, whichever is smallest.
fn long_doubles(raw: *mut u128, record_cnt: u32, tres_cnt: usize) -> usize {
    // SAFETY: null or an xmalloc'ed array of a usage record (lock held by the caller).
    tres_cnt
        .min(record_cnt as usize)
        .min(unsafe { capacity(raw) })
}

/// The job's billing TRES over its window (multifactor's `calc_job_billable_tres(job,
/// start_period, true)`; assoc_mgr locks held). Outside slurmctld, the stored value.
fn billable_tres(job: &mut JobRecord<'_>, start: i64) -> f64 {
    match CALC_JOB_BILLABLE_TRES.get() {
        // SAFETY: a live job record (job write lock held by the caller) and the assoc_mgr
        // locks it asks for (`assoc_mgr_locked` = true) held here.
        Some(calc) => unsafe { calc(job.as_mut_ptr(), start, true) },
        None => job.billable_tres(),
    }
}

/// QOS `acct_limit_list`'s record for `acct` (created if missing).
#[cfg(slurm_24_05)]
fn used_limits_acct(
    list: &mut *mut ffi::xlist,
    acct: *mut c_char,
) -> *mut ffi::slurmdb_used_limits_t {
    let Some(get) = ACCT_USED_LIMITS.get() else {
        return std::ptr::null_mut();
    };
    // SAFETY: the QOS's list slot and the job's account name; QOS write lock held.
    unsafe { get(list, acct) }
}

/// QOS `user_limit_list`'s record for `uid` (created if missing).
#[cfg(slurm_24_05)]
fn used_limits_user(list: &mut *mut ffi::xlist, uid: u32) -> *mut ffi::slurmdb_used_limits_t {
    let Some(get) = USER_USED_LIMITS.get() else {
        return std::ptr::null_mut();
    };
    // SAFETY: the QOS's list slot; QOS write lock held.
    unsafe { get(list, uid) }
}

/// Every association of assoc_mgr (caller holds the association write lock).
fn for_each_assoc(mut f: impl FnMut(&mut Assoc)) {
    let list = &raw const ffi::assoc_mgr_assoc_list;
    // SAFETY: libslurmfull global (association lock held by the caller).
    let list = unsafe { list.read() };
    // SAFETY: a list of association records owned by assoc_mgr.
    if let Some(l) = unsafe { ListRef::<Assoc>::from_raw(list) } {
        for mut a in l.iter_ptrs() {
            // SAFETY: a live record; the write lock gives exclusive access.
            f(unsafe { a.as_mut() });
        }
    }
}

/// Every QOS of assoc_mgr (caller holds the QOS write lock).
fn for_each_qos(mut f: impl FnMut(&mut Qos)) {
    let list = &raw const ffi::assoc_mgr_qos_list;
    // SAFETY: libslurmfull global (QOS lock held by the caller).
    let list = unsafe { list.read() };
    // SAFETY: a list of QOS records owned by assoc_mgr.
    if let Some(l) = unsafe { ListRef::<Qos>::from_raw(list) } {
        for mut q in l.iter_ptrs() {
            // SAFETY: a live record; the write lock gives exclusive access.
            f(unsafe { q.as_mut() });
        }
    }
}

fn cstr(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: NUL-terminated string of an assoc_mgr record (lock held).
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// `assoc_mgr_tres_name_array[i]` (TRES read lock held).
fn tres_name(i: usize) -> String {
    let names = &raw const ffi::assoc_mgr_tres_name_array;
    // SAFETY: libslurmfull global; TRES read lock held by the caller.
    let names = unsafe { names.read() };
    if names.is_null() || i >= super::tres_count() {
        return i.to_string();
    }
    // SAFETY: the array has slurmctld_tres_cnt entries.
    cstr(unsafe { names.wrapping_add(i).read() })
}
