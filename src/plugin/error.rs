//! Errors of the plugin shell. Only `guard` turns them into Slurm return codes.

use std::path::PathBuf;

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
    /// `dlopen` of the stock plugin failed.
    #[error("cannot dlopen {path}: {reason}")]
    StockOpen {
        /// Absolute path given to dlopen.
        path: PathBuf,
        /// `dlerror()` text.
        reason: String,
    },
    /// The stock plugin lacks a symbol its release requires.
    #[error("{path} has no symbol {symbol}")]
    StockSymbol {
        /// The stock plugin.
        path: PathBuf,
        /// The missing symbol.
        symbol: String,
    },
    /// The stock plugin was built for another Slurm release.
    #[error(
        "{path} is plugin_version {found:#x}, this build needs {expected:#x} (exact major.minor.micro)"
    )]
    StockVersion {
        /// The stock plugin.
        path: PathBuf,
        /// Its `plugin_version`.
        found: u32,
        /// Our `SLURM_VERSION_NUMBER`.
        expected: u32,
    },
    /// Slurm's site-factor interface (`PrioritySiteFactorPlugin`) did not initialise
    /// (multifactor fatals then too).
    #[error("failed to initialize the site_factor plugin (PrioritySiteFactorPlugin)")]
    SiteFactor,
    /// An entry point ran before `init()` loaded the stock plugin.
    #[error("the stock plugin is not loaded (init() did not run or failed)")]
    NotStarted,
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
