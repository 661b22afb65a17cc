//! The node `Extra` JSON format: how the agent publishes per-GPU health (and the NVLink matrix
//! it measured) to slurmctld, and how the select plugin reads it back.
//!
//! Slurm's node `Extra` is a free string that root/SlurmUser set with
//! `scontrol update NodeName=X Extra=...`; it survives slurmctld restarts (node state file).
//! gputopo stores a JSON object and owns only its `gputopo` key, so other tools may keep their
//! own keys next to it:
//!
//! ```text
//! {"gpu_faulty":"3","gpu_ok":7,               flat summary keys first (see [`flat`])
//!  "gputopo":{"v":1,
//!   "gpus":[{"i":0,"s":"ok"},{"i":3,"s":"faulty","r":["ecc_uncorrectable"]}, ...],
//!   "links":[[0,18,...],[18,0,...],...],     optional: NVLinks per pair, NVSwitch applied
//!   "pcie":[[0,1,3,...],...],                optional: PCIe level per pair, 0=SB 1=PIX 2=PXB
//!                                            3=PHB 4=NODE 5=SYS
//!   "w":[0,1],                               optional: ok GPUs running warm (see below)
//!   "e":["driver_not_loaded"],               optional: node-level problems
//!   "t":1764583200}}                         optional: when the agent wrote it (Unix s)
//! ```
//!
//! - `v`: format version. Readers reject other versions; writers bump it only for incompatible
//!   changes (new optional fields and new reason tokens keep `v`: 1, and readers ignore unknown
//!   fields and keep unknown reason tokens as [`Reason::Other`]).
//! - `gpus[].i`: Slurm GRES index (Slurm's own GPU order, `crate::identity`, tied to the NVML
//!   device through the device minor number); `s`: `ok`|`degraded`|`unknown`|`faulty`; `r`: reason tokens (absent
//!   when empty). GPUs the agent could not see at all are absent, or listed `unknown`.
//! - `gpus[].m`, `gpus[].b`, `gpus[].u` (optional): the device the verdict is about, its
//!   minor (`/dev/nvidiaN`), its PCI bus id in short form (`3d:00.0`) and its NVML UUID, for
//!   administrators and for joining `gputopo metrics` with dcgm-exporter (same labels).
//! - `links`/`pcie`: `n`×`n` matrices in GRES index order (diagonal 0), `n` = number of GPUs.
//! - `w`: GRES indices of `ok` GPUs that run warm or throttle right now without it being
//!   sustained (`crate::health::telemetry::warm`): a preference only (cooler GPUs first among
//!   equally connected sets), so a malformed value is ignored.
//!
//! [`parse_extra`] is what slurmctld runs (through the select plugin) for every node it
//! considers, so it is cheap: one pass of serde_json over the string, skipping foreign keys
//! without allocating, and a few small vectors for our part. It never panics (property-tested).

mod compose;
pub mod drain;
pub mod flat;
mod gpu_list;
pub mod history;
pub mod labels;
mod wire;

use super::{GpuHealth, Reason, Status};
use crate::gpuset::{GpuSet, MAX_GPUS};
use crate::topology::{NodeTopology, PcieLevel};
use crate::wideset::WideSet;

/// The current format version.
pub const VERSION: u32 = 1;

/// An `n`×`n` matrix of small numbers in GRES index order (row-major).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkMatrix {
    n: usize,
    cells: Vec<u8>,
}

impl LinkMatrix {
    /// Number of GPUs (rows).
    pub fn len(&self) -> usize {
        self.n
    }

    /// True for a 0×0 matrix (never produced by [`parse_extra`]).
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The cell for GPUs `a`, `b`; `None` when out of range.
    pub fn get(&self, a: usize, b: usize) -> Option<u8> {
        if a < self.n && b < self.n {
            self.cells.get(a * self.n + b).copied()
        } else {
            None
        }
    }

    fn from_fn(n: usize, f: impl Fn(usize, usize) -> u8) -> Self {
        let mut cells = Vec::with_capacity(n * n);
        for a in 0..n {
            for b in 0..n {
                cells.push(if a == b { 0 } else { f(a, b) });
            }
        }
        LinkMatrix { n, cells }
    }

    fn rows(&self) -> Vec<&[u8]> {
        if self.n == 0 {
            return Vec::new();
        }
        self.cells.chunks(self.n).collect()
    }

