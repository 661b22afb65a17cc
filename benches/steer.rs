//! Cost of the select hook's pure decision loop at cluster scale: the health pre-filter, the
//! node ranking (`narrow::plan`) and the tries state machine (`tries::run`, against a fake
//! cons_tres that fails the first tier), over 1k and 10k candidate DGX-1V nodes with mixed
//! free GPUs and a faulty GPU on every 7th node. This is the per-call work that grows with
//! the candidate count (docs/perf-log.md, "The decision loop at scale"); the Slurm-side reads are measured by
//! contrib/bench-select.sh. `2gpu_job` asks the engine for every node's key on every call;
//! `2gpu_job_memo` takes them from the topology's `KeyMemo` as slurmctld does (warm: the
//! nodes' states were seen before); `2gpu_job_node_memo` first compares each node's state
//! with its last lookup (`KeyMemos::node_key`); `2gpu_job_plan_memo` plans with the keys
//! where the memo keeps them (`narrow::plan_memo`), as the plugin's planning does now.
//! `steer_call/2gpu_job` is the whole path as the plugin runs it now (`call::Call` over a
//! snapshot, the judge of cons_tres's selection included).
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use gputopo_core::config::SelectConfig;
use gputopo_core::health::read_extra;
use gputopo_core::placement::{Gputopo, Prepared};
use gputopo_core::steer::HealthMasks;
use gputopo_core::steer::call::{
    self, Call, Chosen, Ctx, GpuNeed, GpuPicks, Gpus, JobFacts, Modelled, NodeState, Pick, Reply,
    Selection, Snapshot,
};
use gputopo_core::steer::key_memo::KeyMemos;
use gputopo_core::steer::model::NodeModel;
use gputopo_core::steer::narrow::{self, Basis, Candidate, Need};
use gputopo_core::steer::tries::{self, Answer, Mode, Steering, Tries};
use gputopo_core::topology::fixture;
use gputopo_core::{GpuSet, WideSet};
use std::hint::black_box;
use std::sync::Arc;

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
            b.iter(|| {
                black_box(one_call(cands, |healthy, need| {
                    narrow::plan_with(healthy, need, |_, c| narrow::node_key(&prepared, c, 2))
                }))
            });
        });
        let memos = std::cell::RefCell::new(KeyMemos::default());
        g.bench_with_input(BenchmarkId::new("2gpu_job_memo", n), &cands, |b, cands| {
            b.iter(|| {
                let mut memos = memos.borrow_mut();
                black_box(one_call(cands, |healthy, need| {
                    narrow::plan_with(healthy, need, |_, c| {
                        memos
                            .for_tables(&handle)
                            .key(c, 2, || narrow::node_key(&prepared, c, 2))
                    })
                }))
            });
        });
        // The node's last key per job size first, then the memo (the plugin before plan_memo).
        let memos = std::cell::RefCell::new(KeyMemos::default());
        g.bench_with_input(
            BenchmarkId::new("2gpu_job_node_memo", n),
            &cands,
            |b, cands| {
                b.iter(|| {
                    let mut memos = memos.borrow_mut();
                    black_box(one_call(cands, |healthy, need| {
                        narrow::plan_with(healthy, need, |_, c| {
                            memos.node_key(c.node, &handle, c, 2, || {
                                narrow::node_key(&prepared, c, 2)
                            })
                        })
                    }))
                });
            },
        );
        // As the plugin plans now: the same keys compared where the memo keeps them.
        let memos = std::cell::RefCell::new(KeyMemos::default());
        g.bench_with_input(
            BenchmarkId::new("2gpu_job_plan_memo", n),
            &cands,
            |b, cands| {
                b.iter(|| {
                    let mut memos = memos.borrow_mut();
                    black_box(one_call(cands, |healthy, need| {
                        narrow::plan_memo(
                            healthy,
                            need,
                            &mut memos,
                            |_| Some(&handle),
                            |_, c| narrow::node_key(&prepared, c, 2),
                        )
                    }))
                });
            },
        );
    }
    g.finish();
}

