//! From an NVML reading to Slurm's view: GPUs in GRES index order, each judged by the core's
//! health policy, plus the node's topology in the core model and the exit code that sums it up.

mod memory;

use super::mapping;
use super::nvml_raw::RemoteKind;
use super::probe::{self, Identity, NodeReading, Request};
use super::settings::Settings;
use gputopo_core::health::extra::labels::{GpuFacts, Labels};
use gputopo_core::health::{Device, GpuHealth, NodeHealth, Reason, Status, judge};
use gputopo_core::topology::{Gpu, NodeTopology, PcieLevel};
use memory::apply_memory;
use std::path::Path;
use std::time::Duration;

/// Exit code: every GPU read, none faulty.
pub const EXIT_OK: i32 = 0;
/// Exit code: NVML unavailable (no library, driver not loaded, init failed or timed out).
pub const EXIT_NO_NVML: i32 = 2;
/// Exit code: some GPU `unknown` (timeout, failed query, device missing).
pub const EXIT_PARTIAL: i32 = 3;
/// Exit code: some GPU `faulty`, every GPU read.
pub const EXIT_FAULTY: i32 = 4;

/// Exit code: Slurm's GPUs cannot be tied to NVML devices (see `mapping`); nothing published.
pub const EXIT_IDENTITY: i32 = 7;

/// Exit codes and index order, for `--help`.
pub const EXIT_HELP: &str = "GPUs are numbered like Slurm: Slurm's own order from gres.conf, \
fake_gpus.conf or AutoDetect=nvml (else NVML order), each tied to its NVML device by device minor.\n\
Exit codes: 0 every GPU read, none faulty; 1 usage or configuration error; 2 NVML unavailable \
(no library, driver not loaded, init failed or timed out); 3 some GPU unknown (timeout, failed \
query, missing device); 4 some GPU faulty; 7 Slurm's GPUs cannot be tied to NVML devices \
(nothing published). See docs/agent.md.";

/// One GPU in Slurm's order.
#[derive(Clone, Debug)]
pub struct SlurmGpu {
    /// NVML index, when a device was matched.
    pub nvml: Option<usize>,
    /// Device minor.
    pub minor: Option<u32>,
    /// Identity from NVML.
    pub ident: Identity,
    /// Verdict (its `index` is the Slurm GRES index).
    pub verdict: GpuHealth,
    /// An `ok` GPU running warm, as the warm hysteresis holds it
    /// ([`gputopo_core::health::telemetry::warm_seen`]).
    pub warm: bool,
}

/// The node as Slurm should see it.
#[derive(Clone, Debug)]
pub struct NodeReport {
    /// Raw NVML reading (NVML order).
    pub reading: NodeReading,
    /// GPUs in GRES index order.
    pub gpus: Vec<SlurmGpu>,
    /// Topology in GRES index order, when NVML answered for at least one GPU.
    pub topology: Option<NodeTopology>,
    /// Warnings for stderr.
    pub notes: Vec<String>,
    /// Why Slurm's GPUs could not be tied to NVML devices; nothing may be published then.
    pub refusal: Option<String>,
}

/// Reads and judges the node, remembered XIDs included (the state is only read).
pub fn collect(s: &Settings, topology: bool) -> NodeReport {
    collect_with(s, topology, false)
}

