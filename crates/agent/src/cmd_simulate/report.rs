//! Output of `gputopo simulate`: the terminal table, `summary.csv`, and one SVG bar chart per
//! metric (a bar per policy).
//!
//! Plots use plotters' SVG backend, which writes text as SVG `<text>` and needs no font
//! files or system libraries.

use anyhow::Context;
use gputopo_eval::sim::Summary;
use plotters::prelude::*;
use std::fmt::Write as _;
use std::path::Path;

/// A reported metric: file/column name, human label, value.
struct Metric {
    key: &'static str,
    label: &'static str,
    get: fn(&Summary) -> f64,
}

/// Every metric plotted, in report order.
const METRICS: &[Metric] = &[
    Metric {
        key: "optimal_share",
        label: "multi-GPU allocations at the best achievable quality (share)",
        get: |s| s.optimal_share,
    },
    Metric {
        key: "mean_bottleneck_gbps",
        label: "mean bottleneck of multi-GPU sets (GB/s)",
        get: |s| s.mean_bottleneck_gbps,
    },
    Metric {
        key: "worst_bottleneck_gbps",
        label: "worst bottleneck of multi-GPU sets (GB/s)",
        get: |s| s.worst_bottleneck_gbps,
    },
    Metric {
        key: "stranded_gpus",
        label: "stranded GPUs (time-averaged)",
        get: |s| s.stranded_gpus,
    },
    Metric {
        key: "wait_mean_s",
        label: "mean queueing delay (s)",
        get: |s| s.wait_mean_s,
    },
    Metric {
        key: "wait_p95_s",
        label: "p95 queueing delay (s)",
        get: |s| s.wait_p95_s,
    },
    Metric {
        key: "wait_large_mean_s",
        label: "mean queueing delay of 4- and 8-GPU jobs (s)",
        get: |s| s.wait_large_mean_s,
    },
    Metric {
        key: "jct_mean_s",
        label: "mean job completion time (s)",
        get: |s| s.jct_mean_s,
    },
    Metric {
        key: "slowdown_mean",
        label: "mean slowdown of multi-GPU jobs (x)",
        get: |s| s.slowdown_mean,
    },
    Metric {
        key: "slowdown_p75",
        label: "p75 slowdown of multi-GPU jobs (x)",
        get: |s| s.slowdown_p75,
    },
    Metric {
        key: "slowdown_max",
        label: "worst slowdown of multi-GPU jobs (x)",
        get: |s| s.slowdown_max,
    },
    Metric {
        key: "faulty_allocs",
        label: "jobs given a faulty GPU",
        get: |s| s.faulty_allocs as f64,
    },
    Metric {
        key: "decisions_per_s",
        label: "placement decisions per second",
        get: |s| s.decisions_per_s,
    },
];

/// The terminal table.
pub fn table(title: &str, rows: &[Summary]) -> String {
    let mut out = format!("{title}\n");
    let _ = writeln!(
        out,
        "{:<19} {:>7} {:>8} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6} {:>6} {:>6} {:>6} {:>6} {:>10}",
        "policy",
        "optimal",
        "meanBW",
        "worstBW",
        "stranded",
        "wait",
        "wait-p95",
        "wait-4+",
        "JCT",
        "slow",
        "p75",
        "max",
        "faulty",
        "unrun",
        "dec/s"
    );
    for s in rows {
        let _ = writeln!(
            out,
            "{:<19} {:>6.1}% {:>8.1} {:>8.0} {:>9.2} {:>9.0} {:>9.0} {:>9.0} {:>9.0} {:>6.3} {:>6.3} {:>6.2} {:>6} {:>6} {:>10.0}",
            s.policy,
            100.0 * s.optimal_share,
            s.mean_bottleneck_gbps,
            s.worst_bottleneck_gbps,
            s.stranded_gpus,
            s.wait_mean_s,
            s.wait_p95_s,
            s.wait_large_mean_s,
            s.jct_mean_s,
            s.slowdown_mean,
            s.slowdown_p75,
            s.slowdown_max,
            s.faulty_allocs,
            s.unrunnable,
            s.decisions_per_s
        );
    }
    out
}

