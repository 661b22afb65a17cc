//! Invariants of the call on random clusters and jobs, against the fake cons_tres.

use super::fake::*;
use super::*;
use proptest::prelude::*;

fn node() -> impl Strategy<Value = FakeNode> {
    (
        0u32..256,
        prop::collection::vec(0usize..8, 0..3),
        prop::collection::vec(0usize..8, 0..3),
        prop::bool::weighted(0.8),
        prop::bool::weighted(0.15),
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.1),
    )
        .prop_map(
            |(busy, faulty, degraded, ranked, refuses, takes_none, later)| {
                let mut n = dgx();
                n.allocated = (0..8).filter(|i| busy & (1 << i) != 0).collect();
                n.faulty = faulty;
                n.degraded = degraded;
                n.ranked = ranked;
                n.refuses = refuses;
                n.takes_none = takes_none;
                n.later = later;
                n
            },
        )
}

fn job_of() -> impl Strategy<Value = JobFacts> {
    (
        1usize..5,
        1usize..3,
        prop::bool::ANY,
        prop::bool::weighted(0.15),
    )
        .prop_map(|(per_node, min_nodes, will_run, whole)| {
            let mut j = job(per_node);
            j.min_nodes = min_nodes;
            j.whole_node = whole;
            if will_run {
                j.mode = Mode::WillRun { now: NOW };
            }
            j
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn the_call_keeps_its_promises(
        nodes in prop::collection::vec(node(), 1..7),
        job in job_of(),
    ) {
        let (f, seen, _) = drive(job.clone(), &nodes, &cfg());
        // Bounded: the tiers, the exclusion rounds and one release at most.
        prop_assert_eq!(f.calls, seen.offers.len());
        prop_assert!(f.calls <= MAX_TRIES + crate::steer::tries::MAX_EXCLUSIONS + 1);
        // The pre-filter's nodes are never offered; an excluded node never again.
        let mut gone: Vec<usize> = Vec::new();
        for (i, offer) in seen.offers.iter().enumerate() {
            let released = f.outcome == Outcome::GiveUp && i + 1 == seen.offers.len();
            prop_assert!(!released || offer.is_empty());
            for n in offer {
                prop_assert!(!gone.contains(n), "node {} offered after exclusion", n);
            }
            if i == 0 {
                // Withheld before the first offer: everything in `withheld` that no offer shows.
                gone.extend(f.withheld.iter().filter(|w| !seen.offers.iter().any(|o| o.contains(w))));
            }
        }
        match f.outcome {
            Outcome::Success if job.mode == Mode::RunNow => {
                prop_assert!(f.placement.is_some());
                // Never a faulty GPU in what Slurm commits (on the nodes gputopo models).
                for (n, set) in committed(&f, &seen) {
                    for g in &nodes[n].faulty {
                        prop_assert!(!set.contains(*g), "faulty GPU {} on node {}: {}", g, n, set);
                    }
                }
            }
            Outcome::Failed => {
                // The last try offered every candidate that was not withheld for health.
                let all: Vec<usize> = (0..nodes.len()).filter(|n| !f.withheld.contains(n)).collect();
                prop_assert_eq!(seen.offers.last(), Some(&all));
            }
            _ => prop_assert!(f.placement.is_none()),
        }
    }
}
