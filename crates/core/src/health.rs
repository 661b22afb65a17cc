//! Per-GPU health: the verdict model, the pure policy that turns NVML evidence into verdicts,
//! and (in [`extra`]) the JSON the node agent publishes in the Slurm node's `Extra` field.
//!
//! Why here: the agent (which reads NVML) and the select plugin (which reads `Extra` inside
//! slurmctld) must agree on one model, and every decision must be testable without a GPU.
//!
//! A verdict is one of [`Status::Ok`], [`Status::Degraded`] (usable, but choose it last),
//! [`Status::Faulty`] (never give it to a job) or [`Status::Unknown`] (the agent could not tell,
//! e.g. NVML timed out). Each non-ok verdict carries [`Reason`]s; the status is the most severe
//! reason's [`Reason::severity`], in the order ok < degraded < unknown < faulty (proven faults
//! beat missing data; missing data beats "merely degraded").

pub mod extra;
pub mod kernel_xid;
pub mod persist;
mod policy;
pub mod publish;
pub mod sticky;
pub mod telemetry;
pub mod violation;

pub use extra::{
    ExtraError, LinkMatrix, MergeRefused, NodeHealth, Parsed, merge_extra, merge_extra_keeping,
    merge_extra_with, own_malformed, parse_extra, read_extra, write_drains,
};
pub use policy::{Evidence, HealthPolicy, Reading, RowRemap, judge};

use std::borrow::Cow;
use std::fmt;

/// A GPU's verdict.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Healthy.
    Ok,
    /// Usable but suspect (correctable errors, a pending page retirement): allocate last.
    Degraded,
    /// The agent could not tell (NVML missing, timed out, a query failed).
    Unknown,
    /// Must not be allocated (uncorrectable ECC, lost, critical XID, failed row remap).
    Faulty,
}

impl Status {
    /// The lowercase name used in output and JSON (`ok`, `degraded`, `unknown`, `faulty`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Degraded => "degraded",
            Status::Unknown => "unknown",
            Status::Faulty => "faulty",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a GPU is not `ok`. Written in JSON as a short snake_case token (see [`Reason::token`]);
/// tokens this version does not know parse as [`Reason::Other`], so old readers accept new
/// writers.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    /// Uncorrectable ECC errors above the limit (volatile or aggregate): `ecc_uncorrectable`.
    EccUncorrectable,
    /// Correctable (volatile) ECC errors above the threshold: `ecc_correctable`.
    EccCorrectable,
    /// Retired pages pending (a reset is needed to retire them): `retired_pages_pending`.
    RetiredPagesPending,
    /// A row remapping is pending (a reset is needed): `row_remap_pending`.
    RowRemapPending,
    /// A row remapping failed (the card needs service): `row_remap_failure`.
    RowRemapFailure,
    /// NVML says the GPU fell off the bus (`NVML_ERROR_GPU_IS_LOST`): `gpu_lost`.
    GpuLost,
    /// A critical XID event was seen: `xid_<n>` (faulty).
    Xid(u32),
    /// An XID that is neither critical nor ignored was seen: `xid_other_<n>` (degraded).
    XidOther(u32),
    /// NVML did not answer within the deadline: `nvml_timeout`.
    NvmlTimeout,
    /// The NVML library could not be loaded or initialised: `nvml_unavailable`.
    NvmlUnavailable,
    /// NVML reports that the NVIDIA driver is not loaded: `driver_not_loaded`.
    DriverNotLoaded,
    /// A GPU Slurm has (gres.conf, or Slurm's own detection) that NVML, answering, does not
    /// list: it left the bus (`not_in_nvml`, faulty: a missing GPU must never be handed out).
    NotInNvml,
    /// NVML cannot start (driver not loaded, init failed) although the GPU's device file is
    /// there: the driver lost the GPUs (`gpu_unreachable`, faulty). A node without the NVML
    /// library at all stays `nvml_unavailable` (unknown): nothing is known of its GPUs.
    GpuUnreachable,
    /// One NVML query failed, so its evidence is missing: `query_failed:<query>`.
    QueryFailed(Cow<'static, str>),
    /// A telemetry signal held by the hysteresis (`telemetry`): its token, degraded.
    Sustained(telemetry::Signal),
    /// A token written by a newer agent (kept verbatim, judged `unknown`).
    Other(String),
}

impl Reason {
    /// The status this reason alone implies.
    pub fn severity(&self) -> Status {
        match self {
            Reason::EccUncorrectable
            | Reason::RowRemapFailure
            | Reason::GpuLost
            | Reason::NotInNvml
            | Reason::GpuUnreachable
            | Reason::Xid(_) => Status::Faulty,
            Reason::EccCorrectable
            | Reason::RetiredPagesPending
            | Reason::RowRemapPending
            | Reason::XidOther(_)
            | Reason::Sustained(_) => Status::Degraded,
            Reason::NvmlTimeout
            | Reason::NvmlUnavailable
            | Reason::DriverNotLoaded
            | Reason::QueryFailed(_)
            | Reason::Other(_) => Status::Unknown,
        }
    }

