//! The preemption decision on the shapes, every gate, and a property: never more
//! victims than stock cons_tres (modelled by [`simulate`] on Slurm's own order) where stock's
//! victims leave the faulty GPU out, and the preemptor then starts in the same call (the fake
//! cons_tres of the call's tests, on the nodes the victims leave, needs no exclusion round).

use super::*;
use crate::steer::call::tests::fake::{FakeNode, cfg, dgx, drive, engine, job, snapshot};
use crate::steer::call::{Ctx, GpuNeed, JobFacts, Outcome as CallOutcome};
use proptest::prelude::*;

fn ctx(c: &crate::config::SelectConfig) -> Ctx<'_> {
    Ctx {
        cfg: c,
        engine: engine(),
        log: false,
        multiple_sharing: false,
    }
}

/// One equal-rank one-GPU candidate per busy GPU, node by node (Slurm's order: job ids).
fn one_gpu_jobs(nodes: &[FakeNode]) -> Vec<Offered> {
    let mut v = Vec::new();
    for (n, f) in nodes.iter().enumerate() {
        for g in f.allocated.iter() {
            v.push(Offered {
                job: (100 * n + g) as u32,
                key: (1, 0, 1),
                on: vec![(n, GpuSet::EMPTY.with(g))],
                keeps_gpus: false,
            });
        }
    }
    v
}

/// The cluster: DGX-1V nodes full of one-GPU jobs, GPU 3 of node 0 faulty and idle.
fn full_with_fault(nodes: usize) -> Vec<FakeNode> {
    let mut v = vec![dgx().busy("0-2,4-7").faulty(&[3])];
    v.extend((1..nodes).map(|_| dgx().busy("0-7")));
    v
}

fn nodes_of<'s>(snap: &'s Snapshot, offered: &[Offered], per_node: usize) -> Vec<VictimNode<'s>> {
    let c = cfg();
    victim_nodes(snap, offered, per_node, &ctx(&c))
}

/// The victims stock cons_tres takes on Slurm's order, and whether it lands on a faulty GPU.
fn stock(snap: &Snapshot, offered: &[Offered], per_node: usize, count: usize) -> (usize, bool) {
    let mut c = cfg();
    c.health_aware = false;
    let nodes = victim_nodes(snap, offered, per_node, &ctx(&c));
    let healthy = nodes_of(snap, offered, per_node);
    let order: Vec<usize> = (0..offered.len()).collect();
    let out = simulate(&nodes, offered, &order, per_node, count).expect("stock fits");
    let faulty = out.nodes.iter().any(|(n, free)| {
        let f = healthy
            .iter()
            .find(|v| v.index == *n)
            .map_or(GpuSet::EMPTY, |v| v.health.faulty);
        free.difference(f).len() < per_node
    });
    (out.victims.len(), faulty)
}

/// The nodes once `victims` are gone, and the call that follows on them.
fn after(nodes: &[FakeNode], offered: &[Offered], victims: &[u32], j: &JobFacts) -> CallOutcome {
    let mut left = nodes.to_vec();
    for o in offered.iter().filter(|o| victims.contains(&o.job)) {
        for (n, g) in &o.on {
            left[*n].allocated = left[*n].allocated.difference(*g);
        }
    }
    let (finish, _, _) = drive(j.clone(), &left, &cfg());
    assert_eq!(finish.excluded, 0, "no exclusion round");
    assert_eq!(finish.calls, 1, "the preemptor starts on the first try");
    finish.outcome
}

fn reorder(d: Decision) -> (Vec<usize>, Vec<u32>, Vec<(usize, GpuSet)>) {
    match d {
        Decision::Reorder {
            order,
            victims,
            nodes,
        } => (order, victims, nodes),
        Decision::Keep(g) => panic!("kept Slurm's order: {g:?}"),
    }
}

#[test]
fn a_two_gpu_job_without_n_costs_two_victims_on_a_healthy_node() {
    let nodes = full_with_fault(2);
    let offered = one_gpu_jobs(&nodes);
    let j = job(2); // min_nodes 1: no -N and -N1 read the same
    let snap = snapshot(j.clone(), &nodes);
    let c = cfg();
    let (_, victims, planned) = reorder(decide(&snap, &offered, &ctx(&c), false));
    assert_eq!(victims.len(), 2, "{victims:?}");
    assert_eq!(planned.len(), 1);
    assert_eq!(planned[0].0, 1, "the node without the fault");
    // Stock stops after one victim on node 0, on the faulty GPU (gputopo would then have to
    // exclude the node and ask again: more victims, a later start).
    assert_eq!(stock(&snap, &offered, 2, 1), (1, true));
    assert_eq!(after(&nodes, &offered, &victims, &j), CallOutcome::Success);
}

