//! Placement benchmarks: what the engine adds to slurmctld's `job_test` per node and per job.
//!
//! Budgets (issue 7): an 8-GPU decision is O(1) (a table lookup); a 16-GPU decision well under
//! 10 µs; ranking 10,000 nodes well under 1 ms. Every group runs the brute-force reference
//! (`exhaustive`, the test oracle) on the same inputs, so the speed-up is measured, not claimed.
//!
//! Run: `cargo bench -p gputopo-core --bench placement -- --quick` (figures in docs/perf-log.md).
//!
//! `gputopo` rows are the full answer ([`Gputopo::choose_on`]: the set and its objective),
//! `gputopo-pick` rows the decision alone ([`Gputopo::pick_on`], what the simulator and the
//! plugin's placer call). On a shared, loaded machine wall-clock figures swing by 2×, so the
//! same binary also counts instructions: with `GPUTOPO_COUNT=<case>:<n>` it runs only `n`
//! repetitions of one case (see [`count`]) and exits, for `valgrind --tool=callgrind`
//! (`contrib/bench-instructions.sh` runs it for this tree and an older commit side by side).

// `gputopo_old`: set by contrib/bench-instructions.sh when it builds this file against an
// older tree that lacks `Gputopo::pick_on`.
#![allow(unexpected_cfgs)]

use criterion::{BatchSize, BenchmarkId, Criterion, black_box, criterion_group};
use gputopo_core::GpuSet;
use gputopo_core::placement::{Exhaustive, Gputopo, Request, TopoTables, rank_nodes};
use gputopo_core::topology::{NodeTopology, fixture};
use std::sync::Arc;
use std::time::Duration;

/// The shared topology files (the `fixtures` module is test/feature-only; benches read the
/// same files directly).
mod fixtures {
    use super::{NodeTopology, fixture};

    fn parse(text: &str) -> NodeTopology {
        fixture::parse(text).expect("contrib/topologies files parse (tested)")
    }
    pub fn dgx1v() -> NodeTopology {
        parse(include_str!("../contrib/topologies/dgx1v.topo"))
    }
    pub fn hgx_h100() -> NodeTopology {
        parse(include_str!("../contrib/topologies/hgx-h100.topo"))
    }
    pub fn dgx2() -> NodeTopology {
        parse(include_str!("../contrib/topologies/dgx2.topo"))
    }
}

/// Deterministic xorshift stream.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// `count` requests on an `n`-GPU node: a random free mask holding at least `k` GPUs, a
/// random `k` in 1..=max_k, and `near` = one socket half when `with_near`.
fn cases(
    n: usize,
    max_k: usize,
    count: usize,
    with_near: bool,
    seed: u64,
) -> Vec<(GpuSet, Request)> {
    let mut rng = Rng(seed);
    let all = GpuSet::first_n(n).bits();
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        let free = GpuSet::from_bits(rng.next() as u32 & all);
        let k = 1 + (rng.next() as usize % max_k);
        if free.len() < k {
            continue;
        }
        let near = if with_near {
            GpuSet::from_bits(if rng.next() % 2 == 0 {
                all >> (n / 2)
            } else {
                all & !(all >> (n / 2))
            })
        } else {
            GpuSet::EMPTY
        };
        out.push((
            free,
            Request {
                count: k,
                required: GpuSet::EMPTY,
                near,
            },
        ));
    }
    out
}

/// The decision alone (`pick_on`; on an older tree without it, the full answer's set).
fn pick(t: &TopoTables, free: GpuSet, req: &Request) -> Option<GpuSet> {
    #[cfg(not(gputopo_old))]
    return Gputopo::pick_on(t, free, req);
    #[cfg(gputopo_old)]
    return Gputopo::choose_on(t, free, req).map(|c| c.gpus);
}

