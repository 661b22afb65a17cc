//! Cost of the select hook's pure decision loop at cluster scale: the health pre-filter, the
//! node ranking (`narrow::plan`) and the tries state machine (`tries::run`, against a fake
//! cons_tres that fails the first tier), over 1k and 10k candidate DGX-1V nodes with mixed
//! free GPUs and a faulty GPU on every 7th node. This is the per-call work that grows with
//! the candidate count (docs/select.md, "Scale"); the Slurm-side reads are measured by
//! contrib/bench-select.sh. `2gpu_job` asks the engine for every node's key on every call;
//! `2gpu_job_memo` takes them from the topology's `KeyMemo` as slurmctld does (warm: the
//! nodes' states were seen before); `2gpu_job_node_memo` first compares each node's state
//! with its last lookup (`KeyMemos::node_key`), as slurmctld does now: the plugin's
//! steady-state cost.
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use gputopo_core::GpuSet;
use gputopo_core::placement::engine::Gputopo;
use gputopo_core::steer::key_memo::KeyMemos;
use gputopo_core::steer::narrow::{self, Basis, Candidate, Need};
use gputopo_core::steer::tries::{self, Answer, Mode, Steering, Tries};
use gputopo_core::steer::{HealthMasks, Prepared};
use gputopo_core::topology::fixture;
use std::hint::black_box;

fn bench(c: &mut Criterion) {
    let topo = fixture::parse(include_str!("../contrib/topologies/dgx1v.topo"))
        .expect("contrib/topologies/dgx1v.topo parses (tested)");
    let engine = Gputopo::new();
    let handle = engine.handle(&topo).expect("8 GPUs have tables");
    let prepared = Prepared::new(&engine, [(&topo, handle.clone())]);
    let mut g = c.benchmark_group("steer_loop");
    for n in [1_000usize, 10_000] {
        let cands: Vec<Candidate<'_>> = (0..n)
            .map(|i| Candidate {
                node: i,
                topo: &topo,
                free: GpuSet::from_bits(((i as u32).wrapping_mul(2_654_435_761) >> 24) & 0xff),
                of_type: topo.all(),
                health: HealthMasks {
                    faulty: if i % 7 == 0 {
                        GpuSet::from_bits(1 << (i % 8))
                    } else {
                        GpuSet::EMPTY
                    },
                    degraded: GpuSet::EMPTY,
                },
                weight: 1 << 8,
                warm: GpuSet::EMPTY,
            })
            .collect();
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::new("2gpu_job", n), &cands, |b, cands| {
            b.iter(|| black_box(one_call(cands, |_, c| narrow::node_key(&prepared, c, 2))));
        });
        let memos = std::cell::RefCell::new(KeyMemos::default());
        g.bench_with_input(BenchmarkId::new("2gpu_job_memo", n), &cands, |b, cands| {
            b.iter(|| {
                let mut memos = memos.borrow_mut();
                black_box(one_call(cands, |_, c| {
                    memos
                        .for_tables(&handle)
                        .key(c, 2, || narrow::node_key(&prepared, c, 2))
                }))
            });
        });
        // As the plugin reads keys now: the node's last key per job size first, then the memo.
        let memos = std::cell::RefCell::new(KeyMemos::default());
        g.bench_with_input(
            BenchmarkId::new("2gpu_job_node_memo", n),
            &cands,
            |b, cands| {
                b.iter(|| {
                    let mut memos = memos.borrow_mut();
                    black_box(one_call(cands, |_, c| {
                        memos.node_key(c.node, &handle, c, 2, || narrow::node_key(&prepared, c, 2))
                    }))
                });
            },
        );
    }
    g.finish();
}

/// One `select_p_job_test`'s pure work: pre-filter, tiers (node keys from `key`), tries.
fn one_call(
    cands: &[Candidate<'_>],
    key: impl FnMut(usize, &Candidate<'_>) -> Option<narrow::NodeKey>,
) -> (tries::Outcome, usize) {
    let dropped = narrow::health_filter(cands, 2, Basis::FreeNow, &[]).dropped;
    let healthy: Vec<Candidate<'_>> = cands
        .iter()
        .filter(|c| !dropped.iter().any(|d| d.node == c.node))
        .cloned()
        .collect();
    let ranked: Vec<usize> = healthy.iter().map(|c| c.node).collect();
    let need = Need {
        gpus_per_node: 2,
        min_nodes: 1,
        required: vec![],
        max_calls: 3,
    };
    let steering = Steering {
        node_ranking: true,
        whole_node: false,
        preemption: false,
    };
    let tiers = tries::tiers(steering, &ranked, &[], &[], &[], || {
        narrow::plan_with(&healthy, &need, key).tiers
    });
    let excluded = dropped.iter().map(|d| d.node).collect();
    let mut first = true;
    tries::run(Tries::new(tiers, excluded, Mode::RunNow), |nodes| {
        black_box(nodes.len());
        if std::mem::take(&mut first) {
            Answer::Failed
        } else {
            Answer::Placed
        }
    })
}

criterion_group!(benches, bench);
criterion_main!(benches);
