//! The per-node model cache ([`SteerState::model`]): what gputopo knows of a node's GPUs,
//! keyed by content and rebuilt only when what it is built from changes.

use std::sync::{Arc, OnceLock, PoisonError};

use gputopo_core::GpuSet;
use gputopo_core::config::SelectConfig;
use gputopo_core::health::{NodeHealth, Status};
use gputopo_core::placement::TopoHandle;
use gputopo_core::steer::HealthMasks;
use gputopo_core::topology::NodeTopology;
use gputopo_core::topology::gres_model::from_slurm;

use super::SteerState;
use crate::slurm::gres::NodeGres;
use crate::slurm::node::NodeView;

impl SteerState {
    /// What gputopo knows of a node's GPUs: its topology (`Links=`/`Cores=` from its GRES
    /// state in slurmctld, overridden by the agent's published links when
    /// `PreferAgentTopology`; NVSwitch boards, where Slurm's Links are all 0), its published
    /// health, and its GPU types. Cached per node (one entry per node-table slot, so the
    /// cache is bounded by the node count) and keyed by content: the digest of what it is
    /// built from ([`NodeGres::content_digest`]), the node's cores per socket and its
    /// `Extra` text. The digest reads every record, so it is computed only when the node's
    /// cheap signature moved (GRES state object and shape, [`NodeGres::content_key`], and
    /// registration time: slurmctld edits the GRES state in place on re-registration and
    /// `scontrol update Gres=`); a moved signature with the same digest keeps the model.
    /// `scontrol reconfigure` drops every model.
    pub fn model(
        &self,
        node: &NodeView<'_>,
        gres: &NodeGres<'_>,
        prefer_agent: bool,
    ) -> Option<Arc<NodeModel>> {
        self.model_in(&mut self.models(), node, gres, prefer_agent)
    }

    /// The model cache, locked: node steering takes it once per call and looks up every
    /// candidate in it ([`Self::model_in`]), not one lock per node.
    pub fn models(&self) -> Models<'_> {
        Models(self.models.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// [`Self::model`] with the cache already locked (`models`, from [`Self::models`]).
    pub fn model_in(
        &self,
        models: &mut Models<'_>,
        node: &NodeView<'_>,
        gres: &NodeGres<'_>,
        prefer_agent: bool,
    ) -> Option<Arc<NodeModel>> {
        let key = node.index().0;
        let extra = node.extra_bytes();
        let signature = (gres.id(), gres.content_key(), node.registration());
        let mut digest = None;
        if let Some(e) = models
            .0
            .get_mut(key)
            .and_then(Option::as_mut)
            .filter(|e| e.extra.as_deref() == extra)
        {
            if e.signature == signature {
                return Some(Arc::clone(&e.model));
            }
            // The cheap signature moved (a re-registration, a restart, an edit): compare
            // what the model is built from, and rebuild only if that changed.
            let d = (gres.content_digest(), node.cores_per_socket());
            if e.content == d {
                e.signature = signature;
                return Some(Arc::clone(&e.model));
            }
            digest = Some(d);
        }
        if crate::plugin::steer::wide::is_wide(gres) {
            return None; // health only, in super::wide
        }
        let content = digest.unwrap_or_else(|| (gres.content_digest(), node.cores_per_socket()));
        let health = self.node_health(node);
        let agent = health.as_deref().filter(|_| prefer_agent);
        let topo = build_topology(node, &gres.gpu_cores(), gres.links().as_deref(), agent)?;
        let types: Vec<(u32, GpuSet)> = gres.topo().iter().map(|t| (t.type_id, t.gpus)).collect();
        self.note_faulty(
            key,
            health
                .as_deref()
                .map(|h| h.with_status_wide(Status::Faulty))
                .unwrap_or_default(),
        );
        let tables = self.engine.handle(&topo);
        let untyped = types
            .iter()
            .fold(GpuSet::EMPTY, |acc, (_, g)| acc.union(*g))
            .intersection(topo.all());
        let model = Arc::new(NodeModel {
            topo: Arc::new(topo),
            health,
            masks: OnceLock::new(),
            // Slurm keeps topology records only when some gres.conf line has Type= or
            // Cores= (gres.c `_get_tot_gres_cnt`); a plain `File=` node has none.
            ranked: !types.is_empty(),
            untyped,
            types,
            tables,
        });
        let slots = &mut models.0;
        if slots.len() <= key {
            slots.resize_with(key + 1, || None);
        }
        slots[key] = Some(ModelEntry {
            signature,
            content,
            extra: extra.map(<[u8]>::to_vec),
            model: Arc::clone(&model),
        });
        Some(model)
    }
}

/// A node's GPUs as the decisions see them (see [`SteerState::model`]).
#[derive(Debug)]
pub struct NodeModel {
    /// The interconnect.
    pub topo: Arc<NodeTopology>,
    /// Published health, if any.
    pub health: Option<Arc<NodeHealth>>,
    /// (type id, GPUs) per topology record.
    pub types: Vec<(u32, GpuSet)>,
    /// Slurm knows the node's GPU topology (it has topology records). A node without them
    /// (plain `File=` lines) is scheduled exactly as cons_tres does: never ranked, and its
    /// GPUs re-picked only to avoid faulty or degraded ones.
    pub ranked: bool,
    /// Every GPU of a topology record (what an untyped request matches, read for every
    /// candidate on every call: computed once).
    untyped: GpuSet,
    /// The engine's interned tables for `topo` (`None` above 16 GPUs).
    pub tables: Option<TopoHandle>,
    /// [`health_masks`] of `health`, computed on first use: the settings it depends on
    /// change only on reconfigure, which drops every model.
    masks: OnceLock<HealthMasks>,
}

impl NodeModel {
    /// The health masks of the node ([`health_masks`] with `cfg`), computed once per model.
    pub fn masks(&self, cfg: &SelectConfig) -> HealthMasks {
        *self
            .masks
            .get_or_init(|| health_masks(self.health.as_deref(), cfg))
    }