/// `summary.csv`: one row per policy, every field of [`Summary`].
pub fn csv(rows: &[Summary]) -> String {
    let mut out = String::from(
        "policy,jobs,rejected,started,unrunnable,multi_gpu_allocs,optimal_allocs,optimal_share,\
         mean_bottleneck_gbps,worst_bottleneck_gbps,stranded_gpus,utilization,wait_mean_s,\
         wait_p95_s,jct_mean_s,jct_p95_s,slowdown_mean,slowdown_p75,slowdown_max,faulty_allocs,\
         faults,makespan_s,decisions,decisions_per_s,wall_s,wait_large_mean_s\n",
    );
    for s in rows {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{:.4},{:.2},{:.2},{:.3},{:.4},{:.1},{:.1},{:.1},{:.1},{:.4},{:.4},{:.4},{},{},{:.1},{},{:.0},{:.3},{:.1}",
            s.policy,
            s.jobs,
            s.rejected,
            s.started,
            s.unrunnable,
            s.multi_gpu_allocs,
            s.optimal_allocs,
            s.optimal_share,
            s.mean_bottleneck_gbps,
            s.worst_bottleneck_gbps,
            s.stranded_gpus,
            s.utilization,
            s.wait_mean_s,
            s.wait_p95_s,
            s.jct_mean_s,
            s.jct_p95_s,
            s.slowdown_mean,
            s.slowdown_p75,
            s.slowdown_max,
            s.faulty_allocs,
            s.faults,
            s.makespan_s,
            s.decisions,
            s.decisions_per_s,
            s.wall_s,
            s.wait_large_mean_s
        );
    }
    out
}

const COLORS: [RGBColor; 6] = [
    RGBColor(0x1b, 0x9e, 0x77),
    RGBColor(0xd9, 0x5f, 0x02),
    RGBColor(0x75, 0x70, 0xb3),
    RGBColor(0xe7, 0x29, 0x8a),
    RGBColor(0x66, 0xa6, 0x1e),
    RGBColor(0xe6, 0xab, 0x02),
];

/// One bar chart: a bar per policy.
fn bar_chart(path: &Path, title: &str, m: &Metric, rows: &[Summary]) -> anyhow::Result<()> {
    let values: Vec<f64> = rows.iter().map(m.get).collect();
    let top = values.iter().copied().fold(0.0, f64::max);
    let top = if top > 0.0 { top * 1.18 } else { 1.0 };
    let n = rows.len() as u32;
    let root = SVGBackend::new(path, (640, 340)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(m.label, ("sans-serif", 17))
        .margin(12)
        .x_label_area_size(28)
        .y_label_area_size(64)
        .build_cartesian_2d((0u32..n).into_segmented(), 0f64..top)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .disable_y_mesh()
        .x_desc(title)
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => rows
                .get(*i as usize)
                .map_or(String::new(), |s| s.policy.clone()),
            _ => String::new(),
        })
        .draw()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    chart
        .draw_series(values.iter().enumerate().map(|(i, v)| {
            let i = i as u32;
            let mut bar = Rectangle::new(
                [
                    (SegmentValue::Exact(i), 0.0),
                    (SegmentValue::Exact(i + 1), *v),
                ],
                COLORS[i as usize % COLORS.len()].filled(),
            );
            bar.set_margin(0, 0, 18, 18);
            bar
        }))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    chart
        .draw_series(values.iter().enumerate().map(|(i, v)| {
            Text::new(
                format_value(*v),
                (SegmentValue::CenterOf(i as u32), *v + top * 0.02),
                ("sans-serif", 13),
            )
        }))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    root.present().map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(())
}

fn format_value(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() >= 1000.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

/// Writes `summary.csv` and (when `plots`) one `<metric>.svg` per metric into `dir`.
pub fn write(dir: &Path, title: &str, rows: &[Summary], plots: bool) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let p = dir.join("summary.csv");
    std::fs::write(&p, csv(rows)).with_context(|| format!("writing {}", p.display()))?;
    for m in METRICS.iter().filter(|_| plots) {
        let p = dir.join(format!("{}.svg", m.key));
        bar_chart(&p, title, m, rows).with_context(|| format!("plotting {}", p.display()))?;
    }
    Ok(())
}
