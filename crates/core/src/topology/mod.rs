//! [`NodeTopology`]: the interconnect of one node's GPUs, the model every decision reads.
//!
//! For each pair of GPUs the model holds a [`Link`]: the number of NVLinks between them (with
//! NVSwitch semantics already applied, see [`NodeTopology::apply_nvswitch`]) and the PCIe path
//! level (`PIX` .. `SYS`, NVML's `nvmlGpuTopologyLevel_t`). Each [`Gpu`] carries its socket and
//! core affinity (gres.conf `Cores=`) and, when known, its identity (bus id, minor, UUID).
//!
//! GPUs are numbered by Slurm's GRES index. Parsers for the project's fixture format live in
//! [`fixture`]; renderers for gres.conf in [`gres_conf`]; the one reader of gres.conf lines in
//! [`gres_conf_lines`], and the topology from them in [`gres_conf_parse`] (through the one GRES
//! constructor, [`gres_model`], which the plugin uses too) and for `nvidia-smi topo -m` in [`smi`]; [`detect`] picks one by content.
//!
//! The model is plain data: building it validates it, and nothing here allocates per decision.

pub mod block_conf;
pub mod detect;
pub mod fixture;
pub mod gres_conf;
pub mod gres_conf_lines;
pub mod gres_conf_parse;
pub mod gres_model;
pub mod smi;

use crate::gpuset::{GpuSet, MAX_GPUS};
use std::fmt;

/// PCIe/CPU path between two GPUs, best first. Values follow NVML's
/// `nvmlGpuTopologyLevel_t`; names follow `nvidia-smi topo -m`.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum PcieLevel {
    /// Same board (e.g. a dual-GPU card), NVML_TOPOLOGY_INTERNAL.
    SameBoard,
    /// At most one PCIe switch between them (PIX).
    Pix,
    /// Several PCIe switches, no host bridge (PXB).
    Pxb,
    /// Through a PCIe host bridge, i.e. the CPU root complex (PHB).
    Phb,
    /// Between host bridges within one NUMA node (NODE).
    Node,
    /// Across the inter-socket interconnect (SYS).
    Sys,
}

impl PcieLevel {
    /// Every level, best first.
    pub const ALL: [PcieLevel; 6] = [
        PcieLevel::SameBoard,
        PcieLevel::Pix,
        PcieLevel::Pxb,
        PcieLevel::Phb,
        PcieLevel::Node,
        PcieLevel::Sys,
    ];

    /// NVML's numeric value (`NVML_TOPOLOGY_*`).
    pub const fn nvml_value(self) -> u32 {
        match self {
            PcieLevel::SameBoard => 0,
            PcieLevel::Pix => 10,
            PcieLevel::Pxb => 20,
            PcieLevel::Phb => 30,
            PcieLevel::Node => 40,
            PcieLevel::Sys => 50,
        }
    }

    /// From NVML's numeric value; unknown values are `None`.
    pub const fn from_nvml(v: u32) -> Option<Self> {
        Some(match v {
            0 => PcieLevel::SameBoard,
            10 => PcieLevel::Pix,
            20 => PcieLevel::Pxb,
            30 => PcieLevel::Phb,
            40 => PcieLevel::Node,
            50 => PcieLevel::Sys,
            _ => return None,
        })
    }

    /// The `nvidia-smi topo -m` spelling. Same-board pairs print as `PIX`'s better sibling
    /// `PSB` in some driver versions; we use `SB`.
    pub const fn as_smi(self) -> &'static str {
        match self {
            PcieLevel::SameBoard => "SB",
            PcieLevel::Pix => "PIX",
            PcieLevel::Pxb => "PXB",
            PcieLevel::Phb => "PHB",
            PcieLevel::Node => "NODE",
            PcieLevel::Sys => "SYS",
        }
    }

    /// Parses the `nvidia-smi` spelling (case-insensitive). `SOC` is the pre-2017 name of `SYS`.
    pub fn from_smi(s: &str) -> Option<Self> {
        Some(match s.to_ascii_uppercase().as_str() {
            "SB" | "PSB" | "INTERNAL" => PcieLevel::SameBoard,
            "PIX" => PcieLevel::Pix,
            "PXB" => PcieLevel::Pxb,
            "PHB" => PcieLevel::Phb,
            "NODE" => PcieLevel::Node,
            "SYS" | "SOC" => PcieLevel::Sys,
            _ => return None,
        })
    }
}

impl fmt::Display for PcieLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_smi())
    }
}

