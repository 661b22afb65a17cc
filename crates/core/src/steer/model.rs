//! What the select plugin knows of one node's GPUs: its interconnect, its published health,
//! its GPU types and the engine's tables for it ([`NodeModel`]), and the health masks every
//! decision reads ([`health_masks`], [`wide_health`]).
//!
//! The plugin builds one model per node from Slurm's GRES state and the node's `Extra`, keeps
//! it while neither changes (its per-node cache), and hands it to every decision of a
//! `select_p_job_test` call through the call's snapshot ([`super::call`]). Nothing here reads
//! Slurm: the model is plain data.

use std::sync::{Arc, OnceLock};

use super::HealthMasks;
use super::wide::WideHealth;
use crate::config::SelectConfig;
use crate::gpuset::GpuSet;
use crate::health::{NodeHealth, Status};
use crate::placement::TopoHandle;
use crate::topology::NodeTopology;
use crate::wideset::WideSet;

/// A node's GPUs as the decisions see them.
#[derive(Debug)]
pub struct NodeModel {
    /// The interconnect (its `name` is the node's).
    pub topo: Arc<NodeTopology>,
    /// Published health, if any.
    pub health: Option<Arc<NodeHealth>>,
    /// (type id, GPUs) per topology record.
    pub types: Vec<(u32, GpuSet)>,
    /// Slurm knows the node's GPU topology (it has topology records: some gres.conf line
    /// has `Type=` or `Cores=`, gres.c `_get_tot_gres_cnt`). A node without them (plain
    /// `File=` lines) is scheduled exactly as cons_tres does: never ranked, and its GPUs
    /// re-picked only to avoid faulty or degraded ones.
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
    /// The model of a node with interconnect `topo`, published `health`, topology records
    /// `types` (empty: Slurm keeps none) and the engine's `tables` for `topo`.
    pub fn new(
        topo: NodeTopology,
        health: Option<Arc<NodeHealth>>,
        types: Vec<(u32, GpuSet)>,
        tables: Option<TopoHandle>,
    ) -> Self {
        let untyped = types
            .iter()
            .fold(GpuSet::EMPTY, |acc, (_, g)| acc.union(*g))
            .intersection(topo.all());
        NodeModel {
            topo: Arc::new(topo),
            health,
            ranked: !types.is_empty(),
            untyped,
            types,
            tables,
            masks: OnceLock::new(),
        }
    }

    /// The node's name.
    pub fn name(&self) -> &str {
        &self.topo.name
    }

    /// The health masks of the node ([`health_masks`] with `cfg`), computed once per model.
    pub fn masks(&self, cfg: &SelectConfig) -> HealthMasks {
        *self
            .masks
            .get_or_init(|| health_masks(self.health.as_deref(), cfg))
    }

    /// GPUs the agent reports warm, when `PreferCool` is on (else none).
    pub fn warm(&self, cfg: &SelectConfig) -> GpuSet {
        match self.health.as_deref() {
            Some(h) if cfg.prefer_cool => h.warm.narrow(),
            _ => GpuSet::EMPTY,
        }
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

/// Health masks from a node's published verdicts: `faulty` (with the GPUs an administrator
/// drained) never allocated; `degraded` and `unknown` last when `degraded_last`
/// ([`wide_health`]'s rule, on the indices the topology model holds).
pub fn health_masks(health: Option<&NodeHealth>, cfg: &SelectConfig) -> HealthMasks {
    if health.is_none() {
        return HealthMasks::ALL_OK;
    }
    let w = wide_health(health, cfg);
    HealthMasks {
        faulty: w.faulty.narrow(),
        degraded: w.degraded.narrow(),
    }
}

/// Health sets from a node's published verdicts, on every index (nodes of any size):
/// `faulty` holds the GPUs never to allocate, faulty or drained (`gputopo drain`); with
/// `HealthAware=no` only the drains, which an administrator set by hand, count; `unknown`
/// counts as degraded with `DegradedLast=yes`.
pub fn wide_health(health: Option<&NodeHealth>, cfg: &SelectConfig) -> WideHealth {
    let Some(h) = health else {
        return WideHealth::default();
    };
    if !cfg.health_aware {
        return WideHealth {
            faulty: h.drained_wide(),
            degraded: WideSet::new(),
        };
    }
    WideHealth {
        faulty: h.excluded_wide(),
        degraded: if cfg.degraded_last {
            h.with_status_wide(Status::Degraded)
                .union(&h.with_status_wide(Status::Unknown))
        } else {
            WideSet::new()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    fn typed() -> NodeModel {
        let topo = fixtures::dgx1v();
        let types = vec![
            (7, GpuSet::parse_list("0-3").unwrap()),
            (9, GpuSet::parse_list("4-7").unwrap()),
        ];
        NodeModel::new(topo, None, types, None)
    }

    #[test]
    fn of_type_follows_the_topology_records() {
        let m = typed();
        assert!(m.ranked);
        assert_eq!(m.of_type(Some(9)), Some(GpuSet::parse_list("4-7").unwrap()));
        assert_eq!(m.of_type(None), Some(GpuSet::first_n(8)));
        assert_eq!(m.of_type(Some(1)), Some(GpuSet::EMPTY));
        let plain = NodeModel::new(fixtures::dgx1v(), None, Vec::new(), None);
        assert!(!plain.ranked);
        assert_eq!(plain.of_type(None), Some(GpuSet::first_n(8)));
        assert_eq!(plain.of_type(Some(7)), None, "typed on a count-only node");
    }

    #[test]
    fn masks_follow_the_switches() {
        let health = crate::health::read_extra(
            r#"{"gputopo":{"v":1,"gpus":[{"i":1,"s":"faulty"},{"i":2,"s":"degraded"},{"i":3,"s":"unknown"}]}}"#,
        )
        .unwrap()
        .unwrap()
        .health;
        let on = SelectConfig::default();
        let m = health_masks(Some(&health), &on);
        assert_eq!(m.faulty, GpuSet::parse_list("1").unwrap());
        assert_eq!(m.degraded, GpuSet::parse_list("2-3").unwrap());
        let no_last = SelectConfig {
            degraded_last: false,
            ..on.clone()
        };
        assert!(health_masks(Some(&health), &no_last).degraded.is_empty());
        let off = SelectConfig {
            health_aware: false,
            ..on
        };
        assert_eq!(health_masks(Some(&health), &off), HealthMasks::ALL_OK);
    }

    #[test]
    fn a_drained_gpu_is_never_allocated_even_without_health_awareness() {
        let health = crate::health::read_extra(
            r#"{"gputopo":{"v":1,"gpus":[{"i":1,"s":"faulty"},{"i":4,"s":"ok"}]},"gputopo_drain":{"v":1,"gpus":[{"i":4,"r":"RMA","u":"a","t":1}]}}"#,
        )
        .unwrap()
        .unwrap()
        .health;
        let on = SelectConfig::default();
        assert_eq!(
            health_masks(Some(&health), &on).faulty,
            GpuSet::parse_list("1,4").unwrap()
        );
        let off = SelectConfig {
            health_aware: false,
            ..on
        };
        assert_eq!(
            health_masks(Some(&health), &off).faulty,
            GpuSet::parse_list("4").unwrap(),
            "the agent's verdicts are off, the administrator's drain is not"
        );
        // Drains on a node without the agent.
        let bare = crate::health::read_extra(
            r#"{"gputopo_drain":{"v":1,"gpus":[{"i":0,"r":"x","u":"a","t":1}]}}"#,
        )
        .unwrap()
        .unwrap()
        .health;
        assert_eq!(wide_health(Some(&bare), &off).faulty.len(), 1);
    }
}
