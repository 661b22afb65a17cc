//! Reading Slurm into the core's types for one `select_p_job_test` call: the job
//! ([`job_facts`]), every candidate node once ([`snapshot`]), and after a RUN_NOW success
//! what cons_tres selected ([`selection`]). Nothing here decides; the decisions are
//! [`gputopo_core::steer::call`]'s.
//!
//! A node's GPU model comes from the per-node cache ([`SteerState::model_in`], locked once
//! per call); nodes wider than the topology model are read for health only; a node whose GPUs
//! gputopo cannot read is [`Gpus::Opaque`] (cons_tres alone decides there).

use gputopo_core::WideSet;
use gputopo_core::config::SelectConfig;
use gputopo_core::steer::call::{
    Chosen, GpuNeed, GpuPicks, Gpus, JobFacts, Mode, Modelled, NodeSharing, NodeState, Pick,
    Selection, ShareNeed, SharedPick, SharedPicks, SharingRecord, Snapshot,
};
use gputopo_core::steer::model::wide_health;
use gputopo_core::steer::tries::CallMode;
use gputopo_core::steer::wide::WideNode;

use crate::ffi;
use crate::plugin::select::steer::state::SteerState;
use crate::slurm::EntryPtr;
use crate::slurm::bitmap::{BitmapMut, NodeIndex};
use crate::slurm::gres::{CoreIndex, GPU, JobGres, NodeGres, ResvGres};
use crate::slurm::job::JobView;
use crate::slurm::node::{self, NodeView};
use crate::slurm::preempt::PreempteeOut;

/// Arguments of one `select_p_job_test` call that the hook reads.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// `max_nodes`.
    pub max_nodes: u32,
    /// The call's mode.
    pub mode: CallMode,
    /// The call offers preemptable jobs: no narrowing (cons_tres may append preemptees to
    /// its output list on each successful try, and must see every node to plan preemption).
    pub preemption: bool,
    /// The preemption candidates (`preemptee_candidates`) when the call offers some:
    /// reordered once the snapshot is read ([`crate::plugin::select::steer::preempt`]).
    pub candidates: Option<&'a EntryPtr<'a, ffi::xlist>>,
    /// cons_tres's victims list of the call: cut back before each try after the first and
    /// when the call does not succeed, so only the final try's victims are preempted.
    pub victims_out: Option<&'a PreempteeOut<'a>>,
    /// GRES reservations that constrain this job's GPUs (23.11+ `resv_exc_t` lists): the
    /// re-pick then chooses within what they allow ([`gputopo_core::steer::reserved`]).
    pub reserved: Option<ResvGres<'a>>,
}

