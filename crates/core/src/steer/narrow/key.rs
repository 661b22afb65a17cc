//! [`NodeKey`]: a node's rank for a job, its fields compared in order.
//!
//! Node steering compares rank keys for every candidate on every `select_p_job_test` call
//! (the best key, then which nodes share it or its class). The key is a plain struct with a
//! derived order; an earlier form packed it into four `u128`s for speed, which the perf gate
//! (contrib/bench-select.sh --gate) does not need (docs/perf-log.md has both figures).

use crate::placement::RankKey;
use std::cmp::Reverse;

/// Rank key of a node that can take the job now (bigger is better), compared field by field
/// in this order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeKey {
    /// Slurm's node weight (`sched_weight`; lower is better, and it comes first: the
    /// administrator's order leads). The weight enters no other field (the engine's choice
    /// does not see it), so a key remembered for a node state holds for that state at any
    /// weight ([`NodeKey::set_weight`]; [`super::super::key_memo`] keys on the state
    /// without it).
    weight: Reverse<u64>,
    /// Degraded GPUs the node's best set needs (fewer is better).
    degraded: Reverse<u32>,
    /// The engine's node order for that set.
    engine: RankKey,
    /// Warm GPUs in the set the job would get there after `PreferCool`'s swap (fewer is
    /// better): last, so it only orders nodes that are equally good otherwise, and heat
    /// spreads across nodes as it does across a node's GPUs ([`super::super::cool`]).
    warm: Reverse<u32>,
}

impl NodeKey {
    /// The key of a node of Slurm weight `weight` whose best set needs `degraded` degraded
    /// GPUs, has the engine's key `engine`, and gives the job `warm` warm GPUs (after
    /// `PreferCool`'s swap).
    pub fn new(weight: u64, degraded: u32, engine: RankKey, warm: u32) -> Self {
        NodeKey {
            weight: Reverse(weight),
            degraded: Reverse(degraded),
            engine,
            warm: Reverse(warm),
        }
    }

    /// Slurm's node weight.
    pub fn weight(&self) -> u64 {
        self.weight.0
    }

    /// The same key for a node of weight `weight`.
    pub fn set_weight(&mut self, weight: u64) {
        self.weight = Reverse(weight);
    }

    /// True when `other` has the same weight, health and interconnect class (fit may differ):
    /// the tiers' "same class".
    pub fn same_class(&self, other: &NodeKey) -> bool {
        (self.weight, self.degraded, self.engine.class)
            == (other.weight, other.degraded, other.engine.class)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::{Loss, Score};

    fn engine(class: u32, left: usize) -> RankKey {
        let quality = Score {
            bottleneck: class,
            aggregate: class,
        };
        RankKey::of(quality, Loss::default(), left)
    }

    /// Each field outranks every later one; "same class" ignores fit and warmth.
    #[test]
    fn fields_rank_in_order() {
        let base = NodeKey::new(10, 1, engine(50, 2), 1);
        let better = [
            NodeKey::new(9, 8, engine(0, 8), 8),
            NodeKey::new(10, 0, engine(0, 8), 8),
            NodeKey::new(10, 1, engine(100, 8), 8),
            NodeKey::new(10, 1, engine(50, 1), 8),
            NodeKey::new(10, 1, engine(50, 2), 0),
        ];
        for (i, b) in better.iter().enumerate() {
            assert!(*b > base, "field {i}: {b:?} > {base:?}");
        }
        assert!(base.same_class(&better[3]) && base.same_class(&better[4]));
        assert!(!base.same_class(&better[0]) && !base.same_class(&better[2]));
        let mut moved = base;
        moved.set_weight(9);
        assert_eq!((moved.weight(), moved > base), (9, true));
    }
}