    /// The JSON token.
    pub fn token(&self) -> Cow<'_, str> {
        Cow::Borrowed(match self {
            Reason::EccUncorrectable => "ecc_uncorrectable",
            Reason::EccCorrectable => "ecc_correctable",
            Reason::RetiredPagesPending => "retired_pages_pending",
            Reason::RowRemapPending => "row_remap_pending",
            Reason::RowRemapFailure => "row_remap_failure",
            Reason::GpuLost => "gpu_lost",
            Reason::NvmlTimeout => "nvml_timeout",
            Reason::NvmlUnavailable => "nvml_unavailable",
            Reason::DriverNotLoaded => "driver_not_loaded",
            Reason::NotInNvml => "not_in_nvml",
            Reason::GpuUnreachable => "gpu_unreachable",
            Reason::Sustained(g) => g.token(),
            Reason::Xid(n) => return Cow::Owned(format!("xid_{n}")),
            Reason::XidOther(n) => return Cow::Owned(format!("xid_other_{n}")),
            Reason::QueryFailed(q) => return Cow::Owned(format!("query_failed:{q}")),
            Reason::Other(s) => s,
        })
    }

    /// Parses a token; never fails (unknown tokens become [`Reason::Other`]).
    pub fn from_token(s: &str) -> Reason {
        match s {
            "ecc_uncorrectable" => Reason::EccUncorrectable,
            "ecc_correctable" => Reason::EccCorrectable,
            "retired_pages_pending" => Reason::RetiredPagesPending,
            "row_remap_pending" => Reason::RowRemapPending,
            "row_remap_failure" => Reason::RowRemapFailure,
            "gpu_lost" => Reason::GpuLost,
            "nvml_timeout" => Reason::NvmlTimeout,
            "nvml_unavailable" => Reason::NvmlUnavailable,
            "driver_not_loaded" => Reason::DriverNotLoaded,
            "not_in_nvml" => Reason::NotInNvml,
            "gpu_unreachable" => Reason::GpuUnreachable,
            _ => {
                if let Some(g) = telemetry::Signal::from_token(s) {
                    Reason::Sustained(g)
                } else if let Some(n) = s.strip_prefix("xid_other_").and_then(|n| n.parse().ok()) {
                    Reason::XidOther(n)
                } else if let Some(n) = s.strip_prefix("xid_").and_then(|n| n.parse().ok()) {
                    Reason::Xid(n)
                } else if let Some(q) = s.strip_prefix("query_failed:") {
                    Reason::QueryFailed(Cow::Owned(q.to_string()))
                } else {
                    Reason::Other(s.to_string())
                }
            }
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.token())
    }
}

impl serde::Serialize for Reason {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.token())
    }
}

impl<'de> serde::Deserialize<'de> for Reason {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s: Cow<'de, str> = serde::Deserialize::deserialize(d)?;
        Ok(Reason::from_token(&s))
    }
}

/// One GPU's verdict, by Slurm GRES index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuHealth {
    /// Slurm GRES index (Slurm's own GPU order, see `identity`).
    pub index: usize,
    /// The verdict.
    pub status: Status,
    /// Why, most severe first; empty when `ok`.
    pub reasons: Vec<Reason>,
    /// Which device the agent judged under this index (for administrators and audits).
    pub device: Device,
}

/// A GPU's device identity as published: its device minor (`/dev/nvidiaN`), PCI bus id and
/// UUID (what dcgm-exporter's `device`, `pci_bus_id` and `UUID` labels hold, so `gputopo
/// metrics` joins with it).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Device {
    /// Device minor number.
    pub minor: Option<u32>,
    /// PCI bus id, short form (`3d:00.0`; the domain only when not 0).
    pub bus: Option<String>,
    /// NVML's UUID (`GPU-5fd1...`).
    pub uuid: Option<String>,
}

