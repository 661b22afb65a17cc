//! The loop against fake cons_tres closures: a node table where each node has some free
//! GPUs and may hold a faulty pick; the fake allocates on the lowest offered node that fits.

use super::*;
use proptest::prelude::*;

/// A fake node: free GPUs, and whether cons_tres's pick there would be faulty.
#[derive(Clone, Copy)]
struct Node {
    free: usize,
    faulty_pick: bool,
    starts_at: i64,
}

const NOW: i64 = 1000;

fn ok(free: usize) -> Node {
    Node {
        free,
        faulty_pick: false,
        starts_at: NOW,
    }
}

/// cons_tres as far as the loop can tell: the lowest offered node with `need` free GPUs
/// (RUN_NOW: then the re-pick), or in WILL_RUN the earliest start among fitting nodes.
fn fake<'a>(
    nodes: &'a [Node],
    need: usize,
    mode: Mode,
    log: &'a mut Vec<Vec<usize>>,
) -> impl FnMut(&[usize]) -> Answer + 'a {
    move |offered: &[usize]| {
        log.push(offered.to_vec());
        let fit = offered.iter().copied().filter(|&n| nodes[n].free >= need);
        match mode {
            Mode::RunNow => match fit.min() {
                None => Answer::Failed,
                Some(n) if nodes[n].faulty_pick => Answer::Exclude(vec![n]),
                Some(_) => Answer::Placed,
            },
            Mode::WillRun { .. } => match fit.map(|n| nodes[n].starts_at).min() {
                None => Answer::Failed,
                Some(start) => Answer::Planned { start },
            },
        }
    }
}

#[test]
fn widens_until_a_tier_fits_and_the_last_is_the_full_set() {
    let nodes = [ok(4), ok(0), ok(1)];
    let mut log = Vec::new();
    let tries = Tries::new(
        vec![vec![1], vec![1, 2], vec![0, 1, 2]],
        vec![],
        Mode::RunNow,
    );
    let (outcome, calls) = run(tries, fake(&nodes, 2, Mode::RunNow, &mut log));
    assert_eq!((outcome, calls), (Outcome::Success, 3));
    assert_eq!(log, vec![vec![1], vec![1, 2], vec![0, 1, 2]]);
}

#[test]
fn the_first_fitting_tier_ends_the_loop() {
    let nodes = [ok(4), ok(4)];
    let mut log = Vec::new();
    let tries = Tries::new(vec![vec![1], vec![0, 1]], vec![], Mode::RunNow);
    assert_eq!(
        run(tries, fake(&nodes, 2, Mode::RunNow, &mut log)),
        (Outcome::Success, 1)
    );
}

#[test]
fn nothing_fits_anywhere_is_cons_tres_failure() {
    let nodes = [ok(1), ok(1)];
    let mut log = Vec::new();
    let tries = Tries::new(vec![vec![0], vec![0, 1]], vec![], Mode::RunNow);
    assert_eq!(
        run(tries, fake(&nodes, 2, Mode::RunNow, &mut log)),
        (Outcome::Failed, 2)
    );
    assert_eq!(
        run(Tries::new(vec![], vec![], Mode::RunNow), |_| Answer::Placed),
        (Outcome::Failed, 0)
    );
}

#[test]
fn an_exclusion_retries_the_same_tier_without_the_node() {
    let mut nodes = [ok(4), ok(4), ok(4)];
    nodes[0].faulty_pick = true;
    let mut log = Vec::new();
    let tries = Tries::new(vec![vec![0, 1], vec![0, 1, 2]], vec![], Mode::RunNow);
    let (outcome, calls) = run(tries, fake(&nodes, 2, Mode::RunNow, &mut log));
    assert_eq!((outcome, calls), (Outcome::Success, 2));
    assert_eq!(log, vec![vec![0, 1], vec![1]]);
}

