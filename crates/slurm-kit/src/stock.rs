//! A stock Slurm plugin, opened by absolute path, for a plugin that wraps it and forwards
//! (gputopo's select role wraps `select/cons_tres`).
//!
//! The library is opened with `dlopen(path, RTLD_LAZY | RTLD_LOCAL)`: lazy because a stock
//! plugin references slurmctld-only symbols that clients lack, local so the wrapper's own
//! entry points and `init` never interpose on its symbols (Slurm loads plugins `RTLD_LOCAL` as
//! well). A handle is never `dlclose`d (a late call from another thread must not jump into
//! unmapped code). Where to find the stock plugin is the wrapper's rule; [`slurmfull_dir`] and
//! [`object_path`] are what such a rule usually needs.

use std::ffi::{CStr, CString, c_int, c_void};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;

use crate::sys;

/// Why a stock plugin cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum StockError {
    /// `dlopen` of the stock plugin failed.
    #[error("cannot dlopen {path}: {reason}")]
    Open {
        /// Absolute path given to dlopen.
        path: PathBuf,
        /// `dlerror()` text.
        reason: String,
    },
    /// The stock plugin lacks a symbol its release requires.
    #[error("{path} has no symbol {symbol}")]
    Symbol {
        /// The stock plugin.
        path: PathBuf,
        /// The missing symbol.
        symbol: String,
    },
    /// An entry point ran before `init()` loaded the stock plugin.
    #[error("the stock plugin is not loaded (init() did not run or failed)")]
    NotLoaded,
    /// The stock plugin was built for another Slurm release.
    #[error(
        "{path} is plugin_version {found:#x}, this build needs {expected:#x} (exact major.minor.micro)"
    )]
    Version {
        /// The stock plugin.
        path: PathBuf,
        /// Its `plugin_version`.
        found: u32,
        /// Our `SLURM_VERSION_NUMBER`.
        expected: u32,
    },
}

/// A dlopen'ed stock plugin.
#[doc(alias = "dlopen")]
#[derive(Debug)]
pub struct StockLibrary {
    handle: NonNull<c_void>,
    path: PathBuf,
}

// SAFETY: a dlopen handle may be used from any thread (dlsym is thread-safe); we never close it.
unsafe impl Send for StockLibrary {}
// SAFETY: as above; the struct is immutable after open.
unsafe impl Sync for StockLibrary {}

impl StockLibrary {
    /// Opens `path` with `RTLD_LAZY | RTLD_LOCAL`.
    ///
    /// # Errors
    /// [`StockError::Open`] with `dlerror()`'s text.
    pub fn open(path: &Path) -> Result<Self, StockError> {
        let open_err = |reason: String| StockError::Open {
            path: path.to_path_buf(),
            reason,
        };
        let c_path = CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|_| open_err("path contains NUL".into()))?;
        // SAFETY: NUL-terminated path; loading a Slurm plugin runs only its constructors.
        let handle = unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL) };
        let handle = NonNull::new(handle).ok_or_else(|| open_err(dl_error()))?;
        Ok(Self {
            handle,
            path: path.to_path_buf(),
        })
    }

    /// Absolute path the library was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Address of `name` inside this library.
    ///
    /// # Errors
    /// [`StockError::Symbol`] when the library does not define it.
    #[doc(alias = "dlsym")]
    pub fn symbol(&self, name: &str) -> Result<NonNull<c_void>, StockError> {
        let missing = || StockError::Symbol {
            path: self.path.clone(),
            symbol: name.to_owned(),
        };
        let c_name = CString::new(name).map_err(|_| missing())?;
        // SAFETY: live handle, NUL-terminated name.
        let sym = unsafe { libc::dlsym(self.handle.as_ptr(), c_name.as_ptr()) };
        NonNull::new(sym).ok_or_else(missing)
    }

    /// The library's `plugin_version` data symbol.
    ///
    /// # Errors
    /// [`StockError::Symbol`] when it has none.
    pub fn plugin_version(&self) -> Result<u32, StockError> {
        let sym = self.symbol("plugin_version")?;
        // SAFETY: every Slurm plugin defines `const uint32_t plugin_version` (what
        // `_verify_syms` reads the same way).
        Ok(unsafe { sym.cast::<u32>().as_ptr().read() })
    }

    /// Checks that the library was built for the release of these bindings (the exact
    /// major.minor.micro, what Slurm's `_verify_syms` checks for the plugins it loads itself;
    /// a wrapper that dlopens a stock plugin bypasses that check).
    ///
    /// # Errors
    /// [`StockError::Version`] for another release, [`StockError::Symbol`] without a
    /// `plugin_version`.
    #[doc(alias = "SLURM_VERSION_NUMBER")]
    pub fn check_release(&self) -> Result<(), StockError> {
        let found = self.plugin_version()?;
        let expected = sys::SLURM_VERSION_NUMBER;
        if found & 0x00ff_ffff == expected & 0x00ff_ffff {
            Ok(())
        } else {
            Err(StockError::Version {
                path: self.path.clone(),
                found,
                expected,
            })
        }
    }
}

fn dl_error() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated thread-local message.
    let msg = unsafe { libc::dlerror() };
    if msg.is_null() {
        return "unknown dlopen error".into();
    }
    // SAFETY: non-null message from dlerror, valid until the next dl* call on this thread.
    unsafe { CStr::from_ptr(msg) }
        .to_string_lossy()
        .into_owned()
}

/// Path of the shared object that contains the address `addr` (of a function or a static: it
/// is only compared with the loaded objects' ranges, never dereferenced).
#[doc(alias = "dladdr")]
pub fn object_path(addr: usize) -> Option<PathBuf> {
    let addr = addr as *const c_void;
    // SAFETY: Dl_info is plain old data; all-zero is a valid initial value.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads `addr` as an address and fills `info`.
    let found = unsafe { libc::dladdr(addr, &mut info) };
    if found == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dli_fname is a NUL-terminated path owned by the dynamic loader.
    let name = unsafe { CStr::from_ptr(info.dli_fname) };
    Some(PathBuf::from(name.to_string_lossy().into_owned()))
}

/// The directory of the `libslurmfull.so` this process runs with: Slurm installs it in its
/// plugin directory (`/usr/lib/x86_64-linux-gnu/slurm-wlm` on Debian, `$prefix/lib/slurm` for a
/// source build), so the stock plugins are there.
pub fn slurmfull_dir() -> Option<PathBuf> {
    let in_slurmfull: unsafe extern "C" fn() -> c_int = sys::slurm_get_log_level;
    object_path(in_slurmfull as usize)?
        .parent()
        .map(Path::to_path_buf)
}
