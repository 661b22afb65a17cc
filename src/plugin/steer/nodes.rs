//! Node steering inside `select_p_job_test` (RUN_NOW and WILL_RUN): read the candidate
//! nodes' GPUs, drop nodes that cannot give the job enough non-faulty GPUs, and order the
//! rest into tries for cons_tres ([`gputopo_core::steer::narrow`]).
//!
//! Nodes whose GPU state gputopo cannot model (no `gpu` GRES, a topology that does not
//! build) are never dropped or ranked: they stay in the final try, where cons_tres alone
//! decides, exactly as without gputopo.

use std::sync::Arc;

use gputopo_core::GpuSet;
use gputopo_core::config::SelectConfig;
use gputopo_core::steer::key_memo::KeyMemos;
use gputopo_core::steer::narrow::{self, Basis, Candidate, Need};
use gputopo_core::steer::{HealthMasks, Prepared};

use crate::plugin::steer::state::{NodeModel, SteerState};
use crate::slurm::bitmap::NodeIndex;
use crate::slurm::gres::GPU;
use crate::slurm::job::JobView;
use crate::slurm::node;

/// What the job asks of each node, read from its `gpu` requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuNeed {
    /// GPUs per node (at least 1).
    pub per_node: usize,
    /// The type id of a typed request (the first typed one), `None` for untyped.
    pub type_id: Option<u32>,
}

/// The job's per-node GPU need, `None` when it asks for no GPU.
///
/// `--gres=gpu:N`/`--gpus-per-node=N` give N; `--gpus=N` on a one-node job gives N; other
/// forms (`--gpus` over several nodes, per task or socket) give 1: a node must hold at least
/// one usable GPU, and cons_tres spreads the rest.
pub fn gpu_need(job: &mut JobView<'_>, max_nodes: u32) -> Option<GpuNeed> {
    let reqs = job.gres_requests();
    let gpus: Vec<_> = reqs.iter().filter(|r| r.name() == GPU).collect();
    if gpus.is_empty() {
        return None;
    }
    let per_node: u64 = gpus.iter().map(|r| r.per_node()).sum();
    let per_job: u64 = gpus.iter().map(|r| r.per_job()).sum();
    let n = if per_node > 0 {
        per_node
    } else if per_job > 0 && max_nodes == 1 {
        per_job
    } else {
        1
    };
    Some(GpuNeed {
        per_node: usize::try_from(n).unwrap_or(usize::MAX).max(1),
        type_id: gpus.iter().find_map(|r| r.type_id()),
    })
}

/// One candidate node as the planner sees it.
#[derive(Debug, Clone)]
pub struct NodeFacts {
    /// Node-table index.
    pub index: NodeIndex,
    /// What gputopo knows of it: topology, engine tables, health (one shared model per
    /// node, so reading a candidate costs one reference count, not a copy).
    pub model: Arc<NodeModel>,
    /// GPUs of the job's type that are free now (not allocated, shared GRES not in use).
    pub free: GpuSet,
    /// GPUs of the job's type.
    pub of_type: GpuSet,
    /// Health.
    pub health: HealthMasks,
    /// Slurm's scheduling weight (`sched_weight`; ranked first, as cons_tres orders nodes).
    pub weight: u64,
    /// GPUs the agent reports warm; empty with `PreferCool=no` (a node-ranking tie-break).
    pub warm: GpuSet,
    /// Slurm knows its GPU topology ([`crate::plugin::steer::state::NodeModel::ranked`]):
    /// only such nodes are ranked; the others wait for the final try, as cons_tres would.
    pub ranked: bool,
}

/// Reads every candidate; nodes that cannot be modelled come back in the second list.
pub fn gather(
    st: &SteerState,
    cfg: &SelectConfig,
    job: &JobView<'_>,
    nodes: &[NodeIndex],
    need: GpuNeed,
) -> (Vec<NodeFacts>, Vec<NodeIndex>) {
    let mut facts = Vec::with_capacity(nodes.len());
    let mut opaque = Vec::new();
    let mut models = st.models();
    for &ni in nodes {
        let fact = node::view(job, ni).and_then(|nv| {
            let ng = nv.gpus()?;
            let model = st.model_in(&mut models, &nv, &ng, cfg.prefer_agent_topology)?;
            let of_type = model.of_type(need.type_id)?;
            Some(NodeFacts {
                index: ni,
                free: of_type
                    .difference(ng.allocated())
                    .difference(ng.shared_in_use()),
                of_type,
                health: model.masks(cfg),
                ranked: model.ranked,
                weight: nv.sched_weight(),
                warm: match model.health.as_deref() {
                    Some(h) if cfg.prefer_cool => h.warm.narrow(),
                    _ => GpuSet::EMPTY,
                },
                model,
            })
        });
        match fact {
            Some(f) => facts.push(f),
            None => opaque.push(ni),
        }
    }
    (facts, opaque)
}

