//! Cost of the preemption victim choice (`steer::victims::choose`, issue 15) at scale: it
//! runs in every RUN_NOW and WILL_RUN call (backfill's planning included) that offers
//! preemption candidates for a one-node GPU job, over every offered node that holds one.
//! Nodes full of low-priority 1- and 2-GPU jobs (the worst case: every GPU is a candidate's),
//! mixed ranks, a pinned or idle GPU on some nodes so the nodes differ: 8-GPU DGX-1V nodes
//! with a 4-GPU preemptor (C(8,4) = 70 sets per node), 16-GPU DGX-2 nodes with an 8-GPU one
//! (C(16,8) = 12,870). Numbers in docs/perf-log.md ("Victim search cost").
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use gputopo_core::GpuSet;
use gputopo_core::placement::engine::Gputopo;
use gputopo_core::steer::HealthMasks;
use gputopo_core::steer::victims::{Candidate, VictimNode, choose};
use gputopo_core::topology::{NodeTopology, fixture};
use std::hint::black_box;

/// `nodes` nodes of `topo`, each full of candidates; returns (nodes, candidates).
fn cluster(topo: &NodeTopology, nodes: usize) -> (Vec<VictimNode<'_>>, Vec<Candidate>) {
    let n = topo.len();
    let mut cands = Vec::new();
    let mut vn = Vec::new();
    for node in 0..nodes {
        let h = (node as u32).wrapping_mul(2_654_435_761);
        // Every 5th node: one GPU held by a job that is not a candidate; every 7th: one idle.
        let pinned = if node % 5 == 0 {
            GpuSet::from_bits(1 << (h as usize % n))
        } else {
            GpuSet::EMPTY
        };
        let idle = if node % 7 == 0 {
            GpuSet::from_bits(1 << ((h as usize >> 8) % n)).difference(pinned)
        } else {
            GpuSet::EMPTY
        };
        let mut g = 0;
        while g < n {
            let two = (h >> (g % 24)) & 1 == 1 && g + 1 < n;
            let gpus: GpuSet = if two {
                [g, g + 1].into_iter().collect()
            } else {
                [g].into_iter().collect()
            };
            let gpus = gpus.difference(pinned).difference(idle);
            if !gpus.is_empty() {
                cands.push(Candidate {
                    job: cands.len() as u32 + 1,
                    rank: u64::from((h >> g) & 1) + (node % 3) as u64,
                    node,
                    gpus,
                });
            }
            g += if two { 2 } else { 1 };
        }
        vn.push(VictimNode {
            index: node,
            topo,
            pinned,
            idle,
            health: HealthMasks::ALL_OK,
        });
    }
    (vn, cands)
}

fn bench(c: &mut Criterion) {
    let engine = Gputopo::new();
    let mut g = c.benchmark_group("victims_choose");
    g.sample_size(10);
    for (name, need, sizes) in [("dgx1v", 4, [64usize, 512]), ("dgx2", 8, [4, 32])] {
        let path = format!(
            "{}/../../contrib/topologies/{name}.topo",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).expect("a topology fixture");
        let topo = fixture::parse(&text).expect("the fixture parses (tested)");
        for nodes in sizes {
            let (vn, cands) = cluster(&topo, nodes);
            g.throughput(Throughput::Elements(nodes as u64));
            let id = BenchmarkId::new(format!("{name}_{need}gpu_job"), nodes);
            g.bench_with_input(id, &(vn, cands), |b, (vn, cands)| {
                b.iter(|| black_box(choose(&engine, vn, cands, need)));
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
