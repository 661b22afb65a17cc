//! Named planning cases on DGX-1V nodes, then invariants over many pseudo-random clusters.

use super::*;
use crate::placement::{Gputopo, TopoTables, rank_nodes};
use crate::steer::oracle::{dgx1v, set};

fn cand<'a>(node: usize, topo: &'a NodeTopology, free: &[usize]) -> Candidate<'a> {
    Candidate {
        node,
        topo,
        free: set(free),
        of_type: topo.all(),
        health: HealthMasks::ALL_OK,
        weight: 0,
        warm: GpuSet::EMPTY,
    }
}

fn need(k: usize, min_nodes: usize) -> Need {
    Need {
        gpus_per_node: k,
        min_nodes,
        required: vec![],
        max_calls: 3,
    }
}

#[test]
fn health_filter_drops_only_for_faults() {
    let t = dgx1v();
    let mut c = vec![
        cand(0, &t, &[0, 1, 2, 3, 4, 5, 6, 7]),
        cand(1, &t, &[2, 3]),
        cand(2, &t, &[5]),
        cand(3, &t, &[6]),
    ];
    c[1].health.faulty = set(&[3]);
    c[2].health.faulty = t.all();
    // Node 3 is merely busy: kept (cons_tres may preempt there).
    let f = health_filter(&c, 2, Basis::FreeNow, &[]);
    assert_eq!(f.kept, vec![0, 3]);
    assert_eq!(
        f.dropped,
        vec![Dropped { node: 1, have: 7 }, Dropped { node: 2, have: 0 }]
    );
    // Backfill: node 1 still has 7 non-faulty GPUs in total; node 2 none.
    let f = health_filter(&c, 2, Basis::Total, &[]);
    assert_eq!(f.kept, vec![0, 1, 3]);
    // Required nodes stay.
    let f = health_filter(&c, 2, Basis::FreeNow, &[2]);
    assert_eq!(f.kept, vec![0, 2, 3]);
    // Whole-node jobs: any faulty GPU rules a node out.
    let f = health_filter(&c, usize::MAX, Basis::Total, &[]);
    assert_eq!(f.kept, vec![0, 3]);
}

#[test]
fn best_fit_of_best_sets_first_then_widen() {
    let t = dgx1v();
    let engine = Gputopo::new();
    let e = &Prepared::new(&engine, []);
    let c = [
        cand(0, &t, &[0, 1, 2, 3, 4, 5, 6, 7]),
        cand(1, &t, &[2, 3]),
        cand(2, &t, &[0, 1]),
        cand(3, &t, &[5, 6, 7]),
    ];
    let p = plan(e, &c, &need(2, 1));
    assert_eq!(p.tiers, vec![vec![1], vec![0, 1, 3], vec![0, 1, 2, 3]]);
    assert!(p.narrows());
    // One call allowed: no narrowing.
    let mut n = need(2, 1);
    n.max_calls = 1;
    assert_eq!(plan(e, &c, &n).tiers, vec![vec![0, 1, 2, 3]]);
    // Two calls: the best tier, then everything.
    n.max_calls = 2;
    assert_eq!(plan(e, &c, &n).tiers, vec![vec![1], vec![0, 1, 2, 3]]);
    // No GPUs requested: nothing to steer.
    assert!(!plan(e, &c, &need(0, 1)).narrows());
}

#[test]
fn degraded_nodes_come_last_and_multi_node_jobs_get_enough_nodes() {
    let t = dgx1v();
    let engine = Gputopo::new();
    let e = &Prepared::new(&engine, []);
    let mut c = [
        cand(0, &t, &[2, 3]),
        cand(1, &t, &[2, 3]),
        cand(2, &t, &[0, 1]),
    ];
    c[0].health.degraded = set(&[3]);
    let p = plan(e, &c, &need(2, 1));
    assert_eq!(p.tiers[0], vec![1]);
    // Three nodes needed: no narrower tier is possible.
    assert_eq!(plan(e, &c, &need(2, 3)).tiers, vec![vec![0, 1, 2]]);
    // Two nodes: the two best.
    let p = plan(e, &c, &need(2, 2));
    assert_eq!(p.tiers[0].len(), 2);
    assert!(p.tiers[0].contains(&1));
    // A required node is in every tier.
    let mut n = need(2, 1);
    n.required = vec![2];
    for tier in plan(e, &c, &n).tiers {
        assert!(tier.contains(&2));
    }
}