    /// GPUs of type `type_id` (every GPU for an untyped request), as cons_tres matches types;
    /// `None` when unknown: a typed request on a node without topology records, where
    /// cons_tres matches the type through counts only.
    pub fn of_type(&self, type_id: Option<u32>) -> Option<GpuSet> {
        if !self.ranked {
            return type_id.is_none().then(|| self.topo.all());
        }
        let Some(id) = type_id else {
            return Some(self.untyped);
        };
        Some(
            self.types
                .iter()
                .filter(|(t, _)| id == *t)
                .fold(GpuSet::EMPTY, |acc, (_, g)| acc.union(*g))
                .intersection(self.topo.all()),
        )
    }
}

/// The locked model cache ([`SteerState::models`]).
#[derive(Debug)]
pub struct Models<'a>(std::sync::MutexGuard<'a, Vec<Option<ModelEntry>>>);

#[derive(Debug)]
pub(super) struct ModelEntry {
    /// When to look again: the GRES state object, its shape ([`NodeGres::content_key`]) and
    /// the node's last registration. Read on every call (a few words).
    signature: (
        usize,
        crate::slurm::gres::ContentKey,
        (crate::ffi::time_t, crate::ffi::time_t),
    ),
    /// What the model was built from, by content ([`NodeGres::content_digest`]: GPU count,
    /// topology records, types, `Links=`) and the node's cores per socket; compared only
    /// when the signature moved.
    content: (u64, usize),
    /// The node's `Extra` the model's health was read from, compared byte for byte.
    extra: Option<Vec<u8>>,
    model: Arc<NodeModel>,
}

/// Builds the core model of a node from Slurm's view with the core's one GRES constructor
/// (`topology::gres_model::from_slurm`: sockets from identical `Cores=`, NODE within and SYS
/// across, NVLinks from `Links=`, the same model `gputopo pick` builds from gres.conf), then
/// applies the agent's matrix.
fn build_topology(
    node: &NodeView<'_>,
    cores: &[Vec<u32>],
    links: Option<&[Vec<i32>]>,
    agent: Option<&NodeHealth>,
) -> Option<NodeTopology> {
    let mut topo = match from_slurm(node.name(), cores, links) {
        Ok(t) => t,
        Err(e) => {
            log::debug!("node {}: no GPU topology model: {e}", node.name());
            return None;
        }
    };
    if let Some(agent) = agent {
        agent.apply_to(&mut topo);
    }
    Some(topo)
}

/// Health masks from a node's published verdicts: `faulty` never allocated; `degraded` and
/// `unknown` last when `degraded_last` (the rule is [`crate::plugin::steer::wide::wide_health`]'s, on the
/// indices the topology model holds).
pub fn health_masks(health: Option<&NodeHealth>, cfg: &SelectConfig) -> HealthMasks {
    if health.is_none() || !cfg.health_aware {
        return HealthMasks::ALL_OK;
    }
    let w = crate::plugin::steer::wide::wide_health(health, cfg);
    HealthMasks {
        faulty: w.faulty.narrow(),
        degraded: w.degraded.narrow(),
    }
}
