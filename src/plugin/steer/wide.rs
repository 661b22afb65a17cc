//! Nodes wider than the topology model (more than `gputopo_core::gpuset::MAX_GPUS` GPUs):
//! cons_tres places jobs there as it would without gputopo (they are never ranked and join
//! only the final try), but published health still applies on every index Slurm has
//! ([`gputopo_core::steer::wide`]): the pre-filter drops such a node when its non-faulty
//! GPUs cannot serve the job, and after cons_tres chose, a pick that names a faulty GPU is
//! corrected on that node (or the node excluded and cons_tres asked again).

use gputopo_core::WideSet;
use gputopo_core::config::SelectConfig;
use gputopo_core::health::Status;
use gputopo_core::steer::narrow::Basis;
use gputopo_core::steer::wide::{self, WideDecision, WideHealth};

use crate::plugin::steer::nodes::GpuNeed;
use crate::plugin::steer::state::SteerState;
use crate::slurm::bitmap::{BitmapRef, NodeIndex};
use crate::slurm::gres::{CoreIndex, JobGres, NodeGres};
use crate::slurm::job::JobView;
use crate::slurm::node::{self, NodeView};

/// True when the node's GPUs are beyond the topology model (this module's business).
pub fn is_wide(gres: &NodeGres<'_>) -> bool {
    gres.count() > gputopo_core::gpuset::MAX_GPUS
}

/// A wide node's GPUs as the health rules see them.
struct WideNode<'a> {
    count: usize,
    records: Vec<(u32, WideSet, Option<BitmapRef<'a, CoreIndex>>)>,
    busy: WideSet,
    health: WideHealth,
}

impl<'a> WideNode<'a> {
    fn read(st: &SteerState, cfg: &SelectConfig, nv: &NodeView<'_>, ng: &NodeGres<'a>) -> Self {
        st.note_unmodelled(nv.name(), ng.count());
        let published = st.node_health(nv);
        st.note_faulty(
            nv.index().0,
            published
                .as_deref()
                .map(|h| h.with_status_wide(Status::Faulty))
                .unwrap_or_default(),
        );
        WideNode {
            count: ng.count(),
            records: ng.records_wide(),
            busy: ng.busy_wide(),
            health: wide_health(published.as_deref(), cfg),
        }
    }

    /// GPUs of the type (all for an untyped request); `None` for a typed request on a node
    /// without topology records (cons_tres matches the type by counts there).
    fn of_type(&self, type_id: Option<u32>) -> Option<WideSet> {
        let all = WideSet::first_n(self.count);
        if self.records.is_empty() {
            return type_id.is_none().then_some(all);
        }
        let typed = self
            .records
            .iter()
            .filter(|(t, _, _)| type_id.is_none_or(|id| id == *t))
            .fold(WideSet::new(), |acc, (_, g, _)| acc.union(g));
        Some(typed.intersection(&all))
    }

    /// GPUs whose cores intersect `cores` (GPUs without core binding count as near).
    fn near(&self, cores: &[CoreIndex]) -> WideSet {
        if self.records.is_empty() {
            return WideSet::first_n(self.count);
        }
        self.records
            .iter()
            .filter(|(_, _, c)| {
                c.as_ref()
                    .is_none_or(|b| cores.iter().any(|x| b.contains(*x)))
            })
            .fold(WideSet::new(), |acc, (_, g, _)| acc.union(g))
    }
}

/// Health sets from a node's published verdicts, as `state::health_masks` reads them.
pub fn wide_health(
    health: Option<&gputopo_core::health::NodeHealth>,
    cfg: &SelectConfig,
) -> WideHealth {
    let Some(h) = health.filter(|_| cfg.health_aware) else {
        return WideHealth::default();
    };
    WideHealth {
        faulty: h.with_status_wide(Status::Faulty),
        degraded: if cfg.degraded_last {
            h.with_status_wide(Status::Degraded)
                .union(&h.with_status_wide(Status::Unknown))
        } else {
            WideSet::new()
        },
    }
}