#[test]
fn an_exclusion_that_empties_a_tier_widens() {
    let mut nodes = [ok(4), ok(4)];
    nodes[0].faulty_pick = true;
    let mut log = Vec::new();
    let tries = Tries::new(vec![vec![0], vec![0, 1]], vec![], Mode::RunNow);
    assert_eq!(
        run(tries, fake(&nodes, 2, Mode::RunNow, &mut log)),
        (Outcome::Success, 3)
    );
    assert_eq!(log, vec![vec![0], vec![], vec![1]]);
}

#[test]
fn gives_up_after_the_last_exclusion_round() {
    let nodes: Vec<Node> = (0..10)
        .map(|_| Node {
            faulty_pick: true,
            ..ok(4)
        })
        .collect();
    let mut log = Vec::new();
    let tries = Tries::new(vec![(0..10).collect()], vec![], Mode::RunNow);
    let (outcome, calls) = run(tries, fake(&nodes, 1, Mode::RunNow, &mut log));
    assert_eq!((outcome, calls), (Outcome::GiveUp, MAX_EXCLUSIONS + 1));
    assert_eq!(
        log.last().unwrap(),
        &(MAX_EXCLUSIONS..10).collect::<Vec<_>>()
    );
}

#[test]
fn prefiltered_nodes_are_never_offered() {
    let nodes = [ok(4), ok(4), ok(4)];
    let mut log = Vec::new();
    let tries = Tries::new(vec![vec![0, 1], vec![0, 1, 2]], vec![0], Mode::RunNow);
    run(tries, fake(&nodes, 2, Mode::RunNow, &mut log));
    assert_eq!(log, vec![vec![1]]);
}

#[test]
fn will_run_takes_a_narrowed_answer_only_if_it_starts_now() {
    let mode = Mode::WillRun { now: NOW };
    let later = Node {
        starts_at: NOW + 60,
        ..ok(4)
    };
    // Preferred node 1 frees up later; node 0 is free now: widen and take node 0's start.
    let nodes = [ok(4), later];
    let mut log = Vec::new();
    let tries = Tries::new(vec![vec![1], vec![0, 1]], vec![], mode);
    assert_eq!(
        run(tries, fake(&nodes, 2, mode, &mut log)),
        (Outcome::Success, 2)
    );
    // Starting now on the preferred node: taken at once.
    let nodes = [later, ok(4)];
    let mut log = Vec::new();
    let tries = Tries::new(vec![vec![1], vec![0, 1]], vec![], mode);
    assert_eq!(
        run(tries, fake(&nodes, 2, mode, &mut log)),
        (Outcome::Success, 1)
    );
    // Only later anywhere: the final tier's answer stands.
    let nodes = [later, later];
    let mut log = Vec::new();
    let tries = Tries::new(vec![vec![1], vec![0, 1]], vec![], mode);
    assert_eq!(
        run(tries, fake(&nodes, 2, mode, &mut log)),
        (Outcome::Success, 2)
    );
}

#[test]
fn required_nodes_stay_in_every_try_until_excluded() {
    let mut nodes = [ok(4), ok(0), ok(4)];
    let mut log = Vec::new();
    // narrow::plan puts required node 1 into every tier.
    let tries = Tries::new(vec![vec![1, 2], vec![0, 1, 2]], vec![], Mode::RunNow);
    run(tries, fake(&nodes, 2, Mode::RunNow, &mut log));
    assert!(log.iter().all(|t| t.contains(&1)));
    nodes[2].faulty_pick = true;
    let mut log = Vec::new();
    let tries = Tries::new(vec![vec![1, 2], vec![0, 1, 2]], vec![], Mode::RunNow);
    run(tries, fake(&nodes, 2, Mode::RunNow, &mut log));
    assert_eq!(log, vec![vec![1, 2], vec![1], vec![0, 1]]);
}

const STEER: Steering = Steering {
    node_ranking: true,
    whole_node: false,
    preemption: false,
};

