//! Known answers (table-driven, one named case per row) and properties against the
//! exhaustive oracle.

use super::*;
use crate::fixtures;
use crate::placement::exhaustive::Exhaustive;
use crate::topology::{Gpu, PcieLevel};
use proptest::prelude::*;

fn s(v: &[usize]) -> GpuSet {
    v.iter().copied().collect()
}

struct Case {
    name: &'static str,
    topo: fn() -> NodeTopology,
    free: Option<&'static [usize]>,
    required: &'static [usize],
    near: &'static [usize],
    count: usize,
    want: Option<&'static [usize]>,
}

const fn case(
    name: &'static str,
    topo: fn() -> NodeTopology,
    free: Option<&'static [usize]>,
    count: usize,
    want: Option<&'static [usize]>,
) -> Case {
    Case {
        name,
        topo,
        free,
        required: &[],
        near: &[],
        count,
        want,
    }
}

/// Eight GPUs as two NV1 quads (bridged boards, e.g. 8× A10): NV1 within {0-3} and {4-7},
/// NODE within a socket, SYS across.
fn nv1_quads() -> NodeTopology {
    let gpus = (0..8)
        .map(|index| Gpu {
            index,
            socket: Some((index / 4) as u32),
            ..Gpu::default()
        })
        .collect();
    let mut t = NodeTopology::new("nv1-quads", gpus, PcieLevel::Node).unwrap();
    for a in 0..8 {
        for b in a + 1..8 {
            if a / 4 == b / 4 {
                t.set_nvlinks(a, b, 1).unwrap();
            }
        }
    }
    t
}

