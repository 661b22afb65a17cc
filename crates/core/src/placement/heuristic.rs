//! The choice above 16 GPUs per node, where the exact tables would not fit: multi-start
//! greedy growth plus swap local search on the set's own quality.
//!
//! No such board ships today (the largest, DGX-2, has 16 GPUs and takes the exact path). Above
//! [`super::tables::MAX_EXACT_GPUS`] the lookahead's per-size best subsets are exponential to
//! evaluate, so the heuristic optimises the job's own set only: quality (bottleneck, then
//! aggregate), then `near`, then the lowest set.
//!
//! 1. **Starts**: the `required` GPUs when given, otherwise every free GPU in turn (so a
//!    strong pair far from GPU 0 is found, which a single greedy from the lowest GPU misses).
//! 2. **Growth**: add the free GPU that gives the best quality (then `near`, then the lowest
//!    index), each step O(k) with the running bottleneck and aggregate.
//! 3. **Swaps**: exchange a chosen, non-required GPU for a free one while that improves the
//!    key, at most `4 k` rounds.
//!
//! Cost O(n² k²) pair values per decision (32 GPUs, k = 16: well under a millisecond). Its gap to
//! the exhaustive optimum on random 24- and 32-GPU topologies is measured by the tests below and
//! reported in `docs/engine.md` (none for k ≤ 4; one miss in 12 at k = 5).

use super::Request;
use super::objective::{lex_smaller, score};
use super::score::{Score, pair_gbps};
use crate::gpuset::GpuSet;
use crate::topology::NodeTopology;

/// The heuristic's set for `req` out of `free`, or `None` when the request cannot be met.
pub fn choose(topo: &NodeTopology, free: GpuSet, req: &Request) -> Option<GpuSet> {
    let free = free.intersection(topo.all());
    if !req.required.is_subset(free) || req.required.len() > req.count || free.len() < req.count {
        return None;
    }
    let k = req.count;
    let key = |s: GpuSet| (score(topo, s), s.intersection(req.near).len());
    let better = |a: GpuSet, b: GpuSet| {
        let (ka, kb) = (key(a), key(b));
        ka > kb || (ka == kb && lex_smaller(a, b))
    };
    let starts: Vec<GpuSet> = if !req.required.is_empty() || k == 0 {
        vec![req.required]
    } else {
        free.iter().map(|g| GpuSet::EMPTY.with(g)).collect()
    };
    let mut best: Option<GpuSet> = None;
    for start in starts {
        let grown = swaps(free, req, grow(topo, free, req, start), &better);
        if best.is_none_or(|b| better(grown, b)) {
            best = Some(grown);
        }
    }
    best
}

/// Greedy growth from `set` to `req.count` GPUs.
fn grow(topo: &NodeTopology, free: GpuSet, req: &Request, mut set: GpuSet) -> GpuSet {
    let mut q = score(topo, set);
    while set.len() < req.count {
        let mut pick: Option<(Score, bool, usize)> = None;
        for g in free.difference(set).iter() {
            let mut s = if set.is_empty() { Score::SINGLE } else { q };
            for m in set.iter() {
                let v = pair_gbps(topo.link(g, m));
                s.bottleneck = s.bottleneck.min(v);
                s.aggregate += v;
            }
            let near = req.near.contains(g);
            if pick.is_none_or(|(ps, pn, _)| (s, near) > (ps, pn)) {
                pick = Some((s, near, g));
            }
        }
        let Some((s, _, g)) = pick else { break };
        set.insert(g);
        q = s;
    }
    set
}

