//! The select role: `select/gputopo_cons_tres` is `select/cons_tres` plus hooks.
//!
//! Everything of the role lives in this folder:
//! - [`abi`]: the entry-point table, one line per `select_p_*` of the release, each
//!   `forward`ed unchanged to the stock plugin or `hook`ed into a [`hooks::SelectHooks`]
//!   method (the table is what gputopo changes in Slurm's select API, in one file);
//! - [`hooks`]: that trait, whose methods forward by default, and the one conversion of the
//!   job_test mode;
//! - [`steer`]: gputopo's implementation ([`steer::Steer`]: `job_test`, `reconfigure`);
//! - [`stock`]: the dlopen'ed stock `select/cons_tres`, which this role's start/stop load and
//!   init/fini, only where this `.so` is the select plugin: in a priority-only install
//!   (`SelectType=select/cons_tres`, `PriorityType=priority/gputopo`) the cons_tres slurmctld
//!   runs is the live select plugin itself (dlopen hands back its handle), so the role leaves
//!   it alone: no second `init`, and no `fini` when the priority role's `fini` comes (24.11
//!   calls it before every re-exec reconfigure and initialises again after a failed one).

pub mod abi;
pub mod hooks;
pub mod steer;
pub mod stock;

use std::sync::atomic::{AtomicBool, Ordering};

use crate::plugin::PluginError;
use crate::plugin::lifecycle::Role;
use crate::slurm;

/// The select role of this `.so`.
pub static ROLE: SelectRole = SelectRole;

/// Starts/stops the stock cons_tres behind our `select_p_*`.
#[derive(Debug)]
pub struct SelectRole;

/// Whether this role started the stock cons_tres (and so may stop it).
static STARTED: AtomicBool = AtomicBool::new(false);

impl Role for SelectRole {
    type Error = PluginError;

    fn name(&self) -> &'static str {
        "select"
    }

    fn start(&self) -> Result<(), PluginError> {
        if !serves_select(slurm::conf::select_type().as_deref()) {
            log::debug!("select role idle: SelectType is another plugin");
            return Ok(());
        }
        abi::StockSelect::load(stock::library()?)?;
        stock::start()?;
        STARTED.store(true, Ordering::SeqCst);
        if slurm::conf::in_slurmctld() {
            steer::persist::start();
        }
        Ok(())
    }

    fn stop(&self) {
        if !STARTED.swap(false, Ordering::SeqCst) {
            return;
        }
        steer::persist::stop();
        stock::stop();
    }
}

/// True when this `.so` is the select plugin of a process whose `SelectType` is
/// `select_type` (unset: a process that loads plugins without slurm.conf's select line,
/// where only the select role can have loaded us).
fn serves_select(select_type: Option<&str>) -> bool {
    select_type.is_none_or(|t| t.contains("gputopo"))
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
