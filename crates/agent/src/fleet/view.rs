//! The cluster as `scontrol` shows it, with what gputopo derives from it: each node's
//! published health, its free usable GPUs, the largest free set joined by NVLink, the free
//! GPUs no waiting job can use, and each job's placement note.
//!
//! One model for `gputopo metrics` (and the dashboard built on it); pure, from the two texts.

use super::records::{Record, gpu_count, gpu_indices, job_gpus, value_with_inner};
use gputopo_core::health::{LinkMatrix, NodeHealth, read_extra};
use gputopo_core::steer::explain::{self, Note};
use gputopo_core::wideset::WideSet;

/// What a node's `Extra` holds for gputopo.
#[derive(Clone, Debug)]
pub enum Published {
    /// gputopo health, usable.
    Health(NodeHealth),
    /// No gputopo health (no agent, or an administrator's own value).
    Unpublished,
    /// gputopo health that does not parse (the parser's message).
    Malformed(String),
}

/// One node.
#[derive(Clone, Debug)]
pub struct Node {
    /// `NodeName`.
    pub name: String,
    /// `NodeHostName` (dcgm-exporter's `Hostname` label), the name when absent.
    pub hostname: String,
    /// Configured GPUs (`Gres=`).
    pub gpus: usize,
    /// GPUs held by jobs (`GresUsed=...(IDX:..)`).
    pub used: WideSet,
    /// The node takes new jobs (not down, drained, failing, not responding, powered down).
    pub accepting: bool,
    /// A job could still get a CPU and memory here (`CPUAlloc < CPUTot`, `AllocMem <
    /// RealMemory` when memory is configured).
    pub room: bool,
    /// The health it published.
    pub published: Published,
}

impl Node {
    /// The published health, when usable.
    pub fn health(&self) -> Option<&NodeHealth> {
        match &self.published {
            Published::Health(h) => Some(h),
            _ => None,
        }
    }

    /// GPUs gputopo never hands out: published faulty, or drained by an administrator.
    pub fn excluded(&self) -> WideSet {
        self.health()
            .map(NodeHealth::excluded_wide)
            .unwrap_or_default()
    }

    /// GPUs a new job could get now: configured, not excluded, not held, on a node that takes
    /// jobs.
    pub fn free(&self) -> WideSet {
        if !self.accepting {
            return WideSet::new();
        }
        WideSet::first_n(self.gpus)
            .difference(&self.excluded())
            .difference(&self.used)
    }

    /// The size of the largest set of free GPUs in which every pair is joined by NVLink
    /// (directly or through an NVSwitch), from the matrix the agent measured; `None` when
    /// none was published (gres.conf's `Links=` are not visible through scontrol).
    pub fn free_nvlink_max(&self) -> Option<usize> {
        let links = self.health()?.links.as_ref()?;
        Some(largest_clique(links, &self.free()))
    }
}

/// The largest subset of `among` whose every pair has an NVLink in `links` (indices past the
/// matrix count alone). Exact: Bron–Kerbosch with pivoting over bit masks (nodes have at
/// most [`gputopo_core::gpuset::MAX_GPUS`] rows in a published matrix).
pub fn largest_clique(links: &LinkMatrix, among: &WideSet) -> usize {
    let n = links.len().min(64);
    let mut adj = [0u64; 64];
    let mut cand = 0u64;
    for a in among.iter().filter(|&a| a < n) {
        cand |= 1 << a;
    }
    if cand == 0 {
        return usize::from(!among.is_empty());
    }
    for (a, row) in adj.iter_mut().enumerate().take(n) {
        for b in 0..n {
            if a != b && links.get(a, b).unwrap_or(0) > 0 {
                *row |= 1 << b;
            }
        }
    }
    fn grow(adj: &[u64; 64], size: usize, p: u64, x: u64, best: &mut usize) {
        if p == 0 {
            *best = (*best).max(size);
            return;
        }
        if size + p.count_ones() as usize <= *best {
            return;
        }
        let pivot = (p | x).trailing_zeros() as usize;
        let mut todo = p & !adj[pivot];
        let (mut p, mut x) = (p, x);
        while todo != 0 {
            let v = todo.trailing_zeros() as usize;
            todo &= todo - 1;
            grow(adj, size + 1, p & adj[v], x & adj[v], best);
            p &= !(1 << v);
            x |= 1 << v;
        }
    }
    let mut best = 0;
    grow(&adj, 0, cand, 0, &mut best);
    best
}

/// A job's state as far as the metrics care.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobState {
    /// `RUNNING` (or suspended: it holds its GPUs).
    Running,
    /// `PENDING`.
    Pending,
    /// Anything else (completing, ended).
    Other,
}

/// One job.
#[derive(Clone, Debug)]
pub struct Job {
    /// `JobId`.
    pub id: String,
    /// Its state.
    pub state: JobState,
    /// GPUs it wants on each node, when the request says (`TresPerNode`, or `TresPerJob` on
    /// one node).
    pub gpus_per_node: Option<usize>,
    /// gputopo's line of its `SystemComment`, read back.
    pub note: Option<Note>,
    /// Its GPUs per node (detail records).
    pub gpus: Vec<(String, WideSet)>,
}

/// The cluster: nodes in `scontrol` order, then jobs.
#[derive(Clone, Debug, Default)]
pub struct Cluster {
    /// Nodes.
    pub nodes: Vec<Node>,
    /// Jobs.
    pub jobs: Vec<Job>,
}

