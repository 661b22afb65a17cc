//! `gputopo pick`: the engine's choice of K GPUs on one node, from the command line.
//!
//! The same code path slurmctld's select plugin uses (`gputopo_core::placement::Gputopo`), so
//! sites can ask "which GPUs would gputopo give this job on this node?" and script around it.
//!
//! Output (one line, `Key=Value` words; stable, for scripts):
//! `gpus=2,3 bottleneck=62 aggregate=62 leftover_same_k=62/62 leftover_pairs=172 near=0`
//! (`-` for "no such value", e.g. the bottleneck of a single GPU). With `--json`, one object:
//! `{"gpus":[2,3],"score":{"bottleneck":62,"aggregate":62},"objective":{...},...}`.
//! Exit codes: 0 chosen; 2 the request cannot be met on this node (reason on stderr);
//! 1 bad arguments or topology file.

use crate::cmd_topo::read_topology;
use anyhow::{Context, bail};
use gputopo_core::GpuSet;
use gputopo_core::placement::{Gputopo, Objective, Request, Score};
use serde_json::json;
use std::path::PathBuf;

/// Arguments.
#[derive(clap::Args)]
pub struct Args {
    /// Topology file: gputopo format, gres.conf or `nvidia-smi topo -m` output.
    #[arg(long, value_name = "FILE")]
    pub topology: PathBuf,
    /// Free GPUs, as an index list (`0-3,6`); default: all GPUs of the node.
    #[arg(long, value_name = "LIST")]
    pub free: Option<String>,
    /// Number of GPUs to choose.
    #[arg(long, value_name = "K")]
    pub count: usize,
    /// GPUs that must be part of the answer.
    #[arg(long, value_name = "LIST", default_value = "")]
    pub required: String,
    /// GPUs with affinity to the job's cores (preferred when otherwise equal).
    #[arg(long, value_name = "LIST", default_value = "")]
    pub near: String,
    /// In a gres.conf describing several nodes, the node to read.
    #[arg(long, value_name = "NAME")]
    pub node: Option<String>,
    /// Print one JSON object instead of a Key=Value line.
    #[arg(long)]
    pub json: bool,
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<i32> {
    let topo = read_topology(&args.topology, args.node.as_deref())?;
    let all = topo.all();
    let list = |what: &str, s: &str| -> anyhow::Result<GpuSet> {
        let set = GpuSet::parse_list(s)
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("--{what} {s}"))?;
        if !set.is_subset(all) {
            bail!(
                "--{what} {s}: the node has GPUs 0-{} only",
                topo.len().saturating_sub(1)
            );
        }
        Ok(set)
    };
    let free = match &args.free {
        Some(s) => list("free", s)?,
        None => all,
    };
    let req = Request {
        count: args.count,
        required: list("required", &args.required)?,
        near: list("near", &args.near)?,
    };
    let engine = Gputopo::new();
    let Some(choice) = engine.choose_detailed(&topo, free, &req) else {
        eprintln!("gputopo: no fit: {}", no_fit_reason(free, &req));
        return Ok(2);
    };
    if args.json {
        let doc = json!({
            "gpus": choice.gpus.to_vec(),
            "score": score_json(choice.objective.quality),
            "objective": objective_json(&choice.objective),
            "topology": topo.name,
            "count": req.count,
            "free": free.to_vec(),
        });
        println!("{doc}");
    } else {
        let gpus: Vec<String> = choice.gpus.iter().map(|g| g.to_string()).collect();
        let o = &choice.objective;
        println!(
            "gpus={} bottleneck={} aggregate={} leftover_same_k={} leftover_pairs={} near={}",
            gpus.join(","),
            bottleneck_text(o.quality),
            o.quality.aggregate,
            score_text(o.lookahead_same_k),
            o.lookahead_pairs,
            o.near
        );
    }
    Ok(0)
}

fn no_fit_reason(free: GpuSet, req: &Request) -> String {
    if !req.required.is_subset(free) {
        format!(
            "required GPUs {} are not free",
            req.required.difference(free)
        )
    } else if req.required.len() > req.count {
        format!(
            "{} GPUs required but only {} requested",
            req.required.len(),
            req.count
        )
    } else {
        format!("{} GPUs requested, {} free", req.count, free.len())
    }
}

fn bottleneck_text(s: Score) -> String {
    if s.bottleneck == Score::SINGLE_BOTTLENECK {
        "-".to_string()
    } else {
        s.bottleneck.to_string()
    }
}

fn score_text(s: Score) -> String {
    if s == Score::NONE {
        "-".to_string()
    } else {
        format!("{}/{}", bottleneck_text(s), s.aggregate)
    }
}

fn score_json(s: Score) -> serde_json::Value {
    if s == Score::NONE {
        return serde_json::Value::Null;
    }
    let b = (s.bottleneck != Score::SINGLE_BOTTLENECK).then_some(s.bottleneck);
    json!({ "bottleneck": b, "aggregate": s.aggregate })
}

fn objective_json(o: &Objective) -> serde_json::Value {
    json!({
        "quality": score_json(o.quality),
        "leftover_same_k": score_json(o.lookahead_same_k),
        "leftover_pairs": o.lookahead_pairs,
        "near": o.near,
    })
}
