//! Simulator throughput: jobs replayed per second on a 200-node mixed cluster, for the
//! gputopo engine (node ranking + exact choice) and the stock-Slurm model (first-fit nodes).
//! The 10,000-node, 1M-job figures in docs/results.md come from `contrib/results.sh`.
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use gputopo_core::placement::engine::Gputopo;
use gputopo_core::topology::fixture;
use gputopo_eval::baseline::slurm_greedy::SlurmGreedy;
use gputopo_eval::sim::generator::Synthetic;
use gputopo_eval::sim::{ClusterSpec, Config, Placement, simulate};

fn bench(c: &mut Criterion) {
    let parse = |s: &str| fixture::parse(s).expect("fixture parses");
    let spec = ClusterSpec {
        groups: vec![
            (150, parse(include_str!("../contrib/topologies/dgx1v.topo"))),
            (
                50,
                parse(include_str!("../contrib/topologies/hgx-h100.topo")),
            ),
        ],
    };
    let jobs = Synthetic::new(20_000, 1).generate(spec.gpu_count());
    let engine = Gputopo::new();
    let cfg = Config::default();
    let mut g = c.benchmark_group("simulate_200_nodes_20k_jobs");
    g.sample_size(10);
    g.throughput(Throughput::Elements(jobs.len() as u64));
    g.bench_function("gputopo", |b| {
        b.iter(|| simulate(&spec, &jobs, &[], Placement::Gputopo, &engine, &cfg))
    });
    let sg = SlurmGreedy::V24_11;
    g.bench_function("slurm-greedy", |b| {
        b.iter(|| simulate(&spec, &jobs, &[], Placement::Baseline(&sg), &engine, &cfg))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
