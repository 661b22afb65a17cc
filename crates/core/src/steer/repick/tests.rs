//! Table tests for the named cases, then an exhaustive sweep over DGX-1V free, faulty and
//! degraded masks checking the invariants the plugin relies on.

use super::*;
use crate::steer::oracle::{BruteForce, dgx1v, node_input as input, set};

fn replaced(d: &Decision<crate::steer::oracle::OracleScore>) -> Option<(GpuSet, ReplaceReason)> {
    match d {
        Decision::Replace { set, why, .. } => Some((*set, *why)),
        _ => None,
    }
}

#[test]
fn named_cases() {
    let t = dgx1v();
    const ALL: &[usize] = &[0, 1, 2, 3, 4, 5, 6, 7];
    struct Case {
        name: &'static str,
        stock: &'static [usize],
        free: &'static [usize],
        faulty: &'static [usize],
        degraded: &'static [usize],
        want: Result<&'static [usize], Decision<()>>,
    }
    let keep = |r| Err(Decision::Keep(r));
    let cases = [
        Case {
            name: "24.11 idle pair {0,1} (NV1) becomes an NV2 pair (PIX breaks the tie)",
            stock: &[0, 1],
            free: ALL,
            faulty: &[],
            degraded: &[],
            want: Ok(&[2, 3]),
        },
        Case {
            name: "the engine's own choice stays",
            stock: &[2, 3],
            free: ALL,
            faulty: &[],
            degraded: &[],
            want: keep(KeepReason::AlreadyBest),
        },
        Case {
            name: "an equally good pair keeps cons_tres's indices",
            stock: &[6, 7],
            free: ALL,
            faulty: &[],
            degraded: &[],
            want: keep(KeepReason::NoBetter),
        },
        Case {
            name: "free {0,1,4}: {0,1} (NV1) becomes {0,4} (NV2)",
            stock: &[0, 1],
            free: &[0, 1, 4],
            faulty: &[],
            degraded: &[],
            want: Ok(&[0, 4]),
        },
        Case {
            name: "free {0,2,4,5}: {0,2} becomes {0,4}",
            stock: &[0, 2],
            free: &[0, 2, 4, 5],
            faulty: &[],
            degraded: &[],
            want: Ok(&[0, 4]),
        },
        Case {
            name: "idle 4-GPU {0-3} stays",
            stock: &[0, 1, 2, 3],
            free: ALL,
            faulty: &[],
            degraded: &[],
            want: keep(KeepReason::AlreadyBest),
        },
        Case {
            name: "stock holds faulty 3: swapped for a healthy NV2 pair",
            stock: &[0, 3],
            free: ALL,
            faulty: &[3],
            degraded: &[],
            want: Ok(&[6, 7]),
        },
        Case {
            name: "faulty 1 in stock, only 0,1 free: node excluded",
            stock: &[0, 1],
            free: &[0, 1],
            faulty: &[1],
            degraded: &[],
            want: Err(Decision::ExcludeNode(ExcludeReason::NotEnoughHealthy {
                need: 2,
                have: 1,
            })),
        },
        Case {
            name: "single GPU on a faulty index moves",
            stock: &[2],
            free: &[2, 6],
            faulty: &[2],
            degraded: &[],
            want: Ok(&[6]),
        },
        Case {
            name: "degraded 3 avoided although {0,3} is NV2",
            stock: &[0, 3],
            free: &[0, 1, 3],
            faulty: &[],
            degraded: &[3],
            want: Ok(&[0, 1]),
        },
        Case {
            name: "only degraded left to make up the count: fewest degraded taken",
            stock: &[5, 6],
            free: &[4, 5, 6],
            faulty: &[4],
            degraded: &[5, 6],
            want: keep(KeepReason::AlreadyBest),
        },
        Case {
            name: "one healthy + degraded: healthy one required",
            stock: &[6, 7],
            free: &[4, 6, 7],
            faulty: &[],
            degraded: &[6, 7],
            want: Ok(&[4, 7]),
        },
    ];
    for c in cases {
        let mut i = input(&t, c.stock, c.free);
        i.health = HealthMasks {
            faulty: set(c.faulty),
            degraded: set(c.degraded),
        };
        let d = repick(&BruteForce, &i);
        match c.want {
            Ok(want) => assert_eq!(replaced(&d).map(|r| r.0), Some(set(want)), "{}", c.name),
            Err(Decision::Keep(r)) => assert_eq!(d, Decision::Keep(r), "{}", c.name),
            Err(Decision::ExcludeNode(r)) => {
                assert_eq!(d, Decision::ExcludeNode(r), "{}", c.name)
            }
            Err(Decision::Replace { .. }) => unreachable!("tables use Ok for replacements"),
        }
    }
}

