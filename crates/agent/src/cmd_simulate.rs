//! `gputopo simulate`: replay a workload on a simulated cluster under several placement
//! policies and compare them (issue 6).
//!
//! The simulation itself is `gputopo_eval::sim` (the same engine the plugin runs); this module
//! only turns the command line into its inputs (cluster topologies, workload, faults) and its
//! summaries into a terminal table, CSV and SVG plots ([`report`]).

mod inputs;
mod report;

use anyhow::{Context, bail};
use gputopo_core::placement::engine::Gputopo;
use gputopo_core::placement::{Policy, Score};
use gputopo_eval::baseline::best_effort::BestEffort;
use gputopo_eval::baseline::first_fit::FirstFit;
use gputopo_eval::baseline::slurm_greedy::SlurmGreedy;
use gputopo_eval::sim::{self, Config, Health, Placement};
use std::path::PathBuf;

/// Arguments.
#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("workload").required(true).args(["trace", "synthetic", "alibaba"])))]
pub struct Args {
    /// Cluster as node counts × topologies: `64xdgx1v,16xhgx-h100`. A name resolves to
    /// `NAME.topo` in $GPUTOPO_TOPOLOGY_DIR, ./contrib/topologies or the source tree's
    /// contrib/topologies; anything with a `/` or ending in `.topo` is a path.
    #[arg(long)]
    pub cluster: String,
    /// Job trace CSV: `submit,duration,gpus_per_node,nodes,user` (seconds).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Generate N synthetic jobs (distributions in gputopo_eval::sim::generator).
    #[arg(long, value_name = "N")]
    pub synthetic: Option<usize>,
    /// Trace-shaped workload from the Alibaba GPU v2023 files in DIR
    /// (ali_gpu_v2023_jobs.csv times, openb_pod_list_multigpu50.csv GPU counts).
    #[arg(long, value_name = "DIR")]
    pub alibaba: Option<PathBuf>,
    /// Seed for the synthetic workload, size draws and fault times.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Offered load of the synthetic workload, as a share of the cluster's GPUs.
    #[arg(long, default_value_t = 0.9)]
    pub load: f64,
    /// Divide every submit time by this factor (raises the load of a replayed trace).
    #[arg(long, default_value_t = 1.0)]
    pub compress: f64,
    /// Policies to compare: gputopo, slurm-greedy (24.11), slurm-greedy-22.05, best-effort,
    /// first-fit.
    #[arg(long, default_value = "gputopo,slurm-greedy,best-effort,first-fit")]
    pub policies: String,
    /// GPU faults: a rate (faults per GPU per day, spread uniformly over the submission span)
    /// or a CSV file `time,node,gpu`.
    #[arg(long, value_name = "RATE|FILE")]
    pub faults: Option<String>,
    /// Baselines hide faulty GPUs from their policy (the default).
    #[arg(long, conflicts_with = "health_unaware")]
    pub health_aware: bool,
    /// Baselines keep faulty GPUs in the free set (stock Slurm); gputopo stays health-aware.
    #[arg(long)]
    pub health_unaware: bool,
    /// Share of a multi-GPU step spent communicating on the ideal set (slowdown model).
    #[arg(long, default_value_t = sim::comm::DEFAULT_COMM_FRACTION)]
    pub comm_fraction: f64,
    /// Write the generated workload to this CSV file.
    #[arg(long, value_name = "FILE")]
    pub write_trace: Option<PathBuf>,
    /// Directory for summary.csv and one SVG plot per metric.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// With --out: write summary.csv only, no plots.
    #[arg(long)]
    pub no_plots: bool,
    /// Title for the plots and the table (default: the cluster and workload).
    #[arg(long)]
    pub title: Option<String>,
}

/// The policy objects named on the command line.
fn policies(list: &str) -> anyhow::Result<Vec<Box<dyn Policy<Score = Score>>>> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|name| -> anyhow::Result<Box<dyn Policy<Score = Score>>> {
            Ok(match name {
                "gputopo" => Box::new(Gputopo::new()),
                "slurm-greedy" | "slurm-greedy-24.11" => Box::new(SlurmGreedy::V24_11),
                "slurm-greedy-22.05" => Box::new(SlurmGreedy::V22_05),
                "best-effort" => Box::new(BestEffort),
                "first-fit" => Box::new(FirstFit),
                other => bail!(
                    "unknown policy `{other}` (known: gputopo, slurm-greedy, slurm-greedy-22.05, best-effort, first-fit)"
                ),
            })
        })
        .collect()
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<i32> {
    let spec = inputs::cluster(&args.cluster)?;
    let (jobs, workload) = inputs::workload(&args, &spec)?;
    if let Some(path) = &args.write_trace {
        std::fs::write(path, sim::trace::write_csv(&jobs))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let faults = inputs::faults(args.faults.as_deref(), &spec, &jobs, args.seed)?;
    let health = if args.health_unaware {
        Health::Unaware
    } else {
        Health::Aware
    };
    let cfg = Config {
        health,
        comm_fraction: args.comm_fraction,
    };
    if !(0.0..=1.0).contains(&cfg.comm_fraction) {
        bail!("--comm-fraction must be between 0 and 1");
    }
    let policies = policies(&args.policies)?;
    if policies.is_empty() {
        bail!("--policies names no policy");
    }
    let engine = Gputopo::new();
    let mut rows = Vec::new();
    for p in &policies {
        let placement = if p.name() == "gputopo" {
            Placement::Gputopo
        } else {
            Placement::Baseline(p.as_ref())
        };
        let s = sim::simulate(&spec, &jobs, &faults, placement, &engine, &cfg)
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("simulating {}", p.name()))?;
        rows.push(s);
    }
    let title = args.title.clone().unwrap_or_else(|| {
        format!(
            "{} GPUs ({}), {workload}, {} faults, {}",
            spec.gpu_count(),
            spec.describe(),
            faults.len(),
            match health {
                Health::Aware => "health-aware",
                Health::Unaware => "health-unaware baselines",
            }
        )
    });
    print!("{}", report::table(&title, &rows));
    if let Some(dir) = &args.out {
        report::write(dir, &title, &rows, !args.no_plots)?;
        eprintln!("wrote {}", dir.display());
    }
    Ok(0)
}
