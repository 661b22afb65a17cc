//! [`NodeKey`]: a node's rank for a job, packed into four words compared in order.
//!
//! Node steering compares rank keys for every candidate on every `select_p_job_test` call
//! (the best key, then which nodes share it or its class). Field by field that is up to 15
//! comparisons of `Reverse`-wrapped integers per pair; packed, each field is complemented
//! where smaller is better and laid out most significant first, so the derived order of
//! four `u128`s is exactly the fields' lexicographic order (a property test checks it
//! against the field-by-field definition), and "same weight, health and class" is one word.

use crate::placement::{Loss, RankKey, Score};
use std::fmt;

/// Rank key of a node that can take the job now (bigger is better): lower Slurm weight,
/// then fewer degraded GPUs in its best set, then the engine's [`RankKey`], then fewer warm
/// GPUs in that set. Ordered as those fields in turn, each as documented on its accessor.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeKey {
    /// `!weight`, `!degraded`, class: the tiers' "same class" is this word alone.
    head: u128,
    /// `!whole`, `!left`, `!loss.whole`, `!loss.by_size[0]`.
    fit: u128,
    /// `!loss.by_size[1..4]`, `!loss.pairs`.
    loss: u128,
    /// quality (bottleneck, aggregate), `!warm`, 0.
    tail: u128,
}

/// Four 32-bit fields, the first most significant.
fn words(a: u32, b: u32, c: u32, d: u32) -> u128 {
    (u128::from(a) << 96) | (u128::from(b) << 64) | (u128::from(c) << 32) | u128::from(d)
}

/// The 32-bit field `i` (0 = most significant) of `w`.
fn word(w: u128, i: u32) -> u32 {
    (w >> (96 - 32 * i)) as u32
}

impl NodeKey {
    /// The key of a node of Slurm weight `weight` whose best set needs `degraded` degraded
    /// GPUs, has the engine's key `engine`, and gives the job `warm` warm GPUs (after
    /// `PreferCool`'s swap). `degraded` and `warm` are counts of a `GpuSet` (at most 32).
    pub fn new(weight: u64, degraded: u32, engine: RankKey, warm: u32) -> Self {
        let l = engine.loss.0;
        NodeKey {
            head: (u128::from(!weight) << 64)
                | (u128::from(!degraded) << 32)
                | u128::from(engine.class),
            fit: words(!engine.whole.0, !engine.left.0, !l.whole, !l.by_size[0]),
            loss: words(!l.by_size[1], !l.by_size[2], !l.by_size[3], !l.pairs),
            tail: words(
                engine.quality.bottleneck,
                engine.quality.aggregate,
                !warm,
                0,
            ),
        }
    }

    /// Slurm's node weight (`sched_weight`; lower is better, and it comes first: the
    /// administrator's order leads).
    pub fn weight(&self) -> u64 {
        !((self.head >> 64) as u64)
    }

    /// Degraded GPUs the node's best set needs (fewer is better).
    pub fn degraded(&self) -> u32 {
        !word(self.head, 2)
    }

    /// The engine's node order for that set.
    pub fn engine(&self) -> RankKey {
        let loss = Loss {
            whole: !word(self.fit, 2),
            by_size: [
                !word(self.fit, 3),
                !word(self.loss, 0),
                !word(self.loss, 1),
                !word(self.loss, 2),
            ],
            pairs: !word(self.loss, 3),
        };
        RankKey {
            class: word(self.head, 3),
            whole: std::cmp::Reverse(!word(self.fit, 0)),
            left: std::cmp::Reverse(!word(self.fit, 1)),
            loss: std::cmp::Reverse(loss),
            quality: Score {
                bottleneck: word(self.tail, 0),
                aggregate: word(self.tail, 1),
            },
        }
    }

    /// Warm GPUs in the set the job would get there after `PreferCool`'s swap (fewer is
    /// better): last, so it only orders nodes that are equally good otherwise, and heat
    /// spreads across nodes as it does across a node's GPUs ([`super::super::cool`]).
    pub fn warm(&self) -> u32 {
        !word(self.tail, 2)
    }

