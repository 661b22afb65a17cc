//! Where the agent's inputs come from: gputopo.conf, the NVML library, gres.conf, the node name.
//!
//! - gputopo.conf: `$GPUTOPO_CONF`, else next to `$SLURM_CONF`, else /etc/slurm (core's
//!   [`gputopo_core::config::config_path`]); a missing file means defaults.
//! - NVML library: `$GPUTOPO_NVML_LIB`, else `NvmlLibrary=`, else `libnvidia-ml.so.1`
//!   (the environment wins so that one run can be pointed elsewhere for a test).
//! - gres.conf (for the index mapping): `GresConf=`, else where slurmd reads it: next to
//!   slurm.conf (`$SLURM_CONF`, else `/etc/slurm/slurm.conf`), whether or not gputopo.conf is
//!   there too (`$GPUTOPO_CONF` may name another directory); its `Include` lines are
//!   followed ([`super::conf_include`]).
//! - node name: `--node`, else `$SLURMD_NODENAME` (set for HealthCheckProgram), else the short
//!   host name.

use anyhow::Context;
use gputopo_core::config::{Config, config_path_from_env};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Default NVML soname.
pub const DEFAULT_LIBRARY: &str = "libnvidia-ml.so.1";

/// Resolved inputs.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Parsed gputopo.conf (defaults when absent).
    pub config: Config,
    /// NVML library to load.
    pub library: OsString,
    /// gres.conf used for the index mapping.
    pub gres_conf: PathBuf,
    /// This node's Slurm name.
    pub node: String,
    /// Long-lived service mode (`gputopo serve`): the XID wait ends soon after the first
    /// event, and one NVML handle serves every check.
    pub listen: bool,
}

impl Settings {
    /// Resolves everything from the environment and gputopo.conf.
    ///
    /// # Errors
    /// When gputopo.conf exists but is unreadable or invalid.
    pub fn load(node: Option<String>) -> anyhow::Result<Settings> {
        let config_path = config_path_from_env();
        let config = Config::load(&config_path).context("loading gputopo.conf")?;
        let library = std::env::var_os("GPUTOPO_NVML_LIB")
            .filter(|v| !v.is_empty())
            .or_else(|| config.agent.nvml_library.clone().map(Into::into))
            .unwrap_or_else(|| DEFAULT_LIBRARY.into());
        let gres_conf = config.agent.gres_conf.clone().unwrap_or_else(|| {
            slurm_conf_dir(std::env::var_os("SLURM_CONF").map(PathBuf::from)).join("gres.conf")
        });
        let node = node
            .or_else(|| {
                std::env::var("SLURMD_NODENAME")
                    .ok()
                    .filter(|v| !v.is_empty())
            })
            .unwrap_or_else(short_hostname);
        Ok(Settings {
            config,
            library,
            gres_conf,
            node,
            listen: false,
        })
    }
}

/// The directory of slurm.conf, where Slurm reads gres.conf (`get_extra_conf_path`): that of
/// `slurm_conf` (`$SLURM_CONF`), else `/etc/slurm`.
pub fn slurm_conf_dir(slurm_conf: Option<PathBuf>) -> PathBuf {
    slurm_conf
        .filter(|p| !p.as_os_str().is_empty())
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or_else(|| PathBuf::from("/etc/slurm"))
}

fn short_hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .and_then(|h| h.trim().split('.').next().map(str::to_string))
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}
