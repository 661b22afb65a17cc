//! `gputopo pick`: the engine's choice of K GPUs on one node, from the command line.
//!
//! The same code path slurmctld's select plugin uses (`gputopo_core::placement::Gputopo`), so
//! sites can ask "which GPUs would gputopo give this job on this node?" and script around it.
//!
//! Output (one line, `Key=Value` words; stable, for scripts):
//! `gpus=0,3 bottleneck=50 aggregate=50 leftover=4:25/225,2:50/50 leftover_pairs=150 near=0`
//! (`leftover`: per lookahead size, largest first, the best bottleneck/aggregate a set of
//! that size of the GPUs left free still has; `-` for "no such value", e.g. the bottleneck of
//! a single GPU). With `--json`, one object:
//! `{"gpus":[0,3],"score":{"bottleneck":50,"aggregate":50},"objective":{...},...}`.
//! `--versus LIST` also evaluates another answer (a peer's) on the same request and appends
//! `versus=… versus_bottleneck=… versus_aggregate=… versus_leftover=… job=better|same|worse
//! leftover=better|same|worse` (gputopo's set and leftover against the other's): the check of
//! `placement/engine/peer.rs` (go-gpuallocator's expected answers) on any topology file.
//! Exit codes: 0 chosen; 2 the request cannot be met on this node (reason on stderr);
//! 1 bad arguments or topology file.

use crate::cmd_topo::read_topology;
use anyhow::{Context, bail};
use gputopo_core::GpuSet;
use gputopo_core::placement::{Gputopo, Objective, Prepared, Request, Score, objective};
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
    /// Another answer to compare with (e.g. a peer's): K free GPUs holding `--required`.
    #[arg(long, value_name = "LIST")]
    pub versus: Option<String>,
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
    let versus = match &args.versus {
        Some(s) => {
            let v = list("versus", s)?;
            if !v.is_subset(free) || v.len() != req.count || !req.required.is_subset(v) {
                bail!(
                    "--versus {s}: not an answer to this request ({} free GPUs holding --required)",
                    req.count
                );
            }
            Some(v)
        }
        None => None,
    };
    let engine = Gputopo::new();
    let Some(choice) = Prepared::new(&engine, []).choose_detailed(&topo, free, &req) else {
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
        let mut line = format!(
            "gpus={} bottleneck={} aggregate={} leftover={} leftover_pairs={} near={}",
            gpus.join(","),
            bottleneck_text(o.quality),
            o.quality.aggregate,
            leftover_text(o),
            o.leftover.pairs,
            o.near
        );
        if let Some(v) = versus {
            let p = objective::objective(&topo, free, v, req.near);
            line += &format!(
                " versus={} versus_bottleneck={} versus_aggregate={} versus_leftover={} job={} leftover={}",
                v.to_vec()
                    .iter()
                    .map(|g| g.to_string())
                    .collect::<Vec<_>>()
                    .join(","),
                bottleneck_text(p.quality),
                p.quality.aggregate,
                leftover_text(&p),
                verdict(o.quality.cmp(&p.quality)),
                verdict(o.leftover.cmp(&p.leftover)),
            );
        }
        println!("{line}");
    }
    Ok(0)
}

/// `better`/`same`/`worse`: ours against the other answer (bigger is better).
fn verdict(o: std::cmp::Ordering) -> &'static str {
    match o {
        std::cmp::Ordering::Greater => "better",
        std::cmp::Ordering::Equal => "same",
        std::cmp::Ordering::Less => "worse",
    }
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

/// The leftover per lookahead size that still has a set, largest first: `4:25/225,2:50/50`
/// (`-` when none has).
fn leftover_text(o: &Objective) -> String {
    let parts: Vec<String> = sizes(o)
        .filter(|(_, sc)| *sc != Score::NONE)
        .map(|(s, sc)| format!("{s}:{}", score_text(sc)))
        .collect();
    if parts.is_empty() {
        "-".to_string()
    } else {
        parts.join(",")
    }
}

fn sizes(o: &Objective) -> impl Iterator<Item = (u8, Score)> + '_ {
    o.leftover.by_size.iter().copied().filter(|(s, _)| *s > 0)
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
        "leftover": sizes(o)
            .map(|(s, sc)| (s.to_string(), score_json(sc)))
            .collect::<serde_json::Map<_, _>>(),
        "leftover_pairs": o.leftover.pairs,
        "loss": { "whole": o.loss.0.whole, "by_size": {
            "16": o.loss.0.by_size[0], "8": o.loss.0.by_size[1],
            "4": o.loss.0.by_size[2], "2": o.loss.0.by_size[3] },
            "pairs": o.loss.0.pairs },
        "near": o.near,
    })
}
