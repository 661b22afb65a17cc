//! Errors of the plugin shell. Only `guard` turns them into Slurm return codes.

use slurm_kit::stock::StockError;

use crate::slurm::SlurmError;

/// Why an entry point or the plugin's start-up failed.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// No directory holds the stock `select_cons_tres.so` (other than gputopo itself).
    #[error("cannot find the stock {file} (searched: {searched})")]
    StockNotFound {
        /// The file looked for.
        file: &'static str,
        /// The directories searched, `:`-separated.
        searched: String,
    },
    /// The stock plugin cannot be opened, lacks a symbol, or is of another release.
    #[error(transparent)]
    Stock(#[from] StockError),
    /// Slurm's site-factor interface (`PrioritySiteFactorPlugin`) did not initialise
    /// (multifactor fatals then too).
    #[error("failed to initialize the site_factor plugin (PrioritySiteFactorPlugin)")]
    SiteFactor,
    /// A call into Slurm (or the stock plugin) failed.
    #[error("{what}")]
    Slurm {
        /// What was being done.
        what: String,
        /// The Slurm failure.
        #[source]
        source: SlurmError,
    },
}
