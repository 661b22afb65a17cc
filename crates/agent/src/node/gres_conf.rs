//! `gputopo gres-conf`: gres.conf lines that describe a node's GPUs, including the NVLink
//! counts of NVSwitch boards that Slurm's own NVML autodetection writes as zero.
//!
//! With `--topology FILE` the node comes from a topology fixture file (what the local-cluster
//! harness uses); without it the node is read through NVML (see `gputopo topology`), GPUs in
//! Slurm's GRES index order, NVSwitch links counted (Slurm's own autodetection writes zeros).
//!
//! GPU i's `File=` is `PREFIX` + its device minor number when known (else i); the default
//! prefix is `/dev/nvidia`. Lines come out in Slurm's GRES index order (see `mapping`: on a node
//! without gres.conf that is NVML order), so Slurm's GPU i is line i and its `Links=` has -1 at
//! position i. That matters beyond numbering: with `AutoDetect=nvml` (or a fake_gpus.conf)
//! slurmd compares `Links=` with NVML's, whose -1 sits at the NVML index, and ignores every GPU
//! where they differ; lines in minor order lost all eight GPUs of the pcie8 fixture.

use super::report;
use super::settings::Settings;
use anyhow::Context;
use gputopo_core::topology::{NodeTopology, fixture, gres_conf};
use std::path::PathBuf;

/// Arguments.
#[derive(clap::Args)]
#[command(after_help = super::report::EXIT_HELP)]
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
    /// `Type=` value (empty to omit); default: the topology file's type, or from NVML the
    /// product name the way Slurm's NVML autodetection spells it.
    #[arg(long = "type", value_name = "TYPE")]
    pub gpu_type: Option<String>,
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<i32> {
    let (mut topo, code) = match &args.topology {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading topology file {}", path.display()))?;
            let t = fixture::parse(&text)
                .with_context(|| format!("parsing topology file {}", path.display()))?;
            (t, report::EXIT_OK)
        }
        None => {
            let s = Settings::load(args.node.clone())?;
            let r = report::collect(&s, true);
            r.print_notes();
            let Some(t) = r.topology.clone() else {
                eprintln!("gputopo: no GPU could be read through NVML");
                return Ok(r.exit_code().max(report::EXIT_NO_NVML));
            };
            if !r.reading.topology_complete() {
                eprintln!("gputopo: warning: the topology is incomplete (a GPU did not answer)");
            }
            (t, r.exit_code())
        }
    };
    if let Some(ty) = &args.gpu_type {
        topo.gpu_type = (!ty.is_empty()).then(|| ty.clone());
    }
    print!("{}", render(&topo, args.node.as_deref(), &args.file_prefix));
    Ok(code)
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
