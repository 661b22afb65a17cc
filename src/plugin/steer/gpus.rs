//! GPU re-pick after a successful RUN_NOW `select_p_job_test`: for every node cons_tres
//! chose and every `gpu` request of the job, ask the core ([`gputopo_core::steer::repick`])
//! and rewrite `gres_bit_select[node]` before Slurm commits it in
//! `select_p_select_nodeinfo_set`.
//!
//! Nothing is written unless every node has an answer: when a node would hand out a faulty
//! GPU and has no valid alternative, the caller gets the nodes to exclude and asks cons_tres
//! again. Nodes where cons_tres selected GPUs that are allocated (it plans to preempt their
//! jobs) are left alone: the job does not start in this cycle anyway.

use gputopo_core::config::SelectConfig;
use gputopo_core::steer::cool::prefer_cool;
use gputopo_core::steer::repick::{Constraints, Decision, NodeInput, repick};
use gputopo_core::steer::reserved;
use gputopo_core::steer::{HealthMasks, Prepared, first_fit};
use gputopo_core::{GpuSet, WideSet};

use crate::plugin::steer::explain;
use crate::plugin::steer::state::{Stats, SteerState};
use crate::plugin::steer::wide::{self, OnNode, Repick};
use crate::slurm::bitmap::NodeIndex;
use crate::slurm::gres::{GPU, ResvGres};
use crate::slurm::job::JobView;
use crate::slurm::node;

/// The outcome for the whole job.
#[derive(Debug, PartialEq, Eq)]
pub enum JobRepick {
    /// Selections final (some possibly rewritten).
    Done {
        /// How many node selections were replaced.
        replaced: usize,
    },
    /// These nodes cannot serve the job without a faulty GPU: exclude them and retry.
    Exclude(Vec<NodeIndex>),
}

/// One planned write.
struct Write {
    request: usize,
    node: NodeIndex,
    set: WideSet,
    /// On a node without topology records: the node's GPU count (the bitmap's width), as
    /// cons_tres left a count only ([`crate::slurm::gres::JobGres::write_count_only`]).
    count_only: Option<usize>,
}

