//! Memo lookups against the engine's keys: plans, reuse of a node's last key, bounds.

use super::*;
use crate::GpuSet;
use crate::placement::{Gputopo, Prepared};
use crate::steer::HealthMasks;
use crate::steer::narrow::{self, Need};
use crate::steer::oracle::dgx1v;

fn cand(topo: &crate::topology::NodeTopology, node: usize, free: u32) -> Candidate<'_> {
    Candidate {
        node,
        topo,
        free: GpuSet::from_bits(free),
        of_type: topo.all(),
        health: HealthMasks {
            faulty: GpuSet::from_bits(if node % 3 == 0 { 1 } else { 0 }),
            degraded: GpuSet::from_bits(if node % 4 == 0 { 2 } else { 0 }),
        },
        weight: 1 << 8,
        warm: GpuSet::from_bits(if node % 5 == 0 { 0x0c } else { 0 }),
    }
}

#[test]
fn remembered_keys_give_the_engines_plan() {
    let t = dgx1v();
    let engine = Gputopo::new();
    let h = engine.handle(&t).expect("8 GPUs have tables");
    let prepared = Prepared::new(&engine, [(&t, h.clone())]);
    let cands: Vec<_> = (0..40)
        .map(|i| cand(&t, i, (i as u32).wrapping_mul(2_654_435_761) >> 24))
        .collect();
    let mut memos = KeyMemos::default();
    for k in [1, 2, 4] {
        let need = Need {
            gpus_per_node: k,
            min_nodes: 1,
            required: vec![],
            max_calls: 3,
        };
        let want = narrow::plan(&prepared, &cands, &need);
        for round in 0..2 {
            let mut computed = 0;
            let got = narrow::plan_with(&cands, &need, |_, c| {
                memos.for_tables(&h).key(c, k, || {
                    computed += 1;
                    narrow::node_key(&prepared, c, k)
                })
            });
            assert_eq!(got, want, "k={k}");
            if round == 1 {
                assert_eq!(computed, 0, "second round from memory, k={k}");
            }
        }
    }
}

/// `plan_memo` (keys compared where the memo keeps them, nodes without tables computed)
/// gives `plan`'s tries, for one- and multi-node jobs, with required nodes, as nodes'
/// states move between calls; a state seen before is never computed again.
#[test]
fn plan_memo_gives_the_engines_plan() {
    let t = dgx1v();
    let engine = Gputopo::new();
    let h = engine.handle(&t).expect("8 GPUs have tables");
    let prepared = Prepared::new(&engine, [(&t, h.clone())]);
    let mut memos = KeyMemos::default();
    let mut seed = 7u32;
    let mut next = || {
        seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        seed >> 8
    };
    for call in 0..60 {
        let n = 1 + (next() % 40) as usize;
        // Weights move as Slurm rewrites their low byte per job tested.
        let cands: Vec<_> = (0..n)
            .map(|i| {
                let mut c = cand(&t, 3 * i + (call % 2), next() & 0xff);
                c.weight = (u64::from(next() % 3) << 8) | u64::from(next() & 3);
                c
            })
            .collect();
        let need = Need {
            gpus_per_node: 1 + (next() % 4) as usize,
            min_nodes: 1 + (next() % 3) as usize,
            required: match next() % 4 {
                0 => vec![cands[(next() as usize) % n].node],
                _ => vec![],
            },
            max_calls: 1 + (next() % 3) as usize,
        };
        let want = narrow::plan(&prepared, &cands, &need);
        for round in 0..2 {
            let mut computed = 0;
            let got = narrow::plan_memo(
                &cands,
                &need,
                &mut memos,
                |i| (i % 7 != 3).then_some(&h),
                |_, c| {
                    computed += 1;
                    narrow::node_key(&prepared, c, need.gpus_per_node)
                },
            );
            assert_eq!(got, want, "call {call} round {round}");
            if round == 1 && need.gpus_per_node > 0 && need.max_calls > 1 {
                let untabled = (0..n).filter(|i| i % 7 == 3).count();
                assert_eq!(computed, untabled, "second round from memory");
            }
        }
    }
}