/// Node state words that mean "no new job here" (`State=IDLE+DRAIN`, `DOWN*`).
const NOT_ACCEPTING: &[&str] = &[
    "DOWN",
    "DRAIN",
    "DRAINING",
    "DRAINED",
    "FAIL",
    "FAILING",
    "NOT_RESPONDING",
    "FUTURE",
    "POWERED_DOWN",
    "POWERING_DOWN",
    "POWER_DOWN",
    "REBOOT_ISSUED",
    "INVALID_REG",
    "UNKNOWN",
];

fn accepting(state: &str) -> bool {
    !state.contains('*') && state.split('+').all(|w| !NOT_ACCEPTING.contains(&w.trim()))
}

fn num(rec: &Record<'_>, key: &str) -> Option<u64> {
    rec.get(key).and_then(|v| v.parse().ok())
}

/// The GPU count of a TRES request (`gres:gpu:2`, 24.11's `gres/gpu:2`, `gres/gpu:a100:2`,
/// several TRES joined by commas).
fn tres_gpus(tres: &str) -> Option<usize> {
    tres.split(',').find_map(|t| {
        let t = t
            .strip_prefix("gres:")
            .or_else(|| t.strip_prefix("gres/"))?;
        let mut parts = t.split(':');
        (parts.next()? == "gpu").then_some(())?;
        parts.next_back()?.parse().ok()
    })
}

impl Cluster {
    /// The cluster from `scontrol show node -o -d` and `scontrol show job -d -o` output.
    pub fn read(nodes: &str, jobs: &str) -> Cluster {
        let nodes = nodes
            .lines()
            .filter(|l| l.starts_with("NodeName="))
            .map(|line| {
                let rec = Record::parse(line);
                let name = rec.get("NodeName").unwrap_or_default().to_string();
                let published = match read_extra(rec.get("Extra").unwrap_or_default()) {
                    Ok(Some(p)) => Published::Health(p.health),
                    Ok(None) => Published::Unpublished,
                    Err(e) => Published::Malformed(e.0),
                };
                let cpus = (num(&rec, "CPUAlloc"), num(&rec, "CPUTot"));
                let mem = (num(&rec, "AllocMem"), num(&rec, "RealMemory"));
                let room = cpus.0.zip(cpus.1).is_none_or(|(a, t)| a < t)
                    && mem.0.zip(mem.1).is_none_or(|(a, t)| t <= 1 || a < t);
                Node {
                    hostname: rec
                        .get("NodeHostName")
                        .filter(|h| !h.is_empty() && *h != "(null)")
                        .unwrap_or(&name)
                        .to_string(),
                    gpus: gpu_count(rec.get("Gres").unwrap_or_default()),
                    used: gpu_indices(rec.get("GresUsed").unwrap_or_default())
                        .into_iter()
                        .collect(),
                    accepting: accepting(rec.get("State").unwrap_or_default()),
                    room,
                    published,
                    name,
                }
            })
            .collect();
        let jobs = jobs
            .lines()
            .filter(|l| l.starts_with("JobId="))
            .map(|line| {
                let rec = Record::parse(line);
                let state = match rec.get("JobState").unwrap_or_default() {
                    "RUNNING" | "SUSPENDED" => JobState::Running,
                    "PENDING" => JobState::Pending,
                    _ => JobState::Other,
                };
                let per_node = rec.get("TresPerNode").and_then(tres_gpus);
                let one_node = rec
                    .get("NumNodes")
                    .is_some_and(|n| n == "1" || n.starts_with("1-1"));
                let per_job = rec
                    .get("TresPerJob")
                    .and_then(tres_gpus)
                    .filter(|_| one_node);
                // The note holds `key=value` words of its own.
                let note = value_with_inner(line, "SystemComment", explain::NOTE_KEYS)
                    .and_then(explain::read);
                Job {
                    id: rec.get("JobId").unwrap_or_default().to_string(),
                    state,
                    gpus_per_node: per_node.or(per_job),
                    note,
                    gpus: job_gpus(&rec),
                }
            })
            .collect();
        Cluster { nodes, jobs }
    }

    /// The smallest per-node GPU request among waiting jobs that say one, `None` when no job
    /// waits for GPUs.
    fn smallest_waiting_request(&self) -> Option<usize> {
        self.jobs
            .iter()
            .filter(|j| j.state == JobState::Pending)
            .filter_map(|j| j.gpus_per_node)
            .filter(|&g| g > 0)
            .min()
    }

    /// Free GPUs of `node` that no job can use now ("stranded"): all of them when the node
    /// has no CPU or memory left for a job; else, while jobs wait for GPUs, all of them when
    /// every waiting job wants more GPUs per node than are free here; else none.
    pub fn stranded(&self, node: &Node, smallest_waiting: Option<usize>) -> usize {
        let free = node.free().len();
        if !node.room {
            return free;
        }
        match smallest_waiting {
            Some(want) if free < want => free,
            _ => 0,
        }
    }

    /// [`Cluster::stranded`] for every node, in node order.
    pub fn stranded_all(&self) -> Vec<usize> {
        let want = self.smallest_waiting_request();
        self.nodes.iter().map(|n| self.stranded(n, want)).collect()
    }
}

#[cfg(test)]
pub(crate) mod tests;