    /// The same key for a node of weight `weight`: the weight enters no other field (the
    /// engine's choice does not see it), so a key remembered for a node state holds for that
    /// state at any weight ([`super::super::key_memo`] keys on the state without it).
    pub fn set_weight(&mut self, weight: u64) {
        self.head = (u128::from(!weight) << 64) | (self.head & u128::from(u64::MAX));
    }

    /// True when `other` has the same weight, health and interconnect class (fit may differ).
    pub fn same_class(&self, other: &NodeKey) -> bool {
        self.head == other.head
    }
}

impl fmt::Debug for NodeKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeKey")
            .field("weight", &self.weight())
            .field("degraded", &self.degraded())
            .field("engine", &self.engine())
            .field("warm", &self.warm())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::cmp::Reverse;

    /// The key as it was defined before it was packed: compared field by field.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
    struct Fields {
        weight: Reverse<u64>,
        degraded: Reverse<usize>,
        engine: RankKey,
        warm: Reverse<usize>,
    }

    impl Fields {
        fn packed(&self) -> NodeKey {
            let count = |n: usize| u32::try_from(n).expect("a GpuSet count");
            NodeKey::new(
                self.weight.0,
                count(self.degraded.0),
                self.engine,
                count(self.warm.0),
            )
        }
    }

    /// Few distinct values per field (so that keys often tie on a prefix and differ
    /// later), with the extremes.
    fn u32s() -> impl Strategy<Value = u32> {
        prop_oneof![0..3u32, Just(u32::MAX), Just(u32::MAX - 1), any::<u32>()]
    }

    fn fields() -> impl Strategy<Value = Fields> {
        let weight = prop_oneof![0..3u64, Just(u64::MAX), any::<u64>()];
        let count = prop_oneof![0..3usize, Just(32usize), Just(u32::MAX as usize)];
        let loss = (u32s(), [u32s(), u32s(), u32s(), u32s()], u32s());
        let engine = (u32s(), u32s(), u32s(), loss, (u32s(), u32s()));
        (weight, count.clone(), engine, count).prop_map(
            |(w, d, (class, whole, left, (lw, by_size, pairs), (b, a)), warm)| Fields {
                weight: Reverse(w),
                degraded: Reverse(d),
                engine: RankKey {
                    class,
                    whole: Reverse(whole),
                    left: Reverse(left),
                    loss: Reverse(Loss {
                        whole: lw,
                        by_size,
                        pairs,
                    }),
                    quality: Score {
                        bottleneck: b,
                        aggregate: a,
                    },
                },
                warm: Reverse(warm),
            },
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// The packed order is the field-by-field order, "same class" is equal weight,
        /// health and class, and every field reads back.
        #[test]
        fn packed_order_is_the_field_order(a in fields(), b in fields()) {
            let (pa, pb) = (a.packed(), b.packed());
            prop_assert_eq!(pa.cmp(&pb), a.cmp(&b));
            prop_assert_eq!(pa == pb, a == b);
            let same = a.weight == b.weight
                && a.degraded == b.degraded
                && a.engine.class == b.engine.class;
            prop_assert_eq!(pa.same_class(&pb), same);
            prop_assert_eq!(pa.weight(), a.weight.0);
            prop_assert_eq!(pa.degraded() as usize, a.degraded.0);
            prop_assert_eq!(pa.engine(), a.engine);
            prop_assert_eq!(pa.warm() as usize, a.warm.0);
            let mut moved = pa;
            moved.set_weight(b.weight.0);
            prop_assert_eq!(moved, Fields { weight: b.weight, ..a }.packed());
        }

        /// Keys that differ in one field only (the case that decides most comparisons).
        #[test]
        fn one_field_apart(a in fields(), field in 0..14usize, v in u32s()) {
            let mut b = a;
            let e = &mut b.engine;
            match field {
                0 => b.weight = Reverse(u64::from(v)),
                1 => b.degraded = Reverse(v as usize),
                2 => e.class = v,
                3 => e.whole = Reverse(v),
                4 => e.left = Reverse(v),
                5 => e.loss.0.whole = v,
                6..=9 => e.loss.0.by_size[field - 6] = v,
                10 => e.loss.0.pairs = v,
                11 => e.quality.bottleneck = v,
                12 => e.quality.aggregate = v,
                _ => b.warm = Reverse(v as usize),
            }
            prop_assert_eq!(a.packed().cmp(&b.packed()), a.cmp(&b));
        }
    }
}