/// [`collect`]; with `remember` the XIDs of this check are recorded in the state file (what
/// the health check, `publish`, does).
pub fn collect_with(s: &Settings, topology: bool, remember: bool) -> NodeReport {
    let a = &s.config.agent;
    let mut reading = probe::read(&Request {
        library: s.library.clone(),
        timeout: Duration::from_millis(a.nvml_timeout_ms),
        xid_wait: Duration::from_millis(a.xid_wait_ms),
        topology,
        listen: s.listen,
    });
    let mut notes = Vec::new();
    apply_memory(s, &mut reading, remember, &mut notes);
    let devices = devices(&reading);
    let mapping = match mapping::map_node(&s.gres_conf, &s.node, &devices) {
        Ok(m) => m,
        Err(e) => {
            return NodeReport {
                reading,
                gpus: Vec::new(),
                topology: None,
                notes,
                refusal: Some(e),
            };
        }
    };
    notes.extend(mapping.notes);
    let slots = mapping.slots;
    if let Some((r, detail)) = &reading.failure {
        notes.push(format!("NVML ({}): {detail}", s.library.to_string_lossy()));
        let gpus = slots
            .iter()
            .enumerate()
            .map(|(i, slot)| {
                // NVML cannot start, yet the GPU's device file is there: the driver lost the
                // GPU (faulty). Without the library, or without a device file, nothing is
                // known (unknown). A hung init stays unknown too: it may pass.
                let present = !reading.library_missing
                    && *r != Reason::NvmlTimeout
                    && slot.file.as_deref().is_some_and(mapping::is_device);
                let mut reasons = vec![r.clone()];
                if present {
                    reasons.insert(0, Reason::GpuUnreachable);
                }
                SlurmGpu {
                    nvml: None,
                    minor: slot.minor,
                    ident: Identity::default(),
                    verdict: GpuHealth {
                        device: Device::new(slot.minor, None),
                        ..GpuHealth::from_reasons(i, reasons)
                    },
                    warm: false,
                }
            })
            .collect();
        return NodeReport {
            reading,
            gpus,
            topology: None,
            notes,
            refusal: None,
        };
    }
    let mut gpus = Vec::with_capacity(slots.len());
    for (i, slot) in slots.iter().enumerate() {
        let mut verdict = match slot.nvml {
            Some(n) => judge(i, &reading.gpus[n].evidence, &a.health),
            None => GpuHealth::from_reasons(i, vec![Reason::NotInNvml]),
        };
        // The bus id and UUID only of a device identified by its minor (not of a lost one
        // slotted in); for every GPU, so `gputopo metrics` labels a GPU the same whatever its
        // state (a label that came and went would start a new series).
        let ident = slot
            .nvml
            .map(|n| &reading.gpus[n].ident)
            .filter(|id| id.minor.is_some() && id.minor == slot.minor);
        verdict.device = Device::new(slot.minor, ident.and_then(|id| id.bus_id.as_deref()))
            .with_uuid(ident.and_then(|id| id.uuid.as_deref()));
        let warm = verdict.status == Status::Ok
            && slot.nvml.is_some_and(|n| reading.gpus[n].evidence.warm);
        gpus.push(SlurmGpu {
            warm,
            nvml: slot.nvml,
            minor: slot.minor,
            ident: slot
                .nvml
                .map(|n| reading.gpus[n].ident.clone())
                .unwrap_or_default(),
            verdict,
        });
    }
    let claimed = slots.iter().filter(|s| s.nvml.is_some()).count();
    if claimed < reading.gpus.len() {
        notes.push(format!(
            "{} NVML device(s) are not in gres.conf for node {} and are not reported",
            reading.gpus.len() - claimed,
            s.node
        ));
    }
    // MIG instances have no NVLink and share their parent's PCIe position: no matrices.
    let topology = (topology && slots.iter().all(|slot| slot.mig.is_none()))
        .then(|| build_topology(&s.node, &reading, &gpus))
        .flatten();
    NodeReport {
        reading,
        gpus,
        topology,
        notes,
        refusal: None,
    }
}

impl NodeReport {
    /// The node's capability labels from what NVML said about Slurm's GPUs; `None` when NVML
    /// could not be read, or told nothing about any GPU (all lost): the labels already
    /// published are then kept, since the hardware did not change.
    pub fn labels(&self) -> Option<Labels> {
        if self.reading.failure.is_some() || self.gpus.is_empty() {
            return None;
        }
        let facts: Vec<GpuFacts> = self
            .gpus
            .iter()
            .filter(|g| g.nvml.is_some())
            .map(|g| GpuFacts {
                name: g.ident.name.clone(),
                mem_bytes: g.ident.mem_bytes,
                cc: g.ident.cc,
            })
            .collect();
        if facts.iter().all(|f| *f == GpuFacts::default()) {
            return None;
        }
        let links = self
            .reading
            .gpus
            .iter()
            .flat_map(|g| g.links.iter().flatten());
        let (mut nvlink, mut nvswitch) = (false, false);
        for l in links {
            nvlink = true;
            nvswitch |= l.kind == RemoteKind::Switch;
        }
        let fabric = self
            .gpus
            .iter()
            .find_map(|g| g.ident.fabric.as_ref())
            .map(|(uuid, clique)| (uuid.as_str(), *clique));
        Some(Labels::new(&facts, self.gpus.len(), nvlink, nvswitch).with_domain(fabric))
    }
}