#[test]
fn a_nodes_last_key_is_reused_only_for_the_same_tables_and_state() {
    let t = dgx1v();
    let engine = Gputopo::new();
    let h = engine.handle(&t).expect("tables");
    let other = Gputopo::new().handle(&t).expect("tables");
    let prepared = Prepared::new(&engine, [(&t, h.clone())]);
    let mut memos = KeyMemos::default();
    let computed = std::cell::Cell::new(0);
    let key = |memos: &mut KeyMemos, node, tables: &TopoHandle, c: &Candidate<'_>| {
        memos.node_key(node, tables, c, 2, || {
            computed.set(computed.get() + 1);
            narrow::node_key(&prepared, c, 2)
        })
    };
    let c = cand(&t, 3, 0xf0);
    let first = key(&mut memos, 3, &h, &c);
    assert_eq!(first, narrow::node_key(&prepared, &c, 2));
    assert_eq!(
        key(&mut memos, 3, &h, &c),
        first,
        "same state: the last key"
    );
    assert_eq!(computed.get(), 1);
    // A moved state is looked up again (and computed: the memo has not seen it).
    let busy = Candidate {
        free: GpuSet::from_bits(0x30),
        ..c
    };
    let moved = key(&mut memos, 3, &h, &busy);
    assert_eq!(moved, narrow::node_key(&prepared, &busy, 2));
    assert_eq!(computed.get(), 2);
    // Other tables (a rebuilt model) never take the last key; the memo of those tables
    // has not seen the state either.
    key(&mut memos, 3, &other, &busy);
    assert_eq!(computed.get(), 3);
    // Back to the first state: from the memo of `h`, not computed.
    assert_eq!(key(&mut memos, 3, &h, &c), first);
    assert_eq!(computed.get(), 3);
    // A node index past the bound is served by the memo alone.
    assert_eq!(key(&mut memos, KeyMemos::NODES, &h, &c), first);
    assert!(memos.last.len() <= KeyMemos::NODES * KeyMemos::SLOTS);
    // Jobs of another size have their own entry: alternating sizes reuse both.
    let four = |memos: &mut KeyMemos| {
        memos.node_key(3, &h, &c, 4, || {
            computed.set(computed.get() + 1);
            narrow::node_key(&prepared, &c, 4)
        })
    };
    let before = computed.get();
    let k4 = four(&mut memos);
    assert_eq!(k4, narrow::node_key(&prepared, &c, 4));
    assert_eq!(key(&mut memos, 3, &h, &c), first);
    assert_eq!(four(&mut memos), k4);
    assert_eq!(computed.get(), before + 1);
}

#[test]
fn nodes_of_one_kind_share_a_memo_and_the_topologies_are_bounded() {
    let t = dgx1v();
    let engine = Gputopo::new();
    let h = engine.handle(&t).expect("tables");
    let mut memos = KeyMemos::default();
    let c = cand(&t, 1, 0xf0);
    let computed = std::cell::Cell::new(0);
    for node in [1, 5] {
        memos.for_tables(&h).key(&Candidate { node, ..c }, 2, || {
            computed.set(computed.get() + 1);
            None
        });
    }
    assert_eq!((computed.get(), memos.len()), (1, 1), "one kind, one memo");
    // Each engine interns its own tables: distinct handles of one topology.
    let others: Vec<_> = (0..=KeyMemos::TOPOLOGIES)
        .filter_map(|_| Gputopo::new().handle(&t))
        .collect();
    for x in &others {
        memos.for_tables(x);
    }
    assert!(memos.len() <= KeyMemos::TOPOLOGIES);
    assert!(!memos.is_empty());
}

#[test]
fn any_input_change_is_a_new_state_and_the_memo_is_bounded() {
    let t = dgx1v();
    let mut memo = KeyMemo::default();
    let calls = std::cell::Cell::new(0);
    let key = |memo: &mut KeyMemo, c: &Candidate<'_>, k| {
        memo.key(c, k, || {
            calls.set(calls.get() + 1);
            None
        })
    };
    let c = cand(&t, 1, 0xff);
    key(&mut memo, &c, 2);
    key(&mut memo, &c, 2);
    key(&mut memo, &c, 3);
    key(
        &mut memo,
        &Candidate {
            free: GpuSet::from_bits(0x0f),
            ..c
        },
        2,
    );
    let sick = HealthMasks {
        faulty: GpuSet::from_bits(4),
        degraded: GpuSet::EMPTY,
    };
    key(&mut memo, &Candidate { health: sick, ..c }, 2);
    let warm = GpuSet::from_bits(1);
    key(&mut memo, &Candidate { warm, ..c }, 2);
    assert_eq!(calls.get(), 5);
    // The weight is no state: the remembered key comes back with the new weight.
    let t4 = |memo: &mut KeyMemo, c: &Candidate<'_>| {
        memo.key(c, 4, || {
            calls.set(calls.get() + 1);
            narrow::node_key(&Prepared::new(&Gputopo::new(), []), c, 4)
        })
    };
    let light = t4(&mut memo, &c);
    let heavy = Candidate {
        weight: 7 << 16,
        ..c
    };
    let got = t4(&mut memo, &heavy).expect("8 free GPUs take 4");
    assert_eq!(calls.get(), 6);
    assert_eq!(got.weight(), 7 << 16);
    assert_eq!(
        Some(got),
        narrow::node_key(&Prepared::new(&Gputopo::new(), []), &heavy, 4)
    );
    assert_eq!(t4(&mut memo, &c), light);
    for free in 0..(KeyMemo::CAPACITY as u32 + 10) {
        key(
            &mut memo,
            &Candidate {
                free: GpuSet::from_bits(free),
                ..c
            },
            9,
        );
    }
    assert!(memo.len() <= KeyMemo::CAPACITY);
}