impl Device {
    /// The identity of a device with minor `minor` and NVML bus id `bus`
    /// (`00000000:3D:00.0` is published as `3d:00.0`).
    pub fn new(minor: Option<u32>, bus: Option<&str>) -> Device {
        let bus = bus.map(|b| {
            let b = b.trim().to_ascii_lowercase();
            match b.split_once(':') {
                Some((dom, rest))
                    if rest.contains(':') && dom.trim_start_matches('0').is_empty() =>
                {
                    rest.to_string()
                }
                _ => b,
            }
        });
        Device {
            minor,
            bus,
            uuid: None,
        }
    }

    /// This identity with NVML's UUID.
    pub fn with_uuid(self, uuid: Option<&str>) -> Device {
        Device {
            uuid: uuid.map(str::to_string),
            ..self
        }
    }

    /// The bus id in NVML's long form (`00000000:3D:00.0`), which dcgm-exporter puts in its
    /// `pci_bus_id` label; `None` when unknown or not a bus id.
    pub fn long_bus(&self) -> Option<String> {
        let bus = self.bus.as_deref()?;
        let (dom, rest) = match bus.matches(':').count() {
            1 => ("0", bus),
            2 => bus.split_once(':')?,
            _ => return None,
        };
        let dom = u32::from_str_radix(dom, 16).ok()?;
        Some(format!("{dom:08X}:{}", rest.to_ascii_uppercase()))
    }
}

impl GpuHealth {
    /// A verdict from reasons: the status is the most severe reason's, `ok` when none.
    /// Reasons are sorted most severe first and deduplicated.
    pub fn from_reasons(index: usize, mut reasons: Vec<Reason>) -> Self {
        reasons.sort_by_key(|r| std::cmp::Reverse(r.severity()));
        let mut seen = Vec::with_capacity(reasons.len());
        reasons.retain(|r| {
            if seen.contains(r) {
                false
            } else {
                seen.push(r.clone());
                true
            }
        });
        let status = reasons
            .iter()
            .map(Reason::severity)
            .max()
            .unwrap_or(Status::Ok);
        GpuHealth {
            index,
            status,
            reasons,
            device: Device::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip() {
        for r in [
            Reason::EccUncorrectable,
            Reason::EccCorrectable,
            Reason::RetiredPagesPending,
            Reason::RowRemapPending,
            Reason::RowRemapFailure,
            Reason::GpuLost,
            Reason::Xid(79),
            Reason::XidOther(13),
            Reason::NvmlTimeout,
            Reason::NvmlUnavailable,
            Reason::DriverNotLoaded,
            Reason::NotInNvml,
            Reason::GpuUnreachable,
            Reason::QueryFailed("ecc_mode".into()),
            Reason::Sustained(telemetry::Signal::PcieDegraded),
            Reason::Other("new_thing".into()),
        ] {
            assert_eq!(Reason::from_token(&r.token()), r);
        }
    }

    #[test]
    fn status_is_most_severe_reason() {
        let g = GpuHealth::from_reasons(
            2,
            vec![
                Reason::EccCorrectable,
                Reason::NvmlTimeout,
                Reason::Xid(79),
                Reason::EccCorrectable,
            ],
        );
        assert_eq!(g.status, Status::Faulty);
        assert_eq!(
            g.reasons,
            vec![Reason::Xid(79), Reason::NvmlTimeout, Reason::EccCorrectable]
        );
        assert_eq!(GpuHealth::from_reasons(0, vec![]).status, Status::Ok);
    }

    #[test]
    fn bus_ids_go_back_to_nvmls_long_form() {
        let long = |b: &str| Device::new(None, Some(b)).long_bus();
        assert_eq!(
            long("00000000:3D:00.0").as_deref(),
            Some("00000000:3D:00.0")
        );
        assert_eq!(long("3d:00.0").as_deref(), Some("00000000:3D:00.0"));
        assert_eq!(long("0001:3d:00.0").as_deref(), Some("00000001:3D:00.0"));
        assert_eq!(long("nonsense"), None);
        assert_eq!(long("zz:1:2:3"), None);
        assert_eq!(Device::default().long_bus(), None);
    }
}
