//! Communication-slowdown model: how much longer a job runs on the set it got than on the
//! best set of its size.
//!
//! A data-parallel training step is `compute + comm`; with NCCL's ring all-reduce the comm
//! part is bounded by the ring's slowest hop. So for a set `S` of a node with topology `T`:
//!
//! `runtime(S) = duration × ((1 − f) + f × ring(best k-set of T) / ring(S))`, at least
//! `duration`,
//!
//! where `f` is the share of step time spent communicating on the ideal set and `ring(S)` is
//! the best Hamiltonian cycle's bottleneck over `S` (what NCCL's ring search finds), each hop
//! valued by the engine's per-pair bandwidth estimate
//! ([`gputopo_core::placement::score::pair_gbps`]: 25 GB/s per NVLink per direction, as NVLink
//! 2-4 give; between GPUs without NVLink, PCIe Gen3 x16 peer-to-peer 12 GB/s behind one
//! switch (PIX) down to 5 GB/s across sockets (SYS)). A job spanning nodes takes its slowest node's ring; the network
//! between nodes is the same under every policy and is not modelled. One-GPU jobs never slow
//! down.
//!
//! `f` defaults to [`DEFAULT_COMM_FRACTION`] = 0.1 (`--comm-fraction`), deliberately modest:
//! with it an NV2 pair vs a cross-socket PCIe pair costs 1.9×, NV1 vs NV2 1.1×, which brackets
//! the published topology effects: Amaral et al. (SC'17) up to ≈1.3× from topology-aware
//! placement, MAPA (2021) 12.4 % p75 speed-up and −35 % worst-case time. Results scale
//! roughly linearly with `f`; docs/results.md shows the setting used.

use gputopo_core::gpuset::GpuSet;
use gputopo_core::placement::score::pair_gbps;
use gputopo_core::topology::NodeTopology;
use std::collections::HashMap;

/// Default communication share of a multi-GPU step on its ideal set.
pub const DEFAULT_COMM_FRACTION: f64 = 0.1;

/// Largest node size for which the ideal ring is found by enumerating every k-subset.
const EXACT_IDEAL_SUBSETS: u64 = 20_000;

/// Bottleneck (GB/s) of the best ring through `set`; `u32::MAX` for fewer than 2 GPUs.
pub fn ring_gbps(topo: &NodeTopology, set: GpuSet) -> u32 {
    let v = set.to_vec();
    let k = v.len();
    if k < 2 {
        return u32::MAX;
    }
    let w = |a: usize, b: usize| pair_gbps(topo.link(v[a], v[b]));
    if k <= 3 {
        return (0..k)
            .flat_map(|a| (a + 1..k).map(move |b| (a, b)))
            .map(|(a, b)| w(a, b))
            .min()
            .unwrap_or(u32::MAX);
    }
    let mut values: Vec<u32> = (0..k)
        .flat_map(|a| (a + 1..k).map(move |b| (a, b)))
        .map(|(a, b)| w(a, b))
        .collect();
    values.sort_unstable_by(|a, b| b.cmp(a));
    values.dedup();
    for t in values {
        let adj: Vec<u32> = (0..k)
            .map(|a| {
                (0..k)
                    .filter(|&b| b != a && w(a, b) >= t)
                    .fold(0u32, |m, b| m | (1 << b))
            })
            .collect();
        if hamiltonian_cycle(&adj) {
            return t;
        }
    }
    0
}

/// Whether the graph (adjacency bitmasks, ≤ 32 vertices, used up to 16) has a Hamiltonian
/// cycle: DP over visited sets from vertex 0, each entry the set of possible path ends.
fn hamiltonian_cycle(adj: &[u32]) -> bool {
    let k = adj.len();
    let full = (1usize << k) - 1;
    let mut ends = vec![0u32; 1 << k];
    ends[1] = 1;
    for mask in 1..=full {
        let e = ends[mask];
        if e == 0 || mask & 1 == 0 {
            continue;
        }
        let mut rest = e;
        while rest != 0 {
            let x = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            let mut next = adj[x] & !(mask as u32);
            while next != 0 {
                let y = next.trailing_zeros() as usize;
                next &= next - 1;
                ends[mask | (1 << y)] |= 1 << y;
            }
        }
    }
    ends[full] & adj[0] != 0
}