#[test]
fn whole_node_jobs_are_never_changed() {
    let t = dgx1v();
    let mut i = input(&t, &[0, 1, 2, 3, 4, 5, 6, 7], &[0, 1, 2, 3, 4, 5, 6, 7]);
    i.whole_node = true;
    assert_eq!(
        repick(&BruteForce, &i),
        Decision::Keep(KeepReason::WholeNode)
    );
    i.health.degraded = set(&[2]);
    assert_eq!(
        repick(&BruteForce, &i),
        Decision::Keep(KeepReason::WholeNode)
    );
    i.health.faulty = set(&[5]);
    assert_eq!(
        repick(&BruteForce, &i),
        Decision::ExcludeNode(ExcludeReason::WholeNodeHasFaulty)
    );
}

#[test]
fn empty_and_unknown_indices_are_kept() {
    let t = dgx1v();
    let i = input(&t, &[], &[0, 1]);
    assert_eq!(
        repick(&BruteForce, &i),
        Decision::Keep(KeepReason::NothingSelected)
    );
    let i = input(&t, &[0, 9], &[0, 1]);
    assert_eq!(
        repick(&BruteForce, &i),
        Decision::Keep(KeepReason::OutsideTopology)
    );
}

#[test]
fn constraints_are_respected() {
    let t = dgx1v();
    let all = t.all();
    // Type: only 4-7 are the requested type.
    let mut i = input(&t, &[4, 5], &[0, 1, 2, 3, 4, 5, 6, 7]);
    i.constraints.of_type = set(&[4, 5, 6, 7]);
    assert_eq!(
        replaced(&repick(&BruteForce, &i)).map(|r| r.0),
        Some(set(&[6, 7]))
    );
    // Shared GRES in use on 7: next best NV2 pair inside 4-7 is {5,6}.
    i.constraints.shared_in_use = set(&[7]);
    assert_eq!(
        replaced(&repick(&BruteForce, &i)).map(|r| r.0),
        Some(set(&[5, 6]))
    );
    // Binding: job's cores only near 0-3; cross-socket {0,4} is not allowed.
    let mut i = input(&t, &[0, 1], &[0, 1, 4]);
    i.constraints.bound = Some(set(&[0, 1, 2, 3]));
    assert_eq!(
        repick(&BruteForce, &i),
        Decision::Keep(KeepReason::AlreadyBest)
    );
    // Without binding it is allowed.
    i.constraints.bound = None;
    assert_eq!(
        replaced(&repick(&BruteForce, &i)).map(|r| r.0),
        Some(set(&[0, 4]))
    );
    // Allocated GPUs never come back.
    let i = input(&t, &[0, 1], &[0, 1]);
    assert_eq!(
        repick(&BruteForce, &i),
        Decision::Keep(KeepReason::AlreadyBest)
    );
    assert_eq!(Constraints::none(&t).eligible(), all);
}