/// Adds the XIDs still held for each device (`gputopo_core::health::sticky`) and the telemetry
/// signals its hysteresis holds (`gputopo_core::health::telemetry`) to its evidence; with
/// `remember`, records this check and saves the state when it changed. Without, the signals
/// What the mapping needs of each NVML device: minor, Slurm type, direct NVLinks per device.
fn devices(r: &NodeReading) -> Vec<mapping::Device> {
    let any_mig = r.gpus.iter().any(|g| !g.ident.migs.is_empty());
    let (caps, mig_links) = if any_mig {
        let links = mapping::mig::slurm_writes_mig_links(slurm_release());
        (mapping::mig::CapMinors::read(), links)
    } else {
        (mapping::mig::CapMinors::default(), false)
    };
    let bus: Vec<Option<String>> = r
        .gpus
        .iter()
        .map(|g| g.ident.bus_id.as_deref().map(norm_bus))
        .collect();
    let mut devs = r
        .gpus
        .iter()
        .map(|g| mapping::Device {
            migs: migs_of(&g.ident, &caps, mig_links),
            lost: g.evidence.lost,
            minor: g.ident.minor,
            type_name: g.ident.name.as_deref().map(gres_type),
            nvlinks: g.links.as_ref().map(|l| {
                bus.iter()
                    .map(|b| {
                        l.iter()
                            .filter(|e| {
                                e.kind == super::nvml_raw::RemoteKind::Gpu
                                    && Some(norm_bus(&e.remote_bus)) == *b
                            })
                            .count() as u32
                    })
                    .collect()
            }),
        })
        .collect::<Vec<_>>();
    fill_lost_minors(&mut devs, &mapping::driver_gpus(Path::new("/proc/driver")));
    devs
}

/// A GPU's MIG devices as Slurm detects them: type, capability minors, and (Slurm before
/// 24.11) `Links=` with `-1` at the index among those detected.
fn migs_of(
    id: &Identity,
    caps: &mapping::mig::CapMinors,
    links: bool,
) -> Vec<mapping::mig::MigInstance> {
    let mut out: Vec<mapping::mig::MigInstance> = id
        .migs
        .iter()
        .map(|(gi, ci, name)| mapping::mig::MigInstance {
            gi: *gi,
            ci: *ci,
            type_name: id
                .name
                .as_deref()
                .zip(name.as_deref())
                .and_then(|(p, m)| mapping::mig::type_name(&gres_type(p), &gres_type(m))),
            caps: id.minor.and_then(|minor| caps.of(minor, *gi, *ci)),
            links: None,
        })
        .collect();
    if links {
        let detected = out.iter().filter(|m| m.caps.is_some()).count();
        for (k, m) in out.iter_mut().filter(|m| m.caps.is_some()).enumerate() {
            m.links = Some(mapping::mig::links_before_24_11(k, detected));
        }
    }
    out
}

/// The release of the Slurm the node runs (`$GPUTOPO_SCONTROL -V`, else `scontrol -V`), for
/// what differs between releases in Slurm's own GPU list (MIG `Links=`); `None` when no
/// scontrol answers.
fn slurm_release() -> Option<(u32, u32)> {
    let scontrol = std::env::var("GPUTOPO_SCONTROL")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "scontrol".into());
    let out = std::process::Command::new(scontrol)
        .arg("-V")
        .stdin(std::process::Stdio::null())
        .output()
        .ok()?;
    mapping::mig::parse_release(&String::from_utf8_lossy(&out.stdout))
}

/// A lost GPU answers NVML nothing, not even its minor, so Slurm's GPU for it (detected while
/// it still answered) would have no device and the order built from NVML one GPU too few. The
/// driver still lists it (`/proc/driver/nvidia/gpus`, in NVML's PCI bus order): when it lists
/// exactly as many GPUs as NVML counts, NVML device i is its i-th, and a lost one takes that
/// minor.
fn fill_lost_minors(devs: &mut [mapping::Device], driver: &[(String, u32)]) {
    if driver.len() != devs.len() {
        return;
    }
    let used: Vec<u32> = devs.iter().filter_map(|d| d.minor).collect();
    for (d, (_, minor)) in devs.iter_mut().zip(driver) {
        if d.lost && d.minor.is_none() && !used.contains(minor) {
            d.minor = Some(*minor);
        }
    }
}

impl NodeReport {
    /// The exit code (see the module docs of `node`).
    pub fn exit_code(&self) -> i32 {
        if self.refusal.is_some() {
            EXIT_IDENTITY
        } else if self.reading.failure.is_some() {
            EXIT_NO_NVML
        } else if self
            .gpus
            .iter()
            .any(|g| g.verdict.status == Status::Unknown)
        {
            EXIT_PARTIAL
        } else if self.gpus.iter().any(|g| g.verdict.status == Status::Faulty) {
            EXIT_FAULTY
        } else {
            EXIT_OK
        }
    }

