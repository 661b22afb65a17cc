//! Reference-counted, role-agnostic `init`/`fini`.
//!
//! One `.so` has one `init` and one `fini` symbol, but Slurm may load the same file under
//! several roles (`select_gputopo.so`, later `priority_gputopo.so`; dlopen returns the same
//! handle) and calls `init`/`fini` once per role, without saying which. So the first `init`
//! installs the logger and starts every [`Role`] listed in `plugin_identity!`, later ones only
//! count; the last `fini` stops the roles in reverse order. A role that fails to start makes
//! `init` fail (Slurm then refuses the plugin) after the already started ones are stopped.

use std::sync::{Mutex, PoisonError};

use crate::plugin::PluginError;
use crate::slurm;

/// One plugin role served by this `.so` (select, priority, ...).
pub trait Role: Sync {
    /// Short name for log lines (`select`).
    fn name(&self) -> &'static str;
    /// Sets the role up. Runs in every process that loads the plugin (slurmctld, slurmd,
    /// slurmstepd, clients), so it must stay cheap outside slurmctld.
    ///
    /// # Errors
    /// Any start-up failure; the plugin then fails to load.
    fn start(&self) -> Result<(), PluginError>;
    /// Tears the role down (the last `fini`).
    fn stop(&self);
}

static REFS: Mutex<usize> = Mutex::new(0);

/// The body of the exported `init`.
///
/// # Errors
/// The first role start-up failure.
pub fn init(roles: &[&dyn Role]) -> Result<(), PluginError> {
    let mut refs = REFS.lock().unwrap_or_else(PoisonError::into_inner);
    if *refs == 0 {
        slurm::log::install();
        for (started, role) in roles.iter().enumerate() {
            if let Err(err) = role.start() {
                roles[..started].iter().rev().for_each(|r| r.stop());
                return Err(err);
            }
            log::debug!("{} role started", role.name());
        }
    } else {
        slurm::log::sync_level();
    }
    *refs += 1;
    Ok(())
}

/// The body of the exported `fini`.
pub fn fini(roles: &[&dyn Role]) {
    let mut refs = REFS.lock().unwrap_or_else(PoisonError::into_inner);
    match *refs {
        0 => {}
        1 => {
            roles.iter().rev().for_each(|r| r.stop());
            *refs = 0;
        }
        n => *refs = n - 1,
    }
}