/// The connection between two distinct GPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Link {
    /// NVLinks usable between the two GPUs (direct links plus, on NVSwitch boards, the
    /// bottleneck of their switch links). 0 means PCIe only.
    pub nvlinks: u8,
    /// PCIe/CPU path level, used when `nvlinks == 0` and as a tie-breaker.
    pub pcie: PcieLevel,
}

/// One GPU of a node.
#[derive(Clone, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Gpu {
    /// Slurm GRES index (position of its `File=` in gres.conf).
    pub index: usize,
    /// CPU socket the GPU hangs off, when known.
    pub socket: Option<u32>,
    /// Cores with affinity to this GPU (gres.conf `Cores=`), sorted; empty = unknown/any.
    pub cores: Vec<u32>,
    /// PCI bus id, `00000000:06:00.0`, when known.
    pub bus_id: Option<String>,
    /// Device minor number (`/dev/nvidiaN`), when known.
    pub minor: Option<u32>,
    /// NVML UUID, when known.
    pub uuid: Option<String>,
    /// NVLinks from this GPU into an NVSwitch fabric (0 = no switch).
    pub switch_links: u8,
}

/// Errors building or validating a topology.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TopologyError {
    /// The node has no GPU or more than the model allows.
    #[error("a node must have 1 to {max} GPUs, not {0}", max = MAX_GPUS)]
    GpuCount(usize),
    /// A GPU index is out of range or used twice.
    #[error("GPU index {0} is out of range or repeated")]
    BadIndex(usize),
    /// A link names the same GPU twice.
    #[error("a link cannot join GPU {0} to itself")]
    SelfLink(usize),
}

/// The interconnect of one node's GPUs.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NodeTopology {
    /// A name for messages and tables (`dgx1v`, or the Slurm node name).
    pub name: String,
    /// Slurm GRES type (`Type=` in gres.conf), e.g. `v100`.
    pub gpu_type: Option<String>,
    gpus: Vec<Gpu>,
    /// Row-major `n × n`; the diagonal is unused and always `{0, SameBoard}`.
    links: Vec<Link>,
}

impl NodeTopology {
    /// A topology of `gpus` (indices must be exactly 0..n, in order) with no NVLink and PCIe
    /// levels derived from sockets: `same_socket` within a socket (or when either socket is
    /// unknown), `SYS` across sockets.
    ///
    /// # Errors
    /// [`TopologyError`] when the GPU count or indices are wrong.
    pub fn new(
        name: impl Into<String>,
        gpus: Vec<Gpu>,
        same_socket: PcieLevel,
    ) -> Result<Self, TopologyError> {
        let n = gpus.len();
        if n == 0 || n > MAX_GPUS {
            return Err(TopologyError::GpuCount(n));
        }
        if let Some(g) = gpus.iter().enumerate().find(|(i, g)| g.index != *i) {
            return Err(TopologyError::BadIndex(g.1.index));
        }
        let mut links = Vec::with_capacity(n * n);
        for a in &gpus {
            for b in &gpus {
                let pcie = match (a.socket, b.socket) {
                    _ if a.index == b.index => PcieLevel::SameBoard,
                    (Some(x), Some(y)) if x != y => PcieLevel::Sys,
                    _ => same_socket,
                };
                links.push(Link { nvlinks: 0, pcie });
            }
        }
        Ok(NodeTopology {
            name: name.into(),
            gpu_type: None,
            gpus,
            links,
        })
    }

    /// A topology of `n` anonymous GPUs, all on one socket at `pcie` level; for tests and
    /// generators.
    ///
    /// # Errors
    /// [`TopologyError::GpuCount`] when `n` is 0 or above the limit.
    pub fn uniform(
        name: impl Into<String>,
        n: usize,
        pcie: PcieLevel,
    ) -> Result<Self, TopologyError> {
        let gpus = (0..n)
            .map(|index| Gpu {
                index,
                ..Gpu::default()
            })
            .collect();
        NodeTopology::new(name, gpus, pcie)
    }

    /// Number of GPUs.
    pub fn len(&self) -> usize {
        self.gpus.len()
    }

    /// Always false: a topology has at least one GPU.
    pub fn is_empty(&self) -> bool {
        self.gpus.is_empty()
    }

    /// All GPU indices of the node.
    pub fn all(&self) -> GpuSet {
        GpuSet::first_n(self.len())
    }

    /// The GPUs, by index.
    pub fn gpus(&self) -> &[Gpu] {
        &self.gpus
    }