    fn from_rows(rows: Vec<Vec<u8>>, what: &str, max: u8) -> Result<Self, ExtraError> {
        let n = rows.len();
        if n == 0 || n > MAX_GPUS {
            return Err(ExtraError(format!(
                "{what}: must have 1 to {MAX_GPUS} rows"
            )));
        }
        let mut cells = Vec::with_capacity(n * n);
        for (a, row) in rows.into_iter().enumerate() {
            if row.len() != n {
                return Err(ExtraError(format!(
                    "{what}: row {a} has {} cells, not {n}",
                    row.len()
                )));
            }
            if let Some(&bad) = row.iter().find(|&&c| c > max) {
                return Err(ExtraError(format!("{what}: value {bad} above {max}")));
            }
            cells.extend(row);
        }
        Ok(LinkMatrix { n, cells })
    }
}

/// One node's published health.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct NodeHealth {
    /// Verdicts by GRES index (sorted by index, at most one per index).
    pub gpus: Vec<GpuHealth>,
    /// NVLinks per GPU pair with NVSwitch semantics, when the agent measured them.
    pub links: Option<LinkMatrix>,
    /// PCIe level per GPU pair as an index into [`PcieLevel::ALL`], when measured.
    pub pcie: Option<LinkMatrix>,
    /// Node-level problems (e.g. `driver_not_loaded`), empty when none.
    pub errors: Vec<Reason>,
    /// When the agent wrote this (Unix seconds), if it said.
    pub time: Option<u64>,
    /// `ok` GPUs running warm now (`w`), empty when none.
    pub warm: WideSet,
    /// GPUs an administrator drained ([`drain`]), by index; empty when none.
    pub drained: Vec<drain::Drain>,
}

impl NodeHealth {
    /// Health for `gpus`, with `topo`'s NVLink and PCIe matrices when given.
    pub fn new(mut gpus: Vec<GpuHealth>, topo: Option<&NodeTopology>, errors: Vec<Reason>) -> Self {
        gpus.sort_by_key(|g| g.index);
        gpus.dedup_by_key(|g| g.index);
        let links = topo.map(|t| LinkMatrix::from_fn(t.len(), |a, b| t.link(a, b).nvlinks));
        let pcie = topo.map(|t| {
            LinkMatrix::from_fn(t.len(), |a, b| {
                let l = t.link(a, b).pcie;
                PcieLevel::ALL.iter().position(|&x| x == l).unwrap_or(5) as u8
            })
        });
        NodeHealth {
            gpus,
            links,
            pcie,
            errors,
            time: None,
            warm: WideSet::new(),
            drained: Vec::new(),
        }
    }

    /// The verdict of GPU `index`, if published.
    pub fn status(&self, index: usize) -> Option<Status> {
        self.gpus
            .iter()
            .find(|g| g.index == index)
            .map(|g| g.status)
    }

    /// The GPUs with verdict `status` below [`MAX_GPUS`] (the topology model's range).
    pub fn with_status(&self, status: Status) -> GpuSet {
        self.with_status_wide(status).narrow()
    }

    /// The GPUs with verdict `status`, at any index (health on nodes wider than the model).
    pub fn with_status_wide(&self, status: Status) -> WideSet {
        self.gpus
            .iter()
            .filter(|g| g.status == status)
            .map(|g| g.index)
            .collect()
    }

    /// The drained GPUs, at any index.
    pub fn drained_wide(&self) -> WideSet {
        drain::indices(&self.drained)
    }

    /// The GPUs no new job may get, at any index: faulty or drained.
    pub fn excluded_wide(&self) -> WideSet {
        self.with_status_wide(Status::Faulty)
            .union(&self.drained_wide())
    }

    /// The PCIe level between `a` and `b`, when published.
    pub fn pcie_level(&self, a: usize, b: usize) -> Option<PcieLevel> {
        let v = self.pcie.as_ref()?.get(a, b)?;
        PcieLevel::ALL.get(v as usize).copied()
    }

    /// Overwrites `topo`'s NVLink counts (and PCIe levels, when published) with the agent's
    /// measurement. Returns false and changes nothing when the sizes differ (e.g. gres.conf
    /// and the agent disagree on the GPU count).
    pub fn apply_to(&self, topo: &mut NodeTopology) -> bool {
        let n = topo.len();
        let Some(links) = &self.links else {
            return false;
        };
        if links.len() != n || self.pcie.as_ref().is_some_and(|p| p.len() != n) {
            return false;
        }
        for a in 0..n {
            for b in a + 1..n {
                let _ = topo.set_nvlinks(a, b, links.get(a, b).unwrap_or(0));
                if let Some(l) = self.pcie_level(a, b) {
                    let _ = topo.set_pcie(a, b, l);
                }
            }
        }
        true
    }

