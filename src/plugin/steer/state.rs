//! The select hooks' process state: the `gputopo.conf` switches, the health cache keyed by
//! node `Extra`, the per-node topology cache, the engine, and counters.
//!
//! Built lazily on the first hook call inside slurmctld (so slurmd and clients, which also
//! load the `.so`, never build it) and refreshed by `select_p_reconfigure`. slurmctld calls
//! the hooks from its scheduler threads with its own locks held; the locks here are short and
//! never held across a call into Slurm or cons_tres.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};

use gputopo_core::GpuSet;
use gputopo_core::config::{Config, SelectConfig};
use gputopo_core::health::{NodeHealth, Status, parse_extra};
use gputopo_core::placement::TopoHandle;
use gputopo_core::placement::engine::Gputopo;
use gputopo_core::steer::HealthMasks;
use gputopo_core::steer::health_cache::{HealthCache, Lookup};
use gputopo_core::topology::NodeTopology;
use gputopo_core::topology::gres_model::from_slurm;

use crate::slurm::gres::NodeGres;
use crate::slurm::node::NodeView;

/// Counters for the decision log and the benchmark (`contrib/bench-select.sh`).
#[derive(Debug, Default)]
pub struct Stats {
    /// `select_p_job_test` calls seen (all modes).
    pub calls: AtomicU64,
    /// Time spent in gputopo's own work inside those calls, excluding cons_tres (ns).
    pub own_ns: AtomicU64,
    /// Time spent inside cons_tres (ns).
    pub stock_ns: AtomicU64,
    /// Extra cons_tres calls made by narrowing and exclusion.
    pub extra_stock_calls: AtomicU64,
    /// GPU selections replaced by the engine's choice.
    pub replaced: AtomicU64,
    /// Nodes excluded because they would have handed out a faulty GPU.
    pub excluded: AtomicU64,
    /// When the counters were last logged (seconds since the epoch).
    pub logged_at: AtomicU64,
}

impl Stats {
    /// True (at most once per `every_secs`) when the counters are due for a log line.
    pub fn due(&self, every_secs: u64) -> bool {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let last = self.logged_at.load(Ordering::Relaxed);
        now >= last + every_secs
            && self
                .logged_at
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }

    /// Adds `d` to a counter.
    pub fn add(counter: &AtomicU64, d: u64) {
        counter.fetch_add(d, Ordering::Relaxed);
    }

    /// One line for the log and `contrib/bench-select.sh`:
    /// `job_test calls=N own_us=.. stock_us=.. own_us_per_call=.. stock_us_per_call=.. ...`.
    pub fn summary(&self) -> String {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let calls = g(&self.calls).max(1);
        format!(
            "job_test calls={} own_us={} stock_us={} own_us_per_call={:.1} stock_us_per_call={:.1} extra_stock_calls={} replaced={} excluded={}",
            g(&self.calls),
            g(&self.own_ns) / 1000,
            g(&self.stock_ns) / 1000,
            g(&self.own_ns) as f64 / 1000.0 / calls as f64,
            g(&self.stock_ns) as f64 / 1000.0 / calls as f64,
            g(&self.extra_stock_calls),
            g(&self.replaced),
            g(&self.excluded),
        )
    }
}

/// Everything the hooks keep between calls.
#[derive(Debug)]
pub struct SteerState {
    config: RwLock<SelectConfig>,
    health: Mutex<HealthCache<Arc<NodeHealth>>>,
    models: Mutex<HashMap<usize, ModelEntry>>,
    /// The placement engine (interns per-topology tables).
    pub engine: Gputopo,
    /// Counters.
    pub stats: Stats,
}

const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<SteerState>();
};

static STATE: OnceLock<SteerState> = OnceLock::new();

/// The state, built on first use (config read then).
pub fn state() -> &'static SteerState {
    STATE.get_or_init(|| SteerState {
        config: RwLock::new(load_config()),
        health: Mutex::new(HealthCache::new()),
        models: Mutex::new(HashMap::new()),
        engine: Gputopo::new(),
        stats: Stats::default(),
    })
}

/// `select_p_reconfigure`: refresh the state if it exists (24.11 also calls this right after
/// start-up; building the state then reads the config once).
pub fn reconfigure() {
    match STATE.get() {
        Some(st) => st.reconfigure(),
        None => {
            state();
        }
    }
}

/// Where gputopo.conf is: `$GPUTOPO_CONF`, else next to slurmctld's slurm.conf.
fn config_path() -> PathBuf {
    let slurm_conf = crate::slurm::conf::slurm_conf_path();
    let env = std::env::var_os("GPUTOPO_CONF").map(PathBuf::from);
    gputopo_core::config::config_path(env.as_deref(), slurm_conf.as_deref())
}