/// Every free mask of a DGX-1V, every faulty mask of up to 2 GPUs, degraded masks of up to
/// one GPU, counts 1-4, with cons_tres modelled as first fit (it does not know health).
#[test]
fn exhaustive_invariants_on_dgx1v() {
    let t = dgx1v();
    let small_masks = |max: usize| (0u32..256).filter(move |m| m.count_ones() as usize <= max);
    let mut replaced_n = 0;
    for free_bits in 0u32..256 {
        let free = GpuSet::from_bits(free_bits);
        for count in 1..=4usize.min(free.len()) {
            let stock: GpuSet = free.iter().take(count).collect();
            for fbits in small_masks(2) {
                for dbits in small_masks(1) {
                    let health = HealthMasks {
                        faulty: GpuSet::from_bits(fbits),
                        degraded: GpuSet::from_bits(dbits).difference(GpuSet::from_bits(fbits)),
                    };
                    let mut i = input(&t, &[], &[]);
                    i.stock = stock;
                    i.constraints.allocated = t.all().difference(free);
                    i.health = health;
                    let d = repick(&BruteForce, &i);
                    let usable = free.difference(health.faulty);
                    let healthy = usable.difference(health.degraded);
                    match d {
                        Decision::Keep(_) => {
                            assert!(stock.intersection(health.faulty).is_empty(), "kept faulty")
                        }
                        Decision::Replace { set, why, .. } => {
                            replaced_n += 1;
                            assert_eq!(set.len(), count, "count preserved");
                            assert!(set.is_subset(usable), "only free, non-faulty GPUs");
                            let min_degraded = count.saturating_sub(healthy.len());
                            assert_eq!(
                                set.intersection(health.degraded).len(),
                                min_degraded,
                                "degraded used last"
                            );
                            if why == ReplaceReason::Better {
                                let best = BruteForce
                                    .choose(
                                        &t,
                                        healthy,
                                        &Request {
                                            count,
                                            ..Request::default()
                                        },
                                    )
                                    .map(|b| BruteForce.score(&t, b));
                                assert_eq!(Some(BruteForce.score(&t, set)), best, "optimal");
                            }
                        }
                        Decision::ExcludeNode(ExcludeReason::NotEnoughHealthy { need, have }) => {
                            assert_eq!((need, have), (count, usable.len()));
                            assert!(
                                usable.len() < count,
                                "excluded although a healthy set exists"
                            );
                        }
                        Decision::ExcludeNode(r) => panic!("unexpected {r:?}"),
                    }
                }
            }
        }
    }
    assert!(
        replaced_n > 1000,
        "the sweep exercised replacements ({replaced_n})"
    );
}

#[test]
fn topology_gate_keeps_health_replacements_only() {
    let better = |why| Decision::Replace {
        set: set(&[2, 3]),
        why,
        old_score: (),
        new_score: (),
    };
    assert_eq!(
        better(ReplaceReason::Better).gate_topology(false),
        Decision::Keep(KeepReason::TopologyOff)
    );
    assert_eq!(
        better(ReplaceReason::Better).gate_topology(true),
        better(ReplaceReason::Better)
    );
    for why in [ReplaceReason::AvoidsFaulty, ReplaceReason::AvoidsDegraded] {
        assert_eq!(better(why).gate_topology(false), better(why));
    }
    let ex = ExcludeReason::NotEnoughHealthy { need: 2, have: 1 };
    let d: Decision<()> = Decision::ExcludeNode(ex);
    assert_eq!(d.gate_topology(false), Decision::ExcludeNode(ex));
}

/// The real engine (not the oracle) through the same rules, directly and prepared.
#[test]
fn engine_repicks_stock_pairs_on_dgx1v() {
    use crate::placement::{Gputopo, Prepared};
    use crate::steer::repick::Constraints;
    let t = dgx1v();
    let engine = Gputopo::new();
    let input = |stock: &[usize], free: &[usize]| NodeInput {
        topo: &t,
        stock: set(stock),
        constraints: Constraints {
            allocated: t.all().difference(set(free)),
            ..Constraints::none(&t)
        },
        health: HealthMasks::ALL_OK,
        near: GpuSet::EMPTY,
        whole_node: false,
    };
    // 24.11's idle pick {0,1} (NV1) is replaced by an NV2 pair.
    let d = repick(&engine, &input(&[0, 1], &[0, 1, 2, 3, 4, 5, 6, 7]));
    let Decision::Replace { set: s, .. } = d else {
        panic!("expected a replacement, got {d:?}")
    };
    assert_eq!(t.link(s.to_vec()[0], s.to_vec()[1]).nvlinks, 2);
    // Free {0,1,4}: {0,1} becomes {0,4}.
    let d = repick(&engine, &input(&[0, 1], &[0, 1, 4]));
    assert_eq!(d.final_set(set(&[0, 1])), Some(set(&[0, 4])));
    // The prepared engine answers the same, with and without the node's tables.
    let h = engine.handle(&t).expect("8 GPUs have tables");
    for prepared in [
        Prepared::new(&engine, [(&t, h)]),
        Prepared::new(&engine, []),
    ] {
        let d = repick(&prepared, &input(&[0, 1], &[0, 1, 4]));
        assert_eq!(d.final_set(set(&[0, 1])), Some(set(&[0, 4])));
    }
}
