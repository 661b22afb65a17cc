//! Cooler GPUs first (`PreferCool`, issue 13 item 3): among sets of equal interconnect
//! quality, a job gets GPUs that do not run warm, so heat spreads across the cards instead
//! of piling up on the same ones.
//!
//! It runs after the re-pick ([`super::repick`]) as a tie-break on its answer, never against
//! it: the alternative is the engine's best set out of the usable GPUs that are not warm
//! (degraded ones still only to make up the count), and it replaces the re-pick's set only
//! when its quality (the engine's score: bottleneck, then aggregate) is exactly equal and it
//! holds no more degraded GPUs. The engine's leftover lookahead is what it gives up: with two
//! equal quads free, the lowest quad is the engine's choice, and the cool one is as good for
//! the job. Warm GPUs come from the agent ([`crate::health::telemetry::warm`]).

use super::repick::{Decision, NodeInput, ReplaceReason, choose_healthiest};
use crate::gpuset::GpuSet;
use crate::placement::Policy;
use crate::topology::NodeTopology;

/// The decision with a cooler, equally connected set where the chosen one holds warm GPUs.
/// Exclusions, whole-node jobs and sets without warm GPUs pass unchanged.
pub fn prefer_cool<P: Policy>(
    policy: &P,
    input: &NodeInput<'_>,
    decision: Decision<P::Score>,
    warm: GpuSet,
) -> Decision<P::Score> {
    let Some(chosen) = decision.final_set(input.stock) else {
        return decision;
    };
    if input.whole_node || chosen.intersection(warm).is_empty() {
        return decision;
    }
    let topo = input.topo;
    let Some(cool) = cool_alternative(
        policy,
        topo,
        input.usable(),
        input.health.degraded,
        chosen,
        warm,
        input.near,
    ) else {
        return decision;
    };
    Decision::Replace {
        set: cool,
        why: ReplaceReason::Cooler,
        old_score: policy.score(topo, input.stock),
        new_score: policy.score(topo, cool),
    }
}

/// The set `PreferCool` gives instead of `chosen`: the engine's best set of its size out of
/// `usable` without the `warm` GPUs (degraded ones only to make up the count), when it
/// scores exactly as `chosen` does and holds no more degraded GPUs; `None` otherwise. Shared
/// by the GPU pick ([`prefer_cool`]) and the node ranking (`narrow::node_key`), so a node
/// ranks by the warm GPUs the job would really get there.
pub fn cool_alternative<P: Policy>(
    policy: &P,
    topo: &NodeTopology,
    usable: GpuSet,
    degraded: GpuSet,
    chosen: GpuSet,
    warm: GpuSet,
    near: GpuSet,
) -> Option<GpuSet> {
    let count = chosen.len();
    let pool = usable.difference(warm);
    let cool = choose_healthiest(policy, topo, pool, degraded, count, near)
        .filter(|c| c.len() == count && c.is_subset(pool))?;
    let same_quality = policy.score(topo, cool) == policy.score(topo, chosen);
    let degraded_in = |s: GpuSet| s.intersection(degraded).len();
    (same_quality && degraded_in(cool) <= degraded_in(chosen)).then_some(cool)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::steer::HealthMasks;
    use crate::steer::oracle::{BruteForce, dgx1v, node_input as input, set};
    use crate::steer::repick::{KeepReason, repick};

    fn run(inp: &NodeInput<'_>, warm: &[usize]) -> Option<GpuSet> {
        let d = repick(&BruteForce, inp);
        prefer_cool(&BruteForce, inp, d, set(warm)).final_set(inp.stock)
    }

    #[test]
    fn a_warm_quad_gives_way_to_the_equal_cool_quad() {
        let t = dgx1v();
        let all = [0, 1, 2, 3, 4, 5, 6, 7];
        let inp = input(&t, &[0, 1, 2, 3], &all);
        assert_eq!(
            repick(&BruteForce, &inp),
            Decision::Keep(KeepReason::AlreadyBest)
        );
        assert_eq!(run(&inp, &[0, 1, 2, 3]), Some(set(&[4, 5, 6, 7])));
        // One warm GPU is enough to move; no warm GPU in the pick: unchanged.
        assert_eq!(run(&inp, &[2]), Some(set(&[4, 5, 6, 7])));
        assert_eq!(run(&inp, &[5, 6]), Some(set(&[0, 1, 2, 3])));
    }

    #[test]
    fn quality_is_never_traded_for_coolness() {
        let t = dgx1v();
        // Pairs: {0,3} is NV2; the cool GPUs {5,6} are NV2 too, {1,4} have no NVLink.
        let inp = input(&t, &[0, 3], &[0, 1, 3, 4, 5, 6]);
        assert_eq!(run(&inp, &[0, 3]), Some(set(&[5, 6])));
        let inp = input(&t, &[0, 3], &[0, 1, 3, 4]);
        assert_eq!(
            run(&inp, &[0, 3]),
            Some(set(&[0, 3])),
            "only a worse cool pair"
        );
        // Whole-node jobs and nothing cool enough left: unchanged.
        let all = [0, 1, 2, 3, 4, 5, 6, 7];
        let whole = NodeInput {
            whole_node: true,
            ..input(&t, &all, &all)
        };
        assert_eq!(run(&whole, &[0]), Some(set(&all)));
    }

    #[test]
    fn a_cool_set_with_more_degraded_gpus_is_not_taken() {
        let t = dgx1v();
        let all = [0, 1, 2, 3, 4, 5, 6, 7];
        let inp = NodeInput {
            health: HealthMasks {
                faulty: GpuSet::EMPTY,
                degraded: set(&[4]),
            },
            ..input(&t, &[0, 1, 2, 3], &all)
        };
        assert_eq!(run(&inp, &[0, 1, 2, 3]), Some(set(&[0, 1, 2, 3])));
    }
}
