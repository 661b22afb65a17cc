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
use crate::slurm::ctld::CtldFn;

crate::ctld_symbol!(
    /// `int site_factor_g_init(void)` (24.11 src/interfaces/site_factor.h).
    INIT: fn() -> c_int = "site_factor_g_init"
);
crate::ctld_symbol!(
    /// `int site_factor_plugin_init(void)` (22.05 src/common/site_factor.h).
    INIT_22: fn() -> c_int = "site_factor_plugin_init"
);
crate::ctld_symbol!(
    /// `int site_factor_g_fini(void)` (24.11).
    FINI: fn() -> c_int = "site_factor_g_fini"
);
crate::ctld_symbol!(
    /// `int site_factor_plugin_fini(void)` (22.05).
    FINI_22: fn() -> c_int = "site_factor_plugin_fini"
);
crate::ctld_symbol!(
    /// `void site_factor_g_set(job_record_t *)` (both).
    SET: fn(*mut ffi::job_record_t) = "site_factor_g_set"
);
crate::ctld_symbol!(
    /// `void site_factor_g_update(void)` (both).
    UPDATE: fn() = "site_factor_g_update"
);
crate::ctld_symbol!(
    /// `void site_factor_g_reconfig(void)` (22.05 only).
    RECONFIG: fn() = "site_factor_g_reconfig"
);

type Status = CtldFn<unsafe extern "C" fn() -> c_int>;

/// Calls the first of `symbols` this process has; `None` if it has none.
fn call_status(symbols: [&Status; 2]) -> Option<c_int> {
    let f = symbols.iter().find_map(|s| s.get())?;
    // SAFETY: Slurm's function without arguments, called from slurmctld.
    Some(unsafe { f() })
}

/// Calls `symbol` if this process has it.
fn call_void(symbol: &CtldFn<unsafe extern "C" fn()>) {
    if let Some(f) = symbol.get() {
        // SAFETY: Slurm's function without arguments; callers hold the locks it expects.
        unsafe { f() };
    }
}

/// Initialises the interface (loads the configured plugin). Returns false when Slurm reports
/// a failure (multifactor then fatals; the caller fails the plugin's `init`).
pub fn init() -> bool {
    call_status([&INIT, &INIT_22]).is_none_or(|rc| rc == ffi::SLURM_SUCCESS as c_int)
}

/// Finalises the interface.
pub fn fini() {
    let _ = call_status([&FINI, &FINI_22]);
}

/// Lets the plugin set a job's factor (`priority_p_set`; Slurm holds the job write lock).
pub fn set(job: &mut JobRecord<'_>) {
    if let Some(f) = SET.get() {
        // SAFETY: a live job record whose write lock Slurm holds for the call.
        unsafe { f(job.as_mut_ptr()) };
    }
}

/// Lets the plugin update every job's factor (a pass; the caller holds the job write lock).
pub fn update() {
    call_void(&UPDATE);
}

/// Forwards a reconfigure (22.05; 24.11 has no such call).
pub fn reconfig() {
    call_void(&RECONFIG);
}
