//! `gputopo.conf`: gputopo's settings, in Slurm's `Key=Value` style, next to slurm.conf.
//!
//! One file serves both sides: the node agent (`gputopo health|publish`) and the select plugin
//! inside slurmctld, so an administrator tunes gputopo in one place. Each side reads the keys it
//! needs and ignores the other side's, but every key is validated by both, so a typo is an error
//! wherever it is read. Errors name the line and the key; [`Config::default`] is the safe default
//! used when the file does not exist.
//!
//! Location ([`config_path`]): `$GPUTOPO_CONF`; else `gputopo.conf` in the directory of
//! `$SLURM_CONF`; else `/etc/slurm/gputopo.conf`.
//!
//! | Key | Default | Meaning |
//! |---|---|---|
//! | `NvmlLibrary` | `libnvidia-ml.so.1` | NVML library to load (agent; `GPUTOPO_NVML_LIB` overrides) |
//! | `GresConf` | gres.conf next to gputopo.conf | gres.conf used to map NVML minors to Slurm indices |
//! | `EccUncorrectableLimit` | 0 | faulty when uncorrectable ECC errors exceed this |
//! | `EccCorrectableDegraded` | 1000 | degraded when volatile correctable errors reach this (0 = off) |
//! | `CriticalXids` | 48,63,64,74,79,92,94,95 | XIDs that make a GPU faulty |
//! | `IgnoredXids` | 13,31,43,45,68 | XIDs that are ignored (others make a GPU degraded) |
//! | `XidWaitMs` | 200 | how long the agent waits for XID events |
//! | `NvmlTimeoutMs` | 10000 | deadline for all NVML work; then `unknown` / `nvml_timeout` |
//! | `DrainWhenAllFaulty` | no | `publish` drains the node when every GPU is faulty |
//! | `PublishTimeoutSec` | 30 | bound on `publish`'s scontrol calls, all together |
//! | `XidStickySec` | 3600 | an XID keeps its verdict at least this long after it was last seen |
//! | `XidClearChecks` | 3 | ... and until this many health checks in a row saw no XID on the GPU |
//! | `StateDir` | /var/lib/gputopo | where the agent keeps its state (sticky XIDs) across runs |
//! | `KernelLog` | /dev/kmsg | kernel log read for XIDs logged between checks; `none` = off |
//! | `PublishRefreshSec` | 300 | `publish` rewrites an unchanged Extra this often (report age) |
//! | `ThermalMarginC` | 5 | `thermal` within this many °C of the slowdown/shutdown threshold |
//! | `PowerCapPercent` | 100 | `power_capped` at this share of the enforced power limit (0 = reasons only) |
//! | `PcieGenDegraded` | no | a PCIe generation below the fastest the GPU has shown counts as `pcie_degraded` too |
//! | `NvlinkErrorsDegraded` | 100 | `nvlink_errors` at this many NVLink errors (0 = off) |
//! | `ViolationPercent` | 50 | a power/thermal/board/reliability violation counter throttled this share of the time since the last check counts as its signal (0 = off) |
//! | `WarmRaiseChecks` | 1 | checks in a row a GPU must run warm before it is published in `w` |
//! | `WarmClearChecks` | 3 | checks in a row not warm before it leaves `w` |
//! | `TelemetryRaiseChecks` | 2 | checks in a row a telemetry signal must be seen to count |
//! | `PowerCapRaiseChecks` | 10 | ... `power_capped` alone: a GPU under full load runs at its power limit, so capping counts only when it lasts this long |
//! | `TelemetryClearChecks` | 3 | checks in a row without it before it stops counting |
//! | `HealthAware` | yes | select: never allocate faulty GPUs |
//! | `TopologyAware` | yes | select: pick GPU sets by NVLink/PCIe topology |
//! | `NodeRanking` | yes | select: prefer nodes whose free GPUs form the best set |
//! | `DegradedLast` | yes | select: use degraded/unknown GPUs only when needed |
//! | `PreferAgentTopology` | yes | select: prefer the agent's measured links over gres.conf `Links=` |
//! | `LogDecisions` | no | select: log every placement decision |
//!
//! Booleans accept `yes/no`, `true/false`, `1/0`, `on/off` (any case); lists are comma separated.

use crate::health::HealthPolicy;
use crate::health::telemetry::TelemetryPolicy;
use crate::keyvalue::{self, LineError};
use std::path::{Path, PathBuf};