fn decisions(c: &mut Criterion, label: &str, topo: &NodeTopology, max_k: usize, brute: bool) {
    let engine = Gputopo::new();
    let handle = engine.handle(topo).expect("≤ 16 GPUs");
    let n = topo.len();
    for k in 1..=n {
        let _ = Gputopo::choose_on(&handle, topo.all(), &Request::new(k));
    }
    let mut g = c.benchmark_group(format!("decide/{label}"));
    for (name, near) in [("no-near", false), ("near-socket", true)] {
        let cs = cases(n, max_k, 256, near, 0x9E37_79B9_7F4A_7C15);
        g.bench_function(BenchmarkId::new("gputopo", name), |b| {
            b.iter(|| {
                for (free, req) in &cs {
                    black_box(Gputopo::choose_on(&handle, *free, req));
                }
            })
        });
        g.bench_function(BenchmarkId::new("gputopo-pick", name), |b| {
            b.iter(|| {
                for (free, req) in &cs {
                    black_box(pick(&handle, *free, req));
                }
            })
        });
        if brute {
            let few = &cs[..16];
            g.bench_function(BenchmarkId::new("exhaustive-x16", name), |b| {
                b.iter(|| {
                    for (free, req) in few {
                        black_box(Exhaustive::choose_detailed(topo, *free, req));
                    }
                })
            });
        }
    }
    // Cold search on > 8-GPU nodes: the memo is cleared before every batch of distinct
    // requests, so each decision runs the branch and bound.
    if n > 8 {
        for (name, near) in [("no-near", false), ("near-socket", true)] {
            let cs = cases(n, max_k, 256, near, 0xC01D);
            g.bench_function(BenchmarkId::new("gputopo-cold", name), |b| {
                b.iter_batched(
                    || handle.clear_memo(),
                    |()| {
                        for (free, req) in &cs {
                            black_box(pick(&handle, *free, req));
                        }
                    },
                    BatchSize::PerIteration,
                )
            });
        }
    }
    // With a required GPU (on ≤ 8 GPUs this is the branch and bound; above, memoised).
    let cs: Vec<(GpuSet, Request)> = cases(n, max_k, 256, false, 7)
        .into_iter()
        .map(|(free, mut req)| {
            req.required = GpuSet::from_bits(1 << free.bits().trailing_zeros());
            (free, req)
        })
        .collect();
    g.bench_function(BenchmarkId::new("gputopo", "required"), |b| {
        b.iter(|| {
            for (free, req) in &cs {
                black_box(Gputopo::choose_on(&handle, *free, req));
            }
        })
    });
    g.finish();
}

fn bench_decisions(c: &mut Criterion) {
    decisions(c, "8gpu-dgx1v-x256", &fixtures::dgx1v(), 8, true);
    decisions(c, "8gpu-hgx-h100-x256", &fixtures::hgx_h100(), 8, false);
    decisions(c, "16gpu-dgx2-x256", &fixtures::dgx2(), 8, true);
    decisions(c, "16gpu-random-x256", &random16(), 8, false);
}

/// A 16-GPU topology without symmetry: two 8-GPU hybrid cube meshes joined by NV1 links.
fn random16() -> NodeTopology {
    let mut t = fixtures::dgx2();
    let mut rng = Rng(42);
    for a in 0..16 {
        t.gpu_mut(a).expect("16 GPUs").switch_links = 0;
        for b in a + 1..16 {
            t.set_nvlinks(a, b, (rng.next() % 4) as u8)
                .expect("valid pair");
        }
    }
    t
}

fn bench_tables(c: &mut Criterion) {
    let mut g = c.benchmark_group("tables");
    g.sample_size(10);
    for (label, topo) in [
        ("8gpu-dgx1v", fixtures::dgx1v()),
        ("16gpu-dgx2", fixtures::dgx2()),
    ] {
        g.bench_function(BenchmarkId::new("build-base", label), |b| {
            b.iter(|| black_box(TopoTables::new(&topo)))
        });
        g.bench_function(BenchmarkId::new("build-all-k", label), |b| {
            b.iter(|| {
                let t = TopoTables::new(&topo).expect("≤ 16 GPUs");
                for k in 1..=topo.len() {
                    black_box(Gputopo::choose_on(&t, topo.all(), &Request::new(k)));
                }
            })
        });
    }
    g.finish();
}

