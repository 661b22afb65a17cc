//! Command-line inputs of `gputopo simulate`: cluster descriptions, workloads and faults.

use super::Args;
use anyhow::{Context, bail};
use gputopo_core::topology::{NodeTopology, fixture};
use gputopo_eval::sim::generator::Synthetic;
use gputopo_eval::sim::rng::Rng;
use gputopo_eval::sim::{ClusterSpec, Fault, Job, trace};
use std::path::{Path, PathBuf};

/// Where a topology name may live, in order.
fn candidates(name: &str) -> Vec<PathBuf> {
    if name.contains('/') || name.ends_with(".topo") {
        return vec![PathBuf::from(name)];
    }
    let file = format!("{name}.topo");
    let mut v = Vec::new();
    if let Some(dir) = std::env::var_os("GPUTOPO_TOPOLOGY_DIR") {
        v.push(Path::new(&dir).join(&file));
    }
    v.push(Path::new("contrib/topologies").join(&file));
    v.push(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../contrib/topologies")
            .join(&file),
    );
    v
}

/// Loads one topology by name or path.
fn topology(name: &str) -> anyhow::Result<NodeTopology> {
    let paths = candidates(name);
    let Some(path) = paths.iter().find(|p| p.is_file()) else {
        bail!(
            "topology `{name}` not found (looked for {})",
            paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    };
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    fixture::parse(&text).with_context(|| format!("parsing {}", path.display()))
}

/// Parses `64xdgx1v,16xhgx-h100` (a bare name means one node).
pub fn cluster(desc: &str) -> anyhow::Result<ClusterSpec> {
    let mut spec = ClusterSpec::default();
    for part in desc.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (count, name) = match part.split_once('x') {
            Some((c, n)) if !c.is_empty() && c.chars().all(|ch| ch.is_ascii_digit()) => (
                c.parse::<u32>()
                    .with_context(|| format!("bad node count in `{part}`"))?,
                n,
            ),
            _ => (1, part),
        };
        if count > 0 {
            spec.groups.push((count, topology(name)?));
        }
    }
    if spec.node_count() == 0 {
        bail!("--cluster `{desc}` describes no node");
    }
    Ok(spec)
}

/// The workload named by the arguments, and a label for it.
pub fn workload(args: &Args, spec: &ClusterSpec) -> anyhow::Result<(Vec<Job>, String)> {
    let (mut jobs, label) = if let Some(path) = &args.trace {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let jobs = trace::read_csv(&text)
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("parsing {}", path.display()))?;
        let label = format!("trace {}", path.display());
        (jobs, label)
    } else if let Some(dir) = &args.alibaba {
        let read = |f: &str| {
            let p = dir.join(f);
            std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))
        };
        let mix = trace::size_mix(&read("openb_pod_list_multigpu50.csv")?)
            .map_err(anyhow::Error::msg)
            .context("openb_pod_list_multigpu50.csv")?;
        let jobs = trace::alibaba_shaped(&read("ali_gpu_v2023_jobs.csv")?, &mix, args.seed)
            .map_err(anyhow::Error::msg)
            .context("ali_gpu_v2023_jobs.csv")?;
        (
            jobs,
            "trace-shaped (Alibaba GPU v2023 times, multigpu50 sizes)".to_string(),
        )
    } else {
        let n = args.synthetic.unwrap_or(0);
        let mut g = Synthetic::new(n, args.seed);
        g.load = args.load;
        let label = format!("synthetic {n} jobs, load {}", args.load);
        (g.generate(spec.gpu_count()), label)
    };
    if args.compress <= 0.0 || !args.compress.is_finite() {
        bail!("--compress must be a positive number");
    }
    if args.compress != 1.0 {
        for j in &mut jobs {
            j.submit /= args.compress;
        }
    }
    let label = if args.compress != 1.0 {
        format!("{label}, arrivals ×{}", args.compress)
    } else {
        label
    };
    Ok((jobs, format!("{label}, seed {}", args.seed)))
}

/// Faults from a rate (per GPU per day over the submission span) or a `time,node,gpu` CSV.
pub fn faults(
    arg: Option<&str>,
    spec: &ClusterSpec,
    jobs: &[Job],
    seed: u64,
) -> anyhow::Result<Vec<Fault>> {
    let Some(arg) = arg else {
        return Ok(Vec::new());
    };
    if let Ok(rate) = arg.parse::<f64>() {
        if !(rate >= 0.0 && rate.is_finite()) {
            bail!("--faults rate must be a non-negative number");
        }
        let horizon = jobs.iter().map(|j| j.submit).fold(0.0, f64::max);
        let expected = rate * spec.gpu_count() as f64 * horizon / 86_400.0;
        let mut rng = Rng::derive(seed, 0xFA17);
        let mut out = Vec::new();
        let mut t = 0.0;
        if expected > 0.0 {
            loop {
                t += rng.exp(horizon / expected);
                if t > horizon {
                    break;
                }
                let node = rng.below(u64::from(spec.node_count())) as u32;
                let gpu = rng.below(node_gpus(spec, node) as u64) as u8;
                out.push(Fault { time: t, node, gpu });
            }
        }
        return Ok(out);
    }
    let text = std::fs::read_to_string(arg).with_context(|| format!("reading faults {arg}"))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') || (i == 0 && l.starts_with("time")) {
            continue;
        }
        let f: Vec<&str> = l.split(',').map(str::trim).collect();
        let parse = || -> Option<Fault> {
            Some(Fault {
                time: f.first()?.parse().ok()?,
                node: f.get(1)?.parse().ok()?,
                gpu: f.get(2)?.parse().ok()?,
            })
        };
        let fault =
            parse().with_context(|| format!("{arg}:{}: expected `time,node,gpu`", i + 1))?;
        if fault.node >= spec.node_count() {
            bail!(
                "{arg}:{}: node {} is outside the cluster",
                i + 1,
                fault.node
            );
        }
        if usize::from(fault.gpu) >= node_gpus(spec, fault.node) {
            bail!(
                "{arg}:{}: node {} has no GPU {}",
                i + 1,
                fault.node,
                fault.gpu
            );
        }
        out.push(fault);
    }
    Ok(out)
}

/// GPUs of node `node` (0 when outside the cluster).
fn node_gpus(spec: &ClusterSpec, node: u32) -> usize {
    let mut rest = node;
    for (count, topo) in &spec.groups {
        if rest < *count {
            return topo.len();
        }
        rest -= count;
    }
    0
}