#[test]
fn tiers_rank_only_known_topologies() {
    let plan = || vec![vec![3], vec![1, 3]];
    assert_eq!(
        tiers(STEER, &[1, 3], &[2], &[0], &[], plan),
        vec![vec![3], vec![0, 1, 2, 3]]
    );
    // Nothing ranked (a cluster of plain File= nodes): one try, every node, as cons_tres.
    assert_eq!(
        tiers(STEER, &[], &[2, 0], &[], &[], || unreachable!()),
        vec![vec![0, 2]]
    );
}

#[test]
fn whole_node_preemption_off_and_unranked_required_give_one_full_try() {
    let plan = || vec![vec![3], vec![1, 3]];
    let full = vec![vec![0, 1, 2, 3]];
    for s in [
        Steering {
            whole_node: true,
            ..STEER
        },
        Steering {
            preemption: true,
            ..STEER
        },
        Steering {
            node_ranking: false,
            ..STEER
        },
    ] {
        assert_eq!(tiers(s, &[1, 3], &[2], &[0], &[], plan), full, "{s:?}");
    }
    assert_eq!(tiers(STEER, &[1, 3], &[2], &[0], &[2], plan), full);
    assert_eq!(tiers(STEER, &[1, 3], &[2], &[0], &[0], plan), full);
    assert_eq!(
        tiers(STEER, &[1, 3], &[2], &[0], &[1], plan),
        vec![vec![3], vec![0, 1, 2, 3]]
    );
}

#[test]
fn only_run_now_and_will_run_of_real_jobs_are_steered() {
    let modes = [
        (CallMode::RunNow, Some(Mode::RunNow)),
        (CallMode::WillRun, Some(Mode::WillRun { now: NOW })),
        (CallMode::TestOnly, None),
        (CallMode::Resv, None),
        (CallMode::Other, None),
    ];
    for (call, want) in modes {
        assert_eq!(mode_of(call, 7, true, NOW), want, "{call:?}");
        assert_eq!(
            mode_of(call, 0, true, NOW),
            None,
            "{call:?}: reservation test job"
        );
        assert_eq!(
            mode_of(call, 7, false, NOW),
            None,
            "{call:?}: every switch off"
        );
    }
}

proptest! {
    /// Whatever cons_tres answers, the loop ends within its call budget, and a success is
    /// only reported for a placed (or accepted) answer.
    #[test]
    fn ends_within_the_budget(
        ntiers in 1usize..5,
        answers in proptest::collection::vec(0u8..4, 0..20),
        will_run in any::<bool>(),
    ) {
        let mode = if will_run { Mode::WillRun { now: NOW } } else { Mode::RunNow };
        let tiers: Vec<Vec<usize>> = (0..ntiers).map(|t| (0..=t).collect()).collect();
        let mut it = answers.into_iter();
        let (outcome, calls) = run(Tries::new(tiers, vec![], mode), |nodes| {
            match it.next().unwrap_or(0) {
                0 => Answer::Failed,
                1 => Answer::Planned { start: NOW + 5 },
                2 => Answer::Placed,
                _ => Answer::Exclude(nodes.first().copied().into_iter().collect()),
            }
        });
        prop_assert!(calls <= ntiers + MAX_EXCLUSIONS);
        prop_assert!(calls >= 1);
        if outcome == Outcome::GiveUp {
            prop_assert!(calls > MAX_EXCLUSIONS);
        }
    }
}

#[test]
fn sort_dedup_leaves_strictly_ascending_lists_and_fixes_the_rest() {
    for (given, want) in [
        (vec![], vec![]),
        (vec![1, 4, 9], vec![1, 4, 9]),
        (vec![4, 1, 9, 1], vec![1, 4, 9]),
        (vec![1, 4, 4, 9], vec![1, 4, 9]),
        (vec![9, 4], vec![4, 9]),
    ] {
        let mut got = given.clone();
        sort_dedup(&mut got);
        assert_eq!(got, want, "{given:?}");
    }
}