/// Swap local search: replace a chosen, non-required GPU by a free one while the key improves.
fn swaps(
    free: GpuSet,
    req: &Request,
    mut set: GpuSet,
    better: &impl Fn(GpuSet, GpuSet) -> bool,
) -> GpuSet {
    for _ in 0..4 * req.count.max(1) {
        let mut improved = false;
        'out: for m in set.difference(req.required).iter() {
            for o in free.difference(set).iter() {
                let cand = set.without(m).with(o);
                if better(cand, set) {
                    set = cand;
                    improved = true;
                    break 'out;
                }
            }
        }
        if !improved {
            break;
        }
    }
    set
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::objective::for_each_subset;
    use crate::topology::{Gpu, PcieLevel};

    /// A random topology of `n` GPUs: two sockets, random NVLink pairs (NV1-NV4) among
    /// random groups, as a large NVLink mesh would look.
    fn random(n: usize, seed: u64) -> NodeTopology {
        let mut next = crate::placement::test_rng(seed);
        let gpus = (0..n)
            .map(|index| Gpu {
                index,
                socket: Some((index * 2 / n) as u32),
                ..Gpu::default()
            })
            .collect();
        let mut t = NodeTopology::new("r", gpus, PcieLevel::Node).unwrap();
        for a in 0..n {
            for b in a + 1..n {
                if next(3) == 0 {
                    t.set_nvlinks(a, b, 1 + next(4) as u8).unwrap();
                } else if next(4) == 0 {
                    t.set_pcie(a, b, PcieLevel::Pix).unwrap();
                }
            }
        }
        t
    }

    fn optimum(t: &NodeTopology, free: GpuSet, k: usize) -> Score {
        let mut best = Score::NONE;
        for_each_subset(free, k, &mut |s| best = best.max(score(t, s)));
        best
    }

    /// The gap to the exhaustive optimum on random 24- and 32-GPU topologies, random free
    /// masks: for k = 2..4 the bottleneck is always optimal and the aggregate within 10 %; for
    /// k = 5 the gap is measured (printed; docs/engine.md quotes it) and bounded loosely.
    #[test]
    fn gap_to_the_optimum_on_24_and_32_gpus() {
        // Per k: cases, bottleneck-optimal, fully optimal, worst bottleneck and aggregate ratio.
        let mut stats = [(0u32, 0u32, 0u32, 1.0f64, 1.0f64); 6];
        for n in [24usize, 32] {
            for seed in 1..=6u64 {
                let t = random(n, seed * 7919 + n as u64);
                let free = GpuSet::from_bits((seed.wrapping_mul(0x9E37_79B9) as u32) | 0xF0F0)
                    .intersection(t.all());
                for (k, s) in stats.iter_mut().enumerate().skip(2) {
                    let got = choose(&t, free, &Request::new(k)).unwrap();
                    let (g, o) = (score(&t, got), optimum(&t, free, k));
                    assert_eq!(got.len(), k);
                    assert!(got.is_subset(free));
                    s.0 += 1;
                    s.1 += u32::from(g.bottleneck == o.bottleneck);
                    s.2 += u32::from(g == o);
                    s.3 = s.3.min(f64::from(g.bottleneck) / f64::from(o.bottleneck));
                    s.4 = s.4.min(f64::from(g.aggregate) / f64::from(o.aggregate));
                }
            }
        }
        for (k, s) in stats.iter().enumerate().skip(2) {
            eprintln!(
                "heuristic k={k}: {}/{} bottleneck-optimal, {}/{} optimal, worst bottleneck {:.2}, worst aggregate {:.2} of optimum",
                s.1, s.0, s.2, s.0, s.3, s.4
            );
            if k <= 4 {
                assert_eq!(s.1, s.0, "k={k}");
                assert!(s.4 >= 0.9, "k={k}");
            }
        }
    }

    #[test]
    fn required_near_and_impossible() {
        let t = NodeTopology::uniform("u", 20, PcieLevel::Pix).unwrap();
        let req = Request {
            count: 3,
            required: GpuSet::EMPTY.with(7),
            near: GpuSet::EMPTY,
        };
        assert_eq!(
            choose(&t, t.all(), &req),
            Some(GpuSet::from_bits(0b1000_0011))
        );
        assert_eq!(choose(&t, GpuSet::from_bits(0b110), &req), None);
        let near = Request {
            near: GpuSet::from_bits(0xF0000),
            ..Request::new(2)
        };
        assert_eq!(choose(&t, t.all(), &near), Some(GpuSet::from_bits(0x30000)));
    }
}