#[rustfmt::skip]
fn known_answers() -> Vec<Case> {
    use fixtures::*;
    vec![
        // NV2 pairs tie (their PCIe path carries no traffic); the lowest wins.
        case("dgx1v idle 2 -> NV2", dgx1v, None, 2, Some(&[0, 3])),
        case("dgx1v idle 4 -> quad", dgx1v, None, 4, Some(&[0, 1, 2, 3])),
        case("dgx1v idle 3", dgx1v, None, 3, Some(&[0, 2, 3])),
        case("dgx1v {0,1,4} 2 -> NV2 cross socket", dgx1v, Some(&[0, 1, 4]), 2, Some(&[0, 4])),
        case("dgx1v {0,2,4,5} 2 (go says {4,5})", dgx1v, Some(&[0, 2, 4, 5]), 2, Some(&[0, 4])),
        // go says {5,6}: both leave the other NV2 pair.
        case("dgx1v {0,4,5,6} 2", dgx1v, Some(&[0, 4, 5, 6]), 2, Some(&[0, 4])),
        // go says {4,7}; the old PCIe term took {6,7} and left the NV1 pair {4,5}.
        case("dgx1v {4,5,6,7} 2 -> leaves NV2", dgx1v, Some(&[4, 5, 6, 7]), 2, Some(&[4, 7])),
        case("nv1 quads {0-5} 2 -> keeps quad", nv1_quads, Some(&[0, 1, 2, 3, 4, 5]), 2, Some(&[4, 5])),
        case("nv1 quads {0-5} 1 -> keeps quad", nv1_quads, Some(&[0, 1, 2, 3, 4, 5]), 1, Some(&[4])),
        case("nv1 quads idle 1 -> lowest", nv1_quads, None, 1, Some(&[0])),
        case("nv1 quads {0-6} 1 -> the broken quad", nv1_quads, Some(&[0, 1, 2, 3, 4, 5, 6]), 1, Some(&[4])),
        case("dgx1v {0,1,3} 2", dgx1v, Some(&[0, 1, 3]), 2, Some(&[0, 3])),
        case("dgx1v {0,1,4} 1 keeps the NV2 pair", dgx1v, Some(&[0, 1, 4]), 1, Some(&[1])),
        case("dgx1v too few", dgx1v, Some(&[0, 1]), 3, None),
        Case {
            required: &[4],
            ..case("dgx1v required 4, 2", dgx1v, None, 2, Some(&[4, 7]))
        },
        Case {
            required: &[4],
            ..case("dgx1v required 4, 4", dgx1v, None, 4, Some(&[4, 5, 6, 7]))
        },
        Case {
            required: &[0, 5],
            ..case("dgx1v required beyond count", dgx1v, None, 1, None)
        },
        Case {
            required: &[6],
            ..case("dgx1v required not free", dgx1v, Some(&[0, 1]), 2, None)
        },
        Case {
            near: &[4, 5, 6, 7],
            ..case("dgx1v near socket 1", dgx1v, None, 2, Some(&[4, 7]))
        },
        case("dgx1p idle 2 -> NV1", dgx1p, None, 2, Some(&[0, 1])),
        case("dgx1p idle 4", dgx1p, None, 4, Some(&[0, 1, 2, 3])),
        case("hgx-h100 idle 2 -> same socket", hgx_h100, None, 2, Some(&[0, 1])),
        case("hgx-h100 idle 4 -> one socket", hgx_h100, None, 4, Some(&[0, 1, 2, 3])),
        Case {
            near: &[4, 5, 6, 7],
            ..case("hgx-h100 near socket 1", hgx_h100, None, 2, Some(&[4, 5]))
        },
        // Any NVSwitch set is NV18; the lookahead keeps the other socket's quad whole.
        case("hgx-h100 {0,1,2,4,5,6} 3", hgx_h100, Some(&[0, 1, 2, 4, 5, 6]), 3, Some(&[0, 1, 2])),
        case("hgx-h100 {0,1,4,5,6,7} 2 -> leave a quad", hgx_h100, Some(&[0, 1, 4, 5, 6, 7]), 2, Some(&[0, 1])),
        case("dgx-a100 idle 2 -> PXB pair", dgx_a100, None, 2, Some(&[0, 1])),
        case("dgx-a100 {1,2,3,4} 2 -> lowest", dgx_a100, Some(&[1, 2, 3, 4]), 2, Some(&[1, 2])),
        case("dgx2 idle 2 -> PIX pair", dgx2, None, 2, Some(&[0, 1])),
        case("dgx2 idle 8 -> one board", dgx2, None, 8, Some(&[0, 1, 2, 3, 4, 5, 6, 7])),
        case("dgx2 {1,2,3,8,9} 2 -> lowest", dgx2, Some(&[1, 2, 3, 8, 9]), 2, Some(&[1, 2])),
        case("hgx-b200 idle 8", hgx_b200, None, 8, Some(&[0, 1, 2, 3, 4, 5, 6, 7])),
        case("hgx-b200 {0,1,2,4,5,6,7} 3 -> leave a quad", hgx_b200, Some(&[0, 1, 2, 4, 5, 6, 7]), 3, Some(&[0, 1, 2])),
        case("gb200 tray idle 2", gb200_nvl72_tray, None, 2, Some(&[0, 1])),
        case("l40s idle 2 -> PIX", l40s_pcie8, None, 2, Some(&[0, 1])),
        case("l40s idle 4 -> one switch", l40s_pcie8, None, 4, Some(&[0, 1, 2, 3])),
        case("l40s {0,1,4,5,6,7} 1 -> broken socket", l40s_pcie8, Some(&[0, 1, 4, 5, 6, 7]), 1, Some(&[0])),
        case("rtx8000 idle 2 -> NV2", rtx8000x4, None, 2, Some(&[0, 3])),
        case("rtx8000 {0,1,3} 2", rtx8000x4, Some(&[0, 1, 3]), 2, Some(&[0, 3])),
        case("a100-pcie4 idle 2 -> bridged pair", a100_pcie4, None, 2, Some(&[0, 1])),
        case("a100-pcie4 {1,2,3} 2", a100_pcie4, Some(&[1, 2, 3]), 2, Some(&[2, 3])),
        case("pcie8 idle 2 -> PIX", pcie8, None, 2, Some(&[0, 1])),
        case("pcie8 idle 4 -> one socket", pcie8, None, 4, Some(&[0, 1, 2, 3])),
        case("pcie8 {0,2,3,4} 2 -> PIX", pcie8, Some(&[0, 2, 3, 4]), 2, Some(&[2, 3])),
        case("pcie8 {0,2,4,6} 2 -> same socket", pcie8, Some(&[0, 2, 4, 6]), 2, Some(&[0, 2])),
    ]
}

