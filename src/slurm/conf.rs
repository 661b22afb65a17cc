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
