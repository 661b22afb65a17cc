//! The fake's fixture format: one node's GPUs as NVML would report them, in Slurm `Key=Value`
//! lines (parsed with [`gputopo_core::keyvalue`]). Indices here are NVML indices.
//!
//! ```text
//! Node Name=dgx1v-faults Gpus=8 Driver=550.54.15 SameSocket=PHB [DriverNotLoaded=yes] [NoLibrary=yes]
//!     [FabricCluster=<32 hex digits> FabricClique=N]   (multi-node NVLink fabric, every GPU)
//! Gpu Index=5 Uuid=GPU-... BusId=00000000:86:00.0 Minor=5 Socket=1 Cores=20-39 Name="Tesla V100"
//!     Ecc=on|off|unsupported EccUncVol=2 EccUncAgg=7 EccCorVol=0 EccCorAgg=0
//!     RetiredPending=yes|unsupported RetiredDbe=0x1f000,0x2f000 RetiredSbe=
//!     Remap=corr,unc,pending,failure | Remap=unsupported
//!     Lost=yes | LostAfter=N (calls on this GPU succeed N times, then GPU_IS_LOST)
//!     HangMs=N [HangCall=nvmlDeviceGetEccMode] (that call sleeps N ms)
//!     Events=no (XID events not supported)
//!     MemMiB=81559 Cc=9.0 (total memory, compute capability; unsupported when absent)
//! NvLink Gpu=0 Links=0-1 Remote=00000000:07:00.0 Type=gpu|switch [Down=yes] [Errors=N]
//!     (Down: wired but inactive; Errors: replay errors per port)
//! Telemetry Gpu=3 Temp=88 Slowdown=90 ... (heat, power, clocks, PCIe: see [`telemetry`])
//! Gpu Index=0 ... Mig=on  /  Mig Gpu=0 Gi=1 Ci=0 Profile=3g.20gb   (MIG: see [`mig`])
//! Pcie Gpus=0,1 Level=PIX       (default: SameSocket within a socket, SYS across)
//! Xid Gpu=2 Xid=79              (delivered once through the event set)
//! ```
//!
//! GPUs without a `Gpu` line get defaults: bus `00000000:<0x10+i>:00.0`, minor i, a made-up
//! UUID, ECC on with zero counters, nothing pending. Errors name the line and field.

use gputopo_core::keyvalue::{self, LineError, check_keys as check, get, parse_num as num};
use gputopo_core::topology::PcieLevel;
use gputopo_core::topology::fixture::{level, parse_pair};

pub mod mig;
mod telemetry;
mod values;
pub use mig::{FakeMig, MigMode};
pub use telemetry::FakeTelemetry;
use values::{fabric, flag, gpu_index, hex_list};

/// Most NVLinks per GPU (NVML_NVLINK_MAX_LINKS in the bindings).
pub const MAX_LINKS: usize = 18;

/// The remote end of an NVLink.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Remote {
    /// Remote PCI bus id.
    pub bus_id: String,
    /// `nvmlIntNvLinkDeviceType_t`: 0 = GPU, 1 = IBMNPU, 2 = SWITCH.
    pub kind: u32,
    /// The link is up (`Down=yes` models a wired link that went down).
    pub active: bool,
    /// Replay errors on this port (`nvmlDeviceGetNvLinkErrorCounter`).
    pub errors: u64,
}

/// One fake GPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FakeGpu {
    /// UUID string.
    pub uuid: String,
    /// PCI bus id, `00000000:06:00.0`.
    pub bus_id: String,
    /// Device minor number.
    pub minor: u32,
    /// Marketing name.
    pub name: String,
    /// CPU socket (for default PCIe levels).
    pub socket: u32,
    /// CPU affinity.
    pub cores: Vec<u32>,
    /// ECC: `Some(enabled)`, `None` = not supported.
    pub ecc: Option<bool>,
    /// `[error type][counter type]`: type 0 corrected, 1 uncorrected; counter 0 volatile, 1 aggregate.
    pub ecc_counts: [[u64; 2]; 2],
    /// Pages pending retirement.
    pub retired_pending: bool,
    /// Page retirement is supported (`RetiredPending=unsupported`: not, as on boards with row
    /// remapping, Ampere and later, where NVML answers NOT_SUPPORTED and nvidia-smi N/A).
    pub retired_supported: bool,
    /// Retired page addresses: `[cause]`, cause 0 = multiple SBE, 1 = DBE.
    pub retired: [Vec<u64>; 2],
    /// Row remapping (corr, unc, pending, failure); `None` = not supported.
    pub remap: Option<[u32; 4]>,
    /// Every call returns GPU_IS_LOST.
    pub lost: bool,
    /// Calls succeed this many times, then GPU_IS_LOST.
    pub lost_after: Option<u32>,
    /// Sleep this long in `hang_call`.
    pub hang_ms: u64,
    /// The call that hangs.
    pub hang_call: String,
    /// XID events supported.
    pub events: bool,
    /// XIDs to deliver.
    pub xids: Vec<u64>,
    /// NVLink ports.
    pub links: [Option<Remote>; MAX_LINKS],
    /// Heat, power, clocks and PCIe link; `None`: every such query is not supported.
    pub telemetry: Option<FakeTelemetry>,
    /// Total memory in MiB (`None`: not supported).
    pub mem_mib: Option<u64>,
    /// CUDA compute capability (`None`: not supported).
    pub cc: Option<(u32, u32)>,
    /// MIG mode (`None`: the GPU is not MIG-capable).
    pub mig: Option<MigMode>,
    /// MIG devices, by MIG index.
    pub migs: Vec<FakeMig>,
}

