//! The serde shapes of the format (kept private so the public model can evolve).

use crate::health::{Reason, Status};

#[derive(serde::Deserialize)]
pub(super) struct Envelope {
    #[serde(default)]
    pub gputopo: Option<HealthIn>,
    /// Administrators' drains ([`super::drain`]).
    #[serde(default, rename = "gputopo_drain")]
    pub drain: Option<super::drain::Wire>,
}

/// [`Health`] as read: entries checked one by one (`super::gpu_list`).
#[derive(serde::Deserialize)]
pub(super) struct HealthIn {
    pub v: u32,
    #[serde(default)]
    pub gpus: Vec<super::gpu_list::RawGpu>,
    #[serde(default)]
    pub links: Option<Vec<Vec<u8>>>,
    #[serde(default)]
    pub pcie: Option<Vec<Vec<u8>>>,
    /// Warm GPUs; a preference, so a malformed value is ignored.
    #[serde(default, deserialize_with = "super::gpu_list::lenient_indices")]
    pub w: Option<Vec<usize>>,
    #[serde(default)]
    pub e: Vec<Reason>,
    /// When the agent wrote it; informational, so a malformed value is ignored.
    #[serde(default, deserialize_with = "super::gpu_list::lenient_u64")]
    pub t: Option<u64>,
}

#[derive(serde::Serialize)]
pub(super) struct Health {
    pub v: u32,
    #[serde(default)]
    pub gpus: Vec<Gpu>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub links: Option<Vec<Vec<u8>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie: Option<Vec<Vec<u8>>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub w: Vec<usize>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub e: Vec<Reason>,
    /// When the agent wrote it (Unix seconds; optional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t: Option<u64>,
}

#[derive(serde::Serialize)]
pub(super) struct Gpu {
    pub i: usize,
    pub s: Status,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub r: Vec<Reason>,
    /// Device minor (optional, informational).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub m: Option<u32>,
    /// PCI bus id, short form (optional, informational).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub b: Option<String>,
    /// NVML UUID (optional, informational).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub u: Option<String>,
}
