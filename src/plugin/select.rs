//! The select role: `select/gputopo` is `select/cons_tres` plus two hooks.
//!
//! What gputopo changes in Slurm's select API is the per-release entry-point table
//! (`crate::ffi::select_abi::v22_05` / `v23_11` / `v25_05`, chosen by
//! `cfg(select_abi)`): every
//! `select_p_*` of the release is listed there, `forward`ed unchanged to the stock plugin
//! except `select_p_job_test` and `select_p_select_nodeinfo_set` (→ [`crate::plugin::steer`])
//! and `select_p_reconfigure` (→ [`reconfigure`], which re-reads Slurm's log level).
//! This role's start/stop load and init/fini the stock cons_tres ([`crate::plugin::stock`]).

use std::ffi::c_int;

use crate::plugin::lifecycle::Role;
use crate::plugin::{PluginError, stock};
use crate::slurm;

/// The select role of this `.so`.
pub static ROLE: SelectRole = SelectRole;

/// Starts/stops the stock cons_tres behind our `select_p_*`.
#[derive(Debug)]
pub struct SelectRole;

impl Role for SelectRole {
    fn name(&self) -> &'static str {
        "select"
    }

    fn start(&self) -> Result<(), PluginError> {
        stock::start()?;
        if slurm::conf::in_slurmctld() {
            crate::plugin::steer::persist::start();
        }
        Ok(())
    }

    fn stop(&self) {
        crate::plugin::steer::persist::stop();
        stock::stop();
    }
}

/// `select_p_reconfigure`: `scontrol reconfigure` may have changed SlurmctldDebug.
pub fn reconfigure(forward: impl FnOnce() -> c_int) -> c_int {
    slurm::log::sync_level();
    let rc = forward();
    crate::plugin::steer::reconfigure();
    rc
}
