//! A fake cluster and a fake cons_tres for the call's tests: nodes as the plugin's snapshot
//! reader would produce them, and a cons_tres that knows nothing of health or topology
//! (lowest offered nodes that fit, lowest free GPU indices, as 24.11's first fit does).

use std::sync::Arc;

use super::super::*;
use crate::fixtures;
use crate::gpuset::GpuSet;
use crate::health::{NodeHealth, read_extra};
use crate::placement::engine::Gputopo;
use crate::steer::model::NodeModel;
use crate::steer::wide::{WideHealth, WideNode};
use crate::wideset::WideSet;

pub const NOW: i64 = 1_000;
/// When a busy node frees up in the fake's WILL_RUN plan.
pub const LATER: i64 = NOW + 600;

pub fn set(s: &str) -> GpuSet {
    GpuSet::parse_list(s).expect("test set")
}

pub fn wide(s: &str) -> WideSet {
    set(s).into()
}

/// Published health with these faulty and degraded GPUs.
pub fn health(faulty: &[usize], degraded: &[usize]) -> Option<Arc<NodeHealth>> {
    let entries: Vec<String> = faulty
        .iter()
        .map(|i| format!(r#"{{"i":{i},"s":"faulty"}}"#))
        .chain(
            degraded
                .iter()
                .map(|i| format!(r#"{{"i":{i},"s":"degraded"}}"#)),
        )
        .collect();
    let json = format!(r#"{{"gputopo":{{"v":1,"gpus":[{}]}}}}"#, entries.join(","));
    let parsed = read_extra(&json).expect("test health").expect("ours");
    Some(Arc::new(parsed.health))
}

/// A fake node before it is read into the snapshot.
#[derive(Clone, Debug)]
pub struct FakeNode {
    pub allocated: GpuSet,
    pub faulty: Vec<usize>,
    pub degraded: Vec<usize>,
    /// Slurm has topology records (gres.conf `Type=`/`Cores=`).
    pub ranked: bool,
    /// cons_tres would fail on this node (CPU, memory, partition: nothing gputopo sees).
    pub refuses: bool,
    /// Slurm's commit would take no GPU here (23.11.4 after a restart).
    pub takes_none: bool,
    pub weight: u64,
    /// A node of this many GPUs beyond the topology model (none: a DGX-1V).
    pub wide: Option<usize>,
    /// Nothing gputopo can read.
    pub opaque: bool,
    /// Busy in cons_tres's eyes until [`LATER`] (its cores, say): WILL_RUN plans it then.
    pub later: bool,
}

pub fn dgx() -> FakeNode {
    FakeNode {
        allocated: GpuSet::EMPTY,
        faulty: Vec::new(),
        degraded: Vec::new(),
        ranked: true,
        refuses: false,
        takes_none: false,
        weight: 1,
        wide: None,
        opaque: false,
        later: false,
    }
}

impl FakeNode {
    pub fn busy(mut self, s: &str) -> Self {
        self.allocated = set(s);
        self
    }
    pub fn faulty(mut self, v: &[usize]) -> Self {
        self.faulty = v.to_vec();
        self
    }
    pub fn degraded(mut self, v: &[usize]) -> Self {
        self.degraded = v.to_vec();
        self
    }
    pub fn plain(mut self) -> Self {
        self.ranked = false;
        self
    }
    pub fn refuses(mut self) -> Self {
        self.refuses = true;
        self
    }
    pub fn takes_none(mut self) -> Self {
        self.takes_none = true;
        self
    }
    pub fn wide(mut self, gpus: usize) -> Self {
        self.wide = Some(gpus);
        self
    }
    pub fn opaque(mut self) -> Self {
        self.opaque = true;
        self
    }
    pub fn later(mut self) -> Self {
        self.later = true;
        self
    }

    fn state(&self, node: usize) -> NodeState {
        let name = format!("n{node}");
        let gpus = if self.opaque {
            Gpus::Opaque
        } else if let Some(count) = self.wide {
            Gpus::Wide(Box::new(WideNode {
                name,
                count,
                types: Vec::new(),
                busy: self.allocated.into(),
                health: WideHealth {
                    faulty: self.faulty.iter().copied().collect(),
                    degraded: self.degraded.iter().copied().collect(),
                },
            }))
        } else {
            let mut topo = fixtures::dgx1v();
            topo.name = name;
            let types = if self.ranked {
                vec![(1, topo.all())]
            } else {
                Vec::new()
            };
            let h = if self.faulty.is_empty() && self.degraded.is_empty() {
                None
            } else {
                health(&self.faulty, &self.degraded)
            };
            let tables = engine().handle(&topo);
            Gpus::Modelled(Modelled {
                model: Arc::new(NodeModel::new(topo, h, types, tables)),
                allocated: self.allocated,
                shared_in_use: GpuSet::EMPTY,
                count: 8,
                weight: self.weight,
            })
        };
        NodeState { node, gpus }
    }

    fn gpu_count(&self) -> usize {
        self.wide.unwrap_or(8)
    }
}

/// One engine for every test (it interns tables, as slurmctld's does).
pub fn engine() -> &'static Gputopo {
    static ENGINE: std::sync::OnceLock<Gputopo> = std::sync::OnceLock::new();
    ENGINE.get_or_init(Gputopo::new)
}

/// A RUN_NOW job of `per_node` untyped GPUs on one node.
pub fn job(per_node: usize) -> JobFacts {
    JobFacts {
        id: 42,
        mode: Mode::RunNow,
        need: Some(GpuNeed {
            per_node,
            type_id: None,
            spread: false,
        }),
        shares: Vec::new(),
        min_nodes: 1,
        required: Vec::new(),
        whole_node: false,
        preemption: false,
        binding: false,
        reserved: false,
        per_socket: false,
    }
}

pub fn snapshot(job: JobFacts, nodes: &[FakeNode]) -> Snapshot {
    Snapshot {
        job,
        nodes: nodes.iter().enumerate().map(|(i, n)| n.state(i)).collect(),
        sharing: Vec::new(),
        restricted: Vec::new(),
    }
}

/// What the fake cons_tres saw and answered.
#[derive(Default, Debug)]
pub struct Seen {
    pub offers: Vec<Vec<usize>>,
    /// The last allocation it selected.
    pub last: Option<Selection>,
}

/// cons_tres on `nodes` for `job`: the lowest offered nodes (as many as the job's minimum)
/// that have the job's GPUs free, the lowest free indices on each; health unknown to it.
/// WILL_RUN: starts now when enough offered nodes fit now, at [`LATER`] when enough would
/// once their jobs end.
pub fn cons_tres<'a>(
    nodes: &'a [FakeNode],
    job: &'a JobFacts,
    seen: &'a mut Seen,
) -> impl FnMut(&[usize]) -> Reply + 'a {
    move |offered: &[usize]| {
        seen.offers.push(offered.to_vec());
        let per_node = job.need.map_or(1, |n| n.per_node);
        let want = job.min_nodes.max(1);
        let usable: Vec<usize> = offered
            .iter()
            .copied()
            .filter(|&n| !nodes[n].refuses)
            .collect();
        let count_free = |n: usize| {
            let all = WideSet::first_n(nodes[n].gpu_count());
            let busy: WideSet = nodes[n].allocated.into();
            all.difference(&busy).len()
        };
        let fits_now: Vec<usize> = usable
            .iter()
            .copied()
            .filter(|&n| !nodes[n].later)
            .filter(|&n| {
                if job.whole_node {
                    nodes[n].allocated.is_empty()
                } else {
                    count_free(n) >= per_node
                }
            })
            .collect();
        if let Mode::WillRun { now } = job.mode {
            return if fits_now.len() >= want {
                Reply::Planned { start: now }
            } else if usable.len() >= want {
                Reply::Planned { start: LATER }
            } else {
                Reply::Failed
            };
        }
        if fits_now.len() < want {
            return Reply::Failed;
        }
        let chosen = &fits_now[..want];
        let picks = chosen
            .iter()
            .map(|&n| {
                let f = &nodes[n];
                let all = WideSet::first_n(f.gpu_count());
                let free = all.difference(&f.allocated.into());
                let take = if job.whole_node { all.len() } else { per_node };
                let bits: WideSet = free.iter().take(take).collect();
                Pick {
                    takes_none: f.takes_none,
                    bits: (f.ranked && !f.takes_none).then_some(bits),
                    width: if f.ranked { f.gpu_count() } else { 0 },
                    count: if f.takes_none { 0 } else { take as u64 },
                    reserved: None,
                }
            })
            .collect();
        let sel = Selection {
            nodes: chosen
                .iter()
                .map(|&n| Chosen {
                    node: n,
                    near: WideSet::first_n(nodes[n].gpu_count()),
                })
                .collect(),
            gpu: vec![GpuPicks {
                request: 0,
                type_id: None,
                type_name: None,
                on: picks,
            }],
            shared: Vec::new(),
        };
        seen.last = Some(sel.clone());
        Reply::Selected(sel)
    }
}

/// The settings every test starts from (gputopo.conf defaults).
pub fn cfg() -> crate::config::SelectConfig {
    crate::config::SelectConfig::default()
}

/// Runs the call of `job` on `nodes` against the fake cons_tres: how it ended, what it
/// offered, and the log events.
pub fn drive(
    job: JobFacts,
    nodes: &[FakeNode],
    cfg: &crate::config::SelectConfig,
) -> (Finish, Seen, Vec<Event>) {
    let snap = snapshot(job.clone(), nodes);
    let ctx = Ctx {
        cfg,
        engine: engine(),
        log: true,
        multiple_sharing: false,
    };
    let mut keys = crate::steer::key_memo::KeyMemos::default();
    let call = Call::start(&snap, ctx, &mut keys);
    let mut seen = Seen::default();
    let mut events = Vec::new();
    let finish = run(call, cons_tres(nodes, &job, &mut seen), |e| {
        events.extend(e)
    });
    (finish, seen, events)
}

/// The GPUs a finished RUN_NOW call gives the job on each chosen node, as Slurm would
/// commit them: the placement's write there, else cons_tres's last pick.
pub fn committed(finish: &Finish, seen: &Seen) -> Vec<(usize, WideSet)> {
    let (Some(p), Some(sel)) = (&finish.placement, &seen.last) else {
        return Vec::new();
    };
    sel.nodes
        .iter()
        .zip(&sel.gpu[0].on)
        .map(|(c, pick)| {
            let set = p
                .gpu
                .iter()
                .find(|w| w.node == c.node)
                .map(|w| w.set.clone())
                .or_else(|| pick.bits.clone())
                .unwrap_or_else(|| WideSet::first_n(usize::try_from(pick.count).unwrap_or(0)));
            (c.node, set)
        })
        .collect()
}

/// The call's context with `cfg`, decisions not described, one device per job's shares.
pub fn ctx(cfg: &crate::config::SelectConfig) -> Ctx<'_> {
    Ctx {
        cfg,
        engine: engine(),
        log: false,
        multiple_sharing: false,
    }
}

/// cons_tres's answer for a job of one `shard` request placed on `node` with `pick`.
pub fn shard_answer(node: usize, pick: SharedPick) -> Reply {
    Reply::Selected(Selection {
        nodes: vec![Chosen {
            node,
            near: WideSet::first_n(8),
        }],
        gpu: Vec::new(),
        shared: vec![SharedPicks {
            request: 0,
            name: "shard".into(),
            type_id: None,
            on: vec![Some(pick)],
        }],
    })
}
