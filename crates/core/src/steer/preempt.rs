//! Preemption as one pure decision over the call's snapshot (issue 26 item 2, issue 25 item 2):
//! whether to reorder slurmctld's preemption candidates, and how, before cons_tres plans a
//! preemption for a GPU job.
//!
//! cons_tres removes the offered candidates in list order from a simulated node state until
//! the preemptor fits (cons_tres/job_test.c `_run_now`), so which GPUs it frees, and on which
//! node, is an accident of that order; with an idle faulty GPU it may stop one victim early on
//! a node where only the faulty GPU makes the job fit, and gputopo must then exclude the node
//! and ask again (more victims, a later start). [`decide`] runs every gate, finds the
//! cheapest victims that free healthy GPUs (fewest jobs, then the lowest preemption ranks,
//! then the engine's best set: [`super::victims::choose`], per node for a multi-node job),
//! orders the candidates so that those victims lead their run of equal rank (Slurm's order
//! across ranks is untouched), and then checks the order against [`simulate`], a model of
//! cons_tres's own removal passes (reorders included): the order is used only when cons_tres,
//! walking it, would stop on the planned nodes with enough healthy GPUs there. Otherwise
//! Slurm's order stands, as without gputopo.
//!
//! The job's nodes come from the snapshot's job facts whatever the job said: `-N` given or
//! not, a `--gres=gpu:N` (per node) job needs its minimum node count of nodes, so a job
//! submitted without `-N1` is planned like one with it.

mod simulate;

pub use simulate::{Outcome, simulate};

use super::HealthMasks;
use super::call::{Ctx, Gpus, Snapshot, candidate};
use super::narrow::{self, Basis};
use super::tries::Mode;
use super::victims::{self, Candidate, VictimNode};
use crate::gpuset::GpuSet;

/// One preemption candidate, in Slurm's order, as the plugin reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Offered {
    /// Its job id.
    pub job: u32,
    /// What the preempt plugin's order depends on (partition tier, QOS, node count): equal
    /// keys are interchangeable, so only the order inside runs of equal keys may change.
    pub key: (u32, u64, u32),
    /// Its GPUs per node (node index, GPUs); empty when they could not be read.
    pub on: Vec<(usize, GpuSet)>,
    /// It would be suspended, not requeued or cancelled: a suspended job keeps its GPUs.
    pub keeps_gpus: bool,
}

/// Why Slurm's order stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gate {
    /// `TopologyAware=no` and `HealthAware=no`.
    Off,
    /// `PreemptParameters=youngest_first`: start times rank the jobs, which is not modelled.
    YoungestFirst,
    /// Not RUN_NOW or WILL_RUN, or no untyped whole-GPU request.
    NoGpuNeed,
    /// A typed request (`gpu:a100:2`): types are not modelled in victim plans.
    Typed,
    /// A per-job GPU count cons_tres may spread over several nodes (`--gpus` without
    /// `-N1`): the GPUs per node are not known in advance.
    Spread,
    /// The job takes whole nodes: every job on the node is a victim whatever the order.
    WholeNode,
    /// The job requires nodes (`--nodelist`).
    Required,
    /// A candidate would be suspended and keep its GPUs: the order changes only whose
    /// cores are taken.
    Suspends,
    /// A candidate's GPUs could not be read, so what removing it frees is unknown.
    Unread,
    /// No plan frees enough healthy GPUs on enough nodes.
    NoPlan,
    /// cons_tres, walking the planned order, would not stop on the plan.
    Unsafe,
    /// The plan's order is Slurm's own.
    AlreadyInOrder,
}

/// The decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Leave the list as it is.
    Keep(Gate),
    /// Reorder the list.
    Reorder {
        /// The new order: positions into the offered candidates.
        order: Vec<usize>,
        /// The planned victims' job ids, in the new order.
        victims: Vec<u32>,
        /// The planned nodes and the healthy GPUs the job can have there.
        nodes: Vec<(usize, GpuSet)>,
    },
}

/// The job's per-node need and node count for a victim plan, or the gate that stops it.
fn need(snap: &Snapshot) -> Result<(usize, usize), Gate> {
    let job = &snap.job;
    let need = job.need.ok_or(Gate::NoGpuNeed)?;
    if need.type_id.is_some() {
        return Err(Gate::Typed);
    }
    if need.spread {
        return Err(Gate::Spread);
    }
    if job.whole_node {
        return Err(Gate::WholeNode);
    }
    if !job.required.is_empty() {
        return Err(Gate::Required);
    }
    Ok((need.per_node, job.min_nodes.max(1)))
}

/// Ranks of the candidates: runs of equal consecutive keys share one.
fn ranks(offered: &[Offered]) -> Vec<u64> {
    let mut rank = 0u64;
    offered
        .iter()
        .enumerate()
        .map(|(i, c)| {
            if i > 0 && offered[i - 1].key != c.key {
                rank += 1;
            }
            rank
        })
        .collect()
}

