//! The select role: `select/gputopo` is `select/cons_tres` plus two hooks.
//!
//! What gputopo changes in Slurm's select API is the per-release entry-point table
//! (`crate::ffi::select_abi::v22_05` / `v23_11` / `v25_05`, chosen by
//! `cfg(select_abi)`): every
//! `select_p_*` of the release is listed there, `forward`ed unchanged to the stock plugin
//! except `select_p_job_test` and `select_p_select_nodeinfo_set` (→ [`crate::plugin::steer`])
//! and `select_p_reconfigure` (→ [`reconfigure`], which re-reads Slurm's log level).
//! This role's start/stop load and init/fini the stock cons_tres ([`crate::plugin::stock`]),
//! only where this `.so` is the select plugin: in a priority-only install
//! (`SelectType=select/cons_tres`, `PriorityType=priority/gputopo`) the cons_tres slurmctld
//! runs is the live select plugin itself (dlopen hands back its handle), so the role leaves
//! it alone: no second `init`, and no `fini` when the priority role's `fini` comes (24.11
//! calls it before every re-exec reconfigure and initialises again after a failed one).

use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::plugin::lifecycle::Role;
use crate::plugin::{PluginError, stock};
use crate::slurm;

/// The select role of this `.so`.
pub static ROLE: SelectRole = SelectRole;

/// Starts/stops the stock cons_tres behind our `select_p_*`.
#[derive(Debug)]
pub struct SelectRole;

/// Whether this role started the stock cons_tres (and so may stop it).
static STARTED: AtomicBool = AtomicBool::new(false);

impl Role for SelectRole {
    fn name(&self) -> &'static str {
        "select"
    }

    fn start(&self) -> Result<(), PluginError> {
        if !serves_select(slurm::conf::select_type().as_deref()) {
            log::debug!("select role idle: SelectType is another plugin");
            return Ok(());
        }
        stock::start()?;
        STARTED.store(true, Ordering::SeqCst);
        if slurm::conf::in_slurmctld() {
            crate::plugin::steer::persist::start();
        }
        Ok(())
    }

    fn stop(&self) {
        if !STARTED.swap(false, Ordering::SeqCst) {
            return;
        }
        crate::plugin::steer::persist::stop();
        stock::stop();
    }
}

/// True when this `.so` is the select plugin of a process whose `SelectType` is
/// `select_type` (unset: a process that loads plugins without slurm.conf's select line,
/// where only the select role can have loaded us).
fn serves_select(select_type: Option<&str>) -> bool {
    select_type.is_none_or(|t| t.contains("gputopo"))
}

/// `select_p_reconfigure`: `scontrol reconfigure` may have changed SlurmctldDebug.
pub fn reconfigure(forward: impl FnOnce() -> c_int) -> c_int {
    slurm::log::sync_level();
    let rc = forward();
    crate::plugin::steer::reconfigure();
    rc
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 25 item 4: in a priority-only install the select role never touches the live
    /// cons_tres (its `init` ran once, by slurmctld; its `fini` is slurmctld's to call).
    #[test]
    fn the_select_role_serves_only_when_select_type_is_ours() {
        assert!(serves_select(Some("select/gputopo_cons_tres")));
        assert!(serves_select(None));
        assert!(!serves_select(Some("select/cons_tres")));
        assert!(!serves_select(Some("select/linear")));
    }
}