fn candidate(f: &NodeFacts) -> Candidate<'_> {
    Candidate {
        node: f.index.0,
        topo: &f.model.topo,
        free: f.free,
        of_type: f.of_type,
        health: f.health,
        weight: f.weight,
        warm: f.warm,
    }
}

fn candidates(facts: &[NodeFacts]) -> Vec<Candidate<'_>> {
    facts.iter().map(candidate).collect()
}

/// The pre-filter's need per node and basis: a whole-node job would receive every GPU (a
/// single faulty one rules the node out: `usize::MAX`); RUN_NOW counts free GPUs.
pub fn filter_rule(need: GpuNeed, run_now: bool, whole_node: bool) -> (usize, Basis) {
    let per_node = if whole_node {
        usize::MAX
    } else {
        need.per_node
    };
    let basis = if run_now {
        Basis::FreeNow
    } else {
        Basis::Total
    };
    (per_node, basis)
}

/// The health pre-filter: node indices to drop (with a log line each).
pub fn unhealthy(
    facts: &[NodeFacts],
    need: GpuNeed,
    run_now: bool,
    whole_node: bool,
    required: &[NodeIndex],
    job_id: u32,
) -> Vec<NodeIndex> {
    let required: Vec<usize> = required.iter().map(|n| n.0).collect();
    let (per_node, basis) = filter_rule(need, run_now, whole_node);
    facts
        .iter()
        .filter_map(|f| {
            let d = narrow::health_drop(&candidate(f), per_node, basis, &required)?;
            log::debug!(
                target: "gputopo::select",
                "JobId={job_id} node {} skipped: {} non-faulty GPU(s) of the type, {} needed, faulty {}",
                f.model.topo.name,
                d.have,
                need.per_node,
                f.health.faulty
            );
            Some(f.index)
        })
        .collect()
}

/// The tries for a job over the healthy candidates (each sorted, the last = all of them).
/// Rank keys come from the memo of the node's engine tables ([`SteerState::keys`]): the
/// engine runs only for a state (free GPUs, health, weight) not seen before on a node of
/// that kind.
pub fn plan(
    st: &SteerState,
    facts: &[NodeFacts],
    need: GpuNeed,
    min_nodes: usize,
    required: &[NodeIndex],
) -> Vec<Vec<NodeIndex>> {
    let cands = candidates(facts);
    let mut memos = st
        .keys
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let p = narrow::plan_with(
        &cands,
        &Need {
            gpus_per_node: need.per_node,
            min_nodes,
            required: required.iter().map(|n| n.0).collect(),
            max_calls: MAX_TRIES,
        },
        |i, c| rank_key(st, &mut memos, &facts[i], c, need.per_node),
    );
    p.tiers
        .into_iter()
        .map(|t| t.into_iter().map(NodeIndex).collect())
        .collect()
}

/// A candidate's rank key: the node's last key while its state is unchanged, else from the
/// memo of its engine tables ([`SteerState::keys`], locked by the caller as `memos`); the
/// engine runs only for a state not seen before on a node of that kind.
fn rank_key(
    st: &SteerState,
    memos: &mut KeyMemos,
    f: &NodeFacts,
    c: &Candidate<'_>,
    per_node: usize,
) -> Option<narrow::NodeKey> {
    let compute = || {
        let tables = f.model.tables.clone().map(|h| (&*f.model.topo, h));
        narrow::node_key(&Prepared::new(&st.engine, tables), c, per_node)
    };
    match &f.model.tables {
        Some(h) => memos.node_key(f.index.0, h, c, per_node, compute),
        None => compute(),
    }
}

/// Most cons_tres calls node steering may cost per job_test (the final, full try included).
pub const MAX_TRIES: usize = 3;
