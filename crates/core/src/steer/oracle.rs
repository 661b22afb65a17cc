//! A brute-force [`Policy`] for the steering tests: tries every subset, so it is the exact
//! optimum of a simple objective (bottleneck NVLinks, then total NVLinks, then the worst
//! PCIe level, then affinity). The real engine is tested against its own oracle; these tests
//! only need *some* exact policy to check the steering rules.

use crate::gpuset::GpuSet;
use crate::placement::{Policy, Request};
use crate::topology::{NodeTopology, PcieLevel};
use std::cmp::Reverse;

/// The oracle.
pub(crate) struct BruteForce;

/// (bottleneck NVLinks, total NVLinks, best worst-PCIe level, near GPUs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct OracleScore(pub u8, pub u32, pub Reverse<PcieLevel>, pub usize);

impl std::fmt::Display for OracleScore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "nv{}/{}/{}", self.0, self.1, (self.2).0)
    }
}

impl BruteForce {
    fn score_near(topo: &NodeTopology, set: GpuSet, near: GpuSet) -> OracleScore {
        let v = set.to_vec();
        let mut min = u8::MAX;
        let mut sum = 0u32;
        let mut worst = PcieLevel::SameBoard;
        for (i, &a) in v.iter().enumerate() {
            for &b in &v[i + 1..] {
                let l = topo.link(a, b);
                min = min.min(l.nvlinks);
                sum += u32::from(l.nvlinks);
                worst = worst.max(l.pcie);
            }
        }
        if v.len() < 2 {
            min = 0;
        }
        OracleScore(min, sum, Reverse(worst), set.intersection(near).len())
    }
}

impl Policy for BruteForce {
    type Score = OracleScore;

    fn name(&self) -> &'static str {
        "brute-force"
    }

    fn choose(&self, topo: &NodeTopology, free: GpuSet, req: &Request) -> Option<GpuSet> {
        if !req.required.is_subset(free) || req.count > free.len() {
            return None;
        }
        let n = topo.len();
        (0u32..(1u32 << n))
            .map(GpuSet::from_bits)
            .filter(|s| s.len() == req.count && s.is_subset(free) && req.required.is_subset(*s))
            // max_by_key keeps the last maximum; iterate so the lowest mask wins ties.
            .rev()
            .max_by_key(|s| Self::score_near(topo, *s, req.near))
    }

    fn score(&self, topo: &NodeTopology, set: GpuSet) -> OracleScore {
        Self::score_near(topo, set, GpuSet::EMPTY)
    }
}

/// The shipped DGX-1V topology.
pub(crate) fn dgx1v() -> NodeTopology {
    crate::topology::fixture::parse(include_str!("../../../../contrib/topologies/dgx1v.topo"))
        .expect("invariant: the shipped DGX-1V fixture parses")
}

/// A re-pick input: cons_tres picked `stock`, `free` are the unallocated GPUs, all healthy.
pub(crate) fn node_input<'a>(
    topo: &'a NodeTopology,
    stock: &[usize],
    free: &[usize],
) -> super::repick::NodeInput<'a> {
    super::repick::NodeInput {
        topo,
        stock: set(stock),
        constraints: super::repick::Constraints {
            allocated: topo.all().difference(set(free)),
            ..super::repick::Constraints::none(topo)
        },
        health: super::HealthMasks::ALL_OK,
        near: GpuSet::EMPTY,
        whole_node: false,
    }
}

/// `GpuSet` from a list, for readable tables.
pub(crate) fn set(v: &[usize]) -> GpuSet {
    v.iter().copied().collect()
}
