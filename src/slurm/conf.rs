//! Read-only access to libslurmfull's `slurm_conf` (the parsed slurm.conf of this process).
//!
//! Only what gputopo needs: `PluginDir` (to find the stock plugins) and the process role.

use std::ffi::CStr;
use std::path::PathBuf;

use crate::ffi;

/// `PluginDir` entries (`:`-separated in slurm.conf), in search order; empty when unset.
pub fn plugin_dirs() -> Vec<PathBuf> {
    // SAFETY: slurm_conf is libslurmfull's global, initialised before any plugin is loaded;
    // we only copy one pointer field out of it (no reference to the static is formed).
    let raw = unsafe { std::ptr::addr_of!(ffi::slurm_conf.plugindir).read() };
    if raw.is_null() {
        return Vec::new();
    }
    // SAFETY: plugindir is a NUL-terminated xstrdup'ed string owned by slurm_conf; it is only
    // replaced under reconfigure, which does not run concurrently with plugin init.
    let dirs = unsafe { CStr::from_ptr(raw) }
        .to_string_lossy()
        .into_owned();
    dirs.split(':')
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .collect()
}

/// True inside slurmctld (false in slurmd, slurmstepd, clients such as sinfo or sshare).
pub fn in_slurmctld() -> bool {
    // SAFETY: libslurmfull function without preconditions.
    unsafe { ffi::slurm_running_in_slurmctld() }
}

/// The path of the slurm.conf this process read (`slurm_conf.slurm_conf`), if known;
/// gputopo.conf lives next to it.
pub fn slurm_conf_path() -> Option<PathBuf> {
    // SAFETY: one pointer field copied out of libslurmfull's initialised global.
    let raw = unsafe { std::ptr::addr_of!(ffi::slurm_conf.slurm_conf).read() };
    if raw.is_null() {
        return None;
    }
    // SAFETY: NUL-terminated string owned by slurm_conf (replaced only by a reconfigure,
    // which does not run concurrently with select calls).
    let path = unsafe { CStr::from_ptr(raw) }
        .to_string_lossy()
        .into_owned();
    (!path.is_empty()).then(|| PathBuf::from(path))
}

/// `DEBUG_FLAG_SELECT_TYPE` and `DEBUG_FLAG_GRES` (slurm/slurm.h, bits 0 and 6 in 22.05 and
/// 24.11): `DebugFlags=SelectType`/`Gres`.
const DEBUG_SELECT_OR_GRES: u64 = (1 << 0) | (1 << 6);

/// True when slurm.conf's `DebugFlags` has `SelectType` or `Gres` (gputopo then logs each
/// placement decision, as Slurm's own `log_flag()` does).
pub fn debug_select_or_gres() -> bool {
    // SAFETY: a plain u64 read of libslurmfull's initialised global.
    let flags = unsafe { std::ptr::addr_of!(ffi::slurm_conf.debug_flags).read() };
    flags & DEBUG_SELECT_OR_GRES != 0
}