/// The agent's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentConfig {
    /// `NvmlLibrary`: path or soname of the NVML library; `None` = `libnvidia-ml.so.1`.
    pub nvml_library: Option<PathBuf>,
    /// `GresConf`: the gres.conf used for index mapping; `None` = next to gputopo.conf.
    pub gres_conf: Option<PathBuf>,
    /// Health thresholds and XID lists.
    pub health: HealthPolicy,
    /// `XidWaitMs`: how long to wait for XID events.
    pub xid_wait_ms: u64,
    /// `NvmlTimeoutMs`: deadline for all NVML work of one run.
    pub nvml_timeout_ms: u64,
    /// `DrainWhenAllFaulty`: let `publish` drain the node when every GPU is faulty.
    pub drain_when_all_faulty: bool,
    /// `PublishTimeoutSec`: bound on all of `publish`'s scontrol calls together.
    pub publish_timeout_sec: u64,
    /// `XidStickySec`: an XID keeps its verdict at least this long after it was last seen.
    pub xid_sticky_sec: u64,
    /// `XidClearChecks`: clean health checks in a row needed (as well) to clear an XID.
    pub xid_clear_checks: u32,
    /// `StateDir`: the agent's state across runs (sticky XIDs); `None` = /var/lib/gputopo.
    pub state_dir: Option<PathBuf>,
    /// `KernelLog`: the kernel log read for XIDs logged between checks (`/dev/kmsg`);
    /// `None` (`KernelLog=none`) reads none.
    pub kernel_log: Option<PathBuf>,
    /// `PublishRefreshSec`: how often `publish` rewrites an unchanged Extra, so that its
    /// timestamp (`t`) tells how old the report is.
    pub publish_refresh_sec: u64,
    /// Telemetry thresholds and hysteresis (`ThermalMarginC` ... `TelemetryClearChecks`).
    pub telemetry: TelemetryPolicy,
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            nvml_library: None,
            gres_conf: None,
            health: HealthPolicy::default(),
            xid_wait_ms: 200,
            nvml_timeout_ms: 10_000,
            drain_when_all_faulty: false,
            publish_timeout_sec: 30,
            xid_sticky_sec: 3600,
            xid_clear_checks: 3,
            state_dir: None,
            kernel_log: Some(PathBuf::from("/dev/kmsg")),
            publish_refresh_sec: 300,
            telemetry: TelemetryPolicy::default(),
        }
    }
}

/// The select plugin's switches (parsed here; the plugin implements them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SelectConfig {
    /// `HealthAware`: never allocate faulty GPUs.
    pub health_aware: bool,
    /// `TopologyAware`: choose GPU sets by topology.
    pub topology_aware: bool,
    /// `NodeRanking`: rank nodes by the quality of their best set.
    pub node_ranking: bool,
    /// `DegradedLast`: use degraded/unknown GPUs only when needed.
    pub degraded_last: bool,
    /// `PreferAgentTopology`: prefer the agent's published links over gres.conf `Links=`.
    pub prefer_agent_topology: bool,
    /// `LogDecisions`: log every decision.
    pub log_decisions: bool,
    /// `PreferCool`: among equally connected sets, GPUs the agent does not report warm.
    pub prefer_cool: bool,
}

impl Default for SelectConfig {
    fn default() -> Self {
        SelectConfig {
            health_aware: true,
            topology_aware: true,
            node_ranking: true,
            degraded_last: true,
            prefer_agent_topology: true,
            log_decisions: false,
            prefer_cool: true,
        }
    }
}

/// All of gputopo.conf.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Config {
    /// Node agent keys.
    pub agent: AgentConfig,
    /// Select plugin keys.
    pub select: SelectConfig,
}

/// Every key, as documented (matching is case-insensitive).
pub const KEYS: &[&str] = &[
    "NvmlLibrary",
    "GresConf",
    "EccUncorrectableLimit",
    "EccCorrectableDegraded",
    "CriticalXids",
    "IgnoredXids",
    "XidWaitMs",
    "NvmlTimeoutMs",
    "DrainWhenAllFaulty",
    "PublishTimeoutSec",
    "XidStickySec",
    "XidClearChecks",
    "StateDir",
    "KernelLog",
    "PublishRefreshSec",
    "ThermalMarginC",
    "PowerCapPercent",
    "PcieGenDegraded",
    "NvlinkErrorsDegraded",
    "ViolationPercent",
    "WarmRaiseChecks",
    "WarmClearChecks",
    "TelemetryRaiseChecks",
    "PowerCapRaiseChecks",
    "TelemetryClearChecks",
    "HealthAware",
    "TopologyAware",
    "NodeRanking",
    "DegradedLast",
    "PreferAgentTopology",
    "LogDecisions",
    "PreferCool",
];

