//! The `gputopo` command.
//!
//! One binary for every job that runs outside slurmctld:
//! - on any machine: `pick` and `topo` (the core engine on the command line), `simulate`;
//! - wherever a Slurm client works: `nodes` (the published GPU health, readable), `metrics`
//!   (the same and more for Prometheus), `drain`/`resume` (one GPU out of service by hand);
//! - on a compute node: `health`, `topology`, `gres-conf` and `publish` (the node agent, NVML).
//!
//! Each subcommand lives in its own module with its argument struct and a
//! `run(args) -> anyhow::Result<i32>` returning the process exit code. Errors go to stderr with
//! their context chain and exit code 1 unless the subcommand documents others.
#![deny(unsafe_code)] // one exception: node::nvml_raw, two raw NVML calls (see its docs)

mod cmd_drain;
mod cmd_features;
mod cmd_metrics;
mod cmd_nodes;
mod cmd_pick;
mod cmd_simulate;
mod cmd_topo;
mod cmd_topology_conf;
mod node;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "gputopo",
    version,
    about = "Topology- and health-aware GPU placement for Slurm"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Choose the best K GPUs of a node for a job.
    Pick(cmd_pick::Args),
    /// Print a topology file's matrix the way `nvidia-smi topo -m` does.
    Topo(cmd_topo::Args),
    /// Per-GPU health of this node from NVML.
    Health(node::health::Args),
    /// This node's GPU interconnect from NVML (NVLink with NVSwitch semantics, PCIe levels).
    Topology(node::topology::Args),
    /// gres.conf lines that describe this node's GPUs.
    GresConf(node::gres_conf::Args),
    /// Publish this node's GPU health to slurmctld (run as HealthCheckProgram).
    Publish(node::publish::Args),
    /// Run as a long-lived service: listen for XIDs and publish on change (systemd).
    Serve(node::serve::ServeArgs),
    /// Published GPU health of the cluster's nodes, per GPU (runs scontrol).
    Nodes(cmd_nodes::Args),
    /// Take GPUs of a node out of service (never allocated until resumed; running jobs keep them).
    Drain(cmd_drain::DrainArgs),
    /// Return drained GPUs of a node to service.
    Resume(cmd_drain::ResumeArgs),
    /// The cluster's GPU facts for Prometheus (OpenMetrics text; HTTP or a textfile).
    Metrics(cmd_metrics::Args),
    /// slurm.conf Features= suggestions from the nodes' published capability labels.
    Features(cmd_features::Args),
    /// Slurm topology/block configuration, one block per published NVLink domain.
    TopologyConf(cmd_topology_conf::TopologyConfArgs),
    /// Replay a job trace on a simulated cluster under several placement policies.
    Simulate(cmd_simulate::Args),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Pick(a) => cmd_pick::run(a),
        Cmd::Topo(a) => cmd_topo::run(a),
        Cmd::Health(a) => node::health::run(a),
        Cmd::Topology(a) => node::topology::run(a),
        Cmd::GresConf(a) => node::gres_conf::run(a),
        Cmd::Publish(a) => node::publish::run(a),
        Cmd::Serve(a) => node::serve::run(a),
        Cmd::Simulate(a) => cmd_simulate::run(a),
        Cmd::Nodes(a) => cmd_nodes::run(a),
        Cmd::Metrics(a) => cmd_metrics::run(a),
        Cmd::Drain(a) => cmd_drain::run_drain(a),
        Cmd::Resume(a) => cmd_drain::run_resume(a),
        Cmd::Features(a) => cmd_features::run(a),
        Cmd::TopologyConf(a) => cmd_topology_conf::run(a),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("gputopo: {e:#}");
            std::process::exit(1);
        }
    }
}
