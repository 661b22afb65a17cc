//! What to do with cons_tres's allocation after a RUN_NOW success: for every `gpu` request
//! and every chosen node, keep its GPUs, rewrite them (healthier or better connected), or
//! exclude the node because it would hand out a faulty GPU; then the same for shared GRES
//! ([`super::shares`]). Nothing is written unless no node is excluded: the plugin writes
//! the whole [`Placement`] once, before Slurm commits it.
//!
//! Per node, by what gputopo knows of it (the call's [`Snapshot`]):
//! - modelled, with topology records: the engine's re-pick ([`repick::repick`]), gated by
//!   `TopologyAware`, then `PreferCool`; GRES reservations narrow the eligible set
//!   ([`reserved::of_type`]);
//! - modelled, without topology records (cons_tres selected a count): Slurm's first fit
//!   minus faulty GPUs ([`first_fit::pick`]);
//! - beyond the topology model: health on every index ([`wide::correct`], [`wide::first_fit`]);
//! - a job whose GPUs are tied to its cores or sockets (`--gpus-per-socket`, the node's
//!   `RestrictedCoresPerGPU`): cons_tres's pick stands when healthy, else the node is
//!   excluded ([`keep_pinned`]);
//! - unknown to gputopo: cons_tres's pick stands.
//!
//! Nodes where cons_tres selected GPUs that are allocated (it plans a preemption; the job does
//! not start this cycle) are left alone. A node where Slurm's commit would record no GPU at
//! all is excluded (`Pick::takes_none`).

use super::super::cool::prefer_cool;
use super::super::explain::NodeNote;
use super::super::repick::{Constraints, Decision, NodeInput, keep_pinned, repick};
use super::super::wide::{self, WideDecision, WideNode};
use super::super::{HealthMasks, first_fit, reserved};
use super::Ctx;
use super::answer::{Chosen, GpuPicks, Pick, Selection};
use super::events::Event;
use super::shares::{self, SharedWrite};
use super::snapshot::{Gpus, Modelled, Snapshot};
use crate::gpuset::GpuSet;
use crate::placement::Prepared;
use crate::wideset::WideSet;

/// The answer for a RUN_NOW success.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Final: write this (possibly nothing) and return cons_tres's success.
    Place(Placement),
    /// These nodes (ascending) cannot serve the job without a faulty GPU (or would start it
    /// holding none): exclude them and ask cons_tres again.
    Exclude(Vec<usize>),
}

/// Everything the plugin writes before Slurm commits the allocation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placement {
    /// New GPU selections.
    pub gpu: Vec<GpuWrite>,
    /// New share selections.
    pub shared: Vec<SharedWrite>,
    /// The job's GPUs per node, for its `SystemComment` ([`super::super::explain::placed`]).
    pub notes: Vec<NodeNote>,
}

/// One GPU selection to write (`gres_bit_select[node]` of request `request`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuWrite {
    /// The request's position in the job's GRES list.
    pub request: usize,
    /// Node index.
    pub node: usize,
    /// The GPUs (same count as cons_tres's pick).
    pub set: WideSet,
    /// On a node where cons_tres left a count only: the node's GPU count (the width of the
    /// bitmap to allocate); `None` to rewrite the existing bitmap.
    pub count_only: Option<usize>,
}

/// One judgement in progress: what it reads, and what it has decided so far.
struct Judging<'j> {
    snap: &'j Snapshot,
    ctx: &'j Ctx<'j>,
    events: &'j mut Vec<Event>,
    placement: Placement,
    exclude: Vec<usize>,
    /// GPUs the job holds per node through an earlier request (typed requests such as
    /// `--gres=gpu:a:1,gpu:b:1` are separate list entries).
    taken: Vec<(usize, WideSet)>,
}

impl Judging<'_> {
    fn taken_on(&self, node: usize) -> WideSet {
        self.taken
            .iter()
            .filter(|(n, _)| *n == node)
            .fold(WideSet::new(), |a, (_, s)| a.union(s))
    }

    fn write(&mut self, request: usize, node: usize, set: WideSet, count_only: Option<usize>) {
        self.taken.push((node, set.clone()));
        self.placement.gpu.push(GpuWrite {
            request,
            node,
            set,
            count_only,
        });
    }
}

