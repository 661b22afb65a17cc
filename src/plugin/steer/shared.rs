//! Shared GRES (`shard`, `mps`) with health: after a RUN_NOW success, every shared request's
//! shares on each chosen node are checked against the node's published health and moved off
//! faulty (and, when possible, degraded) GPUs before Slurm commits them
//! ([`gputopo_core::steer::shared`] decides; [`crate::slurm::gres::SharedRecord`] and
//! `JobGres::write_shared` read and write Slurm's arrays).
//!
//! cons_tres picks shares per sharing record with no notion of health, so without this a
//! shard job lands on a GPU published faulty whenever the GPUs before it are busy. A node
//! that can serve the job only with a faulty GPU's shares is excluded and cons_tres asked
//! again, through the same loop as whole-GPU jobs (`super::run::drive`); a job with shared
//! requests only runs that loop with one try of every offered node (no ranking: shares carry
//! no interconnect question). Whole-GPU jobs already avoid GPUs whose shares are in use
//! ([`crate::slurm::gres::NodeGres::shared_in_use`]); devices whose GPU is allocated whole
//! are never chosen here.

use gputopo_core::GpuSet;
use gputopo_core::config::SelectConfig;
use gputopo_core::steer::shared::{Device, SharedDecision, SharedInput, decide};

use crate::ffi;
use crate::plugin::steer::gpus::{JobRepick, emit, excluded};
use crate::plugin::steer::run::Call;
use crate::plugin::steer::state::{Stats, SteerState};
use crate::slurm::bitmap::{BitmapMut, NodeIndex};
use crate::slurm::job::JobView;
use crate::slurm::node;

/// The tries for a job without a `gpu` request: one try of every offered node when it has a
/// shared request, the call is RUN_NOW and `HealthAware=yes`; `None` (cons_tres alone)
/// otherwise.
pub fn tiers(
    job: &mut JobView<'_>,
    bitmap: &BitmapMut<'_, NodeIndex>,
    cfg: &SelectConfig,
    call: Call<'_>,
) -> Option<Vec<Vec<usize>>> {
    let run_now = u32::from(call.mode) & ffi::SELECT_MODE_BASE == ffi::SELECT_MODE_RUN_NOW;
    let shared = job.gres_requests().iter().any(|r| r.is_shared());
    (run_now && cfg.health_aware && shared).then(|| vec![bitmap.iter_set().map(|n| n.0).collect()])
}

/// One planned write.
struct Write {
    request: usize,
    node: NodeIndex,
    shares: Vec<u64>,
}

/// Checks (and rewrites) the shares of every shared request on the nodes cons_tres chose.
/// Nothing is written unless no node has to be excluded. GRES reservations of `gres/gpu` do
/// not constrain shares in cons_tres ([`gputopo_core::steer::reserved::by_gpu`]), so none
/// are read here: a replacement may take any healthy GPU cons_tres could have used.
pub fn repick_shared(st: &SteerState, cfg: &SelectConfig, job: &mut JobView<'_>) -> JobRepick {
    if !cfg.health_aware {
        return JobRepick::Done { replaced: 0 };
    }
    let Some(res) = job.resources() else {
        return JobRepick::Done { replaced: 0 };
    };
    let nodes = res.nodes();
    let binding = job.enforce_binding();
    let job_id = job.id().0;
    let multiple = crate::slurm::conf::multiple_sharing_gres_pj();
    let mut requests = job.gres_requests();
    let mut writes = Vec::new();
    let mut exclude = Vec::new();
    for (ri, req) in requests.iter().enumerate() {
        if !req.is_shared() {
            continue;
        }
        for (job_node, &ni) in nodes.iter().enumerate() {
            let Some(stock) = req.shared_selected(ni) else {
                continue;
            };
            let Some(nv) = node::view(job, ni) else {
                continue;
            };
            let (Some(gpus), Some(shared)) = (nv.gpus(), nv.gres(req.name())) else {
                continue;
            };
            // Health is the GPUs' (their model holds the node's published verdicts).
            let Some(model) = st.model(&nv, &gpus, cfg.prefer_agent_topology) else {
                continue;
            };
            let health = model.masks(cfg);
            if !health.has_findings() {
                continue;
            }
            let near = gpus.near_cores(&res.cores_on(job_node));
            let whole = shared.shared_in_use(); // the GPUs allocated whole (its alt GRES)
            let devices: Vec<Device> = shared
                .shared_records()
                .iter()
                .map(|r| {
                    let is_near = !r.gpus.intersection(near).is_empty();
                    Device {
                        gpus: r.gpus,
                        free: r.avail.saturating_sub(r.alloc),
                        eligible: req.type_id().is_none_or(|t| t == r.type_id)
                            && r.gpus.intersection(whole).is_empty()
                            && (is_near || !binding),
                        near: is_near,
                    }
                })
                .collect();
            let input = SharedInput {
                devices: &devices,
                stock: &stock,
                health,
                multiple,
            };
            let d = decide(&input);
            log_decision(cfg, job_id, nv.name(), req.name(), &input, &d);
            match d {
                SharedDecision::Replace { shares, .. } => writes.push(Write {
                    request: ri,
                    node: ni,
                    shares,
                }),
                SharedDecision::ExcludeNode { .. } => exclude.push(ni),
                SharedDecision::Keep(_) => {}
            }
        }
    }
    if let Some(r) = excluded(st, exclude) {
        return r;
    }
    let mut replaced = 0;
    for w in &writes {
        match requests[w.request].write_shared(w.node, &w.shares) {
            Ok(()) => replaced += 1,
            Err(e) => log::error!("JobId={job_id}: could not rewrite shared GRES selection: {e}"),
        }
    }
    Stats::add(&st.stats.replaced, replaced as u64);
    JobRepick::Done { replaced }
}

/// GPUs of the records holding `shares` (for the decision line).
fn on_gpus(devices: &[Device], shares: &[u64]) -> GpuSet {
    devices
        .iter()
        .zip(shares)
        .filter(|(_, s)| **s > 0)
        .fold(GpuSet::EMPTY, |a, (d, _)| a.union(d.gpus))
}

/// One line per node decision, as for whole GPUs (info with `LogDecisions=yes`, else debug
/// with `DebugFlags=SelectType`/`Gres`).
fn log_decision(
    cfg: &SelectConfig,
    job: u32,
    node: &str,
    name: &str,
    input: &SharedInput<'_>,
    d: &SharedDecision,
) {
    if !cfg.log_decisions && !crate::slurm::conf::debug_select_or_gres() {
        return;
    }
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
    let msg = format!(
        "decision JobId={job} node={node} gres={name} count={} faulty={} degraded={} {what}",
        input.stock.iter().sum::<u64>(),
        input.health.faulty,
        input.health.degraded
    );
    emit(cfg.log_decisions, &msg);
}
