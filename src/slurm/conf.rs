//! Read-only access to libslurmfull's `slurm_conf` (the parsed slurm.conf of this process).
//!
//! Only what gputopo needs: `PluginDir` (to find the stock plugins), the process role, the
//! slurm.conf path and `DebugFlags`.

use std::ffi::{CStr, c_char};
use std::path::PathBuf;

use gputopo_core::steer::victims::mode::PreemptKind;

use crate::ffi;

/// libslurmfull's `slurm_conf` global (taking its address needs no `unsafe`).
fn global() -> *const ffi::slurm_conf_t {
    &raw const ffi::slurm_conf
}

/// Copies one C string field of `slurm_conf`; NULL or empty becomes `None`.
fn string_field(raw: *const c_char) -> Option<String> {
    if raw.is_null() {
        return None;
    }
    // SAFETY: string fields of slurm_conf are NUL-terminated xstrdup'ed strings owned by
    // slurm_conf; they are replaced only by a reconfigure, which does not run concurrently with
    // plugin init or select calls.
    let text = unsafe { CStr::from_ptr(raw) }
        .to_string_lossy()
        .into_owned();
    (!text.is_empty()).then_some(text)
}

/// `PluginDir` entries (`:`-separated in slurm.conf), in search order; empty when unset.
#[doc(alias = "plugindir")]
pub fn plugin_dirs() -> Vec<PathBuf> {
    // SAFETY: slurm_conf is initialised before any plugin is loaded; one field is copied out.
    let raw = unsafe { (*global()).plugindir };
    string_field(raw)
        .map(|dirs| {
            dirs.split(':')
                .filter(|d| !d.is_empty())
                .map(PathBuf::from)
                .collect()
        })
        .unwrap_or_default()
}

/// True inside slurmctld (false in slurmd, slurmstepd, clients such as sinfo or sshare).
#[cfg(not(slurm_25_05))]
#[doc(alias = "running_in_slurmctld")]
pub fn in_slurmctld() -> bool {
    // SAFETY: libslurmfull function without preconditions.
    unsafe { ffi::slurm_running_in_slurmctld() }
}

/// `IS_SLURMCTLD` (src/common/run_in_daemon.h, 25.05+: `SLURM_BIT(3)`, which bindgen cannot
/// evaluate); `running_in_slurmctld()` became a macro over `run_in_daemon(IS_SLURMCTLD)`.
#[cfg(slurm_25_05)]
const IS_SLURMCTLD: u32 = 1 << 3;

/// True inside slurmctld (false in slurmd, slurmstepd, clients such as sinfo or sshare).
#[cfg(slurm_25_05)]
#[doc(alias = "running_in_slurmctld")]
#[doc(alias = "run_in_daemon")]
pub fn in_slurmctld() -> bool {
    // SAFETY: libslurmfull function taking a bit mask of daemon kinds, without preconditions.
    unsafe { ffi::slurm_run_in_daemon(IS_SLURMCTLD) }
}

/// The path of the slurm.conf this process read (`slurm_conf.slurm_conf`), if known;
/// gputopo.conf lives next to it.
#[doc(alias = "slurm_conf")]
pub fn slurm_conf_path() -> Option<PathBuf> {
    // SAFETY: one pointer field copied out of libslurmfull's initialised global.
    let raw = unsafe { (*global()).slurm_conf };
    string_field(raw).map(PathBuf::from)
}

/// slurm.conf's `SelectType` (`select/cons_tres`, `select/gputopo_cons_tres`), if set.
pub fn select_type() -> Option<String> {
    // SAFETY: one pointer field copied out of libslurmfull's initialised global.
    let raw = unsafe { (*global()).select_type };
    string_field(raw)
}

/// slurm.conf's `StateSaveLocation`, if set (where slurmctld keeps what survives restarts).
pub fn state_save_location() -> Option<PathBuf> {
    // SAFETY: one pointer field copied out of libslurmfull's initialised global.
    let raw = unsafe { (*global()).state_save_location };
    string_field(raw).map(PathBuf::from)
}

/// `SlurmUser`'s uid: the owner of what slurmctld keeps in `StateSaveLocation`.
pub fn slurm_user_id() -> u32 {
    // SAFETY: a plain u32 read of libslurmfull's initialised global.
    unsafe { (*global()).slurm_user_id }
}

/// `DEBUG_FLAG_SELECT_TYPE` and `DEBUG_FLAG_GRES` (slurm/slurm.h, bits 0 and 6 in 22.05 and
/// 24.11): `DebugFlags=SelectType`/`Gres`.
const DEBUG_SELECT_OR_GRES: u64 = (1 << 0) | (1 << 6);

/// True when slurm.conf's `DebugFlags` has `SelectType` or `Gres` (gputopo then logs each
/// placement decision, as Slurm's own `log_flag()` does).
#[doc(alias = "debug_flags")]
pub fn debug_select_or_gres() -> bool {
    // SAFETY: a plain u64 read of libslurmfull's initialised global.
    let flags = unsafe { (*global()).debug_flags };
    flags & DEBUG_SELECT_OR_GRES != 0
}

/// `SelectTypeParameters=MULTIPLE_SHARING_GRES_PJ` (slurm.h `0x8000`, 23.11 and later): one
/// job's shares of a shared GRES on a node may come from several GPUs. 22.05 has no such
/// option (a job's shares on a node come from one GPU).
#[cfg(not(select_abi = "22.05"))]
pub fn multiple_sharing_gres_pj() -> bool {
    // SAFETY: a plain u16 read of libslurmfull's initialised global.
    let params = unsafe { (*global()).select_type_param };
    params & 0x8000 != 0
}

/// 22.05: never (see the 23.11+ version).
#[cfg(select_abi = "22.05")]
pub fn multiple_sharing_gres_pj() -> bool {
    false
}

/// True when slurm.conf orders preemption candidates by start time (`PreemptParameters=
/// youngest_first`; 22.05: `SchedulerParameters=preempt_youngest_first`), which gputopo's
/// victim choice does not model.
pub fn preempt_youngest_first() -> bool {
    #[cfg(select_abi = "22.05")]
    // SAFETY: one pointer field copied out of libslurmfull's initialised global.
    let raw = unsafe { (*global()).sched_params };
    #[cfg(not(select_abi = "22.05"))]
    // SAFETY: one pointer field copied out of libslurmfull's initialised global.
    let raw = unsafe { (*global()).preempt_params };
    string_field(raw).is_some_and(|p| p.to_ascii_lowercase().contains("youngest_first"))
}

/// slurm.conf's `PreemptType` (as the mode rule needs it) and `PreemptMode`.
pub fn preempt_mode() -> (PreemptKind, u16) {
    // SAFETY: one pointer field copied out of libslurmfull's initialised global.
    let raw = unsafe { (*global()).preempt_type };
    let kind = PreemptKind::from_preempt_type(&string_field(raw).unwrap_or_default());
    // SAFETY: one integer field copied out of libslurmfull's initialised global.
    let mode = unsafe { (*global()).preempt_mode };
    (kind, mode)
}
