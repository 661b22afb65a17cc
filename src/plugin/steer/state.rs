//! The select hooks' process state: the `gputopo.conf` switches, the health cache keyed by
//! node `Extra`, the per-node topology cache, the engine, and counters.
//!
//! Built lazily on the first hook call inside slurmctld (so slurmd and clients, which also
//! load the `.so`, never build it) and refreshed by `select_p_reconfigure`. slurmctld calls
//! the hooks from its scheduler threads with its own locks held; the locks here are short and
//! never held across a call into Slurm or cons_tres.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock, mpsc};

use gputopo_core::config::{Config, SelectConfig};
use gputopo_core::health::{NodeHealth, Parsed, Status, read_extra};
use gputopo_core::placement::TopoHandle;
use gputopo_core::placement::engine::Gputopo;
use gputopo_core::steer::HealthMasks;
use gputopo_core::steer::fast_hash::FastHash;
use gputopo_core::steer::health_cache::{HealthCache, Lookup};
use gputopo_core::steer::key_memo::KeyMemos;
use gputopo_core::topology::NodeTopology;
use gputopo_core::topology::gres_model::from_slurm;
use gputopo_core::{GpuSet, WideSet};

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
    /// Calls served by the degraded path after a panic ([`super::degraded`]).
    pub degraded_calls: AtomicU64,
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
            "job_test calls={} own_us={} stock_us={} own_us_per_call={:.1} stock_us_per_call={:.1} extra_stock_calls={} replaced={} excluded={} degraded_calls={}",
            g(&self.calls),
            g(&self.own_ns) / 1000,
            g(&self.stock_ns) / 1000,
            g(&self.own_ns) as f64 / 1000.0 / calls as f64,
            g(&self.stock_ns) as f64 / 1000.0 / calls as f64,
            g(&self.extra_stock_calls),
            g(&self.replaced),
            g(&self.excluded),
            g(&self.degraded_calls),
        )
    }
}

/// Everything the hooks keep between calls.
#[derive(Debug)]
pub struct SteerState {
    config: RwLock<SelectConfig>,
    health: Mutex<HealthCache<Arc<Parsed>>>,
    /// By node-table index, looked up for every candidate on every call (hence [`FastHash`]).
    models: Mutex<HashMap<usize, ModelEntry, FastHash>>,
    /// Faulty GPUs per node index, as last read (kept for the degraded path after a panic).
    faulty: Mutex<HashMap<usize, WideSet>>,
    /// Nodes already reported as too large to model (one log line per node).
    unmodelled: Mutex<HashSet<String>>,
    /// Node rank keys per engine tables and node state ([`KeyMemos`]): node steering asks
    /// the engine once per state seen, not once per candidate per call.
    pub keys: Mutex<KeyMemos>,
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
    STATE.get_or_init(|| SteerState::new(load_config(None)))
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

/// Reads gputopo.conf (logging the settings) and saves its text as the last good one;
/// `None` for a bad file, logged as an error.
fn read_config() -> Option<SelectConfig> {
    let path = config_path();
    match Config::load_with_text(&path) {
        Ok((c, text)) => {
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
            save_last_good(text);
            Some(c.select)
        }
        Err(e) => {
            log::error!("{e}");
            None
        }
    }
}

/// Where the text of the last gputopo.conf that parsed is kept: 24.11 re-executes
/// slurmctld on `scontrol reconfigure`, so memory alone cannot carry it over.
fn last_good_path() -> Option<PathBuf> {
    crate::slurm::conf::state_save_location().map(|d| d.join("gputopo.conf.last-good"))
}

/// Hands `text` to the saver thread ([`saver`]): the hooks run under slurmctld's locks,
/// where no file is written.
fn save_last_good(text: String) {
    let Some(path) = last_good_path() else { return };
    let sent = saver().and_then(|tx| {
        tx.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .send((path, text))
            .ok()
    });
    if sent.is_none() {
        log::debug!("cannot save the last good gputopo.conf: no saver thread");
    }
}

/// Where the saver thread takes (file, text) pairs from.
type SaveQueue = mpsc::Sender<(PathBuf, String)>;

/// The plugin's own thread that writes the last good gputopo.conf, in order (a later copy
/// never overtaken by an earlier one), each to a temporary name and renamed, so a crash
/// never leaves a truncated copy. Started on first use; `None` if it cannot start.
fn saver() -> Option<&'static Mutex<SaveQueue>> {
    static SAVER: OnceLock<Option<Mutex<SaveQueue>>> = OnceLock::new();
    SAVER
        .get_or_init(|| {
            let (tx, rx) = mpsc::channel::<(PathBuf, String)>();
            std::thread::Builder::new()
                .name("gputopo-conf".into())
                .spawn(move || {
                    for (path, text) in rx {
                        let tmp = path.with_extension("last-good.tmp");
                        let wrote =
                            std::fs::write(&tmp, &text).and_then(|()| std::fs::rename(&tmp, &path));
                        if let Err(e) = wrote {
                            log::debug!("cannot save {}: {e}", path.display());
                        }
                    }
                })
                .ok()
                .map(|_| Mutex::new(tx))
        })
        .as_ref()
}

/// The settings saved by the last good read, if any.
fn saved_last_good() -> Option<SelectConfig> {
    let text = std::fs::read_to_string(last_good_path()?).ok()?;
    Config::parse(&text).ok().map(|c| c.select)
}

/// The settings to use: gputopo.conf when it is good; else `current` (a reconfigure in the
/// same process), else the last good file saved by an earlier read (a 24.11 reconfigure
/// re-executes slurmctld), else the safe defaults. A bad file never resets good settings.
fn load_config(current: Option<SelectConfig>) -> SelectConfig {
    if let Some(fresh) = read_config() {
        return fresh;
    }
    if let Some(kept) = current.or_else(saved_last_good) {
        log::error!("keeping the last good select settings");
        return kept;
    }
    log::error!("using the default select settings");
    SelectConfig::default()
}

fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

impl SteerState {
    /// Empty caches and counters with the settings `config`.
    pub fn new(config: SelectConfig) -> Self {
        SteerState {
            config: RwLock::new(config),
            health: Mutex::new(HealthCache::new()),
            models: Mutex::new(HashMap::default()),
            unmodelled: Mutex::new(HashSet::new()),
            keys: Mutex::new(KeyMemos::default()),
            faulty: Mutex::new(HashMap::new()),
            engine: Gputopo::new(),
            stats: Stats::default(),
        }
    }

    /// The current switches.
    pub fn config(&self) -> SelectConfig {
        self.config
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// `scontrol reconfigure`: re-reads gputopo.conf (a bad file keeps the settings in force)
    /// and forgets the cached topologies. The health cache stays: it is keyed by content,
    /// and it holds each node's last good health, which a reconfigure must not drop.
    pub fn reconfigure(&self) {
        let fresh = load_config(Some(self.config()));
        *self.config.write().unwrap_or_else(PoisonError::into_inner) = fresh;
        self.models
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        log::info!("select: {}", self.stats.summary());
    }

    /// The node's published health (parsed once per `Extra` change). A bad value keeps the
    /// node's last good health (health fails closed); each distinct bad value and each
    /// partial record is logged once at error level.
    pub(super) fn node_health(&self, node: &NodeView<'_>) -> Option<Arc<NodeHealth>> {
        let mut cache = self.health.lock().unwrap_or_else(PoisonError::into_inner);
        let extra = node.extra();
        let parse = |s: &str| read_extra(s).map(|p| p.map(Arc::new));
        let found = cache.lookup(node.name(), extra.as_deref(), parse);
        match &found {
            Lookup::Parsed {
                value,
                first_seen: true,
            } if !value.problems.is_empty() => {
                log::error!(
                    "node {}: node Extra: gputopo health used in part: {}",
                    node.name(),
                    value.problems.join("; ")
                );
            }
            Lookup::Malformed {
                error,
                first_seen: true,
                kept,
            } => {
                let keeps = match kept {
                    Some(h) => format!(
                        "keeping its last good health (faulty GPUs: {})",
                        h.health.with_status(Status::Faulty)
                    ),
                    None => {
                        "no earlier health is known, so its GPUs are treated as healthy".to_string()
                    }
                };
                log::error!("node {}: {error}; {keeps}", node.name());
            }
            _ => {}
        }
        found.value().map(|p| Arc::new(p.health.clone()))
    }

    /// Node indices with a GPU published faulty when their model was last built.
    pub fn known_faulty_nodes(&self) -> Vec<usize> {
        let map = self.faulty.lock().unwrap_or_else(PoisonError::into_inner);
        map.iter()
            .filter(|(_, f)| !f.is_empty())
            .map(|(n, _)| *n)
            .collect()
    }

    /// Remembers node `index`'s faulty GPUs for the degraded path ([`Self::known_faulty_nodes`]).
    pub(crate) fn note_faulty(&self, index: usize, faulty: WideSet) {
        self.faulty
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(index, faulty);
    }

    /// Reports once per node that it has more GPUs than gputopo's topology model: cons_tres
    /// places jobs there alone, and only published health is applied (`super::wide`).
    pub(super) fn note_unmodelled(&self, node: &str, gpus: usize) {
        let mut seen = self
            .unmodelled
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if seen.insert(node.to_string()) {
            log::warn!(
                "node {node}: {gpus} GPUs, more than the {} gputopo models; cons_tres places jobs there alone, and gputopo applies only its published health",
                gputopo_core::gpuset::MAX_GPUS
            );
        }
    }

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
        let key = node.index().0;
        let extra = node.extra_bytes();
        let signature = (gres.id(), gres.content_key(), node.registration());
        let mut digest = None;
        {
            let mut map = self.models.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(e) = map.get_mut(&key).filter(|e| e.extra.as_deref() == extra) {
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
        }
        if super::wide::is_wide(gres) {
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
        let model = Arc::new(NodeModel {
            topo: Arc::new(topo),
            health,
            masks: OnceLock::new(),
            // Slurm keeps topology records only when some gres.conf line has Type= or
            // Cores= (gres.c `_get_tot_gres_cnt`); a plain `File=` node has none.
            ranked: !types.is_empty(),
            types,
            tables,
        });
        self.models
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                key,
                ModelEntry {
                    signature,
                    content,
                    extra: extra.map(<[u8]>::to_vec),
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
    /// Slurm knows the node's GPU topology (it has topology records). A node without them
    /// (plain `File=` lines) is scheduled exactly as cons_tres does: never ranked, and its
    /// GPUs re-picked only to avoid faulty or degraded ones.
    pub ranked: bool,
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
        Some(
            self.types
                .iter()
                .filter(|(t, _)| type_id.is_none_or(|id| id == *t))
                .fold(GpuSet::EMPTY, |acc, (_, g)| acc.union(*g))
                .intersection(self.topo.all()),
        )
    }
}

#[derive(Debug)]
struct ModelEntry {
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
/// `unknown` last when `degraded_last` (the rule is [`super::wide::wide_health`]'s, on the
/// indices the topology model holds).
pub fn health_masks(health: Option<&NodeHealth>, cfg: &SelectConfig) -> HealthMasks {
    if health.is_none() || !cfg.health_aware {
        return HealthMasks::ALL_OK;
    }
    let w = super::wide::wide_health(health, cfg);
    HealthMasks {
        faulty: w.faulty.narrow(),
        degraded: w.degraded.narrow(),
    }
}
