//! `gputopo metrics`: the cluster's GPU facts as OpenMetrics or Prometheus text, encoded by the
//! `prometheus-client` crate.
//!
//! Exporter style: nothing is kept between scrapes; each scrape reads `scontrol` once and a
//! [`Collector`] streams every series straight from that [`Cluster`] (no registry of
//! long-lived metrics, no hash maps), in a fixed order so two scrapes of the same cluster are
//! byte-identical.
//!
//! Naming follows Prometheus conventions (`gputopo_` prefix, base units, `_seconds` for
//! timestamps, a 0/1 gauge per state for state sets). Per-GPU series carry dcgm-exporter's
//! labels so the two join: `Hostname` (the node's `NodeHostName`), `gpu` (Slurm's GPU index,
//! which is NVML's order wherever Slurm autodetects or `gputopo gres-conf` wrote gres.conf),
//! `device` (`nvidia<minor>`, as dcgm-exporter writes it), `pci_bus_id` (NVML's long form) and
//! `UUID` (when the agent published them); plus `node`, the Slurm node name. Every metric is
//! listed in docs/operations.md.

use super::view::{Cluster, JobState, Node, Published};
use gputopo_core::health::extra::drain::Drain;
use gputopo_core::health::{GpuHealth, NodeHealth, Reason, Status};
use gputopo_core::steer::explain::Note;
use gputopo_core::wideset::WideSet;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};
use std::fmt;

/// The exposition format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// OpenMetrics 1.0 text (what Prometheus asks for first).
    #[value(name = "openmetrics")]
    OpenMetrics,
    /// Prometheus text format 0.0.4 (node_exporter's textfile collector reads this one).
    #[value(name = "prometheus")]
    Prometheus,
}

impl Format {
    /// The HTTP `Content-Type` of this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::Prometheus => prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
        }
    }

    /// The format a scraper's `Accept` header asks for: OpenMetrics when it names it, else
    /// Prometheus text.
    pub fn negotiate(accept: Option<&str>) -> Format {
        match accept {
            Some(a) if a.contains("application/openmetrics-text") => Format::OpenMetrics,
            _ => Format::Prometheus,
        }
    }
}

/// One scrape: the cluster, or `None` when scontrol could not be read (then only
/// `gputopo_up 0` is exposed).
#[derive(Debug)]
struct Scrape(Option<Cluster>);

/// Encodes `cluster` (`None`: scontrol failed) in `format`.
pub fn render(cluster: Option<Cluster>, format: Format) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Scrape(cluster)));
    let mut out = String::new();
    let done = match format {
        Format::OpenMetrics => prometheus_client::encoding::text::encode(&mut out, &registry),
        Format::Prometheus => {
            prometheus_client::encoding::prometheus_text::encode(&mut out, &registry)
        }
    };
    // Writing into a String cannot fail; an encoder error would be a bug in a label.
    if done.is_err() {
        out.clear();
    }
    out
}

/// One label: its name and value.
type Pair<'a> = (&'static str, &'a str);

type Labels<'a> = Vec<Pair<'a>>;

/// One gauge family: its descriptor, then `(labels, extra labels, value)` per series.
fn gauge<'l, S: EncodeLabelSet>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    series: impl IntoIterator<Item = (&'l [Pair<'l>], S, i64)>,
) -> fmt::Result {
    let mut m = enc.encode_descriptor(name, help, unit, MetricType::Gauge)?;
    for (base, extra, v) in series {
        let labels = (base, extra);
        m.encode_family(&labels)?.encode_gauge(&v)?;
    }
    Ok(())
}

/// No extra labels.
const NONE: [Pair<'static>; 0] = [];

/// What the series of one GPU need, computed once per scrape.
struct GpuRow<'a> {
    node: &'a Node,
    health: &'a NodeHealth,
    /// Its GRES index.
    index: usize,
    /// Position in `health.gpus`; `None` for a drained GPU the agent published no verdict
    /// for (a node without the agent).
    at: Option<usize>,
    labels: Labels<'a>,
}

