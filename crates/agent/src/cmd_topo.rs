//! `gputopo topo FILE`: print a node's GPU matrix the way `nvidia-smi topo -m` does.
//!
//! FILE may be a gputopo topology file, a gres.conf or saved `nvidia-smi topo -m` output
//! (detected from the content, see `gputopo_core::topology::detect`), so the command doubles
//! as a check of what gputopo understood from a site's files. The output is tab-separated like
//! nvidia-smi's (`GPU0..` columns, `X` on the diagonal, `NV#` for NVLink pairs — switch-routed
//! ones included — else the PCIe level, then `CPU Affinity` and `NUMA Affinity`), followed by
//! nvidia-smi's legend; `gputopo topo` output is itself valid input to `--topology`.

use anyhow::Context;
use gputopo_core::topology::{NodeTopology, detect};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Arguments.
#[derive(clap::Args)]
pub struct Args {
    /// Topology file: gputopo format, gres.conf or `nvidia-smi topo -m` output.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// In a gres.conf describing several nodes, the node to read.
    #[arg(long, value_name = "NAME")]
    pub node: Option<String>,
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<i32> {
    let topo = read_topology(&args.file, args.node.as_deref())?;
    print!("{}", render_matrix(&topo));
    Ok(0)
}

/// Reads and parses a topology file of any supported format (shared with `gputopo pick`).
///
/// # Errors
/// When the file cannot be read or parsed; the message names the file, format, line and field.
pub fn read_topology(path: &Path, node: Option<&str>) -> anyhow::Result<NodeTopology> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading topology file {}", path.display()))?;
    let (_, topo) = detect::read(&text, node).with_context(|| format!("{}", path.display()))?;
    Ok(topo)
}

/// The `nvidia-smi topo -m` rendering of `topo`.
pub fn render_matrix(topo: &NodeTopology) -> String {
    let n = topo.len();
    let mut s = String::new();
    for i in 0..n {
        let _ = write!(s, "\tGPU{i}");
    }
    s.push_str("\tCPU Affinity\tNUMA Affinity\n");
    for (a, g) in topo.gpus().iter().enumerate() {
        let _ = write!(s, "GPU{a}");
        for b in 0..n {
            let link = topo.link(a, b);
            let cell = if a == b {
                " X ".to_string()
            } else if link.nvlinks > 0 {
                format!("NV{}", link.nvlinks)
            } else {
                link.pcie.to_string()
            };
            let _ = write!(s, "\t{cell}");
        }
        let cores = if g.cores.is_empty() {
            "N/A".to_string()
        } else {
            let r = gputopo_core::cpulist::to_ranges(g.cores.iter().copied());
            gputopo_core::cpulist::format_ranges(&r)
        };
        let numa = g.socket.map_or("N/A".to_string(), |x| x.to_string());
        let _ = writeln!(s, "\t{cores}\t{numa}");
    }
    s.push_str(LEGEND);
    s
}

const LEGEND: &str = "
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  SB   = Both GPUs on the same board
  NV#  = Connection traversing a bonded set of # NVLinks
";
