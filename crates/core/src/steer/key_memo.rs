//! Rank keys, remembered per topology and node state instead of computed per call.
//!
//! [`super::narrow::node_key`] asks the engine for the node's best set: per candidate node
//! on every `select_p_job_test` call, the largest per-node cost of node steering. With the
//! engine's tables the key depends only on those tables (interned by the decision-relevant
//! topology, so every node of one kind shares them: `placement::tables`) and on the
//! candidate's free GPUs, health, warm GPUs, weight and the job's GPUs per node. So [`KeyMemos`] keeps
//! one [`KeyMemo`] per set of tables, and the engine runs once per distinct state seen on
//! any node of that kind, not once per node per call. Bounded: a full memo starts over.
//!
//! Most nodes' state does not change between two calls, so [`KeyMemos::node_key`] first
//! compares the node's state with the one it had at its last lookup (a few words, no hash)
//! and reuses that key; only a node whose state moved probes the memo.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use super::fast_hash::FastHash;
use super::narrow::{Candidate, NodeKey};
use crate::placement::TopoHandle;

/// One [`KeyMemo`] per set of engine tables, found by the tables' address; each entry holds
/// its tables, so the address cannot be reused by others while the entry lives.
#[derive(Debug, Default)]
pub struct KeyMemos {
    /// Searched by address, most recently added first: a cluster has a few kinds of node
    /// ([`Self::TOPOLOGIES`] at most), so a scan of pointers costs less than a hash.
    by_tables: Vec<(TopoHandle, KeyMemo)>,
    /// By node index and GPUs per node ([`Self::SLOTS`] per node): the tables, state and
    /// key of the node's last lookup for jobs of that size. Holding the tables keeps their
    /// address from being reused by others while the entry lives.
    last: Vec<Last>,
}

/// A node's last lookup for one job size ([`KeyMemos::node_key`]); `tables` is `None` in a
/// slot never used.
#[derive(Clone, Debug, Default)]
struct Last {
    tables: Option<TopoHandle>,
    input: Input,
    key: Option<NodeKey>,
}

impl KeyMemos {
    /// Most topologies remembered; past it every memo is dropped.
    pub const TOPOLOGIES: usize = 64;

    /// Node indices below this get last-lookup entries ([`Self::node_key`]); others only the
    /// memo (a bound on memory, above any cluster's node count).
    pub const NODES: usize = 1 << 16;

    /// Last-lookup entries per node: one per job size of 1 to `SLOTS` GPUs per node (a
    /// scheduler pass mixes job sizes; larger jobs share the last slot).
    pub const SLOTS: usize = 8;

    /// The key of node `node` (candidate `c`, engine tables `tables`) for `gpus_per_node`
    /// GPUs: the node's last key when its tables and state are the same as then, else from
    /// the memo of its tables ([`KeyMemo::key`]), else `compute`d.
    pub fn node_key(
        &mut self,
        node: usize,
        tables: &TopoHandle,
        c: &Candidate<'_>,
        gpus_per_node: usize,
        compute: impl FnOnce() -> Option<NodeKey>,
    ) -> Option<NodeKey> {
        self.node_key_ref(node, tables, c, gpus_per_node, compute)
            .copied()
    }

    /// [`Self::node_key`], borrowed from the memo (no copy of the key for a caller that
    /// only compares it: [`super::narrow::plan_memo`]). Inlined: it runs for every candidate
    /// on every call, and its unchanged-node path is a few instructions.
    #[inline(always)]
    pub fn node_key_ref(
        &mut self,
        node: usize,
        tables: &TopoHandle,
        c: &Candidate<'_>,
        gpus_per_node: usize,
        compute: impl FnOnce() -> Option<NodeKey>,
    ) -> Option<&NodeKey> {
        let input = input(c, gpus_per_node);
        let slot = node * Self::SLOTS + gpus_per_node.clamp(1, Self::SLOTS) - 1;
        let same = self.last.get(slot).is_some_and(|e| {
            e.input == input && e.tables.as_ref().map(Arc::as_ptr) == Some(Arc::as_ptr(tables))
        });
        if same {
            return weighed(&mut self.last[slot].key, c.weight);
        }
        self.node_key_moved(node, slot, tables, c, input, gpus_per_node, compute)
    }