/// Owned label values of one GPU (index, device, long bus id).
struct GpuIds<'a> {
    index: usize,
    at: Option<usize>,
    gpu: String,
    uuid: &'a str,
    device: String,
    bus: String,
}

const STATES: [Status; 4] = [
    Status::Ok,
    Status::Degraded,
    Status::Unknown,
    Status::Faulty,
];
const RECORDS: [&str; 3] = ["published", "unpublished", "malformed"];

fn record(n: &Node) -> &'static str {
    match n.published {
        Published::Health(_) => RECORDS[0],
        Published::Unpublished => RECORDS[1],
        Published::Malformed(_) => RECORDS[2],
    }
}

impl Collector for Scrape {
    fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
        let up = i64::from(self.0.is_some());
        gauge(
            &mut enc,
            "gputopo_up",
            "1 when scontrol answered this scrape, 0 when it failed (no other series then).",
            None,
            [(&[][..], NONE, up)],
        )?;
        let Some(c) = &self.0 else {
            return Ok(());
        };
        encode_nodes(&mut enc, c)?;
        encode_gpus(&mut enc, c)?;
        encode_jobs(&mut enc, c)
    }
}

fn encode_nodes(enc: &mut DescriptorEncoder, c: &Cluster) -> fmt::Result {
    let labels: Vec<Labels<'_>> = c
        .nodes
        .iter()
        .map(|n| vec![("node", n.name.as_str()), ("Hostname", n.hostname.as_str())])
        .collect();
    let each = || c.nodes.iter().zip(labels.iter().map(Vec::as_slice));
    gauge(
        enc,
        "gputopo_node_health_record",
        "What the node's Extra holds for gputopo: published health, none (unpublished) or a record that does not parse (malformed); 1 for the current one.",
        None,
        each().flat_map(|(n, l)| {
            let now = record(n);
            RECORDS.map(|r| (l, [("record", r)], i64::from(r == now)))
        }),
    )?;
    gauge(
        enc,
        "gputopo_node_health_timestamp",
        "When the node's agent last wrote its health (Unix time).",
        Some(&Unit::Seconds),
        each().filter_map(|(n, l)| Some((l, NONE, n.health()?.time? as i64))),
    )?;
    let problems: Vec<(&[Pair<'_>], String)> = each()
        .flat_map(|(n, l)| {
            n.health()
                .map(|h| h.errors.iter().map(|r| (l, r.to_string())).collect())
                .unwrap_or_else(Vec::new)
        })
        .collect();
    gauge(
        enc,
        "gputopo_node_problem",
        "A node-level problem the agent reported (e.g. driver_not_loaded); 1 while reported.",
        None,
        problems
            .iter()
            .map(|(l, r)| (*l, [("reason", r.as_str())], 1)),
    )?;
    gauge(
        enc,
        "gputopo_node_gpus",
        "GPUs configured on the node (Gres=).",
        None,
        each().map(|(n, l)| (l, NONE, n.gpus as i64)),
    )?;
    gauge(
        enc,
        "gputopo_node_gpus_free",
        "GPUs a new job could get now: not held, not faulty, not drained, on a node that takes jobs.",
        None,
        each().map(|(n, l)| (l, NONE, n.free().len() as i64)),
    )?;
    gauge(
        enc,
        "gputopo_node_gpus_free_nvlink_max",
        "The largest set of free GPUs whose every pair is joined by NVLink (agent-measured links; absent without them).",
        None,
        each().filter_map(|(n, l)| Some((l, NONE, n.free_nvlink_max()? as i64))),
    )?;
    let stranded = c.stranded_all();
    gauge(
        enc,
        "gputopo_node_gpus_stranded",
        "Free GPUs no job can use now: the node has no CPU or memory left, or every job waiting for GPUs wants more per node than are free here.",
        None,
        each()
            .zip(&stranded)
            .map(|((_, l), &s)| (l, NONE, s as i64)),
    )
}

fn encode_gpus(enc: &mut DescriptorEncoder, c: &Cluster) -> fmt::Result {
    let ids: Vec<Vec<GpuIds<'_>>> = c
        .nodes
        .iter()
        .map(|n| {
            n.health()
                .map(|h| {
                    let listed = h.gpus.iter().map(|g| GpuIds {
                        index: g.index,
                        at: Some(0),
                        gpu: g.index.to_string(),
                        uuid: g.device.uuid.as_deref().unwrap_or_default(),
                        device: g
                            .device
                            .minor
                            .map(|m| format!("nvidia{m}"))
                            .unwrap_or_default(),
                        bus: g.device.long_bus().unwrap_or_default(),
                    });
                    let verdicts: WideSet = h.gpus.iter().map(|g| g.index).collect();
                    let unlisted = h.drained_wide().difference(&verdicts);
                    let mut ids: Vec<GpuIds<'_>> = listed.collect();
                    for (at, id) in ids.iter_mut().enumerate() {
                        id.at = Some(at);
                    }
                    ids.extend(unlisted.iter().map(|index| GpuIds {
                        index,
                        at: None,
                        gpu: index.to_string(),
                        uuid: "",
                        device: String::new(),
                        bus: String::new(),
                    }));
                    ids
                })
                .unwrap_or_default()
        })
        .collect();
    let rows: Vec<GpuRow<'_>> = c
        .nodes
        .iter()
        .zip(&ids)
        .filter_map(|(n, ids)| Some((n, n.health()?, ids)))
        .flat_map(|(node, health, ids)| {
            ids.iter().map(move |id| {
                let mut labels = vec![
                    ("node", node.name.as_str()),
                    ("Hostname", node.hostname.as_str()),
                    ("gpu", id.gpu.as_str()),
                ];
                for (k, v) in [
                    ("UUID", id.uuid),
                    ("device", id.device.as_str()),
                    ("pci_bus_id", id.bus.as_str()),
                ] {
                    if !v.is_empty() {
                        labels.push((k, v));
                    }
                }
                GpuRow {
                    node,
                    health,
                    index: id.index,
                    at: id.at,
                    labels,
                }
            })
        })
        .collect();
    fn gpu<'a>(r: &GpuRow<'a>) -> Option<&'a GpuHealth> {
        r.health.gpus.get(r.at?)
    }
    gauge(
        enc,
        "gputopo_gpu_health",
        "The GPU's published verdict as a state set: 1 for the current state (ok, degraded, unknown, faulty), 0 for the others. Faulty GPUs are never allocated; degraded and unknown ones are used last.",
        None,
        rows.iter()
            .filter_map(|r| Some((r, gpu(r)?.status)))
            .flat_map(|(r, now)| {
                STATES.map(|s| {
                    (
                        r.labels.as_slice(),
                        [("state", s.as_str())],
                        i64::from(s == now),
                    )
                })
            }),
    )?;
    let reasons: Vec<(&[Pair<'_>], String)> = rows
        .iter()
        .flat_map(|r| {
            gpu(r)
                .into_iter()
                .flat_map(|g| g.reasons.iter())
                .map(move |why| (r.labels.as_slice(), why.to_string()))
        })
        .collect();
    gauge(
        enc,
        "gputopo_gpu_reason",
        "A reason behind the GPU's verdict (ecc_uncorrectable, xid_79, thermal, ...); 1 while published.",
        None,
        reasons
            .iter()
            .map(|(l, why)| (*l, [("reason", why.as_str())], 1)),
    )?;
    let xids: Vec<(&[Pair<'_>], String, &str)> = rows
        .iter()
        .flat_map(|r| {
            gpu(r)
                .into_iter()
                .flat_map(|g| g.reasons.iter())
                .filter_map(move |why| match why {
                    Reason::Xid(n) => Some((r.labels.as_slice(), n.to_string(), "true")),
                    Reason::XidOther(n) => Some((r.labels.as_slice(), n.to_string(), "false")),
                    _ => None,
                })
        })
        .collect();
    gauge(
        enc,
        "gputopo_gpu_xid",
        "An XID the agent holds against the GPU (critical: faulty; other: degraded); count by (xid) for fleet-wide XID counts.",
        None,
        xids.iter()
            .map(|(l, xid, crit)| (*l, [("xid", xid.as_str()), ("critical", *crit)], 1)),
    )?;
    gauge(
        enc,
        "gputopo_gpu_allocated",
        "1 when a job holds the GPU (GresUsed).",
        None,
        rows.iter().map(|r| {
            let held = r.node.used.contains(r.index);
            (r.labels.as_slice(), NONE, i64::from(held))
        }),
    )?;
    gauge(
        enc,
        "gputopo_gpu_warm",
        "1 when the GPU is ok but runs warm or throttles without it being sustained (gputopo prefers cooler GPUs).",
        None,
        rows.iter().map(|r| {
            let warm = r.health.warm.contains(r.index);
            (r.labels.as_slice(), NONE, i64::from(warm))
        }),
    )?;
    fn drain_of<'a>(r: &GpuRow<'a>) -> Option<&'a Drain> {
        r.health.drained.iter().find(|d| d.index == r.index)
    }
    gauge(
        enc,
        "gputopo_gpu_drained",
        "1 when an administrator drained the GPU (gputopo drain): never allocated to a new job, whatever its health; running jobs keep it.",
        None,
        rows.iter()
            .map(|r| (r.labels.as_slice(), NONE, i64::from(drain_of(r).is_some()))),
    )?;
    gauge(
        enc,
        "gputopo_gpu_drain_info",
        "A drained GPU's reason and who drained it; 1 while drained.",
        None,
        rows.iter().filter_map(|r| {
            let d = drain_of(r)?;
            Some((
                r.labels.as_slice(),
                [("reason", d.reason.as_str()), ("user", d.user.as_str())],
                1,
            ))
        }),
    )?;
    gauge(
        enc,
        "gputopo_gpu_drain_timestamp",
        "When the GPU was drained (Unix time).",
        Some(&Unit::Seconds),
        rows.iter()
            .filter_map(|r| Some((r.labels.as_slice(), NONE, drain_of(r)?.time as i64))),
    )
}

fn encode_jobs(enc: &mut DescriptorEncoder, c: &Cluster) -> fmt::Result {
    let mut placed: Vec<([Pair<'_>; 2], [Pair<'_>; 2], i64)> = Vec::new();
    let mut withheld: Vec<([Pair<'_>; 1], i64)> = Vec::new();
    for j in &c.jobs {
        match (&j.note, j.state) {
            (Some(Note::Placed { nodes, .. }), JobState::Running) => {
                for n in nodes {
                    let count = j
                        .gpus
                        .iter()
                        .find(|(name, _)| *name == n.node)
                        .map_or(0, |(_, s)| s.len());
                    let optimal = match n.optimal {
                        Some(true) => "yes",
                        Some(false) => "no",
                        None => "unknown",
                    };
                    let link = match n.link.as_deref() {
                        None => "unknown",
                        Some(l) if l.starts_with("none") => "none",
                        Some(l) => l,
                    };
                    placed.push((
                        [("job_id", j.id.as_str()), ("node", n.node.as_str())],
                        [("link", link), ("optimal", optimal)],
                        count as i64,
                    ));
                }
            }
            (Some(Note::Pending { withheld: w, more }), JobState::Pending) => {
                withheld.push(([("job_id", j.id.as_str())], (w.len() + more) as i64));
            }
            _ => {}
        }
    }
    gauge(
        enc,
        "gputopo_job_placement_gpus",
        "GPUs of a running job on one node, with the placement note's weakest link (NV<n>, PCIe-<level>, none for one GPU) and whether a better-connected set was free (optimal=no).",
        None,
        placed.iter().map(|(l, extra, v)| (&l[..], *extra, *v)),
    )?;
    gauge(
        enc,
        "gputopo_job_pending_withheld_nodes",
        "Nodes gputopo withheld from a waiting job because of faulty GPUs (its placement note).",
        None,
        withheld.iter().map(|(l, v)| (&l[..], NONE, *v)),
    )
}

#[cfg(test)]
mod tests;