impl FakeGpu {
    fn new(node: &str, i: usize) -> Self {
        FakeGpu {
            uuid: format!("GPU-fa4e0000-0000-4000-8000-{:04x}{:08x}", node.len(), i),
            bus_id: format!("00000000:{:02X}:00.0", 0x10 + i),
            minor: i as u32,
            name: "Fake GPU".into(),
            socket: 0,
            cores: Vec::new(),
            ecc: Some(true),
            ecc_counts: [[0; 2]; 2],
            retired_pending: false,
            retired_supported: true,
            retired: [Vec::new(), Vec::new()],
            remap: Some([0; 4]),
            lost: false,
            lost_after: None,
            hang_ms: 0,
            hang_call: "nvmlDeviceGetEccMode".into(),
            events: true,
            xids: Vec::new(),
            links: Default::default(),
            telemetry: None,
            mem_mib: None,
            cc: None,
            mig: None,
            migs: Vec::new(),
        }
    }
}

/// One fake node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FakeNode {
    /// Name (for messages).
    pub name: String,
    /// Driver version string.
    pub driver: String,
    /// `nvmlInit` fails with NVML_ERROR_DRIVER_NOT_LOADED.
    pub driver_not_loaded: bool,
    /// The node has no NVML library at all: harness scripts and tests point the agent at a path
    /// that does not exist; if this library is loaded anyway, `nvmlInit` answers
    /// `NVML_ERROR_LIBRARY_NOT_FOUND`.
    pub no_library: bool,
    /// GPUs by NVML index.
    pub gpus: Vec<FakeGpu>,
    /// `n`×`n` PCIe levels by NVML index.
    pub pcie: Vec<PcieLevel>,
    /// The NVLink fabric every GPU registered with: cluster UUID bytes and clique id.
    pub fabric: Option<([u8; 16], u32)>,
}

impl FakeNode {
    /// PCIe level between NVML indices `a` and `b` (`SB` for a == b).
    pub fn pcie(&self, a: usize, b: usize) -> Option<PcieLevel> {
        self.pcie.get(a * self.gpus.len() + b).copied()
    }
}