    /// Mutable access to one GPU's attributes (not its index).
    pub fn gpu_mut(&mut self, i: usize) -> Option<&mut Gpu> {
        self.gpus.get_mut(i)
    }

    /// The link between GPUs `a` and `b`.
    ///
    /// # Panics
    /// When an index is out of range: callers hold indices that came from this topology.
    pub fn link(&self, a: usize, b: usize) -> Link {
        self.links[a * self.len() + b]
    }

    /// Sets the NVLink count between `a` and `b` (both directions).
    ///
    /// # Errors
    /// When an index is out of range or `a == b`.
    pub fn set_nvlinks(&mut self, a: usize, b: usize, count: u8) -> Result<(), TopologyError> {
        self.update_pair(a, b, |l| l.nvlinks = count)
    }

    /// Sets the PCIe level between `a` and `b` (both directions).
    ///
    /// # Errors
    /// When an index is out of range or `a == b`.
    pub fn set_pcie(&mut self, a: usize, b: usize, level: PcieLevel) -> Result<(), TopologyError> {
        self.update_pair(a, b, |l| l.pcie = level)
    }

    fn update_pair(
        &mut self,
        a: usize,
        b: usize,
        f: impl Fn(&mut Link),
    ) -> Result<(), TopologyError> {
        let n = self.len();
        for i in [a, b] {
            if i >= n {
                return Err(TopologyError::BadIndex(i));
            }
        }
        if a == b {
            return Err(TopologyError::SelfLink(a));
        }
        f(&mut self.links[a * n + b]);
        f(&mut self.links[b * n + a]);
        Ok(())
    }

    /// Applies NVSwitch semantics: two GPUs whose links both go into the switch fabric can talk
    /// over `min(switch_links_a, switch_links_b)` links, added to any direct links.
    ///
    /// Slurm's NVML autodetection and go-gpuallocator count only links whose remote end is a
    /// GPU, so on NVSwitch boards they see no NVLink at all; this is the fix.
    pub fn apply_nvswitch(&mut self) {
        let n = self.len();
        for a in 0..n {
            for b in 0..n {
                let (sa, sb) = (self.gpus[a].switch_links, self.gpus[b].switch_links);
                if a != b && sa > 0 && sb > 0 {
                    let l = &mut self.links[a * n + b];
                    l.nvlinks = l.nvlinks.saturating_add(sa.min(sb));
                }
            }
        }
    }

    /// The largest NVLink count of any pair (0 on PCIe-only nodes).
    pub fn max_nvlinks(&self) -> u8 {
        let n = self.len();
        (0..n)
            .flat_map(|a| (0..n).filter(move |&b| b != a).map(move |b| (a, b)))
            .map(|(a, b)| self.link(a, b).nvlinks)
            .max()
            .unwrap_or(0)
    }

    /// GPUs whose `Cores=` affinity intersects `cores` (all GPUs with unknown affinity count).
    pub fn gpus_near_cores(&self, cores: &[u32]) -> GpuSet {
        self.gpus
            .iter()
            .filter(|g| {
                g.cores.is_empty() || g.cores.iter().any(|c| cores.binary_search(c).is_ok())
            })
            .map(|g| g.index)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sockets_give_default_levels_and_nvswitch_takes_min() {
        let gpus = (0..4)
            .map(|i| Gpu {
                index: i,
                socket: Some((i / 2) as u32),
                switch_links: [12, 12, 6, 12][i],
                ..Gpu::default()
            })
            .collect();
        let mut t = NodeTopology::new("t", gpus, PcieLevel::Phb).unwrap();
        assert_eq!(t.link(0, 1).pcie, PcieLevel::Phb);
        assert_eq!(t.link(0, 2).pcie, PcieLevel::Sys);
        t.apply_nvswitch();
        assert_eq!(t.link(0, 1).nvlinks, 12);
        assert_eq!(t.link(0, 2).nvlinks, 6);
        assert_eq!(t.max_nvlinks(), 12);
        assert!(t.set_nvlinks(1, 1, 2).is_err());
        assert!(t.set_nvlinks(1, 9, 2).is_err());
    }

    #[test]
    fn pcie_level_names_round_trip() {
        for l in PcieLevel::ALL {
            assert_eq!(PcieLevel::from_smi(l.as_smi()), Some(l));
            assert_eq!(PcieLevel::from_nvml(l.nvml_value()), Some(l));
        }
    }
}
