//! Per-node GPU re-pick: replace cons_tres's GPU indices on one node by the engine's choice.
//!
//! cons_tres has already decided that the job runs on this node with `count` GPUs, and which
//! cores it gets; it wrote its GPU indices into the job's `gres_bit_select` for the node.
//! Slurm commits that selection later (`select_p_select_nodeinfo_set`), so the plugin may
//! swap indices in between, as long as every constraint cons_tres honoured still holds:
//!
//! - the count on the node (never changed here);
//! - only GPUs of the requested type, not allocated to other jobs, whose shared GRES
//!   (`shard`/`mps`) is not in use, and, under `--gres-flags=enforce-binding` or
//!   `RestrictedCoresPerGPU`, only GPUs bound to the job's cores: [`Constraints::eligible`];
//! - whole-node and exclusive jobs get every GPU: their pick is never changed.
//!
//! Health: faulty GPUs are never chosen, degraded ones only when the healthy ones cannot make
//! up the count. When cons_tres's pick holds a faulty GPU and no valid set exists on the
//! node, the answer is [`Decision::ExcludeNode`]: the plugin drops the node and asks
//! cons_tres again. A pick is replaced only when the new set is strictly better (healthier,
//! or a higher engine score), so equal-quality picks keep cons_tres's indices.

use super::HealthMasks;
use crate::gpuset::GpuSet;
use crate::placement::{Policy, Request};
use crate::topology::NodeTopology;

/// The GPUs cons_tres's own rules allow for this job on this node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Constraints {
    /// GPUs of the requested type (all GPUs for an untyped request).
    pub of_type: GpuSet,
    /// GPUs already allocated on the node (node `gres_bit_alloc`), plus GPUs this job
    /// already holds there through another GRES request of the same name.
    pub allocated: GpuSet,
    /// GPUs whose shared GRES (`shard`, `mps`) is in use by some job.
    pub shared_in_use: GpuSet,
    /// When binding is enforced: the GPUs whose `Cores=` overlap the job's cores on this
    /// node. `None` when binding is not enforced.
    pub bound: Option<GpuSet>,
}

impl Constraints {
    /// No constraint beyond the node's size.
    pub fn none(topo: &NodeTopology) -> Self {
        Constraints {
            of_type: topo.all(),
            allocated: GpuSet::EMPTY,
            shared_in_use: GpuSet::EMPTY,
            bound: None,
        }
    }

    /// GPUs the job may be given, health aside.
    pub fn eligible(&self) -> GpuSet {
        let base = self
            .of_type
            .difference(self.allocated)
            .difference(self.shared_in_use);
        match self.bound {
            Some(b) => base.intersection(b),
            None => base,
        }
    }
}

/// Everything the re-pick of one node reads.
#[derive(Clone, Copy, Debug)]
pub struct NodeInput<'a> {
    /// The node's interconnect.
    pub topo: &'a NodeTopology,
    /// cons_tres's pick on this node (`gres_bit_select`).
    pub stock: GpuSet,
    /// What cons_tres's rules allow.
    pub constraints: Constraints,
    /// Per-GPU health.
    pub health: HealthMasks,
    /// GPUs with affinity to the job's cores here (a preference passed to the engine).
    pub near: GpuSet,
    /// The job takes the whole node (`--exclusive`, `OverSubscribe=EXCLUSIVE`, whole-node
    /// GRES): its GPUs are all of them, nothing to choose.
    pub whole_node: bool,
}

impl NodeInput<'_> {
    /// The GPUs the job could be given here: eligible, on the topology, not faulty.
    pub fn usable(&self) -> GpuSet {
        self.constraints
            .eligible()
            .intersection(self.topo.all())
            .difference(self.health.faulty)
    }
}

/// Why cons_tres's pick stays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeepReason {
    /// No GPU of this GRES was selected on the node.
    NothingSelected,
    /// Whole-node or exclusive job: every GPU goes to the job.
    WholeNode,
    /// cons_tres selected an index the topology does not know (gres.conf and the node's
    /// topology disagree); the plugin must not guess.
    OutsideTopology,
    /// The engine chose the same set.
    AlreadyBest,
    /// The engine's set scores no better, or no alternative exists and the pick is healthy.
    NoBetter,
    /// A better-connected set exists but is not taken: `TopologyAware=no`, or Slurm does
    /// not know the node's topology (no `Type=`/`Cores=` in gres.conf). Set by the caller.
    TopologyOff,
    /// The job's GPUs are tied to its cores or sockets beyond what the re-pick models
    /// (`--gpus-per-socket`, the node's `RestrictedCoresPerGPU`): cons_tres's healthy pick
    /// stands ([`keep_pinned`]).
    Pinned,
}

/// Why a new set replaces cons_tres's pick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplaceReason {
    /// cons_tres picked a faulty GPU.
    AvoidsFaulty,
    /// The new set uses fewer degraded GPUs.
    AvoidsDegraded,
    /// The new set scores higher.
    Better,
    /// Equal quality, fewer GPUs running warm ([`super::cool`]).
    Cooler,
}

/// Why the node cannot serve the job without a faulty GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExcludeReason {
    /// Fewer usable (eligible, not faulty) GPUs than the job needs here.
    NotEnoughHealthy {
        /// GPUs the job needs on the node.
        need: usize,
        /// Eligible, non-faulty GPUs on the node.
        have: usize,
    },
    /// A whole-node job would receive the node's faulty GPU(s).
    WholeNodeHasFaulty,
    /// cons_tres's pick of a pinned job ([`KeepReason::Pinned`]) holds a faulty GPU, and a
    /// pinned pick is never replaced.
    PinnedPickFaulty,
}

