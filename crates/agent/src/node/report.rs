//! From an NVML reading to Slurm's view: GPUs in GRES index order, each judged by the core's
//! health policy, plus the node's topology in the core model and the exit code that sums it up.

use super::mapping;
use super::probe::{self, Identity, NodeReading, Request};
use super::settings::Settings;
use gputopo_core::health::{GpuHealth, NodeHealth, Reason, Status, judge};
use gputopo_core::topology::{Gpu, NodeTopology, PcieLevel};
use std::time::Duration;

/// Exit code: every GPU read, none faulty.
pub const EXIT_OK: i32 = 0;
/// Exit code: NVML unavailable (no library, driver not loaded, init failed or timed out).
pub const EXIT_NO_NVML: i32 = 2;
/// Exit code: some GPU `unknown` (timeout, failed query, device missing).
pub const EXIT_PARTIAL: i32 = 3;
/// Exit code: some GPU `faulty`, every GPU read.
pub const EXIT_FAULTY: i32 = 4;

/// Exit codes and index order, for `--help`.
pub const EXIT_HELP: &str = "GPUs are numbered like Slurm: in the order of gres.conf File= paths \
(else by device minor), mapped from NVML through the minor number.\n\
Exit codes: 0 every GPU read, none faulty; 1 usage or configuration error; 2 NVML unavailable \
(no library, driver not loaded, init failed or timed out); 3 some GPU unknown (timeout, failed \
query, missing device); 4 some GPU faulty. See docs/agent.md.";

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
}

/// Reads and judges the node.
pub fn collect(s: &Settings, topology: bool) -> NodeReport {
    let a = &s.config.agent;
    let reading = probe::read(&Request {
        library: s.library.clone(),
        timeout: Duration::from_millis(a.nvml_timeout_ms),
        xid_wait: Duration::from_millis(a.xid_wait_ms),
        topology,
    });
    let mut notes = Vec::new();
    let gres = match mapping::gres_minors(&s.gres_conf, &s.node) {
        Ok(g) => g,
        Err(e) => {
            if s.gres_conf.exists() {
                notes.push(format!("ignoring gres.conf for the index mapping: {e}"));
            }
            None
        }
    };
    if let Some((r, detail)) = &reading.failure {
        notes.push(format!("NVML ({}): {detail}", s.library.to_string_lossy()));
        let gpus = gres
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .map(|(i, m)| SlurmGpu {
                nvml: None,
                minor: Some(m),
                ident: Identity::default(),
                verdict: GpuHealth::from_reasons(i, vec![r.clone()]),
            })
            .collect();
        return NodeReport {
            reading,
            gpus,
            topology: None,
            notes,
        };
    }
    let minors: Vec<Option<u32>> = reading.gpus.iter().map(|g| g.ident.minor).collect();
    let slots = mapping::map(&minors, gres.as_deref());
    let mut gpus = Vec::with_capacity(slots.len());
    for (i, slot) in slots.iter().enumerate() {
        let verdict = match slot.nvml {
            Some(n) => judge(i, &reading.gpus[n].evidence, &a.health),
            None => GpuHealth::from_reasons(i, vec![Reason::NotInNvml]),
        };
        gpus.push(SlurmGpu {
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
    let topology = topology
        .then(|| build_topology(&s.node, &reading, &gpus))
        .flatten();
    NodeReport {
        reading,
        gpus,
        topology,
        notes,
    }
}

impl NodeReport {
    /// The exit code (see the module docs of `node`).
    pub fn exit_code(&self) -> i32 {
        if self.reading.failure.is_some() {
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
        NodeHealth::new(
            self.gpus.iter().map(|g| g.verdict.clone()).collect(),
            self.topology.as_ref().filter(|_| complete),
            errors,
        )
    }

    /// Prints the warnings to stderr.
    pub fn print_notes(&self) {
        for n in &self.notes {
            eprintln!("gputopo: warning: {n}");
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
