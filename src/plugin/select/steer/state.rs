//! The select hooks' process state: the `gputopo.conf` switches (`settings`), the health
//! cache keyed by node `Extra`, the per-node topology cache (`model`), the engine, and
//! counters (`stats`).
//!
//! Built lazily on the first hook call inside slurmctld (so slurmd and clients, which also
//! load the `.so`, never build it) and refreshed by `select_p_reconfigure`. slurmctld calls
//! the hooks from its scheduler threads with its own locks held; the locks here are short and
//! never held across a call into Slurm or cons_tres.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};

use gputopo_core::WideSet;
use gputopo_core::config::SelectConfig;
use gputopo_core::health::extra::history;
use gputopo_core::health::{
    GpuHealth, NodeHealth, Parsed, Reason, Status, merge_extra, read_extra,
};
use gputopo_core::placement::engine::Gputopo;
use gputopo_core::steer::health_cache::{HealthCache, Lookup};
use gputopo_core::steer::key_memo::KeyMemos;

use crate::plugin::select::steer::persist::{self, ReadBack};
use crate::slurm::log_labels::EVENTS;
use crate::slurm::node::NodeView;

mod model;
mod settings;
mod stats;

use model::ModelEntry;
pub use model::Models;
use settings::load_config;
pub use stats::Stats;

