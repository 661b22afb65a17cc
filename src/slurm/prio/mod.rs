//! The Slurm side of `priority/gputopo`: everything that touches slurmctld memory for priorities.
//!
//! - this file: `slurm_conf` → [`PriorityConfig`], slurmctld-only globals (resolved through
//!   [`crate::slurm::ctld`]), the `long double` shim; the named lock sets ([`CtldLock`],
//!   [`AssocLock`]) and xmalloc are slurm-kit's, re-exported here.
//! - [`job`]: a `job_record_t` as a borrowed [`JobInput`](gputopo_core::priority::JobInput)
//!   (Slurm's arrays, no copy) and the write-back of priority, factors and the
//!   per-partition/QOS array (xmalloc'ed); `job_list` only through the lock-scoped
//!   [`job::JobsLocked`] (typed views that cannot outlive the lock, no raw pointers above).
//! - [`sprio`]: building the `priority_factors_object_t` list `sprio` receives.
//!
//! Lock discipline: only the priority recalculation thread (`src/plugin/priority/recalc.rs`) and
//! `priority_p_recover`/22.05's factor list call [`CtldLock::acquire`]; entry points that Slurm
//! calls with locks held (`priority_p_set`, `priority_p_job_end`, 24.11's factor list) never do.

pub mod assoc;
pub mod job;
pub mod long_double;
pub mod site_factor;
pub mod sprio;
pub mod usage;

use std::ffi::{CStr, c_char, c_int};

use gputopo_core::priority::{Flags, PriorityConfig, Release, Weights};

use crate::ffi;
pub use slurm_kit::lock::{AssocLock, CtldLock, CtldLocks};
pub use slurm_kit::xmalloc;

crate::ctld_symbol!(
    /// `uint32_t cluster_cpus` (slurmctld controller.c).
    pub CLUSTER_CPUS: static u32 = "cluster_cpus"
);
crate::ctld_symbol!(
    /// `int slurmctld_tres_cnt` (slurmctld).
    pub SLURMCTLD_TRES_CNT: static c_int = "slurmctld_tres_cnt"
);
crate::ctld_symbol!(
    /// `time_t last_job_update` (slurmctld job_mgr.c).
    pub LAST_JOB_UPDATE: static ffi::time_t = "last_job_update"
);
crate::ctld_symbol!(
    /// `time_t last_part_update` (slurmctld partition_mgr.c).
    pub LAST_PART_UPDATE: static ffi::time_t = "last_part_update"
);
crate::ctld_symbol!(
    /// `bool validate_operator(uid_t)` (src/slurmctld/slurmctld.h, proc_req.c).
    pub VALIDATE_OPERATOR: fn(u32) -> bool = "validate_operator"
);
crate::ctld_symbol!(
    /// `char *part_list_to_xstr(list_t *)` (slurmctld partition_mgr.c, 23.02+).
    pub PART_LIST_TO_XSTR: fn(*mut ffi::xlist) -> *mut c_char = "part_list_to_xstr"
);

unsafe extern "C" {
    /// slurm-headers/priority_shim.c: FairShareDampeningFactor for `priority_p_calc_fs_factor`.
    static mut gputopo_priority_damp_factor: u16;
}

fn conf() -> &'static ffi::slurm_conf_t {
    let p = &raw const ffi::slurm_conf;
    // SAFETY: libslurmfull's global, initialised before plugins load; we only read fields, and
    // slurmctld replaces them only under the config write lock during reconfigure, after which
    // it calls priority_p_reconfig (so a stale read is corrected at the next snapshot).
    unsafe { &*p }
}

/// Number of TRES slurmctld tracks (`slurmctld_tres_cnt`), 0 outside slurmctld.
pub fn tres_count() -> usize {
    SLURMCTLD_TRES_CNT.ptr().map_or(0, |p| {
        // SAFETY: the slurmctld global `int slurmctld_tres_cnt`, set at startup/reconfigure.
        let n = unsafe { p.as_ptr().read() };
        usize::try_from(n).unwrap_or(0)
    })
}