#[test]
fn a_four_gpu_job_gets_a_best_quad_at_four_victims() {
    let nodes = full_with_fault(2);
    let offered = one_gpu_jobs(&nodes);
    let j = job(4);
    let snap = snapshot(j.clone(), &nodes);
    let c = cfg();
    let (_, victims, planned) = reorder(decide(&snap, &offered, &ctx(&c), false));
    assert_eq!(victims.len(), 4);
    let (node, gpus) = planned[0];
    assert!(
        gpus == GpuSet::parse_list("0-3").expect("set")
            || gpus == GpuSet::parse_list("4-7").expect("set")
    );
    assert!(!(node == 0 && gpus.contains(3)));
    assert_eq!(after(&nodes, &offered, &victims, &j), CallOutcome::Success);
}

#[test]
fn a_multi_node_job_plans_on_enough_healthy_nodes() {
    let nodes = full_with_fault(3);
    let offered = one_gpu_jobs(&nodes);
    let mut j = job(2);
    j.min_nodes = 2;
    let snap = snapshot(j.clone(), &nodes);
    let c = cfg();
    let (_, victims, planned) = reorder(decide(&snap, &offered, &ctx(&c), false));
    assert_eq!(victims.len(), 4, "{victims:?}");
    let on: Vec<usize> = planned.iter().map(|p| p.0).collect();
    assert_eq!(on, vec![1, 2], "the two nodes without the fault");
    assert_eq!(after(&nodes, &offered, &victims, &j), CallOutcome::Success);
}

#[test]
fn a_per_job_count_over_one_node_is_planned_and_spread_over_several_is_not() {
    let nodes = full_with_fault(2);
    let offered = one_gpu_jobs(&nodes);
    let c = cfg();
    let mut j = job(2); // --gpus=2 -N1: the per-job count is the node's need
    let snap = snapshot(j.clone(), &nodes);
    assert!(matches!(
        decide(&snap, &offered, &ctx(&c), false),
        Decision::Reorder { .. }
    ));
    j.need = j.need.map(|n| GpuNeed {
        per_node: 1,
        spread: true,
        ..n
    });
    let snap = snapshot(j, &nodes);
    assert_eq!(
        decide(&snap, &offered, &ctx(&c), false),
        Decision::Keep(Gate::Spread)
    );
}

#[test]
fn every_gate_keeps_slurms_order() {
    let nodes = full_with_fault(2);
    let offered = one_gpu_jobs(&nodes);
    let base = job(2);
    let c = cfg();
    let keep = |j: &JobFacts, o: &[Offered], c: &crate::config::SelectConfig, yf: bool| {
        decide(&snapshot(j.clone(), &nodes), o, &ctx(c), yf)
    };
    let mut off = cfg();
    off.topology_aware = false;
    off.health_aware = false;
    assert_eq!(
        keep(&base, &offered, &off, false),
        Decision::Keep(Gate::Off)
    );
    assert_eq!(
        keep(&base, &offered, &c, true),
        Decision::Keep(Gate::YoungestFirst)
    );
    let mut j = base.clone();
    j.need = None;
    assert_eq!(
        keep(&j, &offered, &c, false),
        Decision::Keep(Gate::NoGpuNeed)
    );
    let mut j = base.clone();
    j.need = j.need.map(|n| GpuNeed {
        type_id: Some(1),
        ..n
    });
    assert_eq!(keep(&j, &offered, &c, false), Decision::Keep(Gate::Typed));
    let mut j = base.clone();
    j.whole_node = true;
    assert_eq!(
        keep(&j, &offered, &c, false),
        Decision::Keep(Gate::WholeNode)
    );
    let mut j = base.clone();
    j.required = vec![1];
    assert_eq!(
        keep(&j, &offered, &c, false),
        Decision::Keep(Gate::Required)
    );
    let mut suspend = offered.clone();
    suspend[3].keeps_gpus = true;
    assert_eq!(
        keep(&base, &suspend, &c, false),
        Decision::Keep(Gate::Suspends)
    );
    let mut unread = offered.clone();
    unread[0].on.clear();
    assert_eq!(
        keep(&base, &unread, &c, false),
        Decision::Keep(Gate::Unread)
    );
    // Nine GPUs on one node: no plan frees them.
    assert_eq!(
        keep(&job(9), &offered, &c, false),
        Decision::Keep(Gate::NoPlan)
    );
    // A node-1 victim pair already leads the list: nothing to change.
    let mut first = offered.clone();
    first.rotate_left(7);
    let snap = snapshot(base.clone(), &nodes);
    match decide(&snap, &first, &ctx(&c), false) {
        Decision::Keep(Gate::AlreadyInOrder) | Decision::Reorder { .. } => {}
        d => panic!("{d:?}"),
    }
}

