//! GPU-set choice on one node, and node ranking across a cluster.
//!
//! Every placement strategy is a stateless [`Policy`]: given a node's topology, its free
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
mod search;
mod table_cache;
pub mod tables;

pub use engine::{Choice, Gputopo, score};
pub use exhaustive::Exhaustive;
pub use lookahead::{Leftover, Loss};
pub use objective::{Objective, Score};
pub use rank::{RankKey, rank_nodes};
pub use tables::{TableCache, TopoHandle, TopoTables};

use crate::gpuset::GpuSet;
use crate::topology::NodeTopology;

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

/// A GPU placement strategy. Implementations are stateless and deterministic.
pub trait Policy: Send + Sync {
    /// Short name used on the command line and in reports (`gputopo`, `first-fit`, ...).
    fn name(&self) -> &'static str;

    /// Chooses `req.count` GPUs out of `free` on `topo`, or `None` when impossible.
    fn choose(&self, topo: &NodeTopology, free: GpuSet, req: &Request) -> Option<GpuSet>;
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