    /// [`Self::node_key_ref`] for a node whose state moved since its last lookup (or that
    /// has none): from the memo of its tables, which becomes its last key. Kept out of line,
    /// so the lookup of an unchanged node (most of them) stays a few instructions.
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn node_key_moved(
        &mut self,
        node: usize,
        slot: usize,
        tables: &TopoHandle,
        c: &Candidate<'_>,
        input: Input,
        gpus_per_node: usize,
        compute: impl FnOnce() -> Option<NodeKey>,
    ) -> Option<&NodeKey> {
        if node >= Self::NODES {
            return self.for_tables(tables).key_ref(c, gpus_per_node, compute);
        }
        let key = self.for_tables(tables).key(c, gpus_per_node, compute);
        if self.last.len() <= slot {
            self.last.resize((node + 1) * Self::SLOTS, Last::default());
        }
        let e = &mut self.last[slot];
        *e = Last {
            tables: Some(Arc::clone(tables)),
            input,
            key,
        };
        weighed(&mut e.key, c.weight)
    }

    /// The memo of the nodes whose tables are `tables`.
    pub fn for_tables(&mut self, tables: &TopoHandle) -> &mut KeyMemo {
        let found = self
            .by_tables
            .iter()
            .rposition(|(t, _)| Arc::ptr_eq(t, tables));
        let i = match found {
            Some(i) => i,
            None => {
                if self.by_tables.len() >= Self::TOPOLOGIES {
                    self.by_tables.clear();
                }
                self.by_tables
                    .push((Arc::clone(tables), KeyMemo::default()));
                self.by_tables.len() - 1
            }
        };
        &mut self.by_tables[i].1
    }

    /// Topologies remembered.
    pub fn len(&self) -> usize {
        self.by_tables.len()
    }

    /// True when nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.by_tables.is_empty()
    }
}

/// What a key depends on besides the topology and the node's weight, as words compared at
/// once: free, faulty, degraded and warm GPU masks, GPUs per node. The weight enters the key
/// only as its leading field ([`NodeKey::set_weight`]; the engine's choice does not see it),
/// so a remembered key is given the candidate's weight on the way out ([`weighed`]): Slurm
/// rewrites the low byte of a node's `sched_weight` for each job cons_tres tests, which
/// would otherwise make an unchanged node a new state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Input([u64; 3]);

impl Hash for Input {
    /// One word at a time (a `[u64]`'s own `Hash` feeds the hasher bytes).
    fn hash<H: Hasher>(&self, state: &mut H) {
        for w in self.0 {
            state.write_u64(w);
        }
    }
}

/// The [`Input`] of candidate `c` for `gpus_per_node` GPUs (one definition for the memo and
/// the last-lookup entries, so both see every input).
fn input(c: &Candidate<'_>, gpus_per_node: usize) -> Input {
    let pair =
        |a: crate::GpuSet, b: crate::GpuSet| (u64::from(a.bits()) << 32) | u64::from(b.bits());
    Input([
        pair(c.free, c.health.faulty),
        pair(c.health.degraded, c.warm),
        gpus_per_node as u64,
    ])
}

/// A remembered key, given the weight `weight` of the candidate it is for.
fn weighed(key: &mut Option<NodeKey>, weight: u64) -> Option<&NodeKey> {
    let k = key.as_mut()?;
    k.set_weight(weight);
    Some(k)
}

/// Rank keys of the nodes of one topology by candidate state. See the module docs.
#[derive(Debug, Default)]
pub struct KeyMemo {
    keys: HashMap<Input, Option<NodeKey>, FastHash>,
}

impl KeyMemo {
    /// Most states remembered; past it the memo is emptied (a DGX node sees a few dozen).
    pub const CAPACITY: usize = 512;

    /// The key of `c` for `gpus_per_node` GPUs: remembered, or `compute`d and remembered.
    /// `c`'s engine tables must be the memo's ([`KeyMemos::for_tables`]).
    pub fn key(
        &mut self,
        c: &Candidate<'_>,
        gpus_per_node: usize,
        compute: impl FnOnce() -> Option<NodeKey>,
    ) -> Option<NodeKey> {
        self.key_ref(c, gpus_per_node, compute).copied()
    }

    /// [`Self::key`], borrowed from the memo.
    pub fn key_ref(
        &mut self,
        c: &Candidate<'_>,
        gpus_per_node: usize,
        compute: impl FnOnce() -> Option<NodeKey>,
    ) -> Option<&NodeKey> {
        let input = input(c, gpus_per_node);
        if self.keys.len() >= Self::CAPACITY && !self.keys.contains_key(&input) {
            self.keys.clear();
        }
        weighed(self.keys.entry(input).or_insert_with(compute), c.weight)
    }

    /// States remembered.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True when nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GpuSet;
    use crate::placement::engine::Gputopo;
    use crate::steer::narrow::{self, Need};
    use crate::steer::oracle::dgx1v;
    use crate::steer::{HealthMasks, Prepared};

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
}