fn bench_rank(c: &mut Criterion) {
    let engine = Gputopo::new();
    let topos = [fixtures::dgx1v(), fixtures::hgx_h100()];
    let handles: Vec<Arc<TopoTables>> = topos
        .iter()
        .map(|t| engine.handle(t).expect("8 GPUs"))
        .collect();
    let mut g = c.benchmark_group("rank");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(2));
    for nodes in [1_000usize, 10_000, 100_000] {
        let mut rng = Rng(nodes as u64);
        let cands: Vec<(Arc<TopoTables>, GpuSet)> = (0..nodes)
            .map(|i| {
                (
                    Arc::clone(&handles[i % 2]),
                    GpuSet::from_bits(rng.next() as u32 & 0xFF),
                )
            })
            .collect();
        // Warm the per-k tables once, as slurmctld would after its first job.
        black_box(rank_nodes(&cands, 4));
        g.bench_function(BenchmarkId::new("gputopo-k4", nodes), |b| {
            b.iter(|| black_box(rank_nodes(&cands, 4)))
        });
        let plain: Vec<(&NodeTopology, GpuSet)> = cands
            .iter()
            .enumerate()
            .map(|(i, (_, f))| (&topos[i % 2], *f))
            .collect();
        g.bench_function(BenchmarkId::new("exhaustive-k4", nodes), |b| {
            b.iter(|| black_box(Exhaustive::rank_nodes(&plain, 4)))
        });
    }
    g.finish();
}

criterion_group!(benches, bench_decisions, bench_tables, bench_rank);

/// Instruction-count mode: `GPUTOPO_COUNT=<case>:<n>` runs `n` repetitions of one case after
/// its setup (tables built, memo warm, or cleared for `16-cold`). Callgrind's total for `n`
/// minus its total for `0` divided by `n` is the cost of one repetition; cases are
/// `8` / `8-detailed` / `8-near` (one DGX-1V decision of the 256-case batch, no near /
/// full answer / near = socket), `8-near-hgx` (the same on HGX H100), `16-warm`, `16-cold` (DGX-2, pick) and `rank10k` (one
/// ranking of 10,000 DGX-1V and HGX H100 nodes, k = 4).
fn count(spec: &str) {
    let (case, n) = spec.split_once(':').unwrap_or((spec, "0"));
    let n: usize = n.parse().unwrap_or(0);
    let engine = Gputopo::new();
    let decide = |topo: &NodeTopology, near: bool, detailed: bool, cold: bool| {
        let handle = engine.handle(topo).expect("≤ 16 GPUs");
        let cs = cases(topo.len(), 8, 256, near, 0x9E37_79B9_7F4A_7C15);
        for (free, req) in &cs {
            black_box(Gputopo::choose_on(&handle, *free, req));
        }
        if cold {
            handle.clear_memo();
        }
        for i in 0..n {
            let (free, req) = &cs[i % cs.len()];
            if cold && i % cs.len() == 0 {
                handle.clear_memo();
            }
            if detailed {
                black_box(Gputopo::choose_on(&handle, *free, req));
            } else {
                black_box(pick(&handle, *free, req));
            }
        }
    };
    match case {
        "8" => decide(&fixtures::dgx1v(), false, false, false),
        "8-detailed" => decide(&fixtures::dgx1v(), false, true, false),
        "8-near" => decide(&fixtures::dgx1v(), true, false, false),
        "8-near-hgx" => decide(&fixtures::hgx_h100(), true, false, false),
        "16-warm" => decide(&fixtures::dgx2(), false, false, false),
        "16-cold" => decide(&fixtures::dgx2(), false, false, true),
        "rank10k" => {
            let topos = [fixtures::dgx1v(), fixtures::hgx_h100()];
            let handles: Vec<Arc<TopoTables>> = topos
                .iter()
                .map(|t| engine.handle(t).expect("8 GPUs"))
                .collect();
            let mut rng = Rng(10_000);
            let cands: Vec<(Arc<TopoTables>, GpuSet)> = (0..10_000)
                .map(|i| {
                    (
                        Arc::clone(&handles[i % 2]),
                        GpuSet::from_bits(rng.next() as u32 & 0xFF),
                    )
                })
                .collect();
            black_box(rank_nodes(&cands, 4));
            for _ in 0..n {
                black_box(rank_nodes(&cands, 4));
            }
        }
        other => eprintln!("GPUTOPO_COUNT: unknown case {other:?}"),
    }
}

fn main() {
    if let Ok(spec) = std::env::var("GPUTOPO_COUNT") {
        count(&spec);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