/// Parses a fixture.
///
/// # Errors
/// [`LineError`] naming the line and field of the first problem.
pub fn parse(text: &str) -> Result<FakeNode, LineError> {
    let mut node: Option<(FakeNode, PcieLevel)> = None;
    let mut pcie_overrides = Vec::new();
    for (line, words) in keyvalue::lines(text) {
        let words = words?;
        let kind = words[0].key;
        let rest = &words[1..];
        if words[0].has_value {
            return Err(LineError::new(
                line,
                kind,
                "a line starts with Node, Gpu, Mig, NvLink, Pcie, Telemetry or Xid",
            ));
        }
        let e = |f: &str, m: String| LineError::new(line, f, m);
        let lower = kind.to_ascii_lowercase();
        if lower == "node" {
            check(
                line,
                rest,
                &[
                    "Name",
                    "Gpus",
                    "Driver",
                    "DriverNotLoaded",
                    "NoLibrary",
                    "SameSocket",
                    "FabricCluster",
                    "FabricClique",
                ],
            )?;
            if node.is_some() {
                return Err(e("Node", "only one Node line".into()));
            }
            let name = get(rest, "Name").unwrap_or("fake").to_string();
            let n: usize = num(line, rest, "Gpus")?.ok_or_else(|| e("Gpus", "missing".into()))?;
            if n > 64 {
                return Err(e("Gpus", "at most 64".into()));
            }
            let same = match get(rest, "SameSocket") {
                Some(v) => level(line, "SameSocket", v)?,
                None => PcieLevel::Phb,
            };
            let gpus = (0..n).map(|i| FakeGpu::new(&name, i)).collect();
            node = Some((
                FakeNode {
                    driver: get(rest, "Driver").unwrap_or("550.54.15").to_string(),
                    driver_not_loaded: flag(line, rest, "DriverNotLoaded")?.unwrap_or(false),
                    no_library: flag(line, rest, "NoLibrary")?.unwrap_or(false),
                    name,
                    gpus,
                    pcie: Vec::new(),
                    fabric: fabric(line, rest)?,
                },
                same,
            ));
            continue;
        }
        let Some((n, _)) = node.as_mut() else {
            return Err(e("Node", "the Node line must come first".into()));
        };
        let count = n.gpus.len();
        match lower.as_str() {
            "gpu" => {
                check(
                    line,
                    rest,
                    &[
                        "Index",
                        "Uuid",
                        "BusId",
                        "Minor",
                        "Name",
                        "Socket",
                        "Cores",
                        "Ecc",
                        "EccUncVol",
                        "EccUncAgg",
                        "EccCorVol",
                        "EccCorAgg",
                        "RetiredPending",
                        "RetiredDbe",
                        "RetiredSbe",
                        "Remap",
                        "Lost",
                        "LostAfter",
                        "HangMs",
                        "HangCall",
                        "Events",
                        "MemMiB",
                        "Cc",
                        "Mig",
                    ],
                )?;
                let i = gpu_index(line, rest, "Index", count)?;
                let g = &mut n.gpus[i];
                if let Some(v) = get(rest, "Uuid") {
                    g.uuid = v.to_string();
                }
                if let Some(v) = get(rest, "BusId") {
                    g.bus_id = v.to_string();
                }
                if let Some(v) = get(rest, "Name") {
                    g.name = v.to_string();
                }
                g.minor = num(line, rest, "Minor")?.unwrap_or(g.minor);
                g.socket = num(line, rest, "Socket")?.unwrap_or(g.socket);
                if let Some(v) = get(rest, "Cores") {
                    g.cores =
                        gputopo_core::cpulist::parse_members(v, 4096).map_err(|m| e("Cores", m))?;
                }
                if let Some(v) = get(rest, "Ecc") {
                    g.ecc = match v.to_ascii_lowercase().as_str() {
                        "on" | "yes" => Some(true),
                        "off" | "no" => Some(false),
                        "unsupported" => None,
                        _ => return Err(e("Ecc", format!("'{v}' is not on, off or unsupported"))),
                    };
                }
                for (key, t, c) in [
                    ("EccCorVol", 0, 0),
                    ("EccCorAgg", 0, 1),
                    ("EccUncVol", 1, 0),
                    ("EccUncAgg", 1, 1),
                ] {
                    g.ecc_counts[t][c] = num(line, rest, key)?.unwrap_or(g.ecc_counts[t][c]);
                }
                if get(rest, "RetiredPending")
                    .is_some_and(|v| v.eq_ignore_ascii_case("unsupported"))
                {
                    g.retired_supported = false;
                } else {
                    g.retired_pending = flag(line, rest, "RetiredPending")?.unwrap_or(false);
                }
                for (key, cause) in [("RetiredSbe", 0), ("RetiredDbe", 1)] {
                    if let Some(v) = get(rest, key) {
                        g.retired[cause] = hex_list(v).map_err(|m| e(key, m))?;
                    }
                }
                if let Some(v) = get(rest, "Remap") {
                    g.remap = if v.eq_ignore_ascii_case("unsupported") {
                        None
                    } else {
                        let parts: Vec<u32> = v
                            .split(',')
                            .map(|x| x.trim().parse::<u32>())
                            .collect::<Result<_, _>>()
                            .map_err(|_| {
                                e("Remap", format!("'{v}' is not corr,unc,pending,failure"))
                            })?;
                        let arr: [u32; 4] = parts
                            .try_into()
                            .map_err(|_| e("Remap", format!("'{v}' is not four numbers")))?;
                        Some(arr)
                    };
                }
                g.lost = flag(line, rest, "Lost")?.unwrap_or(false);
                g.lost_after = num(line, rest, "LostAfter")?;
                g.hang_ms = num(line, rest, "HangMs")?.unwrap_or(0);
                if let Some(v) = get(rest, "HangCall") {
                    g.hang_call = v.to_string();
                }
                g.events = flag(line, rest, "Events")?.unwrap_or(true);
                g.mem_mib = num(line, rest, "MemMiB")?.or(g.mem_mib);
                if let Some(v) = get(rest, "Cc") {
                    let bad = || e("Cc", format!("'{v}' is not major.minor"));
                    let (a, b) = v.split_once('.').ok_or_else(bad)?;
                    g.cc = Some((a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?));
                }
                if let Some(v) = get(rest, "Mig") {
                    g.mig = Some(mig::parse_mode(line, v)?);
                }
            }
            "mig" => {
                check(line, rest, mig::KEYS)?;
                let g = &mut n.gpus[gpu_index(line, rest, "Gpu", count)?];
                let m = mig::parse(line, rest, &g.uuid, g.migs.len())?;
                if g.migs.iter().any(|o| (o.gi, o.ci) == (m.gi, m.ci)) {
                    return Err(e("Gi", format!("GI {} CI {} twice", m.gi, m.ci)));
                }
                g.migs.push(m);
            }
            "nvlink" => {
                check(
                    line,
                    rest,
                    &["Gpu", "Links", "Remote", "Type", "Down", "Errors"],
                )?;
                let i = gpu_index(line, rest, "Gpu", count)?;
                let ports = get(rest, "Links").ok_or_else(|| e("Links", "missing".into()))?;
                let ports = gputopo_core::cpulist::parse_members(ports, MAX_LINKS)
                    .map_err(|m| e("Links", m))?;
                let remote = get(rest, "Remote").ok_or_else(|| e("Remote", "missing".into()))?;
                let kind = match get(rest, "Type")
                    .unwrap_or("gpu")
                    .to_ascii_lowercase()
                    .as_str()
                {
                    "gpu" => 0,
                    "ibmnpu" => 1,
                    "switch" => 2,
                    other => {
                        return Err(e("Type", format!("'{other}' is not gpu, ibmnpu or switch")));
                    }
                };
                let active = !flag(line, rest, "Down")?.unwrap_or(false);
                let errors = num(line, rest, "Errors")?.unwrap_or(0);
                for p in ports {
                    let slot = n.gpus[i]
                        .links
                        .get_mut(p as usize)
                        .ok_or_else(|| e("Links", format!("link {p} is not below {MAX_LINKS}")))?;
                    *slot = Some(Remote {
                        bus_id: remote.to_string(),
                        kind,
                        active,
                        errors,
                    });
                }
            }
            "pcie" => {
                check(line, rest, &["Gpus", "Level"])?;
                let v = get(rest, "Gpus").ok_or_else(|| e("Gpus", "missing".into()))?;
                let (a, b) = parse_pair(line, v, count)?;
                let l = get(rest, "Level").ok_or_else(|| e("Level", "missing".into()))?;
                pcie_overrides.push((a, b, level(line, "Level", l)?));
            }
            "telemetry" => {
                check(line, rest, telemetry::KEYS)?;
                let i = gpu_index(line, rest, "Gpu", count)?;
                n.gpus[i].telemetry = Some(telemetry::parse(line, rest)?);
            }
            "xid" => {
                check(line, rest, &["Gpu", "Xid"])?;
                let i = gpu_index(line, rest, "Gpu", count)?;
                let x = num(line, rest, "Xid")?.ok_or_else(|| e("Xid", "missing".into()))?;
                n.gpus[i].xids.push(x);
            }
            _ => {
                return Err(e(
                    kind,
                    "unknown line kind (Node, Gpu, Mig, NvLink, Pcie, Telemetry, Xid)".into(),
                ));
            }
        }
    }
    let (mut n, same) = node.ok_or_else(|| LineError::new(1, "Node", "no Node line"))?;
    if let Some(i) = n
        .gpus
        .iter()
        .position(|g| g.mig.is_none() && !g.migs.is_empty())
    {
        return Err(LineError::new(
            1,
            "Mig",
            format!("GPU {i} has Mig lines but no Mig= mode (not MIG-capable)"),
        ));
    }
    let c = n.gpus.len();
    n.pcie = (0..c * c)
        .map(|k| {
            let (a, b) = (k / c, k % c);
            if a == b {
                PcieLevel::SameBoard
            } else if n.gpus[a].socket == n.gpus[b].socket {
                same
            } else {
                PcieLevel::Sys
            }
        })
        .collect();
    for (a, b, l) in pcie_overrides {
        n.pcie[a * c + b] = l;
        n.pcie[b * c + a] = l;
    }
    Ok(n)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod shipped {
    /// Every fixture the tests and the harness use parses.
    #[test]
    fn shipped_fixtures_parse() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/nvml");
        let mut n = 0;
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "fx") {
                let text = std::fs::read_to_string(&p).unwrap();
                super::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                n += 1;
            }
        }
        assert!(n >= 4);
    }
}