/// Judges cons_tres's `sel` for the job of `snap`. See the module docs.
pub fn judge(snap: &Snapshot, sel: &Selection, ctx: &Ctx<'_>, events: &mut Vec<Event>) -> Verdict {
    let mut j = Judging {
        snap,
        ctx,
        events,
        placement: Placement::default(),
        exclude: Vec::new(),
        taken: Vec::new(),
    };
    for picks in &sel.gpu {
        for (chosen, pick) in sel.nodes.iter().zip(&picks.on) {
            if pick.takes_none {
                j.events.push(Event::NoGpuSelected { node: chosen.node });
                j.exclude.push(chosen.node);
                continue;
            }
            let Some(state) = snap.node(chosen.node) else {
                continue; // not a candidate gputopo read: cons_tres's pick stands
            };
            match &state.gpus {
                Gpus::Opaque => {}
                Gpus::Wide(w) => j.on_wide(w, chosen, picks, pick),
                Gpus::Modelled(m) if !m.model.ranked => j.on_plain(m, chosen.node, picks, pick),
                Gpus::Modelled(m) => j.on_ranked(m, chosen, picks, pick),
            }
        }
    }
    if j.exclude.is_empty() {
        let out = shares::Out {
            events: j.events,
            writes: &mut j.placement.shared,
            exclude: &mut j.exclude,
        };
        shares::judge(snap, sel, ctx, out);
    }
    if j.exclude.is_empty() {
        Verdict::Place(j.placement)
    } else {
        j.exclude.sort_unstable();
        j.exclude.dedup();
        Verdict::Exclude(j.exclude)
    }
}

impl Judging<'_> {
    /// A node beyond the topology model: health on every index ([`wide`]).
    fn on_wide(&mut self, w: &WideNode, chosen: &Chosen, picks: &GpuPicks, pick: &Pick) {
        let job = &self.snap.job;
        let node = chosen.node;
        let keep = |j: &mut Self| {
            if let Some(s) = &pick.bits {
                j.placement.notes.push(NodeNote::plain(&w.name, s, None));
                j.taken.push((node, s.clone()));
            }
        };
        let Some(of_type) = w.of_type(picks.type_id) else {
            return keep(self);
        };
        let mut free = of_type.difference(&w.busy).difference(&self.taken_on(node));
        if job.binding {
            free = free.intersection(&chosen.near);
        }
        let stock_only = job.whole_node || job.reserved || self.snap.pinned(node);
        let decision = match pick.bits.as_ref().filter(|s| !s.is_empty()) {
            Some(stock) if !stock.intersection(&w.busy).is_empty() => {
                return keep(self); // preemption planned: not this cycle's allocation
            }
            Some(stock) if stock_only => {
                if stock.intersection(&w.health.faulty).is_empty() {
                    WideDecision::Keep
                } else {
                    WideDecision::Exclude
                }
            }
            Some(stock) => wide::correct(stock, &free, &w.health),
            None => {
                let count = usize::try_from(pick.count).unwrap_or(usize::MAX);
                if count == 0 || stock_only || picks.type_id.is_some() {
                    return keep(self);
                }
                match wide::first_fit(&free, &w.health, count) {
                    Some(set) => return self.wide_write(w, node, picks, set, Some(w.count)),
                    None => WideDecision::Exclude,
                }
            }
        };
        match decision {
            WideDecision::Keep => keep(self),
            WideDecision::Replace(set) => self.wide_write(w, node, picks, set, None),
            WideDecision::Exclude => self.exclude.push(node),
        }
    }

    fn wide_write(
        &mut self,
        w: &WideNode,
        node: usize,
        picks: &GpuPicks,
        set: WideSet,
        count_only: Option<usize>,
    ) {
        // Rare (nodes of more than 32 GPUs with a fault in cons_tres's way): always described.
        self.events.push(Event::Decision(format!(
            "decision JobId={} node={} chose {set} (health, beyond the topology model)",
            self.snap.job.id, w.name
        )));
        self.placement
            .notes
            .push(NodeNote::plain(&w.name, &set, None));
        self.write(picks.request, node, set, count_only);
    }

    /// A modelled node without topology records: cons_tres selected a count, and the commit
    /// would take the first free GPUs; gputopo writes Slurm's first fit minus faulty GPUs. A
    /// reservation holds a count there, which cons_tres already applied
    /// ([`reserved::by_gpu`]), so none is read.
    fn on_plain(&mut self, m: &Modelled, node: usize, picks: &GpuPicks, pick: &Pick) {
        let job = &self.snap.job;
        let binds = job.reserved && reserved::by_gpu(reserved::Request::Gpu, m.model.ranked);
        if job.whole_node || binds || picks.type_id.is_some() {
            return;
        }
        let count = usize::try_from(pick.count).unwrap_or(usize::MAX);
        if count == 0 {
            return;
        }
        let free = m
            .model
            .topo
            .all()
            .difference(m.allocated)
            .difference(m.shared_in_use)
            .difference(self.taken_on(node).narrow());
        let health = m.model.masks(self.ctx.cfg);
        let chosen = first_fit::pick(free, health, count);
        if self.ctx.log {
            self.events.push(Event::Decision(first_fit_line(
                job.id,
                m.model.name(),
                count,
                health,
                chosen,
            )));
        }
        match chosen {
            Some(set) => {
                let degraded = set.intersection(health.degraded);
                self.placement
                    .notes
                    .push(NodeNote::plain(m.model.name(), set, Some(degraded)));
                self.write(picks.request, node, set.into(), Some(m.count));
            }
            None => self.exclude.push(node),
        }
    }

    /// A modelled node with topology records: the engine's re-pick.
    fn on_ranked(&mut self, m: &Modelled, chosen: &Chosen, picks: &GpuPicks, pick: &Pick) {
        let (job, ctx) = (&self.snap.job, self.ctx);
        let node = chosen.node;
        let model = &m.model;
        let topo = &*model.topo;
        let Some(stock) = pick
            .bits
            .as_ref()
            .map(WideSet::narrow)
            .filter(|s| !s.is_empty())
        else {
            return;
        };
        if pick.width != topo.len() || m.count != topo.len() {
            self.events.push(Event::WidthMismatch {
                node,
                width: pick.width,
                gpus: topo.len(),
            });
            return;
        }
        if !stock.intersection(m.allocated).is_empty() {
            return; // preemption planned: not this cycle's allocation
        }
        let near = chosen.near.narrow();
        let of_type = model.of_type(picks.type_id).unwrap_or(stock);
        let input = NodeInput {
            topo,
            stock,
            constraints: Constraints {
                of_type: match pick.reserved {
                    Some(r) => reserved::of_type(of_type, stock, r),
                    None => of_type,
                },
                allocated: m.allocated.union(self.taken_on(node).narrow()),
                shared_in_use: m.shared_in_use,
                bound: job.binding.then_some(near),
            },
            health: model.masks(ctx.cfg),
            near,
            whole_node: job.whole_node,
        };
        let engine = Prepared::new(ctx.engine, model.tables.clone().map(|h| (topo, h)));
        let decision = if self.snap.pinned(node) {
            keep_pinned(&input)
        } else {
            // A better-connected set is taken only where TopologyAware is on; avoiding faulty
            // or degraded GPUs always applies.
            let decision = repick(&engine, &input).gate_topology(ctx.cfg.topology_aware);
            // Among equally connected sets, GPUs the agent does not report warm.
            let warm = model.warm(ctx.cfg);
            if warm.is_empty() {
                decision
            } else {
                prefer_cool(&engine, &input, decision, warm)
            }
        };
        if let Some(set) = decision.final_set(stock) {
            let note = NodeNote::ranked(&engine, topo, set, input.usable(), input.health.degraded);
            self.placement.notes.push(note);
        }
        if ctx.log {
            let line = decision_line(job.id, &input, &decision, picks);
            self.events.push(Event::Decision(line));
        }
        match decision {
            Decision::Replace { set, .. } => self.write(picks.request, node, set.into(), None),
            Decision::ExcludeNode(_) => {
                self.exclude.push(node);
                self.taken.push((node, stock.into()));
            }
            Decision::Keep(_) => self.taken.push((node, stock.into())),
        }
    }
}

