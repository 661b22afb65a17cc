//! Jobs whose GPUs are tied to their cores or sockets (issue 25 item 4): `--gpus-per-socket`
//! and a node's `RestrictedCoresPerGPU`. The re-pick stands down there: cons_tres's healthy
//! pick is kept (a better-connected set could break the tie), and a pick that holds a faulty
//! GPU excludes the node instead of being replaced.

use super::*;

fn per_socket(per_node: usize) -> JobFacts {
    JobFacts {
        per_socket: true,
        ..job(per_node)
    }
}

#[test]
fn a_pinned_jobs_healthy_pick_stands_where_others_are_re_picked() {
    // cons_tres takes {0,1} (NV1) on an idle DGX-1V: a plain job gets an NV2 pair instead.
    let (f, _, _) = drive(job(2), &[dgx()], &cfg());
    assert_eq!(f.placement.expect("placed").gpu.len(), 1, "re-picked");
    let (f, _, events) = drive(per_socket(2), &[dgx()], &cfg());
    assert_eq!(f.outcome, Outcome::Success);
    let p = f.placement.expect("placed");
    assert!(
        p.gpu.is_empty(),
        "--gpus-per-socket: cons_tres's pick stands"
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::Decision(l) if l.contains("(Pinned)"))),
        "{events:?}"
    );
    // RestrictedCoresPerGPU on the node: the same, for any job.
    let nodes = [dgx()];
    let mut snap = snapshot(job(2), &nodes);
    snap.restricted = vec![0];
    let mut seen = Seen::default();
    let config = cfg();
    let mut keys = crate::steer::key_memo::KeyMemos::default();
    let f = run(
        Call::start(&snap, ctx(&config), &mut keys),
        cons_tres(&nodes, &snap.job, &mut seen),
        |_| {},
    );
    assert!(f.placement.expect("placed").gpu.is_empty());
}

#[test]
fn a_pinned_pick_with_a_faulty_gpu_excludes_the_node_and_never_hands_it_out() {
    // A plain job's faulty pick is moved on the same node (a_faulty_pick_is_replaced...);
    // a pinned one cannot be moved: the node is excluded and the job waits.
    let (f, seen, events) = drive(per_socket(1), &[dgx().faulty(&[0])], &cfg());
    assert_ne!(f.outcome, Outcome::Success);
    assert!(f.withheld.contains(&0), "{:?}", f.withheld);
    assert!(committed(&f, &seen).is_empty(), "nothing placed");
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::Decision(l) if l.contains("(PinnedPickFaulty)"))),
        "{events:?}"
    );
    // With a healthy node beside it, the job runs there.
    let (f, seen, _) = drive(per_socket(1), &[dgx().faulty(&[0]), dgx()], &cfg());
    assert_eq!(f.outcome, Outcome::Success);
    assert!(
        committed(&f, &seen)
            .iter()
            .all(|(n, s)| !(*n == 0 && s.contains(0))),
        "the faulty GPU"
    );
}
