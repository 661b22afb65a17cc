//! cons_tres's answer to one try, as the plugin reads it after the forwarded call: failure, a
//! planned start (WILL_RUN), or the allocation it selected (RUN_NOW), which Slurm has not
//! committed yet. Only the chosen nodes' selections are read here; everything else the
//! decisions need is in the call's [`super::Snapshot`].

use super::super::reserved::Reserved;
use crate::gpuset::GpuSet;
use crate::wideset::WideSet;

/// What one forwarded call answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// cons_tres found no allocation on the offered nodes.
    Failed,
    /// WILL_RUN success: the start time cons_tres planned (seconds since the epoch).
    Planned {
        /// Planned start.
        start: i64,
    },
    /// RUN_NOW success: what it selected.
    Selected(Selection),
}

/// The allocation cons_tres built (`job_resrcs` and the job's GRES selections).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// The chosen nodes, in `job_resrcs` order.
    pub nodes: Vec<Chosen>,
    /// The job's `gpu` requests, in the order of its GRES list.
    pub gpu: Vec<GpuPicks>,
    /// The job's shared requests (`shard`, `mps`), in the order of its GRES list.
    pub shared: Vec<SharedPicks>,
}

/// One node of the allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chosen {
    /// Node index.
    pub node: usize,
    /// GPUs whose `Cores=` overlap the cores cons_tres gave the job there (GPUs without core
    /// binding count as near).
    pub near: WideSet,
}

/// One `gpu` request's selection on every chosen node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuPicks {
    /// Its position in the job's GRES request list (where the writes go).
    pub request: usize,
    /// Its type id (`None`: untyped).
    pub type_id: Option<u32>,
    /// Its type name (for log lines).
    pub type_name: Option<String>,
    /// The selection per chosen node, in [`Selection::nodes`]' order.
    pub on: Vec<Pick>,
}

/// A request's selection on one node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pick {
    /// Slurm's commit would record no GPU here and start the job anyway (a per-node request
    /// with nothing selected; 23.11.4 after a restart, `JobGres::commit_would_take_none`).
    pub takes_none: bool,
    /// The GPUs selected (`gres_bit_select[node]`), when that bitmap exists (it may be
    /// empty).
    pub bits: Option<WideSet>,
    /// That bitmap's width (0 without one).
    pub width: usize,
    /// The count selected (`gres_cnt_node_select[node]`), what the commit takes where no
    /// bits were selected (nodes without topology records).
    pub count: u64,
    /// What the call's GRES reservations leave this request here; `None` when the call
    /// has none.
    pub reserved: Option<Reserved>,
}

/// One shared request's selection on every chosen node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedPicks {
    /// Its position in the job's GRES request list.
    pub request: usize,
    /// The GRES name (`shard`, `mps`).
    pub name: String,
    /// Its type id (`None`: untyped).
    pub type_id: Option<u32>,
    /// The shares per chosen node, in [`Selection::nodes`]' order (`None`: none selected or
    /// not readable there).
    pub on: Vec<Option<SharedPick>>,
}

/// A shared request's selection on one node, with the node's sharing records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedPick {
    /// The job's shares per record (cons_tres's pick).
    pub stock: Vec<u64>,
    /// The node's sharing records, by index.
    pub records: Vec<SharingRecord>,
    /// GPUs allocated whole on the node (their shares are not available).
    pub whole: GpuSet,
}

/// One record of a node's shared GRES (one per GPU, as Slurm builds them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharingRecord {
    /// The GPUs it sits on.
    pub gpus: GpuSet,
    /// Its type id.
    pub type_id: u32,
    /// Shares it has.
    pub avail: u64,
    /// Shares other jobs hold.
    pub alloc: u64,
}