/// The outcome for one node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision<S> {
    /// Leave `gres_bit_select` as cons_tres wrote it.
    Keep(KeepReason),
    /// Write `set` (same size as the stock pick) into `gres_bit_select`.
    Replace {
        /// The GPUs the job gets on this node.
        set: GpuSet,
        /// Why.
        why: ReplaceReason,
        /// Engine score of cons_tres's pick (for the decision log).
        old_score: S,
        /// Engine score of `set`.
        new_score: S,
    },
    /// Drop the node and ask cons_tres again: staying would allocate a faulty GPU.
    ExcludeNode(ExcludeReason),
}

impl<S> Decision<S> {
    /// The decision with topology-only replacements turned into [`KeepReason::TopologyOff`]
    /// when `topology_pick` is false (`TopologyAware=no`, or a node whose topology Slurm does
    /// not know). Replacements that avoid faulty or degraded GPUs always stand: health is
    /// not a topology preference.
    pub fn gate_topology(self, topology_pick: bool) -> Self {
        match self {
            Decision::Replace {
                why: ReplaceReason::Better,
                ..
            } if !topology_pick => Decision::Keep(KeepReason::TopologyOff),
            d => d,
        }
    }

    /// The GPUs the job ends up with on the node, given cons_tres's `stock` pick; `None`
    /// when the node is excluded.
    pub fn final_set(&self, stock: GpuSet) -> Option<GpuSet> {
        match self {
            Decision::Keep(_) => Some(stock),
            Decision::Replace { set, .. } => Some(*set),
            Decision::ExcludeNode(_) => None,
        }
    }
}

/// The decision for a job whose GPUs are tied to its cores or sockets beyond what the re-pick
/// models (`--gpus-per-socket`: a count per socket of the cores cons_tres allocated;
/// `RestrictedCoresPerGPU`: cores reserved for the GPUs cons_tres picked). Another set could
/// break that tie, so the re-pick stands down: cons_tres's pick is kept when it holds no
/// faulty GPU (degraded GPUs and topology are not weighed), and the node is excluded when it
/// does, so cons_tres is asked again without it. A faulty GPU is never handed out either way.
pub fn keep_pinned<S>(input: &NodeInput<'_>) -> Decision<S> {
    if input.stock.is_empty() {
        Decision::Keep(KeepReason::NothingSelected)
    } else if input.stock.intersection(input.health.faulty).is_empty() {
        Decision::Keep(KeepReason::Pinned)
    } else {
        Decision::ExcludeNode(ExcludeReason::PinnedPickFaulty)
    }
}

/// Decides the GPUs of one node. See the module docs for the rules.
pub fn repick<P: Policy>(policy: &P, input: &NodeInput<'_>) -> Decision<P::Score> {
    let NodeInput {
        topo,
        stock,
        health,
        ..
    } = *input;
    let all = topo.all();
    let faulty = health.faulty.intersection(all);
    if stock.is_empty() {
        return Decision::Keep(KeepReason::NothingSelected);
    }
    if input.whole_node {
        return if faulty.is_empty() {
            Decision::Keep(KeepReason::WholeNode)
        } else {
            Decision::ExcludeNode(ExcludeReason::WholeNodeHasFaulty)
        };
    }
    if !stock.is_subset(all) {
        return Decision::Keep(KeepReason::OutsideTopology);
    }
    let count = stock.len();
    let stock_ok = stock.intersection(faulty).is_empty();
    let pool = input.usable();
    let choice = choose_healthiest(policy, topo, pool, health.degraded, count, input.near)
        .filter(|c| c.len() == count && c.is_subset(pool));
    let Some(set) = choice else {
        return if stock_ok {
            Decision::Keep(KeepReason::NoBetter)
        } else {
            Decision::ExcludeNode(ExcludeReason::NotEnoughHealthy {
                need: count,
                have: pool.len(),
            })
        };
    };
    if set == stock {
        return Decision::Keep(KeepReason::AlreadyBest);
    }
    let degraded_in = |s: GpuSet| s.intersection(health.degraded).len();
    let (old_score, new_score) = (policy.score(topo, stock), policy.score(topo, set));
    let why = if !stock_ok {
        ReplaceReason::AvoidsFaulty
    } else if degraded_in(set) < degraded_in(stock) {
        ReplaceReason::AvoidsDegraded
    } else if degraded_in(set) == degraded_in(stock) && new_score > old_score {
        ReplaceReason::Better
    } else {
        return Decision::Keep(KeepReason::NoBetter);
    };
    Decision::Replace {
        set,
        why,
        old_score,
        new_score,
    }
}

/// The engine's best `count` GPUs out of `pool`, using degraded GPUs only to make up the
/// count ([`healthiest_request`]).
pub(crate) fn choose_healthiest<P: Policy>(
    policy: &P,
    topo: &NodeTopology,
    pool: GpuSet,
    degraded: GpuSet,
    count: usize,
    near: GpuSet,
) -> Option<GpuSet> {
    let (free, req) = healthiest_request(pool, degraded, count, near)?;
    policy.choose(topo, free, &req)
}

/// What to ask the engine for `count` GPUs out of `pool` so that degraded GPUs only make up
/// the count: the healthy GPUs alone when they suffice, else the whole pool with every healthy
/// GPU required (so the fewest degraded ones are taken). `None` when the pool is too small.
pub(crate) fn healthiest_request(
    pool: GpuSet,
    degraded: GpuSet,
    count: usize,
    near: GpuSet,
) -> Option<(GpuSet, Request)> {
    let healthy = pool.difference(degraded);
    let req = |required| Request {
        count,
        required,
        near,
    };
    if healthy.len() >= count {
        Some((healthy, req(GpuSet::EMPTY)))
    } else if pool.len() >= count {
        Some((pool, req(healthy)))
    } else {
        None
    }
}

#[cfg(test)]
mod tests;
