//! Rank keys, remembered per topology and node state instead of computed per call.
//!
//! [`super::narrow::node_key`] asks the engine for the node's best set: per candidate node
//! on every `select_p_job_test` call, the largest per-node cost of node steering. With the
//! engine's tables the key depends only on those tables (interned by the decision-relevant
//! topology, so every node of one kind shares them: `placement::tables`) and on the
//! candidate's free GPUs, health, warm GPUs and weight and the job's GPUs per node; the
//! weight only as the key's leading field, which a remembered key takes from the candidate,
//! so the state remembered leaves it out ([`NodeKey::set_weight`]). So [`KeyMemos`] keeps
//! one [`KeyMemo`] per set of tables, and the engine runs once per distinct state seen on
//! any node of that kind, not once per node per call. Bounded: a full memo starts over.
//!
//! Most nodes' state does not change between two calls, so [`KeyMemos::node_key`] first
//! compares the node's state with the one it had at its last lookup (a few words, no hash)
//! and reuses that key; only a node whose state moved probes the memo.
//! [`KeyMemos::node_key_ref`] lends the key where it is kept, for a caller that only
//! compares it ([`super::narrow::plan_memo`]).

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use super::narrow::{Candidate, NodeKey};
use crate::fast_hash::FastHash;
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
mod tests;
