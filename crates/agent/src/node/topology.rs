//! `gputopo topology`: this node's GPU interconnect read from NVML, in the core's model.
//!
//! NVLinks are counted per GPU pair; links whose far end is an NVSwitch (found with the raw
//! `nvmlDeviceGetNvLinkRemoteDeviceType`, since nvml-wrapper's wrapper always says Unknown)
//! become switch links, and NVSwitch semantics give every pair of switch-attached GPUs the
//! smaller of their switch link counts. PCIe levels come from
//! `nvmlDeviceGetTopologyCommonAncestor`. GPUs are in Slurm's GRES index order.
//!
//! Output: the topology fixture format (`--format fixture`, default; loadable by `gputopo topo`
//! and the harness) or the `nvidia-smi topo -m` matrix of `gputopo topo` (`--format matrix`).

use super::report;
use super::settings::Settings;
use gputopo_core::topology::fixture;

/// Output format.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Format {
    /// gputopo's topology fixture format.
    Fixture,
    /// A matrix like `nvidia-smi topo -m`.
    Matrix,
}

/// Arguments.
#[derive(clap::Args)]
#[command(after_help = super::report::EXIT_HELP)]
pub struct Args {
    /// Output format.
    #[arg(long, value_enum, default_value = "fixture")]
    pub format: Format,
    /// Slurm node name (for gres.conf and the topology name).
    #[arg(long, value_name = "NAME")]
    pub node: Option<String>,
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<i32> {
    let s = Settings::load(args.node)?;
    let r = report::collect(&s, true);
    r.print_notes();
    let Some(t) = &r.topology else {
        eprintln!("gputopo: no GPU topology could be read");
        return Ok(r.exit_code().max(report::EXIT_NO_NVML));
    };
    if !r.reading.topology_complete() {
        eprintln!("gputopo: warning: the topology is incomplete (a GPU did not answer)");
    }
    match args.format {
        Format::Fixture => print!("{}", fixture::render(t)),
        Format::Matrix => print!("{}", crate::cmd_topo::render_matrix(t)),
    }
    Ok(r.exit_code())
}
