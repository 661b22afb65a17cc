//! `gputopo gres-conf`: gres.conf lines that describe a node's GPUs, including the NVLink
//! counts of NVSwitch boards that Slurm's own NVML autodetection writes as zero.
//!
//! With `--topology FILE` the node comes from a topology fixture file (what the local-cluster
//! harness uses); without it the node is read through NVML.
//!
//! GPU i's `File=` is `PREFIX` + its device minor number when known (else i); the default
//! prefix is `/dev/nvidia`. Lines come out in GRES index order, so Slurm's GPU i is line i.

use anyhow::Context;
use gputopo_core::topology::{NodeTopology, fixture, gres_conf};
use std::path::PathBuf;

/// Arguments.
#[derive(clap::Args)]
pub struct Args {
    /// Read the node from this topology fixture file instead of NVML.
    #[arg(long, value_name = "FILE")]
    pub topology: Option<PathBuf>,
    /// `NodeName=` value for every line (a Slurm host list is fine); omitted when not given.
    #[arg(long, value_name = "NAMES")]
    pub node: Option<String>,
    /// Device path prefix; GPU i's `File=` is PREFIX + (minor number if known, else i).
    #[arg(long, value_name = "PREFIX", default_value = "/dev/nvidia")]
    pub file_prefix: String,
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<i32> {
    let topo = match &args.topology {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading topology file {}", path.display()))?;
            fixture::parse(&text)
                .with_context(|| format!("parsing topology file {}", path.display()))?
        }
        None => anyhow::bail!(
            "reading the node through NVML is not implemented yet; pass --topology FILE"
        ),
    };
    print!("{}", render(&topo, args.node.as_deref(), &args.file_prefix));
    Ok(0)
}

/// gres.conf text for `topo` with `File=PREFIX<minor or index>`.
pub fn render(topo: &NodeTopology, node: Option<&str>, prefix: &str) -> String {
    gres_conf::render(topo, node, |i| {
        let n = topo
            .gpus()
            .get(i)
            .and_then(|g| g.minor)
            .map_or(i, |m| m as usize);
        format!("{prefix}{n}")
    })
}