#[test]
fn known_answers_engine_and_oracle() {
    let engine = Gputopo::new();
    let mut failures: Vec<String> = Vec::new();
    for c in known_answers() {
        let topo = (c.topo)();
        let free = c.free.map_or(topo.all(), s);
        let req = Request {
            count: c.count,
            required: s(c.required),
            near: s(c.near),
        };
        let want = c.want.map(s);
        let got = engine.choose(&topo, free, &req);
        if got != want {
            failures.push(format!("{}: got {got:?}, want {want:?}", c.name));
        }
        assert_eq!(
            Exhaustive.choose(&topo, free, &req),
            got,
            "oracle: {}",
            c.name
        );
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn dgx1v_four_successive_pairs_are_all_nv2() {
    let topo = fixtures::dgx1v();
    let engine = Gputopo::new();
    let mut free = topo.all();
    let mut got = Vec::new();
    for _ in 0..4 {
        let req = Request::new(2);
        let c = Prepared::new(&engine, [])
            .choose_detailed(&topo, free, &req)
            .unwrap();
        let v = c.gpus.to_vec();
        assert_eq!(topo.link(v[0], v[1]).nvlinks, 2, "{:?}", c.gpus);
        free = free.difference(c.gpus);
        got.push(c.gpus);
    }
    // go-gpuallocator's expected sequence.
    assert_eq!(got, vec![s(&[0, 3]), s(&[1, 2]), s(&[4, 7]), s(&[5, 6])]);
    assert!(free.is_empty());
}

#[test]
fn score_is_printable_and_ordered() {
    let t = fixtures::dgx1v();
    let nv2 = score(&t, s(&[0, 4]));
    let nv1 = score(&t, s(&[0, 1]));
    assert!(nv2 > nv1);
    assert_eq!(nv2.to_string(), "bottleneck=50 aggregate=50");
    assert_eq!(score(&t, s(&[3])).to_string(), "bottleneck=- aggregate=0");
}

#[test]
fn greedy_fallback_above_sixteen() {
    let t = NodeTopology::uniform("big", 20, PcieLevel::Pix).unwrap();
    let e = Gputopo::new();
    let req = Request {
        count: 3,
        required: s(&[7]),
        near: GpuSet::EMPTY,
    };
    assert_eq!(e.choose(&t, t.all(), &req), Some(s(&[0, 1, 7])));
    assert_eq!(e.choose(&t, s(&[1, 2]), &req), None);
    let t = NodeTopology::uniform("max", 32, PcieLevel::Pix).unwrap();
    let req = Request::new(16);
    let c = Prepared::new(&e, [])
        .choose_detailed(&t, t.all(), &req)
        .unwrap();
    assert_eq!(c.gpus, GpuSet::first_n(16));
    assert_eq!(c.objective.quality, score(&t, c.gpus));
}

/// A random topology of `n` GPUs: random sockets, PCIe levels, NVLink counts and NVSwitch
/// links, all from `seed`.
fn random_topology(n: usize, seed: u64) -> NodeTopology {
    let mut next = crate::placement::test_rng(seed);
    let switch = next(4) == 0;
    let gpus = (0..n)
        .map(|index| Gpu {
            index,
            socket: Some(next(2) as u32),
            switch_links: if switch { next(3) as u8 * 6 } else { 0 },
            ..Gpu::default()
        })
        .collect();
    let mut t = NodeTopology::new("r", gpus, PcieLevel::Node).unwrap();
    let dense = next(3);
    for a in 0..n {
        for b in a + 1..n {
            if next(4) == 0 {
                t.set_pcie(a, b, PcieLevel::ALL[next(6) as usize]).unwrap();
            }
            if next(3) < dense {
                t.set_nvlinks(a, b, next(4) as u8).unwrap();
            }
        }
    }
    t.apply_nvswitch();
    t
}

fn check_against_oracle(
    engine: &Gputopo,
    topo: &NodeTopology,
    free: u32,
    req: u32,
    near: u32,
    k: usize,
) {
    let n = topo.len();
    let free = GpuSet::from_bits(free & topo.all().bits());
    let req = Request {
        count: k.min(n),
        required: GpuSet::from_bits(req & free.bits()).intersection(GpuSet::first_n(k.min(n))),
        near: GpuSet::from_bits(near),
    };
    let got = Prepared::new(engine, []).choose_detailed(topo, free, &req);
    let want = Exhaustive::choose_detailed(topo, free, &req);
    // The decision alone (`pick_on`, behind `Policy::choose`) is the same set.
    assert_eq!(
        Policy::choose(engine, topo, free, &req),
        got.map(|c| c.gpus),
        "pick {} free={free:?} {req:?}",
        topo.name
    );
    assert_eq!(
        got.map(|c| (c.gpus, c.objective)),
        want,
        "{} free={free:?} {req:?}",
        topo.name
    );
    if let Some(c) = got {
        assert!(c.gpus.is_subset(free) && req.required.is_subset(c.gpus));
        assert_eq!(c.gpus.len(), req.count);
    } else {
        assert!(free.len() < req.count || !req.required.is_subset(free));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn fast_path_equals_oracle_up_to_12(
        n in 1usize..=12, seed: u64, free: u32, req: u32, near: u32, k in 0usize..=8,
    ) {
        let topo = random_topology(n, seed);
        let engine = Gputopo::new();
        check_against_oracle(&engine, &topo, free, req, near, k);
        // Without required/near (the tier and memo paths), twice to hit the memo.
        check_against_oracle(&engine, &topo, free, 0, 0, k);
        check_against_oracle(&engine, &topo, free, 0, 0, k);
        check_against_oracle(&engine, &topo, free, 0, u32::MAX, k);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    #[test]
    fn fast_path_equals_oracle_at_16(seed: u64, free: u32, req: u32, near: u32, k in 1usize..=5) {
        let topo = random_topology(16, seed);
        let engine = Gputopo::new();
        check_against_oracle(&engine, &topo, free, req & 0x0101, near, k);
        check_against_oracle(&engine, &topo, free, 0, 0, k);
    }
}

#[test]
fn nvswitch_16_matches_oracle() {
    let topo = fixtures::dgx2();
    let engine = Gputopo::new();
    for (free, k, near) in [
        (0xFFFF, 2, 0),
        (0xFFFF, 3, 0xFF00),
        (0xF0F3, 4, 0),
        (0x7FFE, 2, 0x00F0),
    ] {
        check_against_oracle(&engine, &topo, free, 0, near, k);
    }
}