#[test]
fn nodes_that_cannot_fit_now_are_only_in_the_final_try() {
    let t = dgx1v();
    let engine = Gputopo::new();
    let e = &Prepared::new(&engine, []);
    let c = [cand(0, &t, &[1]), cand(1, &t, &[]), cand(2, &t, &[4, 7])];
    let p = plan(e, &c, &need(2, 1));
    assert_eq!(p.tiers, vec![vec![2], vec![0, 1, 2]]);
    // Nobody fits now: one call, unchanged.
    let p = plan(e, &c[..2], &need(2, 1));
    assert_eq!(p.tiers, vec![vec![0, 1]]);
}

#[test]
fn will_run_accepts_narrowed_tries_only_for_an_immediate_start() {
    assert!(accept_will_run(false, 100, 100));
    assert!(!accept_will_run(false, 101, 100));
    assert!(accept_will_run(true, 5000, 100));
}

/// A small deterministic generator (no external crate needed for this sweep).
fn lcg(seed: &mut u64) -> u64 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *seed >> 33
}

#[test]
fn plan_invariants_on_random_clusters() {
    let t = dgx1v();
    let engine = Gputopo::new();
    let e = &Prepared::new(&engine, []);
    let mut seed = 7;
    for _ in 0..300 {
        let n = 1 + (lcg(&mut seed) % 12) as usize;
        let cands: Vec<Candidate<'_>> = (0..n)
            .map(|i| {
                let free = GpuSet::from_bits((lcg(&mut seed) & 0xff) as u32);
                let mut c = cand(i * 3, &t, &[]);
                c.free = free;
                c.health.faulty = GpuSet::from_bits((lcg(&mut seed) & 0x11) as u32);
                c.health.degraded = GpuSet::from_bits((lcg(&mut seed) & 0x22) as u32);
                c
            })
            .collect();
        let k = 1 + (lcg(&mut seed) % 4) as usize;
        let mut nd = need(k, 1 + (lcg(&mut seed) % 3) as usize);
        nd.max_calls = 1 + (lcg(&mut seed) % 4) as usize;
        if lcg(&mut seed) % 4 == 0 {
            nd.required = vec![cands[0].node];
        }
        let all: Vec<usize> = cands.iter().map(|c| c.node).collect();
        let p = plan(e, &cands, &nd);
        assert!(!p.tiers.is_empty() && p.tiers.len() <= nd.max_calls);
        assert_eq!(p.tiers.last(), Some(&all), "ends with the original set");
        for w in p.tiers.windows(2) {
            assert!(w[0].iter().all(|x| w[1].contains(x)), "tries only widen");
            assert!(w[0].len() < w[1].len());
        }
        for tier in &p.tiers[..p.tiers.len() - 1] {
            assert!(tier.len() >= nd.min_nodes, "no tier too small for the job");
            assert!(nd.required.iter().all(|r| tier.contains(r)));
            for node in tier {
                if nd.required.contains(node) {
                    continue;
                }
                let c = cands.iter().find(|c| c.node == *node).expect("known node");
                assert!(
                    c.free.difference(c.health.faulty).len() >= k,
                    "narrowed tiers hold only nodes that fit now"
                );
            }
        }
    }
}

/// With no degraded GPU in play, steering ranks nodes exactly as the engine's `rank_nodes`.
#[test]
fn ranking_is_the_engines_node_order() {
    let t = dgx1v();
    let engine = Gputopo::new();
    let tables = TopoTables::new(&t).expect("8 GPUs have tables");
    let mut seed = 11;
    for _ in 0..200 {
        let n = 1 + (lcg(&mut seed) % 10) as usize;
        let mut cands: Vec<Candidate<'_>> = (0..n)
            .map(|i| {
                let mut c = cand(i, &t, &[]);
                c.free = GpuSet::from_bits((lcg(&mut seed) & 0xff) as u32);
                c
            })
            .collect();
        if lcg(&mut seed) % 2 == 0 {
            // Faulty GPUs only shrink the pool.
            cands[0].health.faulty = GpuSet::from_bits((lcg(&mut seed) & 0x11) as u32);
        }
        let k = 1 + (lcg(&mut seed) % 4) as usize;
        let pools: Vec<(&TopoTables, GpuSet)> = cands
            .iter()
            .map(|c| (&tables, c.free.difference(c.health.faulty)))
            .collect();
        let got: Vec<usize> = rank(&Prepared::new(&engine, []), &cands, k)
            .into_iter()
            .map(|(node, _)| node)
            .collect();
        assert_eq!(got, rank_nodes(&pools, k), "k={k}");
    }
}