/// The decision line of a modelled node with topology records.
fn decision_line<S: std::fmt::Display>(
    job: u32,
    input: &NodeInput<'_>,
    d: &Decision<S>,
    picks: &GpuPicks,
) -> String {
    let what = match d {
        Decision::Keep(r) => format!("keep {} ({r:?})", input.stock),
        Decision::Replace {
            set,
            why,
            old_score,
            new_score,
        } => format!(
            "chose {set} ({new_score}) instead of {} ({old_score}) ({why:?})",
            input.stock
        ),
        Decision::ExcludeNode(r) => format!("exclude node ({r:?})"),
    };
    format!(
        "decision JobId={job} node={} type={} count={} candidates={} faulty={} degraded={} {what}",
        input.topo.name,
        picks.type_name.as_deref().unwrap_or("any"),
        input.stock.len(),
        input.usable(),
        input.health.faulty,
        input.health.degraded,
    )
}

/// The decision line of a node without topology records.
fn first_fit_line(
    job: u32,
    node: &str,
    count: usize,
    health: HealthMasks,
    pick: Option<GpuSet>,
) -> String {
    let what = match pick {
        Some(set) => format!("chose {set} (first free, no topology)"),
        None => "exclude node (not enough non-faulty free GPUs)".to_string(),
    };
    format!(
        "decision JobId={job} node={node} type=any count={count} faulty={} degraded={} {what}",
        health.faulty, health.degraded
    )
}
