//! GPU-set choice on one node, and node ranking across a cluster.
//!
//! Every placement strategy is a [`Policy`]: given a node's topology, its free
//! (healthy, unallocated) GPUs and a request, it returns the set to allocate, or `None` when
//! the request cannot be met. Allocation state lives with the caller (slurmctld, the
//! simulator), never in a policy.
//!
//! Policies: `gputopo` (the exact engine, [`engine`]; its objective in [`objective`], its
//! lookahead in [`lookahead`], its tables in [`tables`], its search in `search`, node ranking in [`rank`]), the test oracle
//! [`exhaustive`]. The baselines the evaluation compares against (first fit, a model of stock
//! cons_tres, go-gpuallocator's partition-score policy) live in `gputopo-eval`, outside the
//! library slurmctld loads.

pub mod engine;
pub mod exhaustive;
pub mod heuristic;
pub mod lookahead;
mod memo;
pub mod objective;
pub mod rank;
pub mod score;
mod search;
mod table_cache;
pub mod tables;

pub use engine::{Choice, Gputopo, Prepared, score};
pub use exhaustive::Exhaustive;
pub use lookahead::{Leftover, Loss};
pub use objective::Objective;
pub use rank::{RankKey, rank_nodes};
pub use score::Score;
pub use tables::{TableCache, TopoHandle, TopoTables};

use crate::gpuset::GpuSet;
use crate::topology::NodeTopology;
use std::fmt;

/// What a job asks of one node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Request {
    /// Number of GPUs wanted on this node.
    pub count: usize,
    /// GPUs that must be part of the answer (must also be free).
    pub required: GpuSet,
    /// GPUs with affinity to the job's cores/socket; preferred, not required. Empty = no
    /// preference.
    pub near: GpuSet,
}

impl Request {
    /// A request for `count` GPUs, none required, no preference.
    pub const fn new(count: usize) -> Self {
        Request {
            count,
            required: GpuSet::EMPTY,
            near: GpuSet::EMPTY,
        }
    }
}

/// A GPU placement strategy: the one interface of the engine ([`Gputopo`], and [`Prepared`]
/// for callers that hold each node's tables), the test oracles and the evaluation's baselines.
/// The steering rules (`crate::steer`) are generic over it, so they are tested against a
/// brute-force oracle and run against the engine in slurmctld. Implementations are
/// deterministic and keep no allocation state (the caller owns it).
pub trait Policy: Send + Sync {
    /// Comparable quality of a GPU set (higher is better); printable so decisions can be
    /// logged. The engine and the baselines use the engine's [`Score`].
    type Score: Ord + Copy + fmt::Debug + fmt::Display;

    /// Short name used on the command line and in reports (`gputopo`, `first-fit`, ...).
    fn name(&self) -> &'static str;

    /// Chooses `req.count` GPUs out of `free` on `topo`, or `None` when impossible.
    fn choose(&self, topo: &NodeTopology, free: GpuSet, req: &Request) -> Option<GpuSet>;

    /// The quality of `set` on `topo`, to compare two sets on one node (a stock pick with this
    /// policy's choice).
    fn score(&self, topo: &NodeTopology, set: GpuSet) -> Self::Score;
}

/// A deterministic xorshift stream for tests: each call returns the next value modulo `m`.
#[cfg(test)]
pub(crate) fn test_rng(seed: u64) -> impl FnMut(u64) -> u64 {
    let mut x = seed | 1;
    move |m| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % m
    }
}
