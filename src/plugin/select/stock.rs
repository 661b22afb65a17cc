//! The stock `select/cons_tres`, loaded by absolute path and called through [`StockSelect`](super::abi::StockSelect).
//!
//! gputopo forwards every `select_p_*` call to the real `select_cons_tres.so` of the same
//! release, opened as a [`StockLibrary`] (the kit's: `dlopen(path, RTLD_LAZY | RTLD_LOCAL)`,
//! see `slurm_kit::stock` for why). Its `plugin_version` is checked here because Slurm's
//! `_verify_syms` is bypassed.
//!
//! # Where the stock plugin is found (first directory that has `select_cons_tres.so` which is
//! # not gputopo itself)
//! 1. `$GPUTOPO_STOCK_DIR`, if set in the daemon's environment (tests, unusual installs);
//! 2. the directory of the `libslurmfull.so` this process runs with: Slurm installs it in its
//!    plugin directory (`/usr/lib/x86_64-linux-gnu/slurm-wlm` on Debian, `$prefix/lib/slurm`
//!    for a source build), so it is the stock dir even when `PluginDir=` names gputopo's own
//!    plugin farm (docs/deployment.md);
//! 3. every `PluginDir=` entry of slurm.conf, in order.
//!
//! The library is opened once per process and never `dlclose`d (a late call from another
//! thread must not jump into unmapped code); `fini` calls the stock `fini`, and a later `init`
//! calls the stock `init` again.

use std::ffi::c_int;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock, PoisonError};

use crate::plugin::PluginError;
use crate::slurm;
use crate::slurm::ctld::fn_from_symbol;
pub use slurm_kit::stock::StockLibrary;
use slurm_kit::stock::{object_path, slurmfull_dir};

/// File name of the stock plugin gputopo wraps.
pub const STOCK_FILE: &str = "select_cons_tres.so";

type LifecycleFn = unsafe extern "C" fn() -> c_int;
/// The stock `fini`: `int fini(void)` up to 25.05, `void fini(void)` from 25.11
/// (src/plugins/select/cons_tres/select_cons_tres.c); Slurm itself ignores the result.
#[cfg(not(slurm_25_11))]
type FiniFn = LifecycleFn;
/// The stock `fini`: `int fini(void)` up to 25.05, `void fini(void)` from 25.11
/// (src/plugins/select/cons_tres/select_cons_tres.c); Slurm itself ignores the result.
#[cfg(slurm_25_11)]
type FiniFn = unsafe extern "C" fn();

/// The loaded stock plugin: library and its `init`/`fini` (its entry points are the table's,
/// [`super::abi::StockSelect`], resolved from [`library`]).
#[derive(Debug)]
struct Stock {
    lib: StockLibrary,
    init: LifecycleFn,
    fini: FiniFn,
}

static STOCK: OnceLock<Stock> = OnceLock::new();
static LOADING: Mutex<()> = Mutex::new(());

/// The stock library, loaded on the first call per process (found, opened, its release
/// checked, its `init`/`fini` resolved).
///
/// # Errors
/// Not found, not loadable, wrong release, or no `init`/`fini`.
pub fn library() -> Result<&'static StockLibrary, PluginError> {
    load().map(|s| &s.lib)
}

/// Loads the stock plugin (first call per process) and runs its `init`.
///
/// # Errors
/// As [`library`], or its `init` failing.
pub fn start() -> Result<(), PluginError> {
    let stock = load()?;
    // SAFETY: the stock plugin's `int init(void)`, called once per our own start.
    let rc = unsafe { (stock.init)() };
    slurm::check(rc).map_err(|source| PluginError::Slurm {
        what: format!("init() of {}", stock.lib.path().display()),
        source,
    })?;
    log::debug!("forwarding to {}", stock.lib.path().display());
    Ok(())
}

/// Runs the stock plugin's `fini` (the library stays mapped).
pub fn stop() {
    if let Some(stock) = STOCK.get() {
        #[cfg(not(slurm_25_11))]
        {
            // SAFETY: the stock plugin's `int fini(void)`, after its init succeeded.
            let rc = unsafe { (stock.fini)() };
            if let Err(err) = slurm::check(rc) {
                log::warn!("fini() of {} failed: {err}", stock.lib.path().display());
            }
        }
        // SAFETY: the stock plugin's `void fini(void)` (25.11+), after its init succeeded.
        #[cfg(slurm_25_11)]
        unsafe {
            (stock.fini)();
        }
    }
}

fn load() -> Result<&'static Stock, PluginError> {
    if let Some(stock) = STOCK.get() {
        return Ok(stock);
    }
    let _loading = LOADING.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(stock) = STOCK.get() {
        return Ok(stock);
    }
    let lib = StockLibrary::open(&find_stock()?)?;
    lib.check_release()?;
    // SAFETY: `init` is `int (*)(void)` in every Slurm plugin.
    let init = unsafe { fn_from_symbol::<LifecycleFn>(lib.symbol("init")?) };
    // SAFETY: cons_tres's `fini` has this release's prototype ([`FiniFn`]).
    let fini = unsafe { fn_from_symbol::<FiniFn>(lib.symbol("fini")?) };
    Ok(STOCK.get_or_init(|| Stock { lib, init, fini }))
}

/// Applies the search rule in the module docs.
fn find_stock() -> Result<PathBuf, PluginError> {
    let own = own_path().and_then(|p| p.canonicalize().ok());
    let mut dirs: Vec<PathBuf> = std::env::var_os("GPUTOPO_STOCK_DIR")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    dirs.extend(slurmfull_dir());
    dirs.extend(slurm::conf::plugin_dirs());
    dirs.iter()
        .map(|d| d.join(STOCK_FILE))
        .find(|f| f.is_file() && f.canonicalize().ok() != own)
        .ok_or_else(|| PluginError::StockNotFound {
            file: STOCK_FILE,
            searched: dirs
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(":"),
        })
}

fn own_path() -> Option<PathBuf> {
    let in_own: fn() -> Result<PathBuf, PluginError> = find_stock;
    object_path(in_own as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi;
    use slurm_kit::stock::StockError;

    /// Needs the installed Slurm of the build tree (the one the crate links against).
    #[test]
    fn finds_and_resolves_the_stock_plugin_of_this_release() {
        let path = find_stock().expect("stock select_cons_tres.so next to libslurmfull");
        assert!(path.ends_with(STOCK_FILE));
        let stock = load().expect("stock plugin loads and matches our release");
        assert_eq!(stock.lib.path(), path);
        assert_eq!(
            stock.lib.plugin_version().expect("plugin_version") & 0x00ff_ffff,
            ffi::SLURM_VERSION_NUMBER & 0x00ff_ffff
        );
        assert!(matches!(
            stock.lib.symbol("no_such_symbol"),
            Err(StockError::Symbol { .. })
        ));
    }
}
