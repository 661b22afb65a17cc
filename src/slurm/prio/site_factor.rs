//! `PrioritySiteFactorPlugin`: Slurm's site-factor interface, driven the way multifactor
//! drives it, so a site's plugin keeps setting `site_factor` under priority/gputopo.
//!
//! Multifactor (22.05.8 and 24.11.5 priority_multifactor.c) initialises the interface in its
//! `init` (fatal on failure) and finalises it in `fini`, lets the plugin set a job's factor in
//! `priority_p_set` before computing, and update all factors in each decay pass under the job
//! write lock (`site_factor_g_update`, not on the loop's first pass); 22.05 also forwards
//! `priority_p_reconfig`. The functions are Slurm's own, resolved by name at run time: from
//! libslurmfull in 24.11 (src/interfaces/site_factor.c: `site_factor_g_init`/`_fini`), from
//! slurmctld in 22.05 (src/common/site_factor.c linked into it: `site_factor_plugin_init`/
//! `_fini`, `site_factor_g_reconfig`). Without `PrioritySiteFactorPlugin` they do nothing.

use std::ffi::c_int;

use super::job::JobRecord;
use crate::ffi;

crate::ctld_symbol!(
    /// `int site_factor_g_init(void)` (24.11) / `int site_factor_plugin_init(void)` (22.05).
    INIT = "site_factor_g_init"
);
crate::ctld_symbol!(
    /// 22.05's name of the initialiser.
    INIT_22 = "site_factor_plugin_init"
);
crate::ctld_symbol!(
    /// `int site_factor_g_fini(void)` (24.11).
    FINI = "site_factor_g_fini"
);
crate::ctld_symbol!(
    /// 22.05's name of the finaliser.
    FINI_22 = "site_factor_plugin_fini"
);
crate::ctld_symbol!(
    /// `void site_factor_g_set(job_record_t *)`.
    SET = "site_factor_g_set"
);
crate::ctld_symbol!(
    /// `void site_factor_g_update(void)`.
    UPDATE = "site_factor_g_update"
);
crate::ctld_symbol!(
    /// `void site_factor_g_reconfig(void)` (22.05 only).
    RECONFIG = "site_factor_g_reconfig"
);

type Status = unsafe extern "C" fn() -> c_int;
type Void = unsafe extern "C" fn();

/// Initialises the interface (loads the configured plugin). Returns false when Slurm reports
/// a failure (multifactor then fatals; the caller fails the plugin's `init`).
pub fn init() -> bool {
    // SAFETY: `int f(void)` in both releases (site_factor.h).
    let f =
        unsafe { INIT.function::<Status>() }.or_else(|| unsafe { INIT_22.function::<Status>() });
    // SAFETY: Slurm's initialiser, no arguments; called from the role's start in slurmctld.
    f.is_none_or(|f| unsafe { f() } == ffi::SLURM_SUCCESS as c_int)
}

/// Finalises the interface.
pub fn fini() {
    // SAFETY: `int f(void)` in both releases (site_factor.h).
    let f =
        unsafe { FINI.function::<Status>() }.or_else(|| unsafe { FINI_22.function::<Status>() });
    if let Some(f) = f {
        // SAFETY: Slurm's finaliser, no arguments.
        unsafe { f() };
    }
}

/// Lets the plugin set a job's factor (`priority_p_set`; Slurm holds the job write lock).
pub fn set(job: &mut JobRecord<'_>) {
    type Set = unsafe extern "C" fn(*mut ffi::job_record_t);
    // SAFETY: `void site_factor_g_set(job_record_t *)` (site_factor.h).
    if let Some(f) = unsafe { SET.function::<Set>() } {
        // SAFETY: a live job record whose write lock Slurm holds for the call.
        unsafe { f(job.as_mut_ptr()) };
    }
}

/// Lets the plugin update every job's factor (a pass; the caller holds the job write lock).
pub fn update() {
    // SAFETY: `void site_factor_g_update(void)` (site_factor.h).
    if let Some(f) = unsafe { UPDATE.function::<Void>() } {
        // SAFETY: no arguments; the job write lock is held as the plugin expects.
        unsafe { f() };
    }
}

/// Forwards a reconfigure (22.05; 24.11 has no such call).
pub fn reconfig() {
    // SAFETY: `void site_factor_g_reconfig(void)` (22.05 site_factor.h).
    if let Some(f) = unsafe { RECONFIG.function::<Void>() } {
        // SAFETY: no arguments.
        unsafe { f() };
    }
}