/// The stranding case of `placement::rank`: an idle DGX-1V offers a slightly faster NV2 pair
/// than a busy one, but both are NV2, so the busy node is offered first and the idle node
/// stays whole; fewer degraded GPUs still beat any class.
#[test]
fn same_class_prefers_the_busier_node_and_health_leads() {
    let t = dgx1v();
    let engine = Gputopo::new();
    let e = &Prepared::new(&engine, []);
    let mut c = [
        cand(0, &t, &[0, 1, 2, 3, 4, 5, 6, 7]),
        cand(1, &t, &[0, 3]),
        cand(2, &t, &[0, 1]),
    ];
    assert_eq!(plan(e, &c, &need(2, 1)).tiers[0], vec![1]);
    let order =
        |c: &[Candidate<'_>]| -> Vec<usize> { rank(e, c, 2).into_iter().map(|(n, _)| n).collect() };
    assert_eq!(order(&c), vec![1, 0, 2]);
    c[1].health.degraded = set(&[3]);
    assert_eq!(order(&c), vec![0, 2, 1]);
}

/// slurm.conf `Weight=` comes first: gputopo's preferred node is offered after a node of
/// lower weight; among equal weights gputopo's order decides.
#[test]
fn node_weight_orders_before_the_engine() {
    let t = dgx1v();
    let engine = Gputopo::new();
    let e = &Prepared::new(&engine, []);
    let mut c = vec![cand(0, &t, &[0, 1, 2, 3, 4, 5, 6, 7]), cand(1, &t, &[2, 3])];
    let first = |c: &[Candidate<'_>]| plan(e, c, &need(2, 1)).tiers[0].clone();
    assert_eq!(first(&c), vec![1], "equal weights: the best fit");
    c[1].weight = 10 << 8;
    assert_eq!(first(&c), vec![0], "the lower-weight node first");
    let ranked = rank(e, &c, 2);
    assert_eq!(ranked.iter().map(|r| r.0).collect::<Vec<_>>(), vec![0, 1]);
    c[0].weight = 20 << 8;
    assert_eq!(first(&c), vec![1]);
}

/// `plan_with` as it was before it sorted only when a tier needs extending: every key ranked
/// first (`rank_with`), the tiers read off the ranking.
fn plan_by_full_ranking(e: &Prepared<'_>, cands: &[Candidate<'_>], need: &Need) -> Plan {
    let mut all: Vec<usize> = cands.iter().map(|c| c.node).collect();
    all.sort_unstable();
    if need.gpus_per_node == 0 || need.max_calls <= 1 {
        return Plan { tiers: vec![all] };
    }
    let ranked = rank_with(cands, |_, c| node_key(e, c, need.gpus_per_node));
    let Some((_, top)) = ranked.first() else {
        return Plan { tiers: vec![all] };
    };
    let mut tiers: Vec<Vec<usize>> = Vec::new();
    for exact in [true, false] {
        let in_class = |k: &NodeKey| if exact { k == top } else { k.same_class(top) };
        let tier: Vec<usize> = ranked
            .iter()
            .filter(|(_, k)| in_class(k))
            .map(|(n, _)| *n)
            .collect();
        complete_tier(tier, &ranked, need, &all, &mut tiers);
    }
    tiers.truncate(need.max_calls - 1);
    tiers.push(all);
    Plan { tiers }
}

#[test]
fn plan_sorts_only_when_needed_and_matches_the_full_ranking() {
    let t = dgx1v();
    let engine = Gputopo::new();
    let e = &Prepared::new(&engine, []);
    let mut seed = 11;
    for _ in 0..400 {
        let n = 1 + (lcg(&mut seed) % 14) as usize;
        let cands: Vec<Candidate<'_>> = (0..n)
            .map(|i| {
                let mut c = cand(i * 2 + 1, &t, &[]);
                c.free = GpuSet::from_bits((lcg(&mut seed) & 0xff) as u32);
                c.health.faulty = GpuSet::from_bits((lcg(&mut seed) & 0x11) as u32);
                c.health.degraded = GpuSet::from_bits((lcg(&mut seed) & 0x22) as u32);
                c.weight = 1 + lcg(&mut seed) % 2;
                c
            })
            .collect();
        let mut nd = need(
            1 + (lcg(&mut seed) % 4) as usize,
            1 + (lcg(&mut seed) % 5) as usize,
        );
        nd.max_calls = 1 + (lcg(&mut seed) % 4) as usize;
        if lcg(&mut seed) % 3 == 0 {
            nd.required = vec![cands[(lcg(&mut seed) as usize) % n].node];
        }
        assert_eq!(plan(e, &cands, &nd), plan_by_full_ranking(e, &cands, &nd));
    }
}

/// `PreferCool` at node level (issue 13 item 3): of two equally good nodes the one whose set
/// would hold no warm GPU goes first; a node whose warm GPUs the job can avoid at equal
/// quality is as good as a cool one; warmth never beats health, weight or the engine's order.
#[test]
fn among_equal_nodes_the_cooler_one_first() {
    let t = dgx1v();
    let engine = Gputopo::new();
    let e = &Prepared::new(&engine, []);
    let quad = [0, 1, 2, 3];
    let mut c = vec![cand(0, &t, &quad), cand(1, &t, &quad)];
    let order = |c: &[Candidate<'_>], k| -> Vec<usize> {
        rank(e, c, k).into_iter().map(|(n, _)| n).collect()
    };
    assert_eq!(order(&c, 4), vec![0, 1], "no warm GPU: node index");
    c[0].warm = set(&[2]);
    assert_eq!(order(&c, 4), vec![1, 0]);
    assert_eq!(plan(e, &c, &need(4, 1)).tiers[0], vec![1]);
    // A pair: node 0 gives the cool NV2 pair (0,3) instead of (2,3): as good as node 1.
    assert_eq!(order(&c, 2), vec![0, 1]);
    // PreferCool=no: the plugin leaves `warm` empty.
    c[0].warm = GpuSet::EMPTY;
    assert_eq!(order(&c, 4), vec![0, 1]);
    // Health and fit lead: a warm node beats a degraded one and a looser fit.
    c[0].warm = set(&quad);
    c[1].health.degraded = set(&[1]);
    assert_eq!(order(&c, 4), vec![0, 1]);
    let c = [
        cand(0, &t, &quad).with_warm(&quad),
        cand(1, &t, &[0, 1, 2, 3, 4, 5, 6, 7]),
    ];
    assert_eq!(order(&c, 4), vec![0, 1], "tighter fit first, warm or not");
}

impl Candidate<'_> {
    fn with_warm(self, warm: &[usize]) -> Self {
        Candidate {
            warm: set(warm),
            ..self
        }
    }
}

