//! The per-node model cache ([`SteerState::model`]): what gputopo knows of a node's GPUs,
//! keyed by content and rebuilt only when what it is built from changes.

use std::sync::{Arc, PoisonError};

use gputopo_core::GpuSet;
use gputopo_core::health::NodeHealth;
use gputopo_core::steer::model::NodeModel;
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
        if gres.is_wide() {
            return None; // health only (core::steer::wide)
        }
        let content = digest.unwrap_or_else(|| (gres.content_digest(), node.cores_per_socket()));
        let health = self.node_health(node, gres.count());
        let agent = health.as_deref().filter(|_| prefer_agent);
        let topo = build_topology(node, &gres.gpu_cores(), gres.links().as_deref(), agent)?;
        let types: Vec<(u32, GpuSet)> = gres.topo().iter().map(|t| (t.type_id, t.gpus)).collect();
        self.note_faulty(
            key,
            health
                .as_deref()
                .map(|h| h.excluded_wide())
                .unwrap_or_default(),
        );
        let tables = self.engine.handle(&topo);
        let model = Arc::new(NodeModel::new(topo, health, types, tables));
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