#[test]
fn an_order_cons_tres_would_stop_early_on_is_refused() {
    // Node 0: GPU 3 faulty and idle; its only candidate holds 3 GPUs. Node 1 is busy with
    // jobs that are not candidates. A 4-GPU job: removing the 3-GPU job frees 4 on node 0
    // counting the faulty one, where only 3 are healthy: no safe order exists.
    let nodes = vec![dgx().busy("0-2,4-7").faulty(&[3]), dgx().busy("0-7")];
    let offered = vec![
        Offered {
            job: 1,
            key: (1, 0, 1),
            on: vec![(0, GpuSet::parse_list("0-2").expect("set"))],
            keeps_gpus: false,
        },
        Offered {
            job: 2,
            key: (1, 0, 1),
            on: vec![(0, GpuSet::parse_list("4").expect("set"))],
            keeps_gpus: false,
        },
    ];
    let c = cfg();
    let snap = snapshot(job(4), &nodes);
    assert!(matches!(
        decide(&snap, &offered, &ctx(&c), false),
        Decision::Keep(Gate::Unsafe | Gate::NoPlan)
    ));
}

#[test]
fn ranks_follow_runs_of_equal_keys() {
    let mk = |key| Offered {
        job: 0,
        key,
        on: vec![(0, GpuSet::EMPTY)],
        keeps_gpus: false,
    };
    let o = [mk((1, 0, 1)), mk((1, 0, 1)), mk((2, 0, 1)), mk((1, 0, 1))];
    assert_eq!(ranks(&o), vec![0, 0, 1, 2]);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Random fills of one-GPU and two-GPU jobs over three nodes, random faulty idle GPUs,
    /// random need and node count: whenever gputopo reorders, cons_tres walking the new order
    /// stops on healthy GPUs, takes no more victims than stock where stock's victims leave
    /// the faulty GPUs out, and the call that follows needs no exclusion.
    #[test]
    fn never_more_victims_than_stock(
        fills in proptest::collection::vec(proptest::collection::vec(0usize..3, 8), 3),
        faulty in proptest::collection::vec(proptest::option::of(0usize..8), 3),
        per_node in 1usize..5,
        count in 1usize..3,
    ) {
        // fills[n][g]: 0 idle, 1 a one-GPU job, 2 part of a two-GPU job with g^1.
        let mut nodes = Vec::new();
        let mut offered = Vec::new();
        for (n, fill) in fills.iter().enumerate() {
            let mut f = dgx();
            let bad = faulty[n];
            let mut busy = GpuSet::EMPTY;
            for (g, &kind) in fill.iter().enumerate() {
                if Some(g) == bad || busy.contains(g) {
                    continue;
                }
                let pair = g ^ 1;
                let gpus = match kind {
                    1 => GpuSet::EMPTY.with(g),
                    2 if Some(pair) != bad && !busy.contains(pair) && pair < 8 => {
                        GpuSet::EMPTY.with(g).union(GpuSet::EMPTY.with(pair))
                    }
                    _ => continue,
                };
                busy = busy.union(gpus);
                offered.push(Offered {
                    job: (100 * n + g) as u32,
                    key: (1, 0, 1),
                    on: vec![(n, gpus)],
                    keeps_gpus: false,
                });
            }
            f.allocated = busy;
            if let Some(b) = bad {
                f = f.faulty(&[b]);
            }
            nodes.push(f);
        }
        let mut j = job(per_node);
        j.min_nodes = count;
        let snap = snapshot(j.clone(), &nodes);
        let c = cfg();
        if let Decision::Reorder { order, victims, .. } = decide(&snap, &offered, &ctx(&c), false) {
            let vn = nodes_of(&snap, &offered, per_node);
            let out = simulate(&vn, &offered, &order, per_node, count).expect("fits");
            prop_assert_eq!(out.victims.len(), victims.len());
            let mut c2 = cfg();
            c2.health_aware = false;
            let all = victim_nodes(&snap, &offered, per_node, &ctx(&c2));
            let identity: Vec<usize> = (0..offered.len()).collect();
            if let Some(s) = simulate(&all, &offered, &identity, per_node, count) {
                // cons_tres's first fit takes the lowest free indices: a faulty one among them
                // is stock landing on the fault.
                let stock_faulty = s.nodes.iter().any(|(n, free)| {
                    let pick: GpuSet = free.iter().take(per_node).collect();
                    nodes[*n].faulty.iter().any(|&b| pick.contains(b))
                });
                if !stock_faulty {
                    prop_assert!(victims.len() <= s.victims.len(),
                        "gputopo {} victims, stock {}", victims.len(), s.victims.len());
                }
            }
            prop_assert_eq!(after(&nodes, &offered, &victims, &j), CallOutcome::Success);
        }
    }
}
