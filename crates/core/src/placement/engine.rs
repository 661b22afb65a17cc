//! `gputopo`: the exact, fast GPU-set choice that slurmctld, the simulator and `gputopo pick`
//! share.
//!
//! # What it maximises
//! The objective is defined (with its reasoning and numbers) in [`super::objective`]. In
//! short, lexicographically: (a) the set's communication quality, bottleneck then aggregate of
//! a per-pair GB/s estimate (`25 × NVLinks` for an NVLink pair, else the PCIe level's figure,
//! so any NVLink beats every PCIe path, and SB > PIX > PXB > PHB > NODE > SYS); (b) the
//! lookahead ([`super::lookahead`]): what the GPUs left free are still worth at every size the
//! node can serve, largest first, then their best pairing; (c) affinity to the job's cores
//! (`Request::near`); (d) the lowest set.
//!
//! # Known answers
//! The table of known answers and the deliberate differences from go-gpuallocator are in
//! `docs/engine.md` and tested in `tests` below and in `crates/agent/tests/pick.rs`.
//!
//! # How it is exact and fast
//! Per distinct topology (interned by pair values in a [`TableCache`]) we precompute every
//! subset's quality, leftover pairing and lookahead rank, and per request size the best
//! same-size subset of every mask; on ≤ 8-GPU nodes also the whole decision per free mask
//! ([`super::tables`]). A decision is then a table lookup (≤ 8 GPUs) or a branch and bound
//! whose bounds are table lookups (≤ 16 GPUs, `super::search`). [`Gputopo::pick_on`] returns
//! the set alone; [`Gputopo::choose_on`] also assembles its [`Objective`], which costs more
//! than the decision on small nodes. `docs/perf-log.md` has the measured figures.
//!
//! Above 16 GPUs per node (none ship today) no tables are built and a heuristic is used
//! ([`super::heuristic`]: multi-start greedy growth plus swaps on the set's own quality; its
//! measured gap to the optimum is in `docs/engine.md`). It is not exact and reports no lookahead
//! in its [`Objective`]; callers see the same `gputopo` policy.

use std::borrow::Cow;
use std::collections::HashMap;

use super::objective::{self, Objective};
use super::score::Score;
use super::search::decide;
use super::tables::{TableCache, TopoHandle, TopoTables};
use super::{Policy, Request};
use crate::fast_hash::FastHash;
use crate::gpuset::GpuSet;
use crate::topology::NodeTopology;

/// A chosen set and its objective value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Choice {
    /// The GPUs to allocate.
    pub gpus: GpuSet,
    /// The objective value of that choice (quality, lookahead, near).
    pub objective: Objective,
}

/// The `gputopo` policy: exact under [`super::objective`] up to 16 GPUs per node.
///
/// Holds an interning [`TableCache`]; share one instance (it is `Sync`) so identical nodes
/// share tables.
#[derive(Debug, Default)]
pub struct Gputopo {
    cache: TableCache,
}

impl Gputopo {
    /// A policy with an empty table cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// The interned tables of `topo` (built on first sight), or `None` above 16 GPUs. Callers
    /// that decide often on the same node (slurmctld, the simulator) keep the handle and call
    /// [`Gputopo::choose_on`] / [`super::rank::rank_nodes`] with it.
    pub fn handle(&self, topo: &NodeTopology) -> Option<TopoHandle> {
        self.cache.handle(topo)
    }

    /// Number of distinct topologies whose tables are held.
    pub fn distinct_topologies(&self) -> usize {
        self.cache.len()
    }

    /// [`Prepared::choose_detailed`] on tables the caller already holds.
    pub fn choose_on(tables: &TopoTables, free: GpuSet, req: &Request) -> Option<Choice> {
        let gpus = Self::pick_on(tables, free, req)?;
        Some(Choice {
            gpus,
            objective: tables.objective(free, gpus, req.near),
        })
    }
}

impl Gputopo {
    /// The decision alone: the set [`Gputopo::choose_on`] returns, without its [`Objective`].
    ///
    /// The objective (the leftover per size, the loss) explains a choice; building it costs
    /// more than the choice itself on ≤ 8-GPU nodes, where the choice is one table load. So
    /// callers that only allocate (the simulator, [`Policy::choose`], the plugin's re-pick)
    /// call this, and ask [`TopoTables::objective`] for the details of a set when they want
    /// them (`gputopo pick`, node ranking keys).
    pub fn pick_on(tables: &TopoTables, free: GpuSet, req: &Request) -> Option<GpuSet> {
        // The common case first: ≤ 8 GPUs, no `required`, no `near` among the free GPUs: the
        // tier's first set (what `decide` returns there too), one load.
        let f = free.bits() & tables.all_bits();
        let k = req.count;
        if req.required.is_empty()
            && req.near.bits() & f == 0
            && k > 0
            && f.count_ones() as usize >= k
        {
            if let Some(tiers) = tables.tiers(k) {
                return Some(GpuSet::from_bits(u32::from(tiers.first(f))));
            }
        }
        decide(
            tables,
            free.bits(),
            req.count,
            req.required.bits(),
            req.near.bits(),
        )
        .map(|d| GpuSet::from_bits(d.set))
    }
}

