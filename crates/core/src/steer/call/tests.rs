//! The call's state machine against a fake cons_tres ([`fake::cons_tres`]): every branch of
//! the loop, from the snapshot to the placement the plugin writes.

pub(crate) mod fake;
mod pinned;
mod props;
mod shares;

use super::*;
use crate::gpuset::GpuSet;
use crate::steer::repick::{KeepReason, ReplaceReason};
use fake::*;

/// NVLinks between two GPUs of the fake's DGX-1V nodes.
fn nvlinks(a: usize, b: usize) -> u8 {
    crate::fixtures::dgx1v().link(a, b).nvlinks
}

#[test]
fn the_best_node_is_offered_first_and_one_call_suffices() {
    // n1's free pair {0,3} is NV2 and fits the job exactly; n0 is idle.
    let nodes = [dgx(), dgx().busy("1-2,4-7")];
    let (f, seen, _) = drive(job(2), &nodes, &cfg());
    assert_eq!(f.outcome, Outcome::Success);
    assert_eq!(seen.offers, vec![vec![1]]);
    assert_eq!(f.calls, 1);
    let p = f.placement.expect("RUN_NOW success places");
    assert!(p.gpu.is_empty(), "cons_tres's {{0,3}} is already the best");
    assert_eq!(p.notes.len(), 1);
    assert_eq!(
        p.notes[0].to_string(),
        "n1 gpus=0,3 link=NV2 optimal=yes degraded=none"
    );
}

#[test]
fn a_failed_tier_widens_and_the_last_try_is_every_candidate() {
    let nodes = [dgx(), dgx().busy("1-2,4-7").refuses()];
    let (f, seen, _) = drive(job(2), &nodes, &cfg());
    assert_eq!(f.outcome, Outcome::Success);
    assert_eq!(seen.offers, vec![vec![1], vec![0, 1]]);
    // cons_tres took {0,1} (NV1) on n0; the engine's NV2 pair is written instead.
    let p = f.placement.expect("placed");
    let w = &p.gpu[0];
    assert_eq!((w.node, w.count_only), (0, None));
    let v: Vec<usize> = w.set.iter().collect();
    assert_eq!(nvlinks(v[0], v[1]), 2, "{v:?}");
}

#[test]
fn nothing_fits_is_cons_tres_failure_after_the_full_try() {
    let nodes = [dgx().refuses(), dgx().busy("1-2,4-7").refuses()];
    let (f, seen, _) = drive(job(2), &nodes, &cfg());
    assert_eq!(f.outcome, Outcome::Failed);
    assert_eq!(seen.offers.last(), Some(&vec![0, 1]));
    assert_eq!(f.placement, None);
}

#[test]
fn a_faulty_pick_is_replaced_on_the_same_node() {
    let nodes = [dgx().faulty(&[0])];
    let (f, seen, events) = drive(job(1), &nodes, &cfg());
    assert_eq!((f.outcome, f.calls), (Outcome::Success, 1));
    assert_eq!(seen.offers, vec![vec![0]]);
    let w = &f.placement.expect("placed").gpu[0];
    assert!(!w.set.contains(0), "faulty GPU 0 handed out: {}", w.set);
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::Decision(l) if l.contains("(AvoidsFaulty)"))),
        "{events:?}"
    );
}

#[test]
fn degraded_gpus_are_used_last() {
    let nodes = [dgx().degraded(&[0, 1, 2, 3])];
    let (f, _, _) = drive(job(4), &nodes, &cfg());
    let w = &f.placement.expect("placed").gpu[0];
    assert_eq!(w.set, wide("4-7"));
    // Only degraded GPUs free: they serve, and the note says so.
    let nodes = [dgx().degraded(&[0, 1]).busy("2-7")];
    let (f, _, _) = drive(job(2), &nodes, &cfg());
    let p = f.placement.expect("placed");
    assert!(p.gpu.is_empty());
    assert!(
        p.notes[0].to_string().ends_with("degraded=0-1"),
        "{}",
        p.notes[0]
    );
}