/// Longest accepted millisecond/second setting (one hour), so deadlines stay sane.
const MAX_MS: u64 = 3_600_000;

/// A config file that could not be read or parsed.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Reading the file failed (other than "not found").
    #[error("reading {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A line is wrong.
    #[error("{path}: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// Line, key and message.
        source: LineError,
    },
}

impl Config {
    /// Parses the text of gputopo.conf.
    ///
    /// # Errors
    /// [`LineError`] naming the line and key of the first problem: unknown keys, words without
    /// `=`, repeated keys, bad values.
    pub fn parse(text: &str) -> Result<Config, LineError> {
        let mut c = Config::default();
        let mut seen = [false; KEYS.len()];
        for (line, words) in keyvalue::lines(text) {
            for p in words? {
                let err = |m: String| LineError::new(line, p.key, m);
                if !p.has_value {
                    return Err(err("expected Key=Value".into()));
                }
                let Some(k) = KEYS.iter().position(|k| k.eq_ignore_ascii_case(p.key)) else {
                    return Err(err(format!("unknown key (known: {})", KEYS.join(", "))));
                };
                if std::mem::replace(&mut seen[k], true) {
                    return Err(err("set twice".into()));
                }
                let v = p.value.trim();
                let a = &mut c.agent;
                let s = &mut c.select;
                match KEYS[k] {
                    "NvmlLibrary" => a.nvml_library = Some(path(v).map_err(err)?),
                    "GresConf" => a.gres_conf = Some(path(v).map_err(err)?),
                    "EccUncorrectableLimit" => {
                        a.health.ecc_uncorrectable_limit = num(v, u64::MAX).map_err(err)?;
                    }
                    "EccCorrectableDegraded" => {
                        a.health.ecc_correctable_degraded = num(v, u64::MAX).map_err(err)?;
                    }
                    "CriticalXids" => a.health.critical_xids = list(v).map_err(err)?,
                    "IgnoredXids" => a.health.ignored_xids = list(v).map_err(err)?,
                    "XidWaitMs" => a.xid_wait_ms = num(v, MAX_MS).map_err(err)?,
                    "NvmlTimeoutMs" => a.nvml_timeout_ms = positive(v, MAX_MS).map_err(err)?,
                    "DrainWhenAllFaulty" => a.drain_when_all_faulty = boolean(v).map_err(err)?,
                    "PublishTimeoutSec" => {
                        a.publish_timeout_sec = positive(v, MAX_MS / 1000).map_err(err)?;
                    }
                    "XidStickySec" => {
                        a.xid_sticky_sec = num(v, u64::from(u32::MAX)).map_err(err)?
                    }
                    "XidClearChecks" => {
                        a.xid_clear_checks = num(v, 1_000_000).map_err(err)? as u32;
                    }
                    "StateDir" => a.state_dir = Some(path(v).map_err(err)?),
                    "KernelLog" if v.eq_ignore_ascii_case("none") => a.kernel_log = None,
                    "KernelLog" => a.kernel_log = Some(path(v).map_err(err)?),
                    "PublishRefreshSec" => {
                        a.publish_refresh_sec = positive(v, u64::from(u32::MAX)).map_err(err)?;
                    }
                    "ThermalMarginC" => {
                        a.telemetry.thermal_margin_c = num(v, 200).map_err(err)? as u32
                    }
                    "PowerCapPercent" => {
                        a.telemetry.power_cap_percent = num(v, 1000).map_err(err)? as u32;
                    }
                    "PcieGenDegraded" => a.telemetry.pcie_gen_degraded = boolean(v).map_err(err)?,
                    "NvlinkErrorsDegraded" => {
                        a.telemetry.nvlink_errors_degraded = num(v, u64::MAX).map_err(err)?;
                    }
                    "ViolationPercent" => {
                        a.telemetry.violation_percent = num(v, 100).map_err(err)? as u32;
                    }
                    "WarmRaiseChecks" => {
                        a.telemetry.warm_raise_checks = positive(v, 1_000_000).map_err(err)? as u32;
                    }
                    "WarmClearChecks" => {
                        a.telemetry.warm_clear_checks = positive(v, 1_000_000).map_err(err)? as u32;
                    }
                    "TelemetryRaiseChecks" => {
                        a.telemetry.raise_checks = positive(v, 1_000_000).map_err(err)? as u32;
                    }
                    "PowerCapRaiseChecks" => {
                        a.telemetry.power_cap_raise_checks =
                            positive(v, 1_000_000).map_err(err)? as u32;
                    }
                    "TelemetryClearChecks" => {
                        a.telemetry.clear_checks = positive(v, 1_000_000).map_err(err)? as u32;
                    }
                    "HealthAware" => s.health_aware = boolean(v).map_err(err)?,
                    "TopologyAware" => s.topology_aware = boolean(v).map_err(err)?,
                    "NodeRanking" => s.node_ranking = boolean(v).map_err(err)?,
                    "DegradedLast" => s.degraded_last = boolean(v).map_err(err)?,
                    "PreferAgentTopology" => s.prefer_agent_topology = boolean(v).map_err(err)?,
                    "PreferCool" => s.prefer_cool = boolean(v).map_err(err)?,
                    _ => s.log_decisions = boolean(v).map_err(err)?,
                }
            }
        }
        Ok(c)
    }

