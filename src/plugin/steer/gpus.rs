//! GPU re-pick after a successful RUN_NOW `select_p_job_test`: for every node cons_tres
//! chose and every `gpu` request of the job, ask the core ([`gputopo_core::steer::repick`])
//! and rewrite `gres_bit_select[node]` before Slurm commits it in
//! `select_p_select_nodeinfo_set`.
//!
//! Nothing is written unless every node has an answer: when a node would hand out a faulty
//! GPU and has no valid alternative, the caller gets the nodes to exclude and asks cons_tres
//! again. Nodes where cons_tres selected GPUs that are allocated (it plans to preempt their
//! jobs) are left alone: the job does not start in this cycle anyway.

use gputopo_core::GpuSet;
use gputopo_core::config::SelectConfig;
use gputopo_core::steer::Prepared;
use gputopo_core::steer::repick::{Constraints, Decision, NodeInput, ReplaceReason, repick};

use crate::plugin::steer::state::{Stats, SteerState, health_masks};
use crate::slurm::bitmap::NodeIndex;
use crate::slurm::gres::GPU;
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
    set: GpuSet,
}

/// Re-picks the GPUs of `job` on the nodes cons_tres just chose. See the module docs.
///
/// With `stock_only` (GRES reservations constrain the job in ways this plugin does not model)
/// cons_tres's pick is the only eligible set: it is kept, or its node excluded if faulty.
pub fn repick_job(
    st: &SteerState,
    cfg: &SelectConfig,
    job: &mut JobView<'_>,
    stock_only: bool,
) -> JobRepick {
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
    // GPUs this job already holds per node through an earlier gpu request (typed requests
    // such as --gres=gpu:a:1,gpu:b:1 are separate list entries).
    let mut taken: Vec<(NodeIndex, GpuSet)> = Vec::new();
    for (ri, req) in requests.iter().enumerate() {
        if req.name() != GPU {
            continue;
        }
        for (job_node, &ni) in nodes.iter().enumerate() {
            let Some(stock) = req.selected(ni).filter(|s| !s.is_empty()) else {
                continue;
            };
            // A missing node or GRES state keeps cons_tres's pick.
            let Some(nv) = node::view(job, ni) else {
                continue;
            };
            let Some(ng) = nv.gpus() else { continue };
            let Some(model) = st.model(&nv, &ng, cfg.prefer_agent_topology) else {
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
            let already = taken
                .iter()
                .filter(|(n, _)| *n == ni)
                .fold(GpuSet::EMPTY, |a, (_, s)| a.union(*s));
            let cores = res.cores_on(job_node);
            let near = ng.near_cores(&cores);
            let input = NodeInput {
                topo,
                stock,
                constraints: Constraints {
                    of_type: if stock_only {
                        stock
                    } else {
                        model.of_type(req.type_id())
                    },
                    allocated: node_alloc.union(already),
                    shared_in_use: ng.shared_in_use(),
                    bound: binding.then_some(near),
                },
                health: health_masks(model.health.as_deref(), cfg),
                near,
                whole_node: whole,
            };
            let engine = Prepared::new(&st.engine, model.tables.clone().map(|h| (&**topo, h)));
            let decision = repick(&engine, &input);
            let final_set = match decision {
                Decision::Replace { set, why, .. }
                    if cfg.topology_aware || why != ReplaceReason::Better =>
                {
                    writes.push(Write {
                        request: ri,
                        node: ni,
                        set,
                    });
                    set
                }
                Decision::ExcludeNode(_) => {
                    exclude.push(ni);
                    stock
                }
                _ => stock,
            };
            taken.push((ni, final_set));
            log_decision(cfg, job_id.0, nv.name(), &input, &decision, req.type_name());
        }
    }
    if !exclude.is_empty() {
        exclude.sort_unstable();
        exclude.dedup();
        Stats::add(&st.stats.excluded, exclude.len() as u64);
        return JobRepick::Exclude(exclude);
    }
    let mut replaced = 0;
    for w in &writes {
        match requests[w.request].write_selected(w.node, w.set) {
            Ok(()) => replaced += 1,
            Err(e) => log::error!("JobId={job_id}: could not rewrite GPU selection: {e}"),
        }
    }
    Stats::add(&st.stats.replaced, replaced as u64);
    JobRepick::Done { replaced }
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
    let candidates = input
        .constraints
        .eligible()
        .intersection(input.topo.all())
        .difference(input.health.faulty);
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
    if verbose {
        log::info!(target: "gputopo::select", "{msg}");
    } else {
        log::debug!(target: "gputopo::select", "{msg}");
    }
}