#[test]
fn the_pre_filter_withholds_nodes_that_could_serve_only_with_a_faulty_gpu() {
    // n0's one free GPU is faulty: RUN_NOW never offers it.
    let nodes = [dgx().busy("1-7").faulty(&[0]), dgx()];
    let (f, seen, events) = drive(job(1), &nodes, &cfg());
    assert_eq!(f.outcome, Outcome::Success);
    assert!(
        seen.offers.iter().all(|o| !o.contains(&0)),
        "{:?}",
        seen.offers
    );
    assert_eq!(f.withheld, vec![0]);
    assert_eq!(
        events[0].line(42, "n0"),
        "JobId=42 node n0 skipped: 7 non-faulty GPU(s) of the type, 1 needed, faulty 0"
    );
    // WILL_RUN counts every GPU: n0 may serve once GPUs 1-7 are released.
    let mut j = job(1);
    j.mode = Mode::WillRun { now: NOW };
    let (f, _, _) = drive(j, &nodes, &cfg());
    assert!(f.withheld.is_empty());
    // Never, while the fault lasts: 8 GPUs with 1 faulty for an 8-GPU job.
    let mut j = job(8);
    j.mode = Mode::WillRun { now: NOW };
    let (f, _, _) = drive(j, &[dgx().faulty(&[5]), dgx()], &cfg());
    assert_eq!(f.withheld, vec![0]);
}

#[test]
fn an_exclusion_retries_the_same_tier_without_the_node() {
    // n0 and n1 both fit exactly; cons_tres takes n0, where the commit would take no GPU.
    let nodes = [
        dgx().busy("1-2,4-7").takes_none(),
        dgx().busy("1-2,4-7"),
        dgx(),
    ];
    let (f, seen, events) = drive(job(2), &nodes, &cfg());
    assert_eq!(f.outcome, Outcome::Success);
    assert_eq!(seen.offers, vec![vec![0, 1], vec![1]]);
    assert_eq!((f.withheld.clone(), f.excluded), (vec![0], 1));
    assert!(events.contains(&Event::NoGpuSelected { node: 0 }));
}

#[test]
fn an_exclusion_that_empties_the_tier_widens() {
    let nodes = [dgx().busy("1-2,4-7").takes_none(), dgx()];
    let (f, seen, _) = drive(job(2), &nodes, &cfg());
    assert_eq!(f.outcome, Outcome::Success);
    assert_eq!(seen.offers, vec![vec![0], vec![], vec![1]]);
}

#[test]
fn the_job_gives_up_after_the_last_exclusion_round_and_releases() {
    let nodes: Vec<FakeNode> = (0..8).map(|_| dgx().takes_none()).collect();
    let (f, seen, _) = drive(job(1), &nodes, &cfg());
    assert_eq!(f.outcome, Outcome::GiveUp);
    let rounds = crate::steer::tries::MAX_EXCLUSIONS + 1;
    assert_eq!(f.calls, rounds + 1, "the tries and the release");
    assert_eq!(seen.offers.len(), rounds + 1);
    assert_eq!(
        seen.offers.last(),
        Some(&vec![]),
        "the release offers no node"
    );
    assert_eq!(f.placement, None);
    assert_eq!(f.withheld, (0..rounds).collect::<Vec<_>>());
}

#[test]
fn required_nodes_are_in_every_try() {
    let mut j = job(2);
    j.required = vec![2];
    let nodes = [dgx(), dgx().busy("1-2,4-7").refuses(), dgx().busy("0-5")];
    let (_, seen, _) = drive(j.clone(), &nodes, &cfg());
    assert!(
        seen.offers.iter().all(|o| o.contains(&2)),
        "{:?}",
        seen.offers
    );
    assert_eq!(seen.offers[0], vec![1, 2]);
    // A required node gputopo does not rank (plain gres.conf): one try of every node.
    let nodes = [dgx(), dgx().busy("1-2,4-7"), dgx().plain()];
    let (_, seen, _) = drive(j, &nodes, &cfg());
    assert_eq!(seen.offers, vec![vec![0, 1, 2]]);
}

#[test]
fn whole_node_jobs_get_one_try_and_never_a_node_with_a_faulty_gpu() {
    let mut j = job(1);
    j.whole_node = true;
    let nodes = [dgx().faulty(&[3]), dgx(), dgx()];
    let (f, seen, _) = drive(j.clone(), &nodes, &cfg());
    assert_eq!(seen.offers, vec![vec![1, 2]], "n0 withheld, no narrowing");
    let p = f.placement.expect("placed");
    assert!(p.gpu.is_empty(), "a whole node's pick is never rewritten");
    assert_eq!(p.notes[0].gpus, "0-7");
    // Required, so not pre-filtered: the re-pick excludes it and cons_tres is asked again.
    j.required = vec![0];
    let (f, seen, _) = drive(j, &nodes, &cfg());
    assert_eq!(seen.offers, vec![vec![0, 1, 2], vec![1, 2]]);
    assert_eq!((f.outcome, f.withheld), (Outcome::Success, vec![0]));
}