    /// Reads and parses `path`; a missing file gives [`Config::default`].
    ///
    /// # Errors
    /// [`ConfigError`] when the file exists but cannot be read or parsed.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        Config::load_with_text(path).map(|(c, _)| c)
    }

    /// [`Config::load`], also returning the text it parsed (empty for a missing file), so a
    /// caller that keeps a copy of the last good file reads it once.
    ///
    /// # Errors
    /// As [`Config::load`].
    pub fn load_with_text(path: &Path) -> Result<(Config, String), ConfigError> {
        match std::fs::read_to_string(path) {
            Ok(text) => match Config::parse(&text) {
                Ok(c) => Ok((c, text)),
                Err(source) => Err(ConfigError::Parse {
                    path: path.to_path_buf(),
                    source,
                }),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Ok((Config::default(), String::new()))
            }
            Err(source) => Err(ConfigError::Io {
                path: path.to_path_buf(),
                source,
            }),
        }
    }
}

/// Where gputopo.conf lives, from the values of `$GPUTOPO_CONF` and `$SLURM_CONF`
/// (pass `std::env::var_os(..)`; empty values count as unset).
pub fn config_path(gputopo_conf: Option<&Path>, slurm_conf: Option<&Path>) -> PathBuf {
    fn set(p: Option<&Path>) -> Option<&Path> {
        p.filter(|p| !p.as_os_str().is_empty())
    }
    if let Some(p) = set(gputopo_conf) {
        return p.to_path_buf();
    }
    let dir = set(slurm_conf)
        .and_then(Path::parent)
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("/etc/slurm"));
    dir.join("gputopo.conf")
}

/// [`config_path`] from this process's environment.
pub fn config_path_from_env() -> PathBuf {
    let g = std::env::var_os("GPUTOPO_CONF").map(PathBuf::from);
    let s = std::env::var_os("SLURM_CONF").map(PathBuf::from);
    config_path(g.as_deref(), s.as_deref())
}

fn path(v: &str) -> Result<PathBuf, String> {
    if v.is_empty() {
        Err("needs a path".into())
    } else {
        Ok(PathBuf::from(v))
    }
}

fn num(v: &str, max: u64) -> Result<u64, String> {
    match v.parse::<u64>() {
        Ok(n) if n <= max => Ok(n),
        _ => Err(format!("'{v}' is not a whole number from 0 to {max}")),
    }
}

fn positive(v: &str, max: u64) -> Result<u64, String> {
    match num(v, max) {
        Ok(0) | Err(_) => Err(format!("'{v}' is not a whole number from 1 to {max}")),
        Ok(n) => Ok(n),
    }
}

fn boolean(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "yes" | "true" | "1" | "on" => Ok(true),
        "no" | "false" | "0" | "off" => Ok(false),
        _ => Err(format!("'{v}' is not yes or no")),
    }
}

fn list(v: &str) -> Result<Vec<u32>, String> {
    v.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(|x| {
            x.parse::<u32>()
                .map_err(|_| format!("'{x}' in '{v}' is not an XID number"))
        })
        .collect()
}

#[cfg(test)]
mod tests;