/// The engine with no tables at hand: each topology's come from its interning cache.
impl Policy for Gputopo {
    type Score = Score;

    fn name(&self) -> &'static str {
        "gputopo"
    }

    fn choose(&self, topo: &NodeTopology, free: GpuSet, req: &Request) -> Option<GpuSet> {
        Prepared::new(self, []).choose(topo, free, req)
    }

    fn score(&self, topo: &NodeTopology, set: GpuSet) -> Score {
        score(topo, set)
    }
}

/// The engine with the tables of known topologies at hand, by topology identity (address):
/// the one place that decides which path a choice takes (the node's tables, the engine's
/// interning cache, or the heuristic above 16 GPUs).
///
/// slurmctld keeps each node's interned tables with its per-node model and builds one per
/// decision round, so a decision is a table lookup without re-deriving the topology's key on
/// every call. Build it from topologies the caller keeps alive for the round, so an address
/// cannot be reused by another topology meanwhile; unknown topologies fall back to the
/// engine's own (interning) path, so a miss is only slower, never different.
#[derive(Debug)]
pub struct Prepared<'a> {
    engine: &'a Gputopo,
    /// Keyed by address, hashed with [`FastHash`]: the map is built and probed for every
    /// candidate node on every `select_p_job_test` call, where the default SipHash cost more
    /// than the engine's table lookup itself.
    tables: HashMap<usize, TopoHandle, FastHash>,
}

impl<'a> Prepared<'a> {
    /// The engine with `tables` (each topology with its handle from [`Gputopo::handle`]);
    /// `Prepared::new(&engine, [])` knows none.
    pub fn new<'t>(
        engine: &'a Gputopo,
        tables: impl IntoIterator<Item = (&'t NodeTopology, TopoHandle)>,
    ) -> Self {
        Prepared {
            engine,
            tables: tables
                .into_iter()
                .map(|(t, h)| (std::ptr::from_ref(t) as usize, h))
                .collect(),
        }
    }

    /// The engine's choice with its objective value (the leftover per size, the loss), which
    /// explains it (`gputopo pick`) and ranks nodes ([`super::RankKey`]); `None` when the
    /// request cannot be met (fewer than `req.count` free GPUs, `required` not free, or more
    /// required than count).
    pub fn choose_detailed(
        &self,
        topo: &NodeTopology,
        free: GpuSet,
        req: &Request,
    ) -> Option<Choice> {
        match self.tables_of(topo) {
            Some(h) => Gputopo::choose_on(&h, free, req),
            None => heuristic(topo, free, req),
        }
    }

    /// The tables of `topo`: the round's (borrowed: no reference count on the hot path),
    /// else the engine's cache; `None` above 16 GPUs.
    fn tables_of(&self, topo: &NodeTopology) -> Option<Cow<'_, TopoHandle>> {
        match self.tables.get(&(std::ptr::from_ref(topo) as usize)) {
            Some(h) => Some(Cow::Borrowed(h)),
            None => self.engine.handle(topo).map(Cow::Owned),
        }
    }
}

impl Policy for Prepared<'_> {
    type Score = Score;

    fn name(&self) -> &'static str {
        "gputopo"
    }

    fn choose(&self, topo: &NodeTopology, free: GpuSet, req: &Request) -> Option<GpuSet> {
        match self.tables_of(topo) {
            Some(h) => Gputopo::pick_on(&h, free, req),
            None => super::heuristic::choose(topo, free, req),
        }
    }

    fn score(&self, topo: &NodeTopology, set: GpuSet) -> Score {
        score(topo, set)
    }
}

/// The quality of `set` on `topo`: bottleneck and aggregate pair value (GB/s). Printable
/// and comparable (bigger is better); the first component of the objective.
pub fn score(topo: &NodeTopology, set: GpuSet) -> Score {
    objective::score(topo, set)
}

/// The heuristic above 16 GPUs ([`super::heuristic`]): not exact, no lookahead reported.
fn heuristic(topo: &NodeTopology, free: GpuSet, req: &Request) -> Option<Choice> {
    let set = super::heuristic::choose(topo, free, req)?;
    Some(Choice {
        gpus: set,
        objective: Objective {
            quality: objective::score(topo, set),
            near: set.intersection(req.near).len() as u32,
            ..Objective::default()
        },
    })
}

#[cfg(test)]
mod peer;
#[cfg(test)]
mod tests;