/// The health pre-filter for the wide nodes among `nodes` (the ones the model could not
/// take): the nodes to drop, as `nodes::unhealthy` does for modelled ones.
pub fn unhealthy(
    st: &SteerState,
    cfg: &SelectConfig,
    job: &JobView<'_>,
    nodes: &[NodeIndex],
    need: GpuNeed,
    (per_node, basis): (usize, Basis),
    required: &[NodeIndex],
) -> Vec<NodeIndex> {
    nodes
        .iter()
        .copied()
        .filter(|ni| !required.contains(ni))
        .filter(|&ni| {
            let Some(nv) = node::view(job, ni) else {
                return false;
            };
            let Some(ng) = nv.gpus().filter(is_wide) else {
                return false;
            };
            let w = WideNode::read(st, cfg, &nv, &ng);
            let Some(of_type) = w.of_type(need.type_id) else {
                return false;
            };
            let free = of_type.difference(&w.busy);
            let counts = wide::counts(&of_type, &free, &w.health);
            let out = counts.rules_out(per_node, basis);
            if out {
                log::debug!(
                    target: "gputopo::select",
                    "JobId={} node {} skipped: {} non-faulty GPU(s) of the type, {} needed, faulty {}",
                    job.id().0,
                    nv.name(),
                    counts.have,
                    need.per_node,
                    w.health.faulty
                );
            }
            out
        })
        .collect()
}

/// What to do with cons_tres's pick for one request on one wide node.
#[derive(Debug, PartialEq, Eq)]
pub enum Repick {
    /// Keep cons_tres's pick (or nothing to decide).
    Keep,
    /// Write `set`; `count_only` = the node's GPU count where cons_tres left a count only.
    Write {
        /// The GPUs.
        set: WideSet,
        /// See `JobGres::write_count_only`.
        count_only: Option<usize>,
    },
    /// The node cannot serve the request without a faulty GPU.
    Exclude,
}

/// The job's context on the node (see `gpus::repick_job`).
pub struct OnNode<'c> {
    /// Whole-node/exclusive: cons_tres's pick is kept (only a faulty GPU excludes the node).
    pub whole: bool,
    /// GRES reservations constrain the job: cons_tres's pick is the only eligible set.
    pub stock_only: bool,
    /// `--gres-flags=enforce-binding`: only GPUs near `cores`.
    pub binding: bool,
    /// The job's cores on the node.
    pub cores: &'c [CoreIndex],
    /// GPUs the job already got on the node through an earlier request.
    pub taken: &'c WideSet,
}

/// Health for one `gpu` request on a wide node after cons_tres succeeded.
pub fn repick(
    st: &SteerState,
    cfg: &SelectConfig,
    nv: &NodeView<'_>,
    ng: &NodeGres<'_>,
    req: &JobGres<'_>,
    ctx: &OnNode<'_>,
) -> Repick {
    let w = WideNode::read(st, cfg, nv, ng);
    let ni = nv.index();
    let Some(of_type) = w.of_type(req.type_id()) else {
        return Repick::Keep;
    };
    let mut free = of_type.difference(&w.busy).difference(ctx.taken);
    if ctx.binding {
        free = free.intersection(&w.near(ctx.cores));
    }
    let decision = match req.selected_wide(ni).filter(|s| !s.is_empty()) {
        Some(stock) if !stock.intersection(&w.busy).is_empty() => {
            return Repick::Keep; // preemption planned: not this cycle's allocation
        }
        Some(stock) if ctx.whole || ctx.stock_only => {
            if stock.intersection(&w.health.faulty).is_empty() {
                WideDecision::Keep
            } else {
                WideDecision::Exclude
            }
        }
        Some(stock) => wide::correct(&stock, &free, &w.health),
        None => {
            let count = usize::try_from(req.selected_count(ni)).unwrap_or(usize::MAX);
            if count == 0 || ctx.whole || ctx.stock_only || req.type_id().is_some() {
                return Repick::Keep;
            }
            return match wide::first_fit(&free, &w.health, count) {
                Some(set) => Repick::Write {
                    set,
                    count_only: Some(w.count),
                },
                None => Repick::Exclude,
            };
        }
    };
    match decision {
        WideDecision::Keep => Repick::Keep,
        WideDecision::Replace(set) => Repick::Write {
            set,
            count_only: None,
        },
        WideDecision::Exclude => Repick::Exclude,
    }
}