    /// The value of the `gputopo` key, as compact JSON.
    pub fn to_json(&self) -> String {
        let wire = wire::Health {
            v: VERSION,
            gpus: self
                .gpus
                .iter()
                .map(|g| wire::Gpu {
                    i: g.index,
                    s: g.status,
                    r: g.reasons.clone(),
                    m: g.device.minor,
                    b: g.device.bus.clone(),
                    u: g.device.uuid.clone(),
                })
                .collect(),
            links: self
                .links
                .as_ref()
                .map(|m| m.rows().iter().map(|r| r.to_vec()).collect()),
            pcie: self
                .pcie
                .as_ref()
                .map(|m| m.rows().iter().map(|r| r.to_vec()).collect()),
            w: self.warm.iter().collect(),
            e: self.errors.clone(),
            t: self.time,
        };
        serde_json::to_string(&wire).unwrap_or_else(|_| String::from("{}"))
    }
}

/// Our part of `Extra` is there but malformed (wrong version, wrong shape, bad values).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("node Extra: malformed \"gputopo\" health: {0}")]
pub struct ExtraError(pub String);

/// Parses a node's `Extra` string; [`read_extra`] without the list of problems.
pub fn parse_extra(extra: &str) -> Result<Option<NodeHealth>, ExtraError> {
    read_extra(extra).map(|p| p.map(|p| p.health))
}

/// What [`read_extra`] made of our part of `Extra`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parsed {
    /// The usable health.
    pub health: NodeHealth,
    /// Parts that could not be used (one message each), resolved towards caution: see
    /// `gpu_list` (unknown status → unknown, duplicate → most severe, bad index → dropped)
    /// and matrices of the wrong shape, which are dropped. Empty for a clean record.
    pub problems: Vec<String>,
}

/// Reads a node's `Extra` string.
///
/// - `Ok(None)`: not ours: empty, not JSON without a `"gputopo"` in it, JSON that is not an
///   object, or an object without a `gputopo` key (or with `"gputopo":null`). The select
///   plugin then treats every GPU as ok.
/// - `Ok(Some(p))`: our health, with the entries that could be used (see [`Parsed`]); a
///   bad entry never drops another GPU's verdict.
/// - `Err(e)`: our part is unusable as a whole: a `"gputopo"` in text that is not JSON
///   (truncated, `NaN`), a wrong shape, or another version. The plugin keeps the node's last
///   good health then.
///
/// Never panics; allocates only for our part of the string.
pub fn read_extra(extra: &str) -> Result<Option<Parsed>, ExtraError> {
    let t = extra.trim_start();
    if !t.starts_with('{') {
        return Ok(None);
    }
    let env: wire::Envelope = match serde_json::from_str(t) {
        Ok(e) => e,
        Err(e) => {
            // Not JSON at all: an admin string that happens to start with '{' is not ours,
            // unless it names our key (our JSON, truncated or corrupted).
            if serde_json::from_str::<serde::de::IgnoredAny>(t).is_err()
                && !t.contains("\"gputopo\"")
                && !t.contains(concat!("\"", "gputopo_drain", "\""))
            {
                return Ok(None);
            }
            return Err(ExtraError(e.to_string()));
        }
    };
    let drained = env.drain.map(drain::check).transpose()?.unwrap_or_default();
    let Some(w) = env.gputopo else {
        // Drains without the agent's health: every other GPU counts as healthy.
        return Ok((!drained.is_empty()).then(|| Parsed {
            health: NodeHealth {
                drained,
                ..NodeHealth::default()
            },
            problems: Vec::new(),
        }));
    };
    if w.v != VERSION {
        return Err(ExtraError(format!(
            "version {} is not supported (this gputopo reads {VERSION})",
            w.v
        )));
    }
    let (gpus, mut problems) = gpu_list::verdicts(w.gpus);
    let mut matrix = |rows: Option<Vec<Vec<u8>>>, what: &str, max: u8| {
        let m = match rows
            .map(|r| LinkMatrix::from_rows(r, what, max))
            .transpose()
        {
            Ok(m) => m,
            Err(e) => {
                problems.push(format!("{}; ignored", e.0));
                return None;
            }
        };
        match m {
            Some(m) if !gpus.is_empty() && m.len() != gpus.len() => {
                problems.push(format!(
                    "{what}: {} rows for {} GPUs; ignored",
                    m.len(),
                    gpus.len()
                ));
                None
            }
            m => m,
        }
    };
    let links = matrix(w.links, "links", u8::MAX);
    let pcie = matrix(w.pcie, "pcie", (PcieLevel::ALL.len() - 1) as u8);
    Ok(Some(Parsed {
        health: NodeHealth {
            gpus,
            links,
            pcie,
            errors: w.e,
            time: w.t,
            warm: w.w.unwrap_or_default().into_iter().collect(),
            drained,
        },
        problems,
    }))
}

