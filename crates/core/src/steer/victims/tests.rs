//! Victim choice on two DGX-1V nodes filled with 1-GPU jobs, the scenario.

use super::*;
use crate::placement::engine::Gputopo;
use crate::steer::oracle::{dgx1v, set};

/// Two nodes × 8 one-GPU jobs, all of rank `rank(node, gpu)`, in the order Slurm happened to
/// sort them in the run (GPUs 1, 2, 5, 6 first on node 0).
fn full(rank: impl Fn(usize, usize) -> u64) -> Vec<Candidate> {
    let order = [1, 2, 5, 6, 0, 3, 4, 7];
    let mut v = Vec::new();
    for node in 0..2 {
        for &g in &order {
            v.push(Candidate {
                job: (node * 8 + g) as u32 + 1,
                rank: rank(node, g),
                node,
                gpus: set(&[g]),
            });
        }
    }
    v
}

fn nodes<'a>(t: &'a NodeTopology, faulty0: GpuSet) -> Vec<VictimNode<'a>> {
    (0..2)
        .map(|i| VictimNode {
            index: i,
            topo: t,
            pinned: GpuSet::EMPTY,
            idle: if i == 0 { faulty0 } else { GpuSet::EMPTY },
            health: HealthMasks {
                faulty: if i == 0 { faulty0 } else { GpuSet::EMPTY },
                degraded: GpuSet::EMPTY,
            },
        })
        .collect()
}

fn best_quads() -> [GpuSet; 2] {
    [set(&[0, 1, 2, 3]), set(&[4, 5, 6, 7])]
}

#[test]
fn four_victims_free_a_best_quad() {
    let t = dgx1v();
    let c = full(|_, _| 1);
    let plan = choose(&Gputopo::new(), &nodes(&t, GpuSet::EMPTY), &c, 4).expect("a plan");
    assert_eq!(plan.victims.len(), 4, "the minimum, as cons_tres");
    assert!(best_quads().contains(&plan.gpus), "{plan:?}");
    let freed = plan
        .victims
        .iter()
        .fold(GpuSet::EMPTY, |a, &i| a.union(c[i].gpus));
    assert_eq!(freed, plan.gpus);
    // Reordered: the victims lead their (single) rank group.
    let o = order(&c, &plan);
    assert_eq!(&o[..4], &plan.victims[..]);
    let mut sorted = o.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..16).collect::<Vec<_>>());
}

#[test]
fn lower_ranks_are_preempted_first_and_order_across_ranks_is_kept() {
    let t = dgx1v();
    // Node 1's jobs on GPUs 4-7 rank lower (Slurm preempts them first): they are the victims,
    // even though node 0 comes first.
    let c = full(|node, g| if node == 1 && g >= 4 { 0 } else { 5 });
    let plan = choose(&Gputopo::new(), &nodes(&t, GpuSet::EMPTY), &c, 4).expect("a plan");
    assert_eq!((plan.node, plan.gpus), (1, set(&[4, 5, 6, 7])));
    // A cheaper set in count always wins over a better connected one: 3 jobs + an idle GPU.
    let mut c = full(|_, _| 1);
    c.retain(|x| !(x.node == 1 && x.gpus == set(&[3])));
    let mut n = nodes(&t, GpuSet::EMPTY);
    n[1].idle = set(&[3]);
    let plan = choose(&Gputopo::new(), &n, &c, 4).expect("a plan");
    assert_eq!(plan.victims.len(), 3);
    assert_eq!((plan.node, plan.gpus), (1, set(&[0, 1, 2, 3])));
    // Mixed ranks: order() never moves a job across a rank boundary.
    let c = full(|node, g| (node * 8 + g) as u64 % 3);
    let plan = choose(&Gputopo::new(), &nodes(&t, GpuSet::EMPTY), &c, 2).expect("a plan");
    let o = order(&c, &plan);
    let ranks: Vec<u64> = o.iter().map(|&i| c[i].rank).collect();
    let orig: Vec<u64> = c.iter().map(|x| x.rank).collect();
    assert_eq!(ranks, orig, "each position keeps its rank");
}

#[test]
fn a_faulty_gpu_is_planned_as_absent() {
    let t = dgx1v();
    // GPU 3 of node 0 faulty and idle (its job ended): 7 jobs there. Counting GPU 3, three
    // victims would "free" {0,1,2,3} on node 0, and gputopo would then refuse that set. Planned
    // without it, the plan is 4 victims for a best quad, exactly the fault-free cost.
    let mut c = full(|_, _| 1);
    c.retain(|x| !(x.node == 0 && x.gpus == set(&[3])));
    let plan = choose(&Gputopo::new(), &nodes(&t, set(&[3])), &c, 4).expect("a plan");
    assert_eq!(plan.victims.len(), 4);
    // Not node 0: removing 3 of its jobs, cons_tres would count the idle faulty GPU as the
    // fourth and stop one victim early.
    assert_eq!(plan.node, 1, "{plan:?}");
    assert!(best_quads().contains(&plan.gpus), "{plan:?}");
    let fault_free = choose(
        &Gputopo::new(),
        &nodes(&t, GpuSet::EMPTY),
        &full(|_, _| 1),
        4,
    )
    .expect("a plan");
    assert_eq!(plan.victims.len(), fault_free.victims.len());
}

#[test]
fn pinned_gpus_and_impossible_requests() {
    let t = dgx1v();
    let c = full(|_, _| 1);
    let mut n = nodes(&t, GpuSet::EMPTY);
    for x in &mut n {
        x.pinned = t.all().difference(set(&[0, 1, 2]));
    }
    assert_eq!(
        choose(&Gputopo::new(), &n, &c, 4),
        None,
        "only 3 freeable GPUs per node"
    );
    let plan = choose(&Gputopo::new(), &n, &c, 3).expect("a plan");
    assert_eq!(plan.gpus, set(&[0, 1, 2]));
}
