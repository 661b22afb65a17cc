//! Shared GRES (`shard`, `mps`) in a RUN_NOW success: every shared request's shares on each
//! chosen node are checked against the node's published health and moved off faulty (and,
//! when possible, degraded) GPUs ([`super::super::shared::decide`]).
//!
//! cons_tres picks shares per sharing record with no notion of health. A node that can serve
//! the job only with a faulty GPU's shares is excluded and cons_tres asked again, through the
//! same loop as whole-GPU jobs. GRES reservations of `gres/gpu` do not constrain shares in
//! cons_tres ([`super::super::reserved::by_gpu`]), so a replacement may take any healthy GPU
//! cons_tres could have used. Devices whose GPU is allocated whole are never chosen.

use super::super::shared::{Device, SharedDecision, SharedInput, decide};
use super::Ctx;
use super::answer::{Selection, SharedPick, SharedPicks};
use super::events::Event;
use super::snapshot::{Gpus, Snapshot};
use crate::gpuset::GpuSet;

/// One share selection to write (shares per sharing record of request `request`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedWrite {
    /// The request's position in the job's GRES list.
    pub request: usize,
    /// Node index.
    pub node: usize,
    /// Shares per record (same total as cons_tres's pick).
    pub shares: Vec<u64>,
}

/// Where [`judge`] adds what it decides: the judgement's events, share writes and exclusions.
pub(super) struct Out<'o> {
    pub(super) events: &'o mut Vec<Event>,
    pub(super) writes: &'o mut Vec<SharedWrite>,
    pub(super) exclude: &'o mut Vec<usize>,
}

/// Adds the shared requests' writes (or exclusions) to `out`.
pub(super) fn judge(snap: &Snapshot, sel: &Selection, ctx: &Ctx<'_>, out: Out<'_>) {
    if !ctx.cfg.health_aware {
        return;
    }
    for picks in &sel.shared {
        for (chosen, pick) in sel.nodes.iter().zip(&picks.on) {
            let Some(pick) = pick else { continue };
            // Health is the GPUs' (their model holds the node's published verdicts).
            let Some(Gpus::Modelled(m)) = snap.node(chosen.node).map(|n| &n.gpus) else {
                continue;
            };
            let health = m.model.masks(ctx.cfg);
            if !health.has_findings() {
                continue;
            }
            let devices = devices(pick, picks, chosen.near.narrow(), snap.job.binding);
            let input = SharedInput {
                devices: &devices,
                stock: &pick.stock,
                health,
                multiple: ctx.multiple_sharing,
            };
            let decision = decide(&input);
            if ctx.log {
                let line = line(snap.job.id, m.model.name(), &picks.name, &input, &decision);
                out.events.push(Event::Decision(line));
            }
            match decision {
                SharedDecision::Replace { shares, .. } => out.writes.push(SharedWrite {
                    request: picks.request,
                    node: chosen.node,
                    shares,
                }),
                SharedDecision::ExcludeNode { .. } => out.exclude.push(chosen.node),
                SharedDecision::Keep(_) => {}
            }
        }
    }
}

/// The node's sharing devices as the decision sees them: eligible when cons_tres could give
/// them to this job (type, no whole-GPU use, near its cores under enforce-binding).
fn devices(pick: &SharedPick, picks: &SharedPicks, near: GpuSet, binding: bool) -> Vec<Device> {
    pick.records
        .iter()
        .map(|r| {
            let is_near = !r.gpus.intersection(near).is_empty();
            Device {
                gpus: r.gpus,
                free: r.avail.saturating_sub(r.alloc),
                eligible: picks.type_id.is_none_or(|t| t == r.type_id)
                    && r.gpus.intersection(pick.whole).is_empty()
                    && (is_near || !binding),
                near: is_near,
            }
        })
        .collect()
}

/// GPUs of the records holding `shares` (for the decision line).
fn on_gpus(devices: &[Device], shares: &[u64]) -> GpuSet {
    devices
        .iter()
        .zip(shares)
        .filter(|(_, s)| **s > 0)
        .fold(GpuSet::EMPTY, |a, (d, _)| a.union(d.gpus))
}

/// One decision line, as for whole GPUs.
fn line(job: u32, node: &str, name: &str, input: &SharedInput<'_>, d: &SharedDecision) -> String {
    let stock = on_gpus(input.devices, input.stock);
    let what = match d {
        SharedDecision::Keep(r) => format!("keep GPUs {stock} ({r:?})"),
        SharedDecision::Replace { shares, why } => format!(
            "chose GPUs {} instead of {stock} ({why:?})",
            on_gpus(input.devices, shares)
        ),
        SharedDecision::ExcludeNode { need, have } => {
            format!("exclude node (needs {need}, {have} on non-faulty GPUs)")
        }
    };
    format!(
        "decision JobId={job} node={node} gres={name} count={} faulty={} degraded={} {what}",
        input.stock.iter().sum::<u64>(),
        input.health.faulty,
        input.health.degraded
    )
}
