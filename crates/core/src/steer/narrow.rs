//! Node steering: which candidate nodes to offer cons_tres, and in which order.
//!
//! cons_tres picks nodes by its own weights and ignores how well the free GPUs of a node are
//! connected. The plugin cannot pass it a preference, but it can narrow the candidate bitmap:
//! it offers the best-ranked nodes first and widens on failure, ending with every candidate,
//! so a job that cons_tres could place is never refused because of steering ([`plan`]).
//!
//! Ranking (best first, [`NodeKey`]): Slurm's node weight first (slurm.conf `Weight=` keeps
//! its meaning: the administrator's order comes first, gputopo orders nodes of equal weight),
//! then a node whose best achievable set needs fewer degraded GPUs, then the engine's own
//! node order, [`RankKey`] (the interconnect class of the node's
//! best set, then the tightest fit, then the fragmentation it leaves, then the fine quality;
//! `placement::rank` explains why the class and not the fine quality comes before fit). With
//! no degraded GPU in play the order is exactly [`crate::placement::rank_nodes`]'s. Degraded
//! GPUs lead because a degraded GPU costs the job more than any interconnect class (it is
//! used only to make up the count, as in the GPU re-pick). Last come the warm GPUs the
//! job would get (`PreferCool`), so among equally good nodes the cooler one is offered first.
//! The first tier is the top key
//! exactly, the second the top weight, health and class at any fit. Required nodes (`--nodelist`)
//! are in every tier. Tiers smaller than the job's minimum node count are skipped, so
//! multi-node jobs are never starved by narrowing, and the number of cons_tres calls is
//! capped.
//!
//! Health pre-filter ([`health_filter`]): drop nodes that cannot give the job enough
//! non-faulty GPUs (for WILL_RUN counting every GPU, since backfill plans with GPUs that
//! running jobs will release; for RUN_NOW also nodes whose free GPUs suffice only with a
//! faulty one). Never applied in TEST_ONLY: a transient fault must not make a job "never
//! runnable".

use super::HealthMasks;
use super::cool::cool_alternative;
use super::repick::healthiest_request;
use crate::gpuset::GpuSet;
use crate::placement::{Prepared, RankKey};
use crate::topology::NodeTopology;

mod key;
mod plan;
pub use key::NodeKey;
#[cfg(test)]
use plan::complete_tier;
pub use plan::{plan_memo, plan_with};

/// One candidate node.
#[derive(Clone, Copy, Debug)]
pub struct Candidate<'a> {
    /// The node's index in slurmctld's node table (a bit of the candidate bitmap).
    pub node: usize,
    /// Its interconnect.
    pub topo: &'a NodeTopology,
    /// GPUs the job could use there now: of the requested type, not allocated, shared GRES
    /// not in use. Health aside.
    pub free: GpuSet,
    /// GPUs of the requested type, allocated or not (for WILL_RUN).
    pub of_type: GpuSet,
    /// Per-GPU health.
    pub health: HealthMasks,
    /// Slurm's scheduling weight of the node (`sched_weight`: slurm.conf `Weight=` shifted
    /// up, plus Slurm's own low bits), the order cons_tres itself fills nodes in. Lower is
    /// preferred; it leads the ranking, so gputopo orders only nodes of equal weight.
    pub weight: u64,
    /// GPUs the agent reports warm (`w`; empty with `PreferCool=no`): among otherwise equal
    /// nodes the one that would give the job fewer of them ranks first.
    pub warm: GpuSet,
}

/// When the health pre-filter runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Basis {
    /// RUN_NOW: also drop nodes whose free GPUs suffice only with a faulty one.
    FreeNow,
    /// WILL_RUN: only nodes that could never serve the job while the faults last.
    Total,
}

/// A node the health pre-filter removed, for the decision log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dropped {
    /// Node index.
    pub node: usize,
    /// Non-faulty GPUs of the type it has (all of them, allocated or not).
    pub have: usize,
}

/// The pre-filter's answer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filtered {
    /// Node indices kept, ascending.
    pub kept: Vec<usize>,
    /// Nodes removed and why.
    pub dropped: Vec<Dropped>,
}

/// What the health pre-filter counts on one node (any node size: see [`super::wide`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HealthCounts {
    /// Non-faulty GPUs of the type, allocated or not.
    pub have: usize,
    /// Some GPU of the type is faulty.
    pub faulty_of_type: bool,
    /// Free GPUs of the type.
    pub free: usize,
    /// Free non-faulty GPUs of the type.
    pub free_ok: usize,
}

impl HealthCounts {
    /// The pre-filter's rule (see [`health_filter`]; `need = usize::MAX`: whole node).
    pub fn rules_out(&self, need: usize, basis: Basis) -> bool {
        let whole_node_hit = need == usize::MAX && self.faulty_of_type;
        let never = self.have < need && need != usize::MAX;
        let not_now = basis == Basis::FreeNow && self.free >= need && self.free_ok < need;
        whole_node_hit || never || not_now
    }
}