/// Re-picks the GPUs of `job` on the nodes cons_tres just chose. See the module docs.
///
/// With `reserved` (GRES reservations constrain the job) the re-pick chooses within the GPUs
/// they allow on each node ([`reserved::of_type`]); on wide nodes cons_tres's pick is then
/// the only eligible set: it is kept, or its node excluded if faulty. On nodes without
/// topology records a reservation holds a count that cons_tres already applied
/// ([`reserved::by_gpu`]): the first-fit re-pick (healthy free GPUs) applies as without one.
pub fn repick_job(
    st: &SteerState,
    cfg: &SelectConfig,
    job: &mut JobView<'_>,
    reserved: Option<&ResvGres<'_>>,
) -> JobRepick {
    let stock_only = reserved.is_some();
    let Some(res) = job.resources() else {
        return JobRepick::Done { replaced: 0 };
    };
    let nodes = res.nodes();
    let whole = job.whole_node();
    let binding = job.enforce_binding();
    let job_id = job.id();
    let mut requests = job.gres_requests();
    let mut writes: Vec<Write> = Vec::new();
    let mut exclude: Vec<NodeIndex> = Vec::new();
    // What the job gets per node, for its SystemComment (written with the selections).
    let mut notes = Vec::new();
    // GPUs this job already holds per node through an earlier gpu request (typed requests
    // such as --gres=gpu:a:1,gpu:b:1 are separate list entries).
    let mut taken: Vec<(NodeIndex, WideSet)> = Vec::new();
    let taken_on = |taken: &[(NodeIndex, WideSet)], ni: NodeIndex| {
        taken
            .iter()
            .filter(|(n, _)| *n == ni)
            .fold(WideSet::new(), |a, (_, s)| a.union(s))
    };
    for (ri, req) in requests.iter().enumerate() {
        if req.name() != GPU {
            continue;
        }
        for (job_node, &ni) in nodes.iter().enumerate() {
            if req.commit_would_take_none(ni) {
                // cons_tres gave the node no GPU; Slurm would start the job without
                // recording any (see the method): exclude it, the job waits instead.
                let name = node::view(job, ni).map(|v| v.name().to_string());
                log::warn!(
                    "JobId={job_id}: cons_tres selected no GPU on node {}; node excluded for this try",
                    name.as_deref().unwrap_or("?")
                );
                exclude.push(ni);
                continue;
            }
            // A missing node or GRES state keeps cons_tres's pick.
            let Some(nv) = node::view(job, ni) else {
                continue;
            };
            let Some(ng) = nv.gpus() else { continue };
            if wide::is_wide(&ng) {
                let already = taken_on(&taken, ni);
                let cores = res.cores_on(job_node);
                let ctx = OnNode {
                    whole,
                    stock_only,
                    binding,
                    cores: &cores,
                    taken: &already,
                };
                match wide::repick(st, cfg, &nv, &ng, req, &ctx) {
                    Repick::Keep => {
                        if let Some(s) = req.selected_wide(ni) {
                            notes.push(explain::plain(nv.name(), &s, None));
                            taken.push((ni, s));
                        }
                    }
                    Repick::Write { set, count_only } => {
                        emit(
                            cfg.log_decisions,
                            &format!(
                                "decision JobId={job_id} node={} chose {set} (health, beyond the topology model)",
                                nv.name()
                            ),
                        );
                        writes.push(Write {
                            request: ri,
                            node: ni,
                            set: set.clone(),
                            count_only,
                        });
                        notes.push(explain::plain(nv.name(), &set, None));
                        taken.push((ni, set));
                    }
                    Repick::Exclude => exclude.push(ni),
                }
                continue;
            }
            let Some(model) = st.model(&nv, &ng, cfg.prefer_agent_topology) else {
                continue;
            };
            if !model.ranked {
                // cons_tres selected a count only; the commit would take the first free GPUs.
                // A reservation binds GPU by GPU only where Slurm has topology records
                // (`reserved::by_gpu`): here it held a count, which cons_tres applied.
                let binds = stock_only && reserved::by_gpu(reserved::Request::Gpu, model.ranked);
                if whole || binds || req.type_id().is_some() {
                    continue;
                }
                let count = usize::try_from(req.selected_count(ni)).unwrap_or(usize::MAX);
                if count == 0 {
                    continue;
                }
                let already = taken_on(&taken, ni).narrow();
                let free = model
                    .topo
                    .all()
                    .difference(ng.allocated())
                    .difference(ng.shared_in_use())
                    .difference(already);
                let health = model.masks(cfg);
                let pick = first_fit::pick(free, health, count);
                log_first_fit(cfg, job_id.0, nv.name(), count, health, pick);
                match pick {
                    Some(set) => {
                        let degraded = set.intersection(health.degraded);
                        notes.push(explain::plain(nv.name(), set, Some(degraded)));
                        writes.push(Write {
                            request: ri,
                            node: ni,
                            set: set.into(),
                            count_only: Some(ng.count()),
                        });
                        taken.push((ni, set.into()));
                    }
                    None => exclude.push(ni),
                }
                continue;
            }
            let Some(stock) = req.selected(ni).filter(|s| !s.is_empty()) else {
                continue;
            };
            let topo = &model.topo;
            let width = req.selected_width(ni).unwrap_or(0);
            if width != topo.len() || ng.count() != topo.len() {
                log::debug!(
                    "JobId={job_id} node {}: selection has {width} bits, node {} GPUs; kept",
                    nv.name(),
                    topo.len()
                );
                continue;
            }
            let node_alloc = ng.allocated();
            if !stock.intersection(node_alloc).is_empty() {
                continue; // preemption planned: not this cycle's allocation
            }
            let already = taken_on(&taken, ni).narrow();
            let cores = res.cores_on(job_node);
            let near = ng.near_cores(&cores);
            let input = NodeInput {
                topo,
                stock,
                constraints: Constraints {
                    of_type: {
                        let of_type = model.of_type(req.type_id()).unwrap_or(stock);
                        match reserved {
                            Some(r) => {
                                reserved::of_type(of_type, stock, req.reserved_on(r, ni, width))
                            }
                            None => of_type,
                        }
                    },
                    allocated: node_alloc.union(already),
                    shared_in_use: ng.shared_in_use(),
                    bound: binding.then_some(near),
                },
                health: model.masks(cfg),
                near,
                whole_node: whole,
            };
            let engine = Prepared::new(&st.engine, model.tables.clone().map(|h| (&**topo, h)));
            let decision = repick(&engine, &input);
            // A better-connected set is taken only where Slurm knows the topology and
            // TopologyAware is on; avoiding faulty or degraded GPUs always applies.
            let decision = decision.gate_topology(cfg.topology_aware && model.ranked);
            // Among equally connected sets, GPUs the agent does not report warm.
            let warm = model.health.as_deref().map(|h| h.warm.narrow());
            let decision = match warm.filter(|w| cfg.prefer_cool && !w.is_empty()) {
                Some(w) => prefer_cool(&engine, &input, decision, w),
                None => decision,
            };
            if let Some(set) = decision.final_set(stock) {
                let usable = input.usable();
                let note = explain::ranked(&engine, nv.name(), topo, set, usable, input.health);
                notes.push(note);
            }
            let final_set = match decision {
                Decision::Replace { set, .. } => {
                    writes.push(Write {
                        request: ri,
                        node: ni,
                        set: set.into(),
                        count_only: None,
                    });
                    set
                }
                Decision::ExcludeNode(_) => {
                    exclude.push(ni);
                    stock
                }
                Decision::Keep(_) => stock,
            };
            taken.push((ni, final_set.into()));
            log_decision(cfg, job_id.0, nv.name(), &input, &decision, req.type_name());
        }
    }
    if let Some(r) = excluded(st, exclude) {
        return r;
    }
    let mut replaced = 0;
    for w in &writes {
        let req = &mut requests[w.request];
        let written = match w.count_only {
            Some(width) => req.write_count_only(w.node, width, &w.set),
            None => req.write_selected(w.node, &w.set),
        };
        match written {
            Ok(()) => replaced += 1,
            Err(e) => log::error!("JobId={job_id}: could not rewrite GPU selection: {e}"),
        }
    }
    Stats::add(&st.stats.replaced, replaced as u64);
    explain::placed(job, &notes);
    JobRepick::Done { replaced }
}

