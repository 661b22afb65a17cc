//! `gputopo features`: slurm.conf `Features=` suggestions from the capability labels the nodes
//! published in `Extra` (`gputopo_core::health::extra::labels`), for `--constraint` on every
//! release (Slurm 24.11+ can also match the labels themselves with `--extra`).
//!
//! One line per node with labels, `NodeName=<node> Features=<list>`, ready to merge into the
//! node's definition (an existing `Features=` there should be kept and extended); nodes without
//! labels are named on stderr. Runs wherever a Slurm client works: it only runs
//! `scontrol show node -o`.

use crate::cmd_nodes;
use gputopo_core::health::extra::labels::Labels;

/// Arguments (also `topology-conf`'s).
#[derive(clap::Args)]
pub struct Args {
    /// Nodes to consider (a Slurm host list); default all.
    #[arg(value_name = "NODES")]
    pub nodes: Option<String>,
    /// scontrol to run.
    #[arg(long, value_name = "PATH", default_value = "scontrol")]
    pub scontrol: String,
}

/// Runs the subcommand. Exit code 0, or 1 when scontrol fails.
pub fn run(args: Args) -> anyhow::Result<i32> {
    let (lines, missing) = suggest(&show_nodes(&args)?);
    print!("{lines}");
    if !missing.is_empty() {
        eprintln!(
            "gputopo: no capability labels published by: {} (is `gputopo publish` their HealthCheckProgram?)",
            missing.join(",")
        );
    }
    Ok(0)
}

/// `scontrol show node -o [NODES]`.
pub fn show_nodes(args: &Args) -> anyhow::Result<String> {
    let mut node_args = vec!["show", "node", "-o"];
    if let Some(n) = &args.nodes {
        node_args.push(n);
    }
    cmd_nodes::scontrol(&args.scontrol, &node_args)
}

/// The suggestions for `scontrol show node -o` output, and the nodes without labels.
pub fn suggest(nodes: &str) -> (String, Vec<String>) {
    let mut out = String::new();
    let mut missing = Vec::new();
    for line in nodes.lines().filter(|l| l.starts_with("NodeName=")) {
        let name = cmd_nodes::value(line, "NodeName").unwrap_or_default();
        let extra = cmd_nodes::value(line, "Extra").unwrap_or_default();
        let labels = serde_json::from_str::<serde_json::Value>(&extra)
            .ok()
            .and_then(|v| v.as_object().and_then(Labels::from_flat));
        match labels {
            Some(l) => out.push_str(&format!(
                "NodeName={name} Features={}\n",
                l.features().join(",")
            )),
            None => missing.push(name),
        }
    }
    (out, missing)
}

#[cfg(test)]
mod tests {
    use super::suggest;

    #[test]
    fn one_line_per_labelled_node() {
        let show = concat!(
            r#"NodeName=h1 Arch=x86_64 Extra={"gpu_ok":8,"gpu_model":"H100","gpu_mem_gib":80,"cc":9.0,"gpu_count":8,"nvlink":true,"nvswitch":true,"gputopo":{"v":1}} State=IDLE"#,
            "\n",
            r#"NodeName=v1 Extra={"gpu_ok":2,"gpu_model":"V100","gpu_mem_gib":16,"cc":7.0,"gpu_count":2,"nvlink":false,"nvswitch":false} State=IDLE"#,
            "\nNodeName=x1 Extra=rack7 State=IDLE\n",
        );
        let (lines, missing) = suggest(show);
        assert_eq!(
            lines,
            "NodeName=h1 Features=h100,gpumem80,cc90,nvlink,nvswitch\nNodeName=v1 Features=v100,gpumem16,cc70\n"
        );
        assert_eq!(missing, ["x1"]);
    }

    /// Issue 25 item 4: a label is text someone wrote into `Extra`; a newline, a space or a
    /// `=` in it must not become its own slurm.conf line or key. Such a label is dropped.
    #[test]
    fn labels_cannot_inject_config_lines() {
        for model in [
            r"H100\nPartitionName=evil",
            "H100 x",
            "H100,gpumem999",
            "",
            "h100#x",
        ] {
            let show = format!(
                r#"NodeName=h1 Extra={{"gpu_model":"{model}","gpu_count":8,"nvlink":true}} State=IDLE"#
            );
            let (lines, missing) = suggest(&show);
            assert_eq!(lines, "NodeName=h1 Features=nvlink\n", "{model:?}");
            assert!(missing.is_empty());
        }
    }
}
