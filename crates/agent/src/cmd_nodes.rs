//! `gputopo nodes`: the published GPU health of the cluster, readable, wherever a Slurm client
//! works (it only runs `scontrol`).
//!
//! One line per GPU of every node that has published health: the node, the GPU's Slurm index,
//! its status and reasons, the device it is (minor and PCI bus id, as the agent published
//! them), the job holding it, and the age of the node's report (from the `t` the agent writes;
//! `publish` refreshes it every `PublishRefreshSec`). Nodes without gputopo health are listed
//! once, as `unpublished` (or `malformed` with the parser's message).
//!
//! Data: `scontrol show node -o -d` (each node's `Extra`) and `scontrol show job -d -o` (each
//! running job's `Nodes=... GRES=gpu:...(IDX:...)` details).

use gputopo_agent::fleet::nodes::{render, render_history};
pub(crate) use gputopo_agent::fleet::records::{scontrol, value};

/// Arguments.
#[derive(clap::Args)]
pub struct Args {
    /// Nodes to show (a Slurm host list); default all.
    #[arg(value_name = "NODES")]
    pub nodes: Option<String>,
    /// Only GPUs that are not `ok` or are drained (and nodes without readable health).
    #[arg(long)]
    pub problems: bool,
    /// The recent state changes of each GPU instead (agent verdicts, drains, resumes; the
    /// last 16 per node, from the node's record).
    #[arg(long, conflicts_with = "problems")]
    pub history: bool,
    /// scontrol to run.
    #[arg(long, value_name = "PATH", default_value = "scontrol")]
    pub scontrol: String,
}

/// Runs the subcommand. Exit code 0, or 1 when scontrol fails.
pub fn run(args: Args) -> anyhow::Result<i32> {
    let mut node_args = vec!["show", "node", "-o", "-d"];
    if let Some(n) = &args.nodes {
        node_args.push(n);
    }
    let nodes = scontrol(&args.scontrol, &node_args)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    if args.history {
        print!("{}", render_history(&nodes, now));
        return Ok(0);
    }
    let jobs = scontrol(&args.scontrol, &["show", "job", "-d", "-o"])?;
    print!("{}", render(&nodes, &jobs, now, args.problems));
    Ok(0)
}