    /// The health to publish: verdicts, plus the link matrices when the topology is complete.
    pub fn health(&self) -> NodeHealth {
        let complete = self.reading.topology_complete()
            && self.gpus.iter().all(|g| g.nvml.is_some())
            && self.gpus.len() == self.reading.gpus.len();
        let errors = self
            .reading
            .failure
            .iter()
            .map(|(r, _)| r.clone())
            .collect();
        let mut health = NodeHealth::new(
            self.gpus.iter().map(|g| g.verdict.clone()).collect(),
            self.topology.as_ref().filter(|_| complete),
            errors,
        );
        health.warm = self
            .gpus
            .iter()
            .filter(|g| g.warm)
            .map(|g| g.verdict.index)
            .collect();
        health
    }

    /// Prints the warnings to stderr.
    pub fn print_notes(&self) {
        for n in &self.notes {
            eprintln!("gputopo: warning: {n}");
        }
        if let Some(e) = &self.refusal {
            eprintln!("gputopo: error: cannot tell which NVML device is which Slurm GPU: {e}");
        }
    }
}

/// Slurm's GRES type for an NVML product name, the way Slurm's NVML autodetection spells it:
/// lower case, spaces as underscores (`NVIDIA H100 80GB HBM3` → `nvidia_h100_80gb_hbm3`).
pub fn gres_type(name: &str) -> String {
    name.trim()
        .chars()
        .map(|c| {
            if c.is_whitespace() {
                '_'
            } else {
                c.to_ascii_lowercase()
            }
        })
        .collect()
}

fn norm_bus(b: &str) -> String {
    b.trim().to_ascii_uppercase()
}

/// The topology in GRES index order. NVLink counts come from both ends (a link is counted if
/// either GPU reports it); links into NVSwitches become `switch_links` and NVSwitch semantics are
/// applied. Unknown PCIe levels stay at the default (`PHB`).
fn build_topology(node: &str, r: &NodeReading, gpus: &[SlurmGpu]) -> Option<NodeTopology> {
    if gpus.is_empty() || gpus.len() > gputopo_core::gpuset::MAX_GPUS {
        return None;
    }
    let n = r.gpus.len();
    let model: Vec<Gpu> = gpus
        .iter()
        .enumerate()
        .map(|(i, g)| Gpu {
            index: i,
            socket: None,
            cores: g.ident.cores.clone(),
            bus_id: g.ident.bus_id.clone(),
            minor: g.minor,
            uuid: g.ident.uuid.clone(),
            switch_links: g
                .nvml
                .and_then(|k| r.gpus[k].links.as_ref())
                .map_or(0, |l| {
                    l.iter()
                        .filter(|e| e.kind == super::nvml_raw::RemoteKind::Switch)
                        .count()
                        .min(u8::MAX as usize) as u8
                }),
        })
        .collect();
    let mut t = NodeTopology::new(node, model, PcieLevel::Phb).ok()?;
    t.gpu_type = gpus
        .iter()
        .find_map(|g| g.ident.name.as_deref())
        .map(gres_type);
    let bus: Vec<Option<String>> = gpus
        .iter()
        .map(|g| g.ident.bus_id.as_deref().map(norm_bus))
        .collect();
    let direct = |a: usize, b: usize| -> usize {
        let (Some(k), Some(target)) = (gpus[a].nvml, &bus[b]) else {
            return 0;
        };
        r.gpus[k].links.as_ref().map_or(0, |l| {
            l.iter()
                .filter(|e| {
                    e.kind == super::nvml_raw::RemoteKind::Gpu && &norm_bus(&e.remote_bus) == target
                })
                .count()
        })
    };
    for a in 0..gpus.len() {
        for b in a + 1..gpus.len() {
            let c = direct(a, b).max(direct(b, a)).min(u8::MAX as usize) as u8;
            if c > 0 {
                let _ = t.set_nvlinks(a, b, c);
            }
            if let (Some(x), Some(y)) = (gpus[a].nvml, gpus[b].nvml) {
                if let Some(Some(l)) = r.pcie.get(x * n + y) {
                    let _ = t.set_pcie(a, b, *l);
                }
            }
        }
    }
    t.apply_nvswitch();
    Some(t)
}