#[test]
fn multi_node_jobs_are_never_offered_fewer_nodes_than_they_need() {
    let mut j = job(2);
    j.min_nodes = 2;
    let nodes = [dgx().busy("1-2,4-7"), dgx(), dgx(), dgx().busy("0-6")];
    let (f, seen, _) = drive(j, &nodes, &cfg());
    assert_eq!(f.outcome, Outcome::Success);
    assert!(
        seen.offers.iter().all(|o| o.len() >= 2),
        "{:?}",
        seen.offers
    );
    assert_eq!(seen.offers[0].len(), 2, "the exact fit plus the next best");
    assert!(seen.offers[0].contains(&0));
    assert_eq!(f.placement.expect("placed").notes.len(), 2);
}

#[test]
fn will_run_takes_a_narrowed_answer_only_if_it_starts_now() {
    let mut j = job(2);
    j.mode = Mode::WillRun { now: NOW };
    // The preferred node starts the job only later: widen to the node that starts it now.
    let nodes = [dgx().busy("1-2,4-7").later(), dgx()];
    let (f, seen, _) = drive(j.clone(), &nodes, &cfg());
    assert_eq!(f.outcome, Outcome::Success);
    assert_eq!(seen.offers, vec![vec![0], vec![0, 1]]);
    assert_eq!(f.placement, None, "WILL_RUN writes nothing");
    // Starting now on the preferred node: taken at once.
    let nodes = [dgx().busy("1-2,4-7"), dgx()];
    let (_, seen, _) = drive(j.clone(), &nodes, &cfg());
    assert_eq!(seen.offers, vec![vec![0]]);
    // Later everywhere: the final try's answer stands.
    let nodes = [dgx().busy("1-2,4-7").later(), dgx().later()];
    let (f, seen, _) = drive(j, &nodes, &cfg());
    assert_eq!((f.outcome, seen.offers.len()), (Outcome::Success, 2));
}

#[test]
fn preemption_calls_and_node_ranking_off_get_one_full_try() {
    let nodes = [dgx(), dgx().busy("1-2,4-7")];
    let mut j = job(2);
    j.preemption = true;
    let (_, seen, _) = drive(j, &nodes, &cfg());
    assert_eq!(seen.offers, vec![vec![0, 1]]);
    let off = SelectConfig {
        node_ranking: false,
        ..cfg()
    };
    let (_, seen, _) = drive(job(2), &nodes, &off);
    assert_eq!(seen.offers, vec![vec![0, 1]]);
}

#[test]
fn which_calls_are_steered() {
    let c = cfg();
    assert!(job(1).steered(&c));
    let mut shared = job(1);
    shared.need = None;
    assert!(!shared.steered(&c), "no GPU, no shared request: forwarded");
    shared.shares = vec![ShareNeed {
        type_id: None,
        per_node: 1,
    }];
    assert!(shared.steered(&c), "shares on RUN_NOW: health applies");
    let off = SelectConfig {
        health_aware: false,
        ..cfg()
    };
    assert!(!shared.steered(&off));
    shared.mode = Mode::WillRun { now: NOW };
    assert!(!shared.steered(&c), "shares in WILL_RUN: cons_tres alone");
    // The modes themselves: `tries::mode_of` (TEST_ONLY, RESV, JobId 0 forwarded).
    assert_eq!(mode_of(CallMode::TestOnly, 7, true, NOW), None);
    assert_eq!(mode_of(CallMode::Resv, 7, true, NOW), None);
    assert_eq!(mode_of(CallMode::RunNow, 0, true, NOW), None);
    assert_eq!(mode_of(CallMode::RunNow, 7, true, NOW), Some(Mode::RunNow));
}

#[test]
fn topology_aware_off_keeps_the_pick_but_still_avoids_faulty_gpus() {
    let off = SelectConfig {
        topology_aware: false,
        ..cfg()
    };
    let (f, _, events) = drive(job(2), &[dgx()], &off);
    assert!(f.placement.expect("placed").gpu.is_empty(), "{{0,1}} kept");
    let keep = format!("({:?})", KeepReason::TopologyOff);
    assert!(
        events.iter().any(|e| e.line(0, "").contains(&keep)),
        "{events:?}"
    );
    let (f, _, _) = drive(job(2), &[dgx().faulty(&[1])], &off);
    let w = &f.placement.expect("placed").gpu[0];
    assert!(!w.set.contains(1));
}