/// Why `extra` is our own record made unusable (truncated, corrupted, another version),
/// `None` when it is usable or not ours (an administrator's note, empty). The agent replaces
/// such a record ([`merge_extra`]) and says so with this message.
pub fn own_malformed(extra: &str) -> Option<ExtraError> {
    read_extra(extra).err()
}

/// Why [`merge_extra`] refused to write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MergeRefused {
    /// The current Extra is an administrator's plain string; overwriting it would lose it.
    #[error(
        "node Extra holds a non-JSON value set by someone else ({0:?}); refusing to overwrite it. \
         Clear it (scontrol update NodeName=<node> Extra=) or turn it into a JSON object"
    )]
    NotJson(String),
    /// The current Extra is JSON but not an object (e.g. a number or an array).
    #[error(
        "node Extra holds JSON that is not an object ({0:?}); refusing to overwrite it. \
         Clear it or turn it into a JSON object"
    )]
    NotObject(String),
    /// The current Extra holds a gputopo record that does not parse: its drains cannot be
    /// read, so they are not rewritten.
    #[error("node Extra holds a gputopo record that does not parse ({0}); nothing changed")]
    Unreadable(String),
}

/// The new Extra string: `existing` with its `gputopo` key set to `ours`, after the flat
/// summary keys of [`flat::health_keys`] (the short, readable part comes first); gputopo's
/// stale flat keys ([`flat::OWNED`]) are dropped and other keys kept, in sorted order, the
/// administrators' drains ([`drain`]) unchanged and the history ([`history`]) extended by the
/// GPUs whose state changed since the health `existing` held. Empty and `(null)` count as no
/// value.
///
/// Our own record made unusable ([`own_malformed`]) is replaced whole, unless it holds drains
/// (they could not be carried over, and the select plugin keeps the last good ones meanwhile).
///
/// # Errors
/// [`MergeRefused`] when `existing` is a non-JSON string or JSON that is not an object, or
/// holds drains that cannot be read (in a record that parses or in our own unusable one).
pub fn merge_extra(existing: &str, ours: &NodeHealth) -> Result<String, MergeRefused> {
    merge_extra_with(existing, ours, None)
}

/// [`merge_extra`] with the node's capability labels ([`labels`]) after the summary keys.
/// Without labels (NVML could not tell this time) the ones already published are kept in
/// their place, so static facts never disappear or move because of one bad check.
///
/// # Errors
/// [`MergeRefused`] when `existing` is a non-JSON string or JSON that is not an object.
pub fn merge_extra_with(
    existing: &str,
    ours: &NodeHealth,
    labels: Option<&labels::Labels>,
) -> Result<String, MergeRefused> {
    merge_extra_keeping(existing, ours, labels, &[])
}

/// [`merge_extra_with`] with the agent's copy of the node's history (`kept`, from its state
/// file): the events the record lacks (it was cleared, or the node re-created) are put back
/// ([`history::union`]).
///
/// # Errors
/// As [`merge_extra_with`].
pub fn merge_extra_keeping(
    existing: &str,
    ours: &NodeHealth,
    labels: Option<&labels::Labels>,
    kept: &[history::Event],
) -> Result<String, MergeRefused> {
    let obj = compose::object_of(existing)?;
    let drains = compose::drains_of(&obj)?;
    let before = read_extra(existing).ok().flatten().map(|p| p.health);
    let events = history::changes(before.as_ref(), ours, ours.time.unwrap_or(0));
    Ok(compose::write(
        obj,
        compose::Parts {
            health: Some(ours),
            write_health: true,
            labels,
            drains,
            events,
            kept,
        },
    ))
}

/// The new Extra string with the node's drains set to `drains` and `events` added to its
/// history (what `gputopo drain`/`resume` write): the flat keys follow (`gpu_drained`, and
/// `gpu_ok` counts only GPUs not drained), everything else is kept as it is.
///
/// # Errors
/// [`MergeRefused`] when `existing` is a non-JSON string, JSON that is not an object, or a
/// gputopo record that does not parse (its drains cannot be read, so none are changed).
pub fn write_drains(
    existing: &str,
    drains: Vec<drain::Drain>,
    events: Vec<history::Event>,
) -> Result<String, MergeRefused> {
    let health = read_extra(existing)
        .map_err(|e| MergeRefused::Unreadable(e.0))?
        .map(|p| p.health)
        .filter(|h| !h.gpus.is_empty());
    let obj = compose::object_of(existing)?;
    Ok(compose::write(
        obj,
        compose::Parts {
            health: health.as_ref(),
            write_health: false,
            labels: None,
            drains,
            events,
            kept: &[],
        },
    ))
}

#[cfg(test)]
mod tests;