/// Everything the hooks keep between calls.
#[derive(Debug)]
pub struct SteerState {
    config: RwLock<SelectConfig>,
    health: Mutex<HealthCache<Arc<Parsed>>>,
    /// By node-table index (the slot of node `i` is `models[i]`, so the cache is bounded by
    /// the node table), looked up for every candidate on every call: an index, no hash.
    models: Mutex<Vec<Option<ModelEntry>>>,
    /// Excluded (faulty or drained) GPUs per node index, as last read (kept for the degraded
    /// path after a panic).
    faulty: Mutex<HashMap<usize, WideSet>>,
    /// Nodes already reported as too large to model (one log line per node).
    unmodelled: Mutex<HashSet<String>>,
    /// Per node, the health whose GPU states were last logged ([`Self::announce`]).
    announced: Mutex<HashMap<String, Arc<Parsed>>>,
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

impl SteerState {
    /// Empty caches and counters with the settings `config`.
    pub fn new(config: SelectConfig) -> Self {
        SteerState {
            config: RwLock::new(config),
            health: Mutex::new(HealthCache::new()),
            models: Mutex::new(Vec::new()),
            unmodelled: Mutex::new(HashSet::new()),
            announced: Mutex::new(HashMap::new()),
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

    /// Logs, at info level, each GPU of `node` whose state changed since the health last
    /// announced for it (the agent's verdicts, an administrator's drains and resumes): one
    /// line per GPU with its bus id, the states and who. Runs once per new `Extra` text of a
    /// node, not per call. After a start every GPU that is not ok is announced once.
    fn announce(&self, node: &str, new: &Arc<Parsed>) {
        let mut seen = self
            .announced
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let old = seen.get(node).map(|p| &p.health);
        for e in history::transitions(old, &new.health) {
            let bus = new
                .health
                .gpus
                .iter()
                .find(|g| g.index == e.index)
                .and_then(|g| g.device.bus.as_deref());
            log::info!(target: EVENTS, "{}", history::log_line(node, bus, &e));
        }
        seen.insert(node.to_owned(), Arc::clone(new));
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

    /// The node's published health (parsed once per `Extra` change), for a node of `gpus`
    /// GPUs. A bad value keeps the node's last good health (health fails closed), read in
    /// this process or, after a restart or takeover, from the persisted health
    /// ([`persist`]); each distinct bad value and each partial record is logged once at error
    /// level. While the persisted health is not read back, a node whose value is bad is
    /// withheld (every GPU faulty). Each good value is handed to [`persist`].
    pub(super) fn node_health(&self, node: &NodeView<'_>, gpus: usize) -> Option<Arc<NodeHealth>> {
        let mut cache = self.health.lock().unwrap_or_else(PoisonError::into_inner);
        let extra = node.extra();
        let parse = |s: &str| read_extra(s).map(|p| p.map(Arc::new));
        let found = cache.lookup(node.name(), extra.as_deref(), parse);
        let mut withhold = false;
        let first = matches!(
            found,
            Lookup::Parsed {
                first_seen: true,
                ..
            } | Lookup::Malformed {
                first_seen: true,
                ..
            }
        );
        if let Some(at) = first.then(|| not_utf8(node.extra_bytes())).flatten() {
            log::error!(
                "node {}: node Extra is not valid UTF-8 (first invalid byte at offset {at}); read with each invalid sequence replaced",
                node.name()
            );
        }
        match &found {
            Lookup::Parsed { value, first_seen } => {
                if *first_seen && !value.problems.is_empty() {
                    log::error!(
                        "node {}: node Extra: gputopo health used in part: {}",
                        node.name(),
                        value.problems.join("; ")
                    );
                }
                if *first_seen {
                    self.announce(node.name(), value);
                }
                persist::remember(node.name(), extra.as_deref().unwrap_or_default());
            }
            Lookup::Malformed {
                error,
                first_seen,
                kept,
            } => {
                let read_back = persist::read_back();
                withhold = match read_back {
                    ReadBack::Done => false,
                    ReadBack::Lost => kept.is_none(),
                    ReadBack::Pending | ReadBack::Failed => true,
                };
                if withhold && read_back == ReadBack::Lost {
                    // Saved so: a restart or takeover withholds it too, until it is good.
                    if let Ok(text) = merge_extra("", &withheld(gpus)) {
                        persist::remember(node.name(), &text);
                    }
                }
                if *first_seen {
                    let keeps = match kept {
                        _ if withhold => format!(
                            "its GPUs are withheld {}",
                            match read_back {
                                ReadBack::Pending =>
                                    "until the persisted GPU health is read back after a reconfigure",
                                ReadBack::Lost =>
                                    "until it is good again: the persisted GPU health was corrupt, so its last good health is unknown",
                                _ => "until the persisted GPU health can be read",
                            }
                        ),
                        Some(h) => format!(
                            "keeping its last good health (faulty GPUs: {})",
                            h.health.with_status(Status::Faulty)
                        ),
                        None => "no earlier health is known, so its GPUs are treated as healthy"
                            .to_string(),
                    };
                    log::error!("node {}: {error}; {keeps}", node.name());
                }
            }
            Lookup::NoInfo => {
                if extra.as_deref().is_none_or(|e| e.trim().is_empty()) {
                    persist::forget(node.name());
                }
            }
        }
        if withhold {
            return Some(Arc::new(withheld(gpus)));
        }
        found.value().map(|p| Arc::new(p.health.clone()))
    }

    /// Applies what the persisted health's thread found ([`persist::take`]), at the start of a
    /// job_test: the health cache starts over from a file read, and the models built from
    /// what it replaces (or while nodes were withheld) go. One atomic comparison otherwise.
    pub(super) fn sync_persisted(&self) {
        if !persist::pending() {
            return;
        }
        let Some(update) = persist::take() else {
            return;
        };
        if let Some(seeds) = update.seeds {
            let mut cache = self.health.lock().unwrap_or_else(PoisonError::into_inner);
            cache.clear();
            for (node, parsed) in seeds {
                cache.seed(&node, parsed);
            }
        }
        self.models
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// Node indices with a GPU published faulty or drained when last read.
    pub fn known_faulty_nodes(&self) -> Vec<usize> {
        let map = self.faulty.lock().unwrap_or_else(PoisonError::into_inner);
        map.iter()
            .filter(|(_, f)| !f.is_empty())
            .map(|(n, _)| *n)
            .collect()
    }

    /// Remembers node `index`'s excluded GPUs for the degraded path ([`Self::known_faulty_nodes`]).
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
}

/// Where `extra` stops being UTF-8, if it does ([`NodeView::extra`] reads it with each invalid
/// sequence replaced; the agent writes UTF-8, so such a value is someone else's or damaged).
fn not_utf8(extra: Option<&[u8]>) -> Option<usize> {
    std::str::from_utf8(extra?).err().map(|e| e.valid_up_to())
}

/// The health of a node withheld while its own cannot be known: every one of its `gpus` GPUs
/// faulty.
fn withheld(gpus: usize) -> NodeHealth {
    let reason = Reason::Other("health_not_read_back".to_string());
    NodeHealth::new(
        (0..gpus)
            .map(|index| GpuHealth {
                index,
                status: Status::Faulty,
                reasons: vec![reason.clone()],
                device: Default::default(),
            })
            .collect(),
        None,
        Vec::new(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_is_checked_where_extra_is_read() {
        assert_eq!(not_utf8(None), None);
        assert_eq!(not_utf8(Some(br#"{"gputopo":1}"#)), None);
        assert_eq!(not_utf8(Some(b"{\"r\":\"ecc\xff\"}")), Some(9));
    }

    #[test]
    fn a_withheld_node_has_every_gpu_faulty() {
        let h = withheld(3);
        assert_eq!(h.with_status(Status::Faulty).len(), 3);
        assert_eq!(h.gpus[2].reasons[0].token(), "health_not_read_back");
    }

    #[test]
    fn a_withheld_node_is_saved_as_a_record_that_reads_back_withheld() {
        let text = merge_extra("", &withheld(4)).expect("composes");
        let back = read_extra(&text).expect("parses").expect("a record");
        assert_eq!(back.health.with_status(Status::Faulty).len(), 4);
        assert!(back.problems.is_empty(), "{:?}", back.problems);
    }
}