/// Slowdown factor of a job whose slowest ring is `actual` GB/s where `ideal` was possible.
pub fn slowdown(comm_fraction: f64, ideal: u32, actual: u32) -> f64 {
    if actual == u32::MAX || actual == 0 || ideal == u32::MAX {
        return 1.0;
    }
    ((1.0 - comm_fraction) + comm_fraction * f64::from(ideal) / f64::from(actual)).max(1.0)
}

/// Memoised ring values per (topology group, set) and ideal rings per (group, size).
#[derive(Debug, Default)]
pub(crate) struct CommCache {
    ring: HashMap<(u16, u32), u32>,
    ideal: HashMap<(u16, usize), u32>,
}

impl CommCache {
    pub fn ring(&mut self, g: u16, topo: &NodeTopology, set: GpuSet) -> u32 {
        *self
            .ring
            .entry((g, set.bits()))
            .or_insert_with(|| ring_gbps(topo, set))
    }

    /// Best ring of `k` GPUs on an idle node: exact by enumeration when the subsets are
    /// few, else the ring of `fallback` (the engine's idle choice).
    pub fn ideal(
        &mut self,
        g: u16,
        topo: &NodeTopology,
        k: usize,
        fallback: impl FnOnce() -> GpuSet,
    ) -> u32 {
        if let Some(v) = self.ideal.get(&(g, k)) {
            return *v;
        }
        let n = topo.len();
        let v = if binomial(n, k) <= EXACT_IDEAL_SUBSETS {
            let mut best = 0;
            gputopo_core::placement::objective::for_each_subset(topo.all(), k, &mut |s| {
                best = best.max(ring_gbps(topo, s));
            });
            best
        } else {
            ring_gbps(topo, fallback())
        };
        self.ideal.insert((g, k), v);
        v
    }
}

fn binomial(n: usize, k: usize) -> u64 {
    let k = k.min(n.saturating_sub(k));
    (0..k).fold(1u64, |acc, i| acc * (n - i) as u64 / (i as u64 + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dgx1v() -> NodeTopology {
        gputopo_core::fixtures::dgx1v()
    }

    #[test]
    fn rings_on_dgx1v() {
        let t = dgx1v();
        let s = |x: &str| GpuSet::parse_list(x).unwrap();
        assert_eq!(ring_gbps(&t, s("0,3")), 2 * 25); // NV2: its PCIe path carries nothing
        assert_eq!(ring_gbps(&t, s("0,5")), 5); // SYS
        // 0-1-2-3 ring: 0-1 NV1 (25) is the weakest hop of the best cycle 0-1-2-3-0
        assert_eq!(ring_gbps(&t, s("0-3")), 25);
        // {0,1,4,5}: ring 0-4-5-1-0 uses NVLinks only: min(NV2, NV1, NV2, NV1) = 25
        assert_eq!(ring_gbps(&t, s("0-1,4-5")), 25);
        assert_eq!(ring_gbps(&t, s("0")), u32::MAX);
        let mut c = CommCache::default();
        assert_eq!(c.ideal(0, &t, 2, || s("0-1")), 50); // any NV2 pair
        assert_eq!(c.ideal(0, &t, 8, || s("0-7")), ring_gbps(&t, s("0-7")));
        assert_eq!(binomial(16, 8), 12_870);
    }

    #[test]
    fn slowdown_bounds() {
        assert_eq!(slowdown(0.1, 50, 50), 1.0);
        assert!((slowdown(0.1, 50, 5) - 1.9).abs() < 1e-9);
        assert_eq!(slowdown(0.1, 50, 100), 1.0);
        assert_eq!(slowdown(0.1, u32::MAX, u32::MAX), 1.0);
    }
}
