//! `gputopo topology-conf`: Slurm `topology/block` configuration (topology.conf) with one
//! block per NVLink domain, from the `nvlink_domain` the nodes published in `Extra` (rule:
//! `gputopo_core::topology::block_conf`); with `--tree`, `topology/tree` with one leaf switch
//! per domain, for releases before 23.11 (no `topology/block`). Runs wherever a Slurm client
//! works.

use crate::cmd_nodes;
use gputopo_core::health::extra::labels::label_str;
use gputopo_core::topology::block_conf::{block_conf, tree_conf};

/// Arguments of `gputopo topology-conf`.
#[derive(clap::Args)]
pub struct TopologyConfArgs {
    /// Which nodes, and the scontrol to ask.
    #[command(flatten)]
    pub nodes: crate::cmd_features::Args,
    /// Write topology/tree (one leaf switch per domain) instead of topology/block.
    #[arg(long)]
    pub tree: bool,
}

/// Runs the subcommand. Exit code 0, or 1 when scontrol fails.
pub fn run(args: TopologyConfArgs) -> anyhow::Result<i32> {
    let nodes = domains(&crate::cmd_features::show_nodes(&args.nodes)?);
    let conf = if args.tree {
        tree_conf(&nodes)
    } else {
        block_conf(&nodes)
    };
    print!("{conf}");
    Ok(0)
}

/// (node, published NVLink domain) for `scontrol show node -o` output.
pub fn domains(nodes: &str) -> Vec<(String, Option<String>)> {
    nodes
        .lines()
        .filter(|l| l.starts_with("NodeName="))
        .map(|line| {
            let name = cmd_nodes::value(line, "NodeName").unwrap_or_default();
            let extra = cmd_nodes::value(line, "Extra").unwrap_or_default();
            let domain = serde_json::from_str::<serde_json::Value>(&extra)
                .ok()
                .and_then(|v| label_str(v.as_object()?, "nvlink_domain"));
            (name, domain)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_each_nodes_domain() {
        let show = "NodeName=r1n1 Extra={\"gpu_ok\":4,\"nvlink_domain\":\"ab.1\"} State=IDLE\n\
                    NodeName=r1n2 Extra=(null) State=IDLE\n";
        assert_eq!(
            super::domains(show),
            [
                ("r1n1".to_string(), Some("ab.1".to_string())),
                ("r1n2".to_string(), None)
            ]
        );
    }

    /// Issue 25 item 4: a domain that is not a fabric id (a newline, spaces, `=`) is not
    /// copied into topology.conf: the node counts as having no domain.
    #[test]
    fn a_domain_cannot_inject_config_lines() {
        let show =
            "NodeName=r1n1 Extra={\"nvlink_domain\":\"ab.1\\nSwitchName=evil\"} State=IDLE\n";
        let d = super::domains(show);
        assert_eq!(d, [("r1n1".to_string(), None)]);
        let conf = gputopo_core::topology::block_conf::block_conf(&d);
        assert!(!conf.contains("evil"), "{conf}");
    }
}
