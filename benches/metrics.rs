//! `gputopo metrics`: the cost of one scrape of a 1,000-node cluster, with `gputopo nodes`
//! reading the same data in the same run as the baseline.
//!
//! Budget (issue 28): one scrape of a 1,000-node cluster's data under 100 ms. The data set is
//! the recorded output of a real 4-node cluster (tests/fixtures/scontrol/RELEASE, recorded by
//! contrib/record-scontrol.sh) replicated 250 times with the node names and job ids renumbered:
//! 1,000 DGX-1V nodes (8,000 GPUs; faulty, lost, warm and XID-holding GPUs, NVLinks
//! down) and 2,250 jobs (1,500 running with placement notes, 750 waiting). A scrape is what
//! `--listen` does after scontrol answered: read both texts into the cluster model and encode
//! it; scontrol itself (slurmctld's time) is not in it.
//!
//! Run: `cargo bench -p gputopo-agent --bench metrics` (`-- --quick` for a short run); the
//! figures are in docs/operations.md.

use criterion::{Criterion, black_box, criterion_group};
use gputopo_agent::fleet::metrics::{Format, render};
use gputopo_agent::fleet::nodes;
use gputopo_agent::fleet::view::Cluster;
use std::time::Duration;

/// Node names `n<k>` and host lists `n[1,3]` / `n[1-2]` in `text` renumbered into group `g`
/// (`n<k>` → `n<4g+k>`); a `[..]` right after a single name (a GPU list in a note) is kept.
fn renumber(text: &str, g: usize, per: usize) -> String {
    let map = |k: usize| k + g * per;
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len() + 64);
    let mut i = 0;
    while i < b.len() {
        let starts = b[i] == b'n'
            && (i == 0 || !(b[i - 1] as char).is_ascii_alphanumeric())
            && b.get(i + 1)
                .is_some_and(|c| c.is_ascii_digit() || *c == b'[');
        if !starts {
            let ch = text[i..].chars().next().unwrap_or(' ');
            out.push(ch);
            i += ch.len_utf8();
            continue;
        }
        out.push('n');
        i += 1;
        if b[i] == b'[' {
            let end = text[i..].find(']').map_or(b.len(), |e| i + e);
            let list = &text[i + 1..end];
            let mapped: Vec<String> = list
                .split(',')
                .map(|part| {
                    part.split('-')
                        .map(|n| {
                            n.parse()
                                .map_or(n.to_string(), |k: usize| map(k).to_string())
                        })
                        .collect::<Vec<_>>()
                        .join("-")
                })
                .collect();
            out.push('[');
            out.push_str(&mapped.join(","));
            out.push(']');
            i = end + 1;
        } else {
            let end = text[i..]
                .find(|c: char| !c.is_ascii_digit())
                .map_or(b.len(), |e| i + e);
            let k: usize = text[i..end].parse().unwrap_or(0);
            out.push_str(&map(k).to_string());
            i = end;
        }
    }
    out
}

/// `JobId=<id>` renumbered into group `g`.
fn renumber_jobs(text: &str, g: usize, per: usize) -> String {
    text.lines()
        .map(|l| {
            let rest = l.strip_prefix("JobId=").unwrap_or(l);
            let (id, tail) = rest.split_once(' ').unwrap_or((rest, ""));
            let id: usize = id.parse().unwrap_or(0);
            format!("JobId={} {}\n", id + g * per, renumber(tail, g, 4))
        })
        .collect()
}

/// The 1,000-node data set of `release`: (nodes text, jobs text).
fn data_set(release: &str) -> (String, String) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/scontrol")
        .join(release);
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).expect("recorded scontrol output");
    let (nodes, jobs) = (read("nodes.txt"), read("jobs.txt"));
    let per_job = jobs.lines().count();
    let (mut n, mut j) = (String::new(), String::new());
    for g in 0..250 {
        n.push_str(&renumber(&nodes, g, 4));
        j.push_str(&renumber_jobs(&jobs, g, per_job));
    }
    (n, j)
}

fn scrape(c: &mut Criterion) {
    for release in ["22.05.8", "24.11.5"] {
        let (nodes_text, jobs_text) = data_set(release);
        let cluster = Cluster::read(&nodes_text, &jobs_text);
        // The renumbering kept every node distinct and every job's GPUs on its own nodes.
        let names: std::collections::HashSet<&str> =
            cluster.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names.len(), 1000);
        let held: usize = cluster.nodes.iter().map(|n| n.used.len()).sum();
        let by_jobs: usize = cluster
            .jobs
            .iter()
            .flat_map(|j| j.gpus.iter().map(|(_, s)| s.len()))
            .sum();
        assert_eq!(held, by_jobs, "GresUsed and the jobs' GPUs agree");
        let sample = render(Some(cluster), Format::OpenMetrics);
        eprintln!(
            "{release}: {} node and {} job records ({} KiB of scontrol text) -> {} series, {} KiB of OpenMetrics",
            nodes_text.lines().count(),
            jobs_text.lines().count(),
            (nodes_text.len() + jobs_text.len()) / 1024,
            sample.lines().filter(|l| !l.starts_with('#')).count(),
            sample.len() / 1024,
        );
        let mut g = c.benchmark_group(format!("scrape_1000_nodes/{release}"));
        g.measurement_time(Duration::from_secs(5)).sample_size(20);
        g.bench_function("gputopo_nodes_baseline", |b| {
            b.iter(|| nodes::render(black_box(&nodes_text), black_box(&jobs_text), 0, false))
        });
        g.bench_function("metrics_openmetrics", |b| {
            b.iter(|| {
                let c = Cluster::read(black_box(&nodes_text), black_box(&jobs_text));
                render(Some(c), Format::OpenMetrics)
            })
        });
        g.bench_function("metrics_prometheus_text", |b| {
            b.iter(|| {
                let c = Cluster::read(black_box(&nodes_text), black_box(&jobs_text));
                render(Some(c), Format::Prometheus)
            })
        });
        g.bench_function("read_only", |b| {
            b.iter(|| Cluster::read(black_box(&nodes_text), black_box(&jobs_text)))
        });
        g.finish();
    }
}

criterion_group!(benches, scrape);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