/// `health_drop`'s shortcut for nodes without a fault gives the full rule's verdict, on
/// every free, type and fault mask of 4 GPUs, every need (whole node included), both bases.
#[test]
fn health_drop_matches_the_counting_rule_everywhere() {
    let t = dgx1v();
    let masks = |m: u32| GpuSet::from_iter((0..4).filter(|g| m & (1 << g) != 0));
    for (of_type, faulty, free) in
        (0..16u32).flat_map(|a| (0..16u32).flat_map(move |b| (0..16u32).map(move |c| (a, b, c))))
    {
        let mut c = cand(7, &t, &[]);
        c.of_type = masks(of_type);
        c.free = masks(free & of_type);
        c.health.faulty = masks(faulty);
        for need in [1, 2, 3, 4, 5, usize::MAX] {
            for basis in [Basis::FreeNow, Basis::Total] {
                let counts = HealthCounts {
                    have: c.of_type.difference(c.health.faulty).len(),
                    faulty_of_type: !c.health.faulty.intersection(c.of_type).is_empty(),
                    free: c.free.len(),
                    free_ok: c.free.difference(c.health.faulty).len(),
                };
                let want = counts.rules_out(need, basis);
                assert_eq!(
                    health_drop(&c, need, basis, &[]).is_some(),
                    want,
                    "{of_type:b} {faulty:b} {free:b} need {need} {basis:?}"
                );
                assert!(
                    health_drop(&c, need, basis, &[7]).is_none(),
                    "required nodes are kept"
                );
            }
        }
    }
}

/// A node's key depends on its weight only through the weight itself: the key of any
/// weight is the key of another with the weight replaced (what the key memo relies on).
#[test]
fn the_weight_enters_only_the_leading_field() {
    let t = dgx1v();
    let engine = Gputopo::new();
    let e = &Prepared::new(&engine, []);
    let mut seed = 5;
    for _ in 0..300 {
        let mut c = cand(0, &t, &[]);
        c.free = GpuSet::from_bits((lcg(&mut seed) & 0xff) as u32);
        c.health.faulty = GpuSet::from_bits((lcg(&mut seed) & 0x11) as u32);
        c.health.degraded = GpuSet::from_bits((lcg(&mut seed) & 0x22) as u32);
        c.warm = GpuSet::from_bits((lcg(&mut seed) & 0x0c) as u32);
        let k = 1 + (lcg(&mut seed) % 4) as usize;
        let (w1, w2) = (lcg(&mut seed), lcg(&mut seed) << 20);
        let key = |w| node_key(e, &Candidate { weight: w, ..c }, k);
        let moved = key(w1).map(|mut x| {
            x.set_weight(w2);
            x
        });
        assert_eq!(moved, key(w2));
    }
}