/// `cluster_cpus` and the node count multifactor uses (22.05: `node_record_count`; 23.11+:
/// `active_node_record_count`).
pub fn cluster() -> gputopo_core::priority::ClusterInput {
    let cpus = CLUSTER_CPUS.ptr().map_or(0, |p| {
        // SAFETY: the slurmctld global `uint32_t cluster_cpus`.
        unsafe { p.as_ptr().read() }
    });
    #[cfg(priority_abi = "22.05")]
    let p = &raw const ffi::node_record_count;
    #[cfg(not(priority_abi = "22.05"))]
    let p = &raw const ffi::active_node_record_count;
    // SAFETY: libslurmfull global `int node_record_count` (22.05) / `active_node_record_count`
    // (23.11+), read under the node read lock.
    let nodes = unsafe { p.read() };
    gputopo_core::priority::ClusterInput { cpus, nodes }
}

/// True when slurmctld talks to slurmdbd (multifactor's condition for age and fair share).
pub fn with_slurmdbd() -> bool {
    // SAFETY: libslurmfull function without preconditions.
    unsafe { ffi::slurm_with_slurmdbd() }
}

/// The release whose multifactor this build reproduces.
pub const RELEASE: Release = if cfg!(priority_abi = "22.05") {
    Release::V22_05
} else {
    Release::V24_11
};

/// Snapshot of the priority keys of `slurm_conf` (multifactor's `_internal_setup`).
pub fn priority_config() -> PriorityConfig {
    let c = conf();
    let tres_cnt = tres_count();
    let tres_weights = if c.priority_weight_tres.is_null() || tres_cnt == 0 {
        None
    } else {
        // SAFETY: a NUL-terminated slurm_conf string and the TRES count; `fail = false` makes
        // Slurm log bad input instead of calling fatal(). The array is xmalloc'ed for us.
        let arr = unsafe {
            ffi::slurm_get_tres_weight_array(c.priority_weight_tres, tres_cnt as c_int, false)
        };
        if arr.is_null() {
            None
        } else {
            // SAFETY: Slurm allocated `tres_cnt` doubles.
            let v = unsafe { std::slice::from_raw_parts(arr, tres_cnt) }.to_vec();
            let mut p = arr.cast::<std::ffi::c_void>();
            // SAFETY: xmalloc'ed by Slurm, freed once here.
            unsafe { ffi::slurm_xfree(&mut p) };
            Some(v)
        }
    };
    PriorityConfig {
        release: RELEASE,
        weights: Weights {
            age: c.priority_weight_age,
            assoc: c.priority_weight_assoc,
            fairshare: c.priority_weight_fs,
            job_size: c.priority_weight_js,
            partition: c.priority_weight_part,
            qos: c.priority_weight_qos,
        },
        tres_weights,
        max_age_secs: c.priority_max_age,
        favor_small: c.priority_favor_small != 0,
        flags: Flags(u32::from(c.priority_flags)),
        damp_factor: c.fs_dampening_factor.max(1),
    }
}

/// Hands `FairShareDampeningFactor` to the C shim's `priority_p_calc_fs_factor` (its global
/// `gputopo_priority_damp_factor`): at start and on every reconfigure, with
/// [`priority_config`]'s `damp_factor`.
pub fn set_fs_damp_factor(damp: u16) {
    let p = &raw mut gputopo_priority_damp_factor;
    // SAFETY: the shim's global is only written here, from the role's start and reconfigure,
    // which slurmctld serialises; the shim reads it in priority_p_calc_fs_factor.
    unsafe { p.write(damp.max(1)) };
}

/// `PriorityCalcPeriod` in seconds (at least 1), `PriorityDecayHalfLife` in seconds.
pub fn periods() -> (u32, u32) {
    let c = conf();
    (c.priority_calc_period.max(1), c.priority_decay_hl)
}

/// `PriorityUsageResetPeriod` (Slurm's `PRIORITY_RESET_*`).
pub fn reset_period() -> u16 {
    conf().priority_reset_period
}

/// slurmctld's local time offset from UTC at `t` (seconds east; 0 if the C library cannot
/// tell), for `PriorityUsageResetPeriod`'s local-midnight boundaries.
pub fn utc_offset(t: i64) -> i64 {
    let t: libc::time_t = t;
    // SAFETY: all-zero is a valid `tm` (plain integers and a null zone pointer).
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: localtime_r writes only into `tm`, which outlives the call; `t` is a valid time.
    let ok = unsafe { libc::localtime_r(&t, &mut tm) };
    if ok.is_null() { 0 } else { tm.tm_gmtoff }
}

