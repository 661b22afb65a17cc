//! The state one `select_p_job_test` call decides over, read from Slurm once before the
//! first try: the job's request and every candidate node's GPUs (by type, allocated, shared
//! in use, topology, health). Node state does not change between the tries of one call
//! (slurmctld holds its job and node write locks, and cons_tres commits nothing before the
//! call returns), so the tries and the re-picks all read this one copy.

use std::sync::Arc;

use super::super::model::NodeModel;
use super::super::tries::Mode;
use super::super::wide::WideNode;
use super::answer::SharingRecord;
use crate::config::SelectConfig;
use crate::gpuset::GpuSet;
use crate::wideset::WideSet;

/// What the job asks of each node, read from its `gpu` requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuNeed {
    /// GPUs per node (at least 1).
    pub per_node: usize,
    /// The type id of a typed request (the first typed one), `None` for untyped.
    pub type_id: Option<u32>,
    /// A per-job count (`--gpus=N`) on a job that may span several nodes: cons_tres splits
    /// it, so `per_node` is only the least a node must offer (1).
    pub spread: bool,
}

/// One shared GRES request of the job (`--gres=shard:N`, `mps:N`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShareNeed {
    /// Its type id, `None` for untyped.
    pub type_id: Option<u32>,
    /// Shares per node (1 when the request counts them otherwise: every node serving the
    /// job gives it at least one).
    pub per_node: u64,
}

/// The job's side of the call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobFacts {
    /// Slurm's job id (for log lines).
    pub id: u32,
    /// RUN_NOW or WILL_RUN ([`super::super::tries::mode_of`]; other modes are forwarded).
    pub mode: Mode,
    /// Whole GPUs per node; `None` for a job without a `gpu` request.
    pub need: Option<GpuNeed>,
    /// The job's shared GRES requests (`shard`, `mps`), in request order.
    pub shares: Vec<ShareNeed>,
    /// Its minimum node count.
    pub min_nodes: usize,
    /// Nodes it requires (`--nodelist`), ascending.
    pub required: Vec<usize>,
    /// It takes whole nodes (`--exclusive`, `OverSubscribe=EXCLUSIVE`, whole-node GRES).
    pub whole_node: bool,
    /// The call offers preemptable jobs: cons_tres must see every node.
    pub preemption: bool,
    /// `--gres-flags=enforce-binding`: only GPUs near the job's cores.
    pub binding: bool,
    /// GRES reservations constrain this call's GPUs (23.11+ `resv_exc_t`): the re-pick
    /// chooses within what they allow ([`super::super::reserved`]).
    pub reserved: bool,
    /// `--gpus-per-socket`: the job's GPUs per socket follow the cores cons_tres allocated,
    /// so its pick stands when healthy ([`super::super::repick::keep_pinned`]).
    pub per_socket: bool,
}

impl JobFacts {
    /// True when gputopo steers this call at all; otherwise it goes to cons_tres unchanged.
    /// A job with whole GPUs is steered; one with shared GRES only is checked for health
    /// (RUN_NOW with `HealthAware=yes`, one try of every node); anything else is forwarded.
    pub fn steered(&self, cfg: &SelectConfig) -> bool {
        self.need.is_some() || (self.shared() && self.mode == Mode::RunNow && cfg.health_aware)
    }

    /// The job has a shared GRES request.
    pub fn shared(&self) -> bool {
        !self.shares.is_empty()
    }

    /// True for a job of shared GRES alone, whose nodes the health pre-filter judges by
    /// their shares ([`Snapshot::sharing`]).
    pub fn shares_only(&self) -> bool {
        self.need.is_none() && self.shared()
    }
}

/// A modelled candidate: one whose topology gputopo builds (at most 32 GPUs).
#[derive(Debug, Clone)]
pub struct Modelled {
    /// The node's model (shared with the plugin's cache: a reference count, not a copy).
    pub model: Arc<NodeModel>,
    /// GPUs allocated to jobs (node `gres_bit_alloc`).
    pub allocated: GpuSet,
    /// GPUs whose shared GRES (`shard`, `mps`) some job holds.
    pub shared_in_use: GpuSet,
    /// The node's GPU count in Slurm (the width of its GPU bitmaps).
    pub count: usize,
    /// Slurm's scheduling weight (`sched_weight`).
    pub weight: u64,
}

/// What gputopo knows of one candidate's GPUs.
#[derive(Debug, Clone)]
pub enum Gpus {
    /// Topology and health known.
    Modelled(Modelled),
    /// More GPUs than the topology model holds: health only ([`super::super::wide`]).
    /// Boxed: rare, and several times the size of the other variants, which every
    /// candidate of every call would carry.
    Wide(Box<WideNode>),
    /// Nothing gputopo can read (no `gpu` GRES, a topology that does not build): cons_tres
    /// alone decides there, in the final try.
    Opaque,
}

/// One candidate node of the call.
#[derive(Debug, Clone)]
pub struct NodeState {
    /// Its index in slurmctld's node table (a bit of the candidate bitmap).
    pub node: usize,
    /// Its GPUs.
    pub gpus: Gpus,
}

impl NodeState {
    /// The node's name when gputopo read its GPUs.
    pub fn name(&self) -> Option<&str> {
        match &self.gpus {
            Gpus::Modelled(m) => Some(m.model.name()),
            Gpus::Wide(w) => Some(&w.name),
            Gpus::Opaque => None,
        }
    }

    /// Its faulty GPUs, as far as known.
    pub fn faulty(&self, cfg: &SelectConfig) -> WideSet {
        match &self.gpus {
            Gpus::Modelled(m) => m.model.masks(cfg).faulty.into(),
            Gpus::Wide(w) => w.health.faulty.clone(),
            Gpus::Opaque => WideSet::new(),
        }
    }
}

/// A candidate's sharing devices, for a job of shared GRES alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSharing {
    /// Node index.
    pub node: usize,
    /// The records of each of the job's shared requests ([`JobFacts::shares`]), in order.
    pub records: Vec<Vec<SharingRecord>>,
}

/// Everything one call decides over.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The job.
    pub job: JobFacts,
    /// Every candidate cons_tres was offered, by ascending node index.
    pub nodes: Vec<NodeState>,
    /// For a job of shared GRES alone ([`JobFacts::shares_only`]) with `HealthAware=yes`:
    /// the modelled candidates' sharing devices, by ascending node index; empty otherwise.
    pub sharing: Vec<NodeSharing>,
    /// Candidates with `RestrictedCoresPerGPU` (24.11+), ascending: cons_tres reserves cores
    /// for the GPUs it picks there, so its pick stands when healthy
    /// ([`super::super::repick::keep_pinned`]).
    pub restricted: Vec<usize>,
}

impl Snapshot {
    /// The candidate with node index `node`.
    pub fn node(&self, node: usize) -> Option<&NodeState> {
        self.nodes
            .binary_search_by_key(&node, |n| n.node)
            .ok()
            .map(|i| &self.nodes[i])
    }

    /// True when cons_tres's GPU pick on `node` must stand unless it holds a faulty GPU
    /// ([`JobFacts::per_socket`], [`Snapshot::restricted`]).
    pub fn pinned(&self, node: usize) -> bool {
        self.job.per_socket || self.restricted.binary_search(&node).is_ok()
    }

    /// Candidate node indices, ascending.
    pub fn indices(&self) -> Vec<usize> {
        self.nodes.iter().map(|n| n.node).collect()
    }
}
