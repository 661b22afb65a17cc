//! `gputopo`: the exact, fast GPU-set choice that slurmctld, the simulator and `gputopo pick`
//! share.
//!
//! # What it maximises
//! The objective is defined (with its reasoning and numbers) in [`super::objective`]. In
//! short, lexicographically: (a) the set's communication quality, bottleneck then aggregate of
//! a per-pair GB/s estimate (`25 × NVLinks + PCIe level`, so any NVLink beats every PCIe path,
//! and SB > PIX > PXB > PHB > NODE > SYS); (b) an anti-fragmentation lookahead on the GPUs
//! left free, first the best same-size set they still hold, then their best pairing;
//! (c) affinity to the job's cores (`Request::near`); (d) the lowest set.
//!
//! # Known answers (tests in `tests` below and in `crates/agent/tests/pick.rs`)
//! DGX-1V: four successive 2-GPU requests on an idle node get {2,3}, {6,7}, {0,4}, {1,5}: all
//! NV2, the first two also behind one PCIe switch. A 4-GPU request gets {0-3}. Free {0,1,4},
//! 2 GPUs → {0,4} (NV2 across sockets beats NV1 on one socket). go-gpuallocator's best-effort
//! cases agree except where noted:
//! - free {0,4,5,6} → {5,6}; free {0,1,3} → {0,3}; required {4}: 2 → {4,7}, 4 → {4-7};
//!   DGX-1P idle pairs {0,2}, {1,3}, {4,6}, {5,7}.
//! - **Deliberate difference**: free {0,2,4,5}, 2 GPUs: go-gpuallocator returns {4,5} (NV1)
//!   because the *partition* {4,5}+{0,2} scores higher in total; we return {0,4} (NV2): the
//!   job in hand gets the better link, the leftover only breaks ties.
//! - **Tie-break difference**: idle DGX-1V pairs. go-gpuallocator's partition sums tie between
//!   {0,3},{1,2},{4,7},{5,6} and {2,3},{6,7},{0,4},{1,5} and its enumeration order yields the
//!   former; our PCIe term prefers NV2 pairs behind one switch, so we start with {2,3}.
//!
//! # How it is exact and fast
//! Per distinct topology (interned by pair values in a [`TableCache`]) we precompute every
//! subset's quality and leftover pairing, and per request size the best same-size subset of
//! every mask; on ≤ 8-GPU nodes also the whole decision per free mask ([`super::tables`]).
//! A decision is then a table lookup (≤ 8 GPUs) or a branch and bound whose bounds are table
//! lookups (≤ 16 GPUs, `super::search`). The first decision of a new size `k` on a new
//! topology pays for that size's table (microseconds at 8 GPUs, about a millisecond at 16);
//! `docs/engine.md` has the measured cold and warm figures.
//!
//! Above 16 GPUs per node (none ship today) no tables are built and a heuristic is used
//! ([`super::heuristic`]: multi-start greedy growth plus swaps on the set's own quality; its
//! measured gap to the optimum is in `docs/engine.md`). It is not exact and reports no lookahead
//! in its [`Objective`]; callers see the same `gputopo` policy.

use super::objective::{self, Objective, Score};
use super::search::{Decision, decide};
use super::tables::{TableCache, TopoHandle, TopoTables};
use super::{Policy, Request};
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

    /// Chooses a set and reports its objective value; `None` when the request cannot be met
    /// (fewer than `req.count` free GPUs, `required` not free, or more required than count).
    pub fn choose_detailed(
        &self,
        topo: &NodeTopology,
        free: GpuSet,
        req: &Request,
    ) -> Option<Choice> {
        match self.handle(topo) {
            Some(h) => Self::choose_on(&h, free, req),
            None => heuristic(topo, free, req),
        }
    }

    /// [`Gputopo::choose_detailed`] on tables the caller already holds.
    pub fn choose_on(tables: &TopoTables, free: GpuSet, req: &Request) -> Option<Choice> {
        let d: Decision = decide(
            tables,
            free.bits(),
            req.count,
            req.required.bits(),
            req.near.bits(),
        )?;
        let gpus = GpuSet::from_bits(d.set);
        Some(Choice {
            gpus,
            objective: tables.objective(free, gpus, req.near),
        })
    }
}

impl Policy for Gputopo {
    fn name(&self) -> &'static str {
        "gputopo"
    }

    fn choose(&self, topo: &NodeTopology, free: GpuSet, req: &Request) -> Option<GpuSet> {
        self.choose_detailed(topo, free, req).map(|c| c.gpus)
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
mod tests;