/// `StateSaveLocation`.
pub fn state_save_location() -> Option<std::path::PathBuf> {
    let p = conf().state_save_location;
    if p.is_null() {
        return None;
    }
    // SAFETY: NUL-terminated slurm_conf string.
    Some(std::path::PathBuf::from(
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned(),
    ))
}

/// `SlurmUser`'s uid (owner of the files slurmctld keeps in StateSaveLocation).
pub fn slurm_user_id() -> u32 {
    conf().slurm_user_id
}

/// True when `PrivateData=jobs`.
pub fn private_jobs() -> bool {
    conf().private_data & 1 != 0 // PRIVATE_DATA_JOBS = SLURM_BIT(0) in slurm.h
}

/// `AccountingStorageEnforce` includes `limits`.
pub fn enforce_limits() -> bool {
    conf().accounting_storage_enforce & (1 << 1) != 0 // ACCOUNTING_ENFORCE_LIMITS = SLURM_BIT(1), read_config.h
}

/// Sets `last_job_update = now` (the scheduler re-sorts its queue when it changes).
pub fn touch_last_job_update(now: i64) {
    if let Some(p) = LAST_JOB_UPDATE.ptr() {
        // SAFETY: slurmctld's `time_t last_job_update`; written with the job write lock held
        // (caller), as multifactor does.
        unsafe { p.as_ptr().write(now) };
    }
}

/// `last_part_update` (0 outside slurmctld).
pub fn last_part_update() -> i64 {
    LAST_PART_UPDATE.ptr().map_or(0, |p| {
        // SAFETY: slurmctld's `time_t last_part_update`, read under the partition read lock.
        unsafe { p.as_ptr().read() }
    })
}

/// Whether `uid` is an operator (`validate_operator`); false if unresolvable.
pub fn is_operator(uid: u32) -> bool {
    VALIDATE_OPERATOR.get().is_some_and(|validate_operator| {
        // SAFETY: plain function taking a uid; it takes the assoc read lock itself.
        unsafe { validate_operator(uid) }
    })
}

/// Index of `gres/gpu` in slurmctld's TRES arrays (`assoc_mgr_tres_name_array`), if tracked.
pub fn gpu_tres_index() -> Option<usize> {
    let n = tres_count();
    let names = &raw const ffi::assoc_mgr_tres_name_array;
    // SAFETY: libslurmfull global; caller holds (or does not need) the TRES read lock: the
    // array is only replaced on TRES changes, which slurmctld does under its write locks.
    let names = unsafe { names.read() };
    if names.is_null() {
        return None;
    }
    (0..n).find(|&i| {
        let slot = names.wrapping_add(i);
        // SAFETY: `names` has at least slurmctld_tres_cnt entries.
        let p: *mut c_char = unsafe { slot.read() };
        // SAFETY: entries are NUL-terminated strings or NULL.
        !p.is_null() && unsafe { CStr::from_ptr(p) }.to_bytes() == b"gres/gpu"
    })
}

/// True when slurm.conf says `PriorityType=priority/gputopo` (the role must stay idle when the
/// same `.so` is only loaded as `select/gputopo`).
pub fn priority_type_is_gputopo() -> bool {
    let p = conf().priority_type;
    // SAFETY: NUL-terminated slurm_conf string (or NULL).
    !p.is_null() && unsafe { CStr::from_ptr(p) }.to_bytes() == b"priority/gputopo"
}

/// True when slurm.conf says `SelectType=select/gputopo_cons_tres` (this `.so` serves both
/// roles, and slurmctld initialises the select plugin first).
pub fn select_type_is_gputopo() -> bool {
    let p = conf().select_type;
    // SAFETY: NUL-terminated slurm_conf string (or NULL).
    !p.is_null() && unsafe { CStr::from_ptr(p) }.to_bytes() == b"select/gputopo_cons_tres"
}

/// True when `PriorityWeightTRES` is set.
pub fn tres_weights_configured() -> bool {
    !conf().priority_weight_tres.is_null()
}