/// The answer for a job with nodes to exclude (sorted, deduplicated, counted); `None` when
/// there are none.
pub(super) fn excluded(st: &SteerState, mut nodes: Vec<NodeIndex>) -> Option<JobRepick> {
    if nodes.is_empty() {
        return None;
    }
    nodes.sort_unstable();
    nodes.dedup();
    Stats::add(&st.stats.excluded, nodes.len() as u64);
    Some(JobRepick::Exclude(nodes))
}

/// One line per node decision: at info level with `LogDecisions=yes`, else at debug level
/// when Slurm's `DebugFlags` has `SelectType` or `Gres`.
fn log_decision<S: std::fmt::Display>(
    cfg: &SelectConfig,
    job: u32,
    node: &str,
    input: &NodeInput<'_>,
    d: &Decision<S>,
    gpu_type: Option<&str>,
) {
    let verbose = cfg.log_decisions;
    if !verbose && !crate::slurm::conf::debug_select_or_gres() {
        return;
    }
    let candidates = input.usable();
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
    let msg = format!(
        "decision JobId={job} node={node} type={} count={} candidates={candidates} faulty={} degraded={} {what}",
        gpu_type.unwrap_or("any"),
        input.stock.len(),
        input.health.faulty,
        input.health.degraded,
    );
    emit(verbose, &msg);
}

/// Writes a decision line: info level with `LogDecisions=yes`, else debug.
pub(super) fn emit(verbose: bool, msg: &str) {
    if verbose {
        log::info!(target: "gputopo::select", "{msg}");
    } else {
        log::debug!(target: "gputopo::select", "{msg}");
    }
}

/// The decision line for a node without topology records (see [`log_decision`]).
fn log_first_fit(
    cfg: &SelectConfig,
    job: u32,
    node: &str,
    count: usize,
    health: HealthMasks,
    pick: Option<GpuSet>,
) {
    if !cfg.log_decisions && !crate::slurm::conf::debug_select_or_gres() {
        return;
    }
    let what = match pick {
        Some(set) => format!("chose {set} (first free, no topology)"),
        None => "exclude node (not enough non-faulty free GPUs)".to_string(),
    };
    let msg = format!(
        "decision JobId={job} node={node} type=any count={count} faulty={} degraded={} {what}",
        health.faulty, health.degraded
    );
    emit(cfg.log_decisions, &msg);
}
