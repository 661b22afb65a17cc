//! The bounded search ([`choose`]'s pruning, repeated-state skip and set budget) gives the
//! same plans as the plain search over every node and set, and gives up past its budget.

use super::*;
use crate::fixtures::dgx2;
use crate::placement::engine::Gputopo;
use crate::placement::test_rng;
use crate::steer::oracle::dgx1v;

/// The plain search: every node, every set, the cheapest cost (the rule in the module docs).
fn reference(nodes: &[VictimNode<'_>], cands: &[Candidate], need: usize) -> Option<Plan> {
    let engine = Gputopo::new();
    let mut best: Option<(Cost<_>, Plan)> = None;
    for n in nodes {
        let usable = n
            .topo
            .all()
            .difference(n.health.faulty)
            .difference(n.pinned);
        for set in subsets(usable, need) {
            let victims: Vec<usize> = (0..cands.len())
                .filter(|&i| {
                    cands[i].node == n.index && !cands[i].gpus.intersection(set).is_empty()
                })
                .collect();
            if premature(n, cands, &victims, need) {
                continue;
            }
            let mut ranks: Vec<u64> = victims.iter().map(|&i| cands[i].rank).collect();
            ranks.sort_unstable_by(|a, b| b.cmp(a));
            let cost = Cost {
                count: victims.len(),
                ranks,
                score: Reverse(engine.score(n.topo, set)),
                node: n.index,
            };
            if best.as_ref().is_none_or(|(b, _)| cost < *b) {
                best = Some((
                    cost,
                    Plan {
                        node: n.index,
                        gpus: set,
                        victims,
                    },
                ));
            }
        }
    }
    best.map(|(_, p)| p)
}

/// `count` nodes of `t` with random 1-/2-GPU candidates (ranks 0-2), some GPUs idle, pinned
/// or faulty; a few nodes repeat node 0's state.
fn random_state<'a>(
    t: &'a NodeTopology,
    count: usize,
    rng: &mut impl FnMut(u64) -> u64,
) -> (Vec<VictimNode<'a>>, Vec<Candidate>) {
    let mut nodes = Vec::new();
    let mut cands: Vec<Candidate> = Vec::new();
    for index in 0..count {
        let mut free = t.all();
        let (mut idle, mut pinned, mut faulty) = (GpuSet::EMPTY, GpuSet::EMPTY, GpuSet::EMPTY);
        let copy = index > 0 && rng(4) == 0;
        if copy {
            let first: Vec<Candidate> = cands.iter().filter(|c| c.node == 0).copied().collect();
            cands.extend(first.into_iter().map(|c| Candidate { node: index, ..c }));
            let n0: VictimNode<'a> = nodes[0];
            nodes.push(VictimNode { index, ..n0 });
            continue;
        }
        for g in t.all().to_vec() {
            if !free.contains(g) {
                continue;
            }
            match rng(10) {
                0 => idle = idle.union(GpuSet::EMPTY.with(g)),
                1 => pinned = pinned.union(GpuSet::EMPTY.with(g)),
                _ => {
                    let mut gpus = GpuSet::EMPTY.with(g);
                    if rng(3) == 0 && free.contains(g + 1) {
                        gpus = gpus.union(GpuSet::EMPTY.with(g + 1));
                    }
                    free = free.difference(gpus);
                    cands.push(Candidate {
                        job: cands.len() as u32,
                        rank: rng(3),
                        node: index,
                        gpus,
                    });
                    continue;
                }
            }
            free = free.difference(GpuSet::EMPTY.with(g));
        }
        if rng(5) == 0 {
            faulty = GpuSet::EMPTY.with(rng(t.len() as u64) as usize);
        }
        idle = idle.union(faulty.difference(pinned));
        nodes.push(VictimNode {
            index,
            topo: t,
            pinned,
            idle,
            health: HealthMasks {
                faulty,
                degraded: GpuSet::EMPTY,
            },
        });
    }
    (nodes, cands)
}

#[test]
fn the_bounded_search_finds_the_plain_searchs_plan() {
    let t = dgx1v();
    let mut rng = test_rng(11);
    for _ in 0..60 {
        let (nodes, cands) = random_state(&t, 6, &mut rng);
        for need in [2, 4, 6] {
            assert_eq!(
                choose(&Gputopo::new(), &nodes, &cands, need),
                reference(&nodes, &cands, need),
                "need {need}: {nodes:?} {cands:?}"
            );
        }
    }
}

#[test]
fn past_the_budget_there_is_no_plan_and_repeated_nodes_cost_nothing() {
    let t = dgx2();
    let full = |node: usize, rank: u64| -> Vec<Candidate> {
        (0..16)
            .map(|g| Candidate {
                job: (node * 16 + g) as u32,
                rank,
                node,
                gpus: GpuSet::EMPTY.with(g),
            })
            .collect()
    };
    let node = |index| VictimNode {
        index,
        topo: &t,
        pinned: GpuSet::EMPTY,
        idle: GpuSet::EMPTY,
        health: HealthMasks::ALL_OK,
    };
    // 8 identical nodes: one node's 12,870 sets are searched, the plan is on node 0.
    let nodes: Vec<VictimNode<'_>> = (0..8).map(node).collect();
    let cands: Vec<Candidate> = (0..8).flat_map(|n| full(n, 1)).collect();
    let plan = choose(&Gputopo::new(), &nodes, &cands, 8).expect("a plan");
    assert_eq!((plan.node, plan.victims.len()), (0, 8));
    // Eight nodes that differ (ranks): 8 × 12,870 sets exceed the budget (100,000), seven
    // do not.
    let cands: Vec<Candidate> = (0..8).flat_map(|n| full(n, n as u64)).collect();
    assert_eq!(choose(&Gputopo::new(), &nodes, &cands, 8), None);
    let plan = choose(&Gputopo::new(), &nodes[..7], &cands, 8).expect("a plan");
    assert_eq!((plan.node, plan.victims.len()), (0, 8), "the lowest ranks");
}
