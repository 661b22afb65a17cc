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
//!   init/fini.

pub mod abi;
pub mod hooks;
pub mod steer;
pub mod stock;

use crate::plugin::PluginError;
use crate::plugin::lifecycle::Role;

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
        abi::StockSelect::load(stock::library()?)?;
        stock::start()
    }

    fn stop(&self) {
        stock::stop();
    }
}