/// Reads gputopo.conf; a bad file is logged as an error and the safe defaults are used.
fn load_config() -> SelectConfig {
    let path = config_path();
    match Config::load(&path) {
        Ok(c) => {
            log::info!(
                "select config from {}: HealthAware={} TopologyAware={} NodeRanking={} DegradedLast={} PreferAgentTopology={} LogDecisions={}",
                path.display(),
                yes(c.select.health_aware),
                yes(c.select.topology_aware),
                yes(c.select.node_ranking),
                yes(c.select.degraded_last),
                yes(c.select.prefer_agent_topology),
                yes(c.select.log_decisions),
            );
            c.select
        }
        Err(e) => {
            log::error!("{e}; using the default select settings");
            SelectConfig::default()
        }
    }
}

fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

impl SteerState {
    /// The current switches.
    pub fn config(&self) -> SelectConfig {
        self.config
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// `scontrol reconfigure`: re-reads gputopo.conf and forgets cached health/topologies.
    pub fn reconfigure(&self) {
        let fresh = load_config();
        *self.config.write().unwrap_or_else(PoisonError::into_inner) = fresh;
        self.health
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        self.models
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        log::info!("select: {}", self.stats.summary());
    }

    /// The node's published health (parsed once per `Extra` change); `None` when there is
    /// none or it is malformed (logged once per distinct malformed value).
    fn node_health(&self, node: &NodeView<'_>) -> Option<Arc<NodeHealth>> {
        let mut cache = self.health.lock().unwrap_or_else(PoisonError::into_inner);
        let parse = |s: &str| parse_extra(s).map(|h| h.map(Arc::new));
        match cache.lookup(node.name(), node.extra(), parse) {
            Lookup::Parsed(h) => Some(Arc::clone(h)),
            Lookup::Malformed { error, first_seen } => {
                if first_seen {
                    log::error!(
                        "node {}: {error}; its GPUs are treated as healthy",
                        node.name()
                    );
                }
                None
            }
            Lookup::NoInfo => None,
        }
    }

    /// What gputopo knows of a node's GPUs: its topology (`Links=`/`Cores=` from its GRES
    /// state in slurmctld, overridden by the agent's published links when
    /// `PreferAgentTopology`; NVSwitch boards, where Slurm's Links are all 0), its published
    /// health, and its GPU types. Cached per node and rebuilt when the node's GRES state
    /// object or its `Extra` text changes (both are replaced, not edited, by slurmctld on
    /// registration, reconfigure and `scontrol update`), or on `scontrol reconfigure`.
    pub fn model(
        &self,
        node: &NodeView<'_>,
        gres: &NodeGres<'_>,
        prefer_agent: bool,
    ) -> Option<Arc<NodeModel>> {
        let key = node.index().0;
        let extra = node.extra();
        {
            let map = self.models.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(e) = map.get(&key) {
                if e.gres_id == gres.id() && e.extra.as_deref() == extra {
                    return Some(Arc::clone(&e.model));
                }
            }
        }
        let health = self.node_health(node);
        let agent = health.as_deref().filter(|_| prefer_agent);
        let topo = build_topology(node, &gres.gpu_cores(), gres.links().as_deref(), agent)?;
        let types = gres.topo().iter().map(|t| (t.type_id, t.gpus)).collect();
        let tables = self.engine.handle(&topo);
        let model = Arc::new(NodeModel {
            topo: Arc::new(topo),
            health,
            types,
            tables,
        });
        self.models
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                key,
                ModelEntry {
                    gres_id: gres.id(),
                    extra: extra.map(str::to_string),
                    model: Arc::clone(&model),
                },
            );
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
    /// The engine's interned tables for `topo` (`None` above 16 GPUs).
    pub tables: Option<TopoHandle>,
}

impl NodeModel {
    /// GPUs of type `type_id` (every GPU for an untyped request), as cons_tres matches types.
    pub fn of_type(&self, type_id: Option<u32>) -> GpuSet {
        self.types
            .iter()
            .filter(|(t, _)| type_id.is_none_or(|id| id == *t))
            .fold(GpuSet::EMPTY, |acc, (_, g)| acc.union(*g))
            .intersection(self.topo.all())
    }
}

#[derive(Debug)]
struct ModelEntry {
    gres_id: usize,
    extra: Option<String>,
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
/// `unknown` last when `degraded_last`.
pub fn health_masks(health: Option<&NodeHealth>, cfg: &SelectConfig) -> HealthMasks {
    let Some(h) = health.filter(|_| cfg.health_aware) else {
        return HealthMasks::ALL_OK;
    };
    HealthMasks {
        faulty: h.with_status(Status::Faulty),
        degraded: if cfg.degraded_last {
            h.with_status(Status::Degraded)
                .union(h.with_status(Status::Unknown))
        } else {
            GpuSet::EMPTY
        },
    }
}
