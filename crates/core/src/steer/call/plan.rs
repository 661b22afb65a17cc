//! The first decisions of a call, before cons_tres is asked anything: which candidates the
//! health pre-filter withholds ([`super::super::narrow::health_drop`], and
//! [`super::super::wide::counts`] on nodes beyond the topology model), and the tiers of nodes
//! to offer ([`super::super::tries::tiers`] over [`super::super::narrow::plan_memo`]).
//!
//! Rank keys come from the memo of each node's engine tables ([`KeyMemos`], compared where
//! it keeps them): the engine runs only for a node state (free GPUs, health) not seen before
//! on a node of that kind.

use super::super::key_memo::KeyMemos;
use super::super::narrow::{self, Basis, Candidate};
use super::super::tries::{self, Mode};
use super::super::wide;
use super::events::Event;
use super::snapshot::{GpuNeed, Gpus, Modelled, Snapshot};
use super::{Ctx, MAX_TRIES};
use crate::placement::Prepared;
use crate::wideset::WideSet;

/// What a call starts with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Start {
    /// Node indices per try, each ascending; the last holds every candidate.
    pub tiers: Vec<Vec<usize>>,
    /// Candidates the health pre-filter withholds (never offered), ascending.
    pub withheld: Vec<usize>,
}

/// The pre-filter's need per node and basis: a whole-node job would receive every GPU (a
/// single faulty one rules the node out: `usize::MAX`); RUN_NOW counts free GPUs, WILL_RUN
/// every GPU (backfill plans with GPUs that running jobs release).
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

/// A modelled candidate as node steering sees it, `None` when the request's type is
/// unknown there (a typed request on a node without topology records).
pub fn candidate<'m>(
    node: usize,
    m: &'m Modelled,
    need: GpuNeed,
    ctx: &Ctx<'_>,
) -> Option<Candidate<'m>> {
    let of_type = m.model.of_type(need.type_id)?;
    Some(Candidate {
        node,
        topo: &m.model.topo,
        free: of_type.difference(m.allocated).difference(m.shared_in_use),
        of_type,
        health: m.model.masks(ctx.cfg),
        weight: m.weight,
        warm: m.model.warm(ctx.cfg),
    })
}

/// Plans the call: pre-filter, then tiers. Withheld nodes are reported in `events`.
pub fn start(
    snap: &Snapshot,
    ctx: &Ctx<'_>,
    keys: &mut KeyMemos,
    events: &mut Vec<Event>,
) -> Start {
    let job = &snap.job;
    let Some(need) = job.need else {
        // Shared requests only: one try of every offered node the shares pre-filter keeps
        // (shares carry no interconnect question), health checked again in the re-pick.
        let withheld = super::shares::pre_filter(snap, ctx, events);
        let tier = snap
            .indices()
            .into_iter()
            .filter(|n| withheld.binary_search(n).is_err())
            .collect();
        return Start {
            tiers: vec![tier],
            withheld,
        };
    };
    let run_now = job.mode == Mode::RunNow;
    let (per_node, basis) = filter_rule(need, run_now, job.whole_node);
    // One pass: ranked candidates (with their models, for the rank keys), the healthy ones
    // Slurm keeps no topology for, and the rest; only ranked ones are planned, the others
    // join the final try. Sized for every candidate (usually all are ranked).
    let mut ranked: Vec<Candidate<'_>> = Vec::with_capacity(snap.nodes.len());
    let mut models: Vec<&Modelled> = Vec::with_capacity(snap.nodes.len());
    let mut ranked_ids = Vec::with_capacity(snap.nodes.len());
    let (mut unranked_ids, mut opaque, mut withheld) = (Vec::new(), Vec::new(), Vec::new());
    let mut skip = |node: usize, have: usize, faulty: WideSet| {
        withheld.push(node);
        events.push(Event::Skipped {
            node,
            have,
            need: need.per_node,
            faulty,
        });
    };
    for n in &snap.nodes {
        match &n.gpus {
            Gpus::Modelled(m) => match candidate(n.node, m, need, ctx) {
                Some(c) => {
                    if ctx.cfg.health_aware
                        && let Some(d) = narrow::health_drop(&c, per_node, basis, &job.required)
                    {
                        skip(n.node, d.have, c.health.faulty.into());
                    } else if m.model.ranked {
                        ranked.push(c);
                        models.push(m);
                        ranked_ids.push(n.node);
                    } else {
                        unranked_ids.push(n.node);
                    }
                }
                None => opaque.push(n.node),
            },
            Gpus::Wide(w) => {
                opaque.push(n.node);
                if !ctx.cfg.health_aware || job.required.contains(&n.node) {
                    continue;
                }
                let Some(of_type) = w.of_type(need.type_id) else {
                    continue;
                };
                let free = of_type.difference(&w.busy);
                let counts = wide::counts(&of_type, &free, &w.health);
                if counts.rules_out(per_node, basis) {
                    skip(n.node, counts.have, w.health.faulty.clone());
                }
            }
            Gpus::Opaque => opaque.push(n.node),
        }
    }
    withheld.sort_unstable();
    let steering = tries::Steering {
        node_ranking: ctx.cfg.node_ranking,
        whole_node: job.whole_node,
        preemption: job.preemption,
    };
    let tiers = tries::tiers(
        steering,
        &ranked_ids,
        &unranked_ids,
        &opaque,
        &job.required,
        || {
            let plan = narrow::plan_memo(
                &ranked,
                &narrow::Need {
                    gpus_per_node: need.per_node,
                    min_nodes: job.min_nodes,
                    required: job.required.clone(),
                    max_calls: MAX_TRIES,
                },
                keys,
                |i| models[i].model.tables.as_ref(),
                |i, c| {
                    let m = &models[i].model;
                    let tables = m.tables.clone().map(|h| (&*m.topo, h));
                    narrow::node_key(&Prepared::new(ctx.engine, tables), c, need.per_node)
                },
            );
            plan.tiers
        },
    );
    Start { tiers, withheld }
}