/// Drops candidates that cannot serve the job because of faulty GPUs; busy nodes are
/// cons_tres's business (it may preempt), so a node is dropped only when:
///
/// - its non-faulty GPUs of the type, allocated or not, are fewer than `need` (it can never
///   serve the job while the faults last), or
/// - (RUN_NOW) its free GPUs would suffice but not without a faulty one, or
/// - the job takes whole nodes and the node has any faulty GPU (`need = usize::MAX`).
///
/// Nodes in `required` are always kept (the GPU re-pick excludes them later if they really
/// cannot serve).
pub fn health_filter(
    cands: &[Candidate<'_>],
    need: usize,
    basis: Basis,
    required: &[usize],
) -> Filtered {
    let mut out = Filtered::default();
    for c in cands {
        match health_drop(c, need, basis, required) {
            Some(d) => out.dropped.push(d),
            None => out.kept.push(c.node),
        }
    }
    out.kept.sort_unstable();
    out
}

/// [`health_filter`]'s verdict on one candidate: `Some` when it is dropped. For callers that
/// need only the dropped nodes (no list of kept ones to build and sort). Inlined: it runs
/// for every candidate on every call, and a node without a fault takes two comparisons.
#[inline]
pub fn health_drop(
    c: &Candidate<'_>,
    need: usize,
    basis: Basis,
    required: &[usize],
) -> Option<Dropped> {
    let faulty = c.health.faulty;
    // Runs for every candidate on every call, and most nodes have no fault: without one,
    // [`HealthCounts::rules_out`] reduces to "fewer GPUs of the type than a per-node need".
    if faulty.is_empty() && (need == usize::MAX || c.of_type.len() >= need) {
        return None;
    }
    let counts = HealthCounts {
        have: c.of_type.difference(faulty).len(),
        faulty_of_type: !faulty.intersection(c.of_type).is_empty(),
        free: c.free.len(),
        free_ok: c.free.difference(faulty).len(),
    };
    (counts.rules_out(need, basis) && !required.contains(&c.node)).then_some(Dropped {
        node: c.node,
        have: counts.have,
    })
}

/// What the job needs, for planning.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Need {
    /// GPUs per node (0: no GPU request or unknown split; no steering).
    pub gpus_per_node: usize,
    /// The job's minimum node count.
    pub min_nodes: usize,
    /// Nodes the job requires (`--nodelist`).
    pub required: Vec<usize>,
    /// Most cons_tres calls the plan may cost, final one included (at least 1).
    pub max_calls: usize,
}

/// Candidate sets to try in order; the last is always every candidate given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Node indices per try, each ascending; each try is a superset of the previous one.
    pub tiers: Vec<Vec<usize>>,
}

impl Plan {
    /// True when the plan narrows anything (more than the final try).
    pub fn narrows(&self) -> bool {
        self.tiers.len() > 1
    }
}

/// The rank key of one candidate for a job of `gpus_per_node` GPUs (see [`NodeKey`]), `None`
/// when it cannot take the job now. It depends only on the candidate's topology, free GPUs,
/// health and weight, so a caller may keep it per node until one of those changes
/// ([`rank_with`]).
pub fn node_key(engine: &Prepared<'_>, c: &Candidate<'_>, gpus_per_node: usize) -> Option<NodeKey> {
    let pool = c
        .free
        .intersection(c.topo.all())
        .difference(c.health.faulty);
    let (free, req) = healthiest_request(pool, c.health.degraded, gpus_per_node, GpuSet::EMPTY)?;
    let choice = engine.choose_detailed(c.topo, free, &req)?;
    let warm_in = |s: GpuSet| s.intersection(c.warm).bits().count_ones();
    let warm = match warm_in(choice.gpus) {
        0 => 0,
        n => cool_alternative(
            engine,
            c.topo,
            pool,
            c.health.degraded,
            choice.gpus,
            c.warm,
            GpuSet::EMPTY,
        )
        .map_or(n, warm_in),
    };
    Some(NodeKey::new(
        c.weight,
        choice
            .gpus
            .intersection(c.health.degraded)
            .bits()
            .count_ones(),
        RankKey::new(&choice.objective, pool.len() - gpus_per_node),
        warm,
    ))
}

/// The node ranking for a job of `gpus_per_node` GPUs on each node: best first (ties by node
/// index), with each node's rank key. Nodes that cannot take the job now are left out.
pub fn rank(
    engine: &Prepared<'_>,
    cands: &[Candidate<'_>],
    gpus_per_node: usize,
) -> Vec<(usize, NodeKey)> {
    rank_with(cands, |_, c| node_key(engine, c, gpus_per_node))
}

/// [`rank`] with each candidate's key from `key(position in cands, candidate)` (its
/// [`node_key`], possibly remembered).
pub fn rank_with(
    cands: &[Candidate<'_>],
    mut key: impl FnMut(usize, &Candidate<'_>) -> Option<NodeKey>,
) -> Vec<(usize, NodeKey)> {
    let mut ranked: Vec<(usize, NodeKey)> = cands
        .iter()
        .enumerate()
        .filter_map(|(i, c)| Some((c.node, key(i, c)?)))
        .collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    ranked
}

/// The tries for one job over `cands` (already health-filtered). See the module docs.
pub fn plan(engine: &Prepared<'_>, cands: &[Candidate<'_>], need: &Need) -> Plan {
    plan_with(cands, need, |_, c| node_key(engine, c, need.gpus_per_node))
}

/// In WILL_RUN, a narrowed try is accepted only when it lets the job start now: a later
/// start on the preferred nodes must not delay a job the full set could start at once.
pub fn accept_will_run(is_final: bool, start_time: i64, now: i64) -> bool {
    is_final || start_time <= now
}

#[cfg(test)]
mod tests;