#[test]
fn nodes_without_topology_records_get_slurms_first_fit_minus_faulty() {
    let nodes = [dgx().plain().faulty(&[0]).busy("2")];
    let (f, seen, events) = drive(job(2), &nodes, &cfg());
    assert_eq!(seen.offers, vec![vec![0]], "nothing ranked: one try");
    let w = &f.placement.expect("placed").gpu[0];
    assert_eq!((w.set.clone(), w.count_only), (wide("1,3"), Some(8)));
    assert!(events.iter().any(|e| {
        e.line(0, "")
            .contains("chose 1,3 (first free, no topology)")
    }));
}

#[test]
fn unknown_nodes_join_only_the_final_try() {
    let nodes = [dgx().opaque(), dgx().busy("1-2,4-7"), dgx()];
    let (_, seen, _) = drive(job(2), &nodes, &cfg());
    assert_eq!(seen.offers, vec![vec![1]]);
    let nodes = [
        dgx().opaque(),
        dgx().busy("1-2,4-7").refuses(),
        dgx().refuses(),
    ];
    let (f, seen, _) = drive(job(2), &nodes, &cfg());
    assert_eq!(seen.offers, vec![vec![1], vec![0, 1, 2]]);
    let p = f.placement.expect("placed");
    assert!(
        p.gpu.is_empty() && p.notes.is_empty(),
        "cons_tres's pick stands"
    );
}

#[test]
fn nodes_beyond_the_model_get_health_on_every_index() {
    let nodes = [dgx().wide(40).faulty(&[0, 35])];
    let (f, _, events) = drive(job(1), &nodes, &cfg());
    let w = &f.placement.expect("placed").gpu[0];
    assert_eq!(w.set, wide("1"));
    assert!(events.iter().any(|e| {
        e.line(0, "")
            .contains("node=n0 chose 1 (health, beyond the topology model)")
    }));
}

#[test]
fn a_typed_request_on_a_count_only_node_is_left_to_cons_tres() {
    let mut j = job(1);
    j.need = Some(GpuNeed {
        per_node: 1,
        type_id: Some(1),
        spread: false,
    });
    let (f, seen, _) = drive(j, &[dgx().plain().faulty(&[0])], &cfg());
    assert_eq!(seen.offers, vec![vec![0]]);
    assert!(
        f.withheld.is_empty(),
        "its type is unknown to gputopo there"
    );
}

#[test]
fn reasons_name_what_happened() {
    // A replacement for topology alone reads "Better".
    let (_, _, events) = drive(job(2), &[dgx()], &cfg());
    let better = format!("({:?})", ReplaceReason::Better);
    assert!(
        events.iter().any(|e| e.line(0, "").contains(&better)),
        "{events:?}"
    );
}

#[test]
fn shares_move_off_a_faulty_gpu_and_a_node_with_none_healthy_is_excluded() {
    let mut j = job(1);
    j.need = None;
    j.shares = vec![ShareNeed {
        type_id: None,
        per_node: 2,
    }];
    let nodes = [dgx().faulty(&[0]), dgx().faulty(&[0, 1])];
    let snap = snapshot(j, &nodes);
    let ctx = Ctx {
        cfg: &cfg(),
        engine: engine(),
        log: false,
        multiple_sharing: false,
    };
    // Two records (GPUs 0 and 1) with 4 shares each; cons_tres took 2 shares of GPU 0.
    let pick = |busy1: u64| SharedPick {
        stock: vec![2, 0],
        records: (0..2)
            .map(|g| SharingRecord {
                gpus: GpuSet::from_iter([g]),
                type_id: 1,
                avail: 4,
                alloc: if g == 1 { busy1 } else { 0 },
            })
            .collect(),
        whole: GpuSet::EMPTY,
    };
    let answer = |node: usize| shard_answer(node, pick(0));
    let mut keys = crate::steer::key_memo::KeyMemos::default();
    let mut offers = Vec::new();
    let call = Call::start(&snap, ctx, &mut keys);
    // cons_tres puts the job on n1 first (both GPUs faulty there), then on n0.
    let f = run(
        call,
        |o| {
            offers.push(o.to_vec());
            answer(if o.contains(&1) { 1 } else { 0 })
        },
        |_| {},
    );
    assert_eq!(
        offers,
        vec![vec![0, 1], vec![0]],
        "one try of every node, then n1 excluded"
    );
    let p = f.placement.expect("placed");
    assert_eq!(
        p.shared,
        vec![SharedWrite {
            request: 0,
            node: 0,
            shares: vec![0, 2],
        }]
    );
}