/// The job's per-node GPU need, `None` when it asks for no GPU.
///
/// `--gres=gpu:N`/`--gpus-per-node=N` give N; `--gpus=N` on a one-node job gives N; other
/// forms (`--gpus` over several nodes, per task or socket) give 1 (`spread`): a node must
/// hold at least one usable GPU, and cons_tres spreads the rest.
fn need_of(reqs: &[JobGres<'_>], max_nodes: u32) -> Option<GpuNeed> {
    let gpus: Vec<_> = reqs.iter().filter(|r| r.name() == GPU).collect();
    if gpus.is_empty() {
        return None;
    }
    let per_node: u64 = gpus.iter().map(|r| r.per_node()).sum();
    let per_job: u64 = gpus.iter().map(|r| r.per_job()).sum();
    let (n, spread) = if per_node > 0 {
        (per_node, false)
    } else if per_job > 0 && max_nodes == 1 {
        (per_job, false)
    } else {
        (1, true)
    };
    Some(GpuNeed {
        per_node: usize::try_from(n).unwrap_or(usize::MAX).max(1),
        type_id: gpus.iter().find_map(|r| r.type_id()),
        spread,
    })
}

/// The job's side of a steered call (`mode` from `tries::mode_of`).
pub fn job_facts(job: &mut JobView<'_>, call: &Call<'_>, mode: Mode) -> JobFacts {
    let reqs = job.gres_requests();
    JobFacts {
        id: job.id().0,
        mode,
        need: need_of(&reqs, call.max_nodes),
        shares: reqs
            .iter()
            .filter(|r| r.is_shared())
            .map(|r| ShareNeed {
                type_id: r.type_id(),
                per_node: r.per_node().max(1),
            })
            .collect(),
        min_nodes: job.min_nodes(),
        required: job.required_nodes().into_iter().map(|n| n.0).collect(),
        whole_node: job.whole_node(),
        preemption: call.preemption,
        binding: job.enforce_binding(),
        reserved: call.reserved.is_some(),
        per_socket: reqs.iter().any(|r| r.name() == GPU && r.per_socket() > 0),
    }
}

/// The low byte of `sched_weight`, which cons_tres rewrites for each job it tests ("Favor
/// nodes with more co-located GPUs": `0xff - near_gpu_cnt`, cons_tres/job_test.c, 24.11.5;
/// node_scheduler.c's layout keeps it for cons_tres). When gputopo reads the weight it holds
/// zero or what cons_tres left from another job, so node ranking leaves it out: it ranks by
/// `Weight=` and Slurm's state bits (completing, rebooting, powered down), and cons_tres
/// still applies its own co-location preference inside the nodes offered.
const COLOCATION_BITS: u64 = 0xff;

/// Every candidate of the call's bitmap `offered` (ascending node indices), read once.
pub fn snapshot(
    st: &SteerState,
    cfg: &SelectConfig,
    job: &mut JobView<'_>,
    facts: JobFacts,
    offered: &BitmapMut<'_, NodeIndex>,
) -> Snapshot {
    let mut nodes = Vec::with_capacity(offered.count());
    let mut sharing = Vec::new();
    let mut restricted = Vec::new();
    let shared: Vec<String> = if facts.shares_only() && cfg.health_aware {
        job.gres_requests()
            .iter()
            .filter(|r| r.is_shared())
            .map(|r| r.name().to_owned())
            .collect()
    } else {
        Vec::new()
    };
    let job = &*job;
    let mut models = st.models();
    for ni in offered.iter_set() {
        let view = node::view(job, ni);
        if view.is_some_and(|nv| nv.restricted_cores_per_gpu() > 0) {
            restricted.push(ni.0);
        }
        let gpus = view
            .and_then(|nv| {
                let ng = nv.gpus()?;
                if ng.is_wide() {
                    return Some(Gpus::Wide(Box::new(wide_node(st, cfg, &nv, &ng))));
                }
                let model = st.model_in(&mut models, &nv, &ng, cfg.prefer_agent_topology)?;
                Some(Gpus::Modelled(Modelled {
                    model,
                    allocated: ng.allocated(),
                    shared_in_use: ng.shared_in_use(),
                    count: ng.count(),
                    weight: nv.sched_weight() & !COLOCATION_BITS,
                }))
            })
            .unwrap_or(Gpus::Opaque);
        if !shared.is_empty() && matches!(gpus, Gpus::Modelled(_)) {
            sharing.extend(node_sharing(job, ni, &shared));
        }
        nodes.push(NodeState { node: ni.0, gpus });
    }
    Snapshot {
        job: facts,
        nodes,
        sharing,
        restricted,
    }
}

/// Node `ni`'s records of each shared GRES in `names` (the job's shared requests, in order).
fn node_sharing(job: &JobView<'_>, ni: NodeIndex, names: &[String]) -> Option<NodeSharing> {
    let nv = node::view(job, ni)?;
    let records = names
        .iter()
        .map(|name| {
            nv.gres(name)
                .map(|g| g.shared_records().into_iter().map(sharing_record).collect())
                .unwrap_or_default()
        })
        .collect();
    Some(NodeSharing {
        node: ni.0,
        records,
    })
}

fn sharing_record(r: crate::slurm::gres::SharedRecord) -> SharingRecord {
    SharingRecord {
        gpus: r.gpus,
        type_id: r.type_id,
        avail: r.avail,
        alloc: r.alloc,
    }
}

/// A node beyond the topology model, for health only (one warning per node says so).
fn wide_node(
    st: &SteerState,
    cfg: &SelectConfig,
    nv: &NodeView<'_>,
    ng: &NodeGres<'_>,
) -> WideNode {
    st.note_unmodelled(nv.name(), ng.count());
    let published = st.node_health(nv, ng.count());
    st.note_faulty(
        nv.index().0,
        published
            .as_deref()
            .map(|h| h.excluded_wide())
            .unwrap_or_default(),
    );
    WideNode {
        name: nv.name().to_owned(),
        count: ng.count(),
        types: ng
            .records_wide()
            .into_iter()
            .map(|(t, gpus, _)| (t, gpus))
            .collect(),
        busy: ng.busy_wide(),
        health: wide_health(published.as_deref(), cfg),
    }
}

/// What cons_tres selected in a successful RUN_NOW try: its nodes (with the GPUs near the
/// job's cores there), and every `gpu` and shared request's pick on each.
pub fn selection(job: &mut JobView<'_>, call: &Call<'_>) -> Selection {
    let Some(res) = job.resources() else {
        return Selection::default();
    };
    let nodes = res.nodes();
    let chosen: Vec<Chosen> = nodes
        .iter()
        .enumerate()
        .map(|(job_node, &ni)| Chosen {
            node: ni.0,
            near: node::view(job, ni)
                .and_then(|nv| nv.gpus())
                .map(|ng| near(&ng, &res.cores_on(job_node)))
                .unwrap_or_default(),
        })
        .collect();
    let mut sel = Selection {
        nodes: chosen,
        ..Selection::default()
    };
    for (ri, req) in job.gres_requests().iter().enumerate() {
        if req.name() == GPU {
            let on = nodes
                .iter()
                .map(|&ni| {
                    let width = req.selected_width(ni).unwrap_or(0);
                    Pick {
                        takes_none: req.commit_would_take_none(ni),
                        bits: req.selected_wide(ni),
                        width,
                        count: req.selected_count(ni),
                        reserved: call
                            .reserved
                            .as_ref()
                            .map(|r| req.reserved_on(r, ni, width)),
                    }
                })
                .collect();
            sel.gpu.push(GpuPicks {
                request: ri,
                type_id: req.type_id(),
                type_name: req.type_name().map(str::to_owned),
                on,
            });
        } else if req.is_shared() {
            let on = nodes
                .iter()
                .map(|&ni| {
                    let stock = req.shared_selected(ni)?;
                    let shared = node::view(job, ni)?.gres(req.name())?;
                    Some(SharedPick {
                        stock,
                        records: shared
                            .shared_records()
                            .into_iter()
                            .map(sharing_record)
                            .collect(),
                        // The GPUs allocated whole (the shared GRES's alt GRES).
                        whole: shared.shared_in_use(),
                    })
                })
                .collect();
            sel.shared.push(SharedPicks {
                request: ri,
                name: req.name().to_owned(),
                type_id: req.type_id(),
                on,
            });
        }
    }
    sel
}

/// GPUs whose `Cores=` overlap `cores`, at any width: GPUs without core binding count as
/// near; a node without topology records has none near, unless it is beyond the topology
/// model (then every GPU, so that enforce-binding does not rule out all of them).
fn near(ng: &NodeGres<'_>, cores: &[CoreIndex]) -> WideSet {
    if !ng.is_wide() {
        return ng.near_cores(cores).into();
    }
    let records = ng.records_wide();
    if records.is_empty() {
        return WideSet::first_n(ng.count());
    }
    records
        .iter()
        .filter(|(_, _, c)| {
            c.as_ref()
                .is_none_or(|b| cores.iter().any(|x| b.contains(*x)))
        })
        .fold(WideSet::new(), |acc, (_, g, _)| acc.union(g))
}