/// The node states a plan is made over: every modelled candidate node the health
/// pre-filter does not withhold (cons_tres is never offered those), with the GPUs no
/// candidate can free (`pinned`) and the GPUs no job holds (`idle`).
fn victim_nodes<'s>(
    snap: &'s Snapshot,
    offered: &[Offered],
    per_node: usize,
    ctx: &Ctx<'_>,
) -> Vec<VictimNode<'s>> {
    let basis = if snap.job.mode == Mode::RunNow {
        Basis::FreeNow
    } else {
        Basis::Total
    };
    let mut out = Vec::new();
    for n in &snap.nodes {
        let Gpus::Modelled(m) = &n.gpus else {
            continue;
        };
        let Some(need) = snap.job.need else { continue };
        let Some(c) = candidate(n.node, m, need, ctx) else {
            continue;
        };
        if ctx.cfg.health_aware && narrow::health_drop(&c, per_node, basis, &[]).is_some() {
            continue;
        }
        // GPUs a one-node candidate frees; a multi-node candidate's count as pinned here
        // (see `plan_order`).
        let held = offered
            .iter()
            .filter_map(|o| match o.on.as_slice() {
                [(node, g)] if *node == n.node => Some(*g),
                _ => None,
            })
            .fold(GpuSet::EMPTY, |a, g| a.union(g));
        let busy = m.allocated.union(m.shared_in_use);
        let health = if ctx.cfg.health_aware {
            m.model.masks(ctx.cfg)
        } else {
            HealthMasks::ALL_OK
        };
        out.push(VictimNode {
            index: n.node,
            topo: &m.model.topo,
            pinned: busy.difference(held),
            idle: m.model.topo.all().difference(busy),
            health,
        });
    }
    out
}

/// Decides whether and how to reorder the candidates `offered` (Slurm's order) for the
/// call's job. `youngest_first` is Slurm's `youngest_first` preemption parameter.
pub fn decide(
    snap: &Snapshot,
    offered: &[Offered],
    ctx: &Ctx<'_>,
    youngest_first: bool,
) -> Decision {
    match plan_order(snap, offered, ctx, youngest_first) {
        Ok(d) => d,
        Err(g) => Decision::Keep(g),
    }
}

fn plan_order(
    snap: &Snapshot,
    offered: &[Offered],
    ctx: &Ctx<'_>,
    youngest_first: bool,
) -> Result<Decision, Gate> {
    if !(ctx.cfg.topology_aware || ctx.cfg.health_aware) {
        return Err(Gate::Off);
    }
    if youngest_first {
        return Err(Gate::YoungestFirst);
    }
    let (per_node, count) = need(snap)?;
    if offered.iter().any(|o| o.keeps_gpus) {
        return Err(Gate::Suspends);
    }
    if offered.iter().any(|o| o.on.is_empty()) {
        return Err(Gate::Unread);
    }
    let ranks = ranks(offered);
    // One-node candidates can be chosen; a multi-node one frees GPUs on several nodes at
    // once, which the per-node search does not weigh: it is never chosen (its GPUs count as
    // pinned there), but the simulation below removes it where cons_tres would.
    let single: Vec<Candidate> = offered
        .iter()
        .zip(&ranks)
        .map(|(o, &rank)| match o.on.as_slice() {
            [(node, gpus)] => Candidate {
                job: o.job,
                rank,
                node: *node,
                gpus: *gpus,
            },
            _ => Candidate {
                job: o.job,
                rank,
                node: usize::MAX,
                gpus: GpuSet::EMPTY,
            },
        })
        .collect();
    let nodes = victim_nodes(snap, offered, per_node, ctx);
    let plans = if count == 1 {
        vec![victims::choose(ctx.engine, &nodes, &single, per_node).ok_or(Gate::NoPlan)?]
    } else {
        cheapest_nodes(ctx, &nodes, &single, per_node, count)?
    };
    let mut victims_at: Vec<usize> = plans.iter().flat_map(|p| p.victims.clone()).collect();
    victims_at.sort_unstable();
    victims_at.dedup();
    let joint = victims::Plan {
        node: plans[0].node,
        gpus: plans[0].gpus,
        victims: victims_at,
    };
    let order = victims::order(&single, &joint);
    let planned: Vec<(usize, GpuSet)> = plans.iter().map(|p| (p.node, p.gpus)).collect();
    let outcome = simulate(&nodes, offered, &order, per_node, count).ok_or(Gate::Unsafe)?;
    // Wherever cons_tres may stop, healthy GPUs must suffice: then the re-pick gives the job
    // healthy ones and no node is excluded (no second try, no second set of victims).
    let healthy = |n: usize, free: GpuSet| {
        nodes
            .iter()
            .find(|v| v.index == n)
            .is_some_and(|v| free.difference(v.health.faulty).len() >= per_node)
    };
    if !outcome.fits.iter().all(|(n, f)| healthy(*n, *f)) {
        return Err(Gate::Unsafe);
    }
    if order.iter().enumerate().all(|(p, &i)| p == i) {
        return Err(Gate::AlreadyInOrder);
    }
    Ok(Decision::Reorder {
        victims: outcome.victims.iter().map(|&i| offered[i].job).collect(),
        order,
        nodes: planned,
    })
}

/// A multi-node job: the best plan of each node alone, then the `count` cheapest nodes
/// (fewest victims, then the lowest ranks, then the node index).
fn cheapest_nodes(
    ctx: &Ctx<'_>,
    nodes: &[VictimNode<'_>],
    cands: &[Candidate],
    per_node: usize,
    count: usize,
) -> Result<Vec<victims::Plan>, Gate> {
    let mut plans: Vec<(usize, Vec<u64>, victims::Plan)> = nodes
        .iter()
        .filter_map(|n| victims::choose(ctx.engine, std::slice::from_ref(n), cands, per_node))
        .map(|p| {
            let mut r: Vec<u64> = p.victims.iter().map(|&i| cands[i].rank).collect();
            r.sort_unstable_by(|a, b| b.cmp(a));
            (p.victims.len(), r, p)
        })
        .collect();
    if plans.len() < count {
        return Err(Gate::NoPlan);
    }
    plans.sort_by(|a, b| (a.0, &a.1, a.2.node).cmp(&(b.0, &b.1, b.2.node)));
    Ok(plans.into_iter().take(count).map(|(_, _, p)| p).collect())
}

#[cfg(test)]
mod tests;