/// One `select_p_job_test`'s pure work: pre-filter, tiers (from `plan`), tries.
fn one_call(
    cands: &[Candidate<'_>],
    plan: impl FnOnce(&[Candidate<'_>], &Need) -> narrow::Plan,
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
        plan(&healthy, &need).tiers
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

/// The plugin's whole decision path per call since issue 14 item 5: `call::Call` over a
/// snapshot of N DGX-1V candidates (pre-filter, tiers with the node-memo keys, the tries,
/// and the judge of cons_tres's selection), against a fake cons_tres that fails the first
/// tier and then places the job on the lowest offered node that fits, lowest free GPUs.
fn bench_call(c: &mut Criterion) {
    let engine = Gputopo::new();
    let cfg = SelectConfig::default();
    let mut g = c.benchmark_group("steer_call");
    for n in [1_000usize, 10_000] {
        let snap = snapshot(&engine, n);
        let keys = std::cell::RefCell::new(KeyMemos::default());
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::new("2gpu_job", n), &snap, |b, snap| {
            b.iter(|| {
                let ctx = Ctx {
                    cfg: &cfg,
                    engine: &engine,
                    log: false,
                    multiple_sharing: false,
                };
                let started = Call::start(snap, ctx, &mut keys.borrow_mut());
                let mut first = true;
                black_box(call::run(
                    started,
                    |offer| fake_cons_tres(snap, offer, &mut first),
                    |_| {},
                ))
            });
        });
    }
    g.finish();
}

/// N DGX-1V candidates as the plugin reads them: free GPUs spread by a hash, a faulty GPU on
/// every 7th node (8 distinct models, shared as the plugin's cache shares one per node).
fn snapshot(engine: &Gputopo, n: usize) -> Snapshot {
    let topo = fixture::parse(include_str!("../contrib/topologies/dgx1v.topo"))
        .expect("contrib/topologies/dgx1v.topo parses (tested)");
    let models: Vec<Arc<NodeModel>> = (0..=8)
        .map(|f| {
            let health = (f < 8).then(|| {
                let json = format!(r#"{{"gputopo":{{"v":1,"gpus":[{{"i":{f},"s":"faulty"}}]}}}}"#);
                Arc::new(read_extra(&json).expect("valid").expect("ours").health)
            });
            let tables = engine.handle(&topo);
            Arc::new(NodeModel::new(
                topo.clone(),
                health,
                vec![(1, topo.all())],
                tables,
            ))
        })
        .collect();
    let nodes = (0..n)
        .map(|i| {
            let free = GpuSet::from_bits(((i as u32).wrapping_mul(2_654_435_761) >> 24) & 0xff);
            let model = if i % 7 == 0 {
                &models[i % 8]
            } else {
                &models[8]
            };
            NodeState {
                node: i,
                gpus: Gpus::Modelled(Modelled {
                    model: Arc::clone(model),
                    allocated: topo.all().difference(free),
                    shared_in_use: GpuSet::EMPTY,
                    count: 8,
                    weight: 1 << 8,
                }),
            }
        })
        .collect();
    let job = JobFacts {
        id: 1,
        mode: Mode::RunNow,
        need: Some(GpuNeed {
            per_node: 2,
            type_id: None,
            spread: false,
        }),
        shares: Vec::new(),
        min_nodes: 1,
        required: Vec::new(),
        whole_node: false,
        preemption: false,
        binding: false,
        reserved: false,
        per_socket: false,
    };
    Snapshot {
        job,
        nodes,
        sharing: Vec::new(),
        restricted: Vec::new(),
    }
}

/// Fails the first offer, then selects the lowest free pair on the lowest offered node.
fn fake_cons_tres(snap: &Snapshot, offer: &[usize], first: &mut bool) -> Reply {
    if std::mem::take(first) {
        return Reply::Failed;
    }
    for &n in offer {
        let Some(Gpus::Modelled(m)) = snap.node(n).map(|s| &s.gpus) else {
            continue;
        };
        let free = m.model.topo.all().difference(m.allocated);
        if free.len() >= 2 {
            let bits: WideSet = free.iter().take(2).collect();
            return Reply::Selected(Selection {
                nodes: vec![Chosen {
                    node: n,
                    near: WideSet::first_n(8),
                }],
                gpu: vec![GpuPicks {
                    request: 0,
                    type_id: None,
                    type_name: None,
                    on: vec![Pick {
                        takes_none: false,
                        bits: Some(bits),
                        width: 8,
                        count: 2,
                        reserved: None,
                    }],
                }],
                shared: Vec::new(),
            });
        }
    }
    Reply::Failed
}

criterion_group!(benches, bench, bench_call);
criterion_main!(benches);
