//! The shares pre-filter (issue 25 item 4): a job of shared GRES alone skips the nodes
//! whose free shares sit only on a faulty GPU.

use super::*;

/// Issue 25 item 4: six nodes whose free shares are all on their faulty GPU 0 (GPU 1's
/// shares are held by other jobs), then a healthy one. cons_tres picks the lowest offered
/// node, so without a pre-filter each of the six was excluded in turn and the job gave up
/// after the fifth exclusion; the pre-filter withholds them and the first try succeeds.
#[test]
fn a_shares_job_skips_nodes_that_offer_only_a_faulty_gpus_shares() {
    let mut j = job(1);
    j.need = None;
    j.shares = vec![ShareNeed {
        type_id: None,
        per_node: 2,
    }];
    let nodes: Vec<FakeNode> = (0..7)
        .map(|i| if i < 6 { dgx().faulty(&[0]) } else { dgx() })
        .collect();
    let records: Vec<SharingRecord> = (0..2)
        .map(|g| SharingRecord {
            gpus: GpuSet::from_iter([g]),
            type_id: 1,
            avail: 4,
            alloc: if g == 1 { 4 } else { 0 },
        })
        .collect();
    let mut snap = snapshot(j, &nodes);
    snap.sharing = (0..7)
        .map(|node| NodeSharing {
            node,
            records: vec![records.clone()],
        })
        .collect();
    let config = cfg();
    let ctx = ctx(&config);
    let answer = |node: usize| {
        let pick = SharedPick {
            stock: vec![2, 0],
            records: records.clone(),
            whole: GpuSet::EMPTY,
        };
        shard_answer(node, pick)
    };
    let mut keys = crate::steer::key_memo::KeyMemos::default();
    let (mut offers, mut events) = (Vec::new(), Vec::new());
    let call = Call::start(&snap, ctx, &mut keys);
    let f = run(
        call,
        |o| {
            offers.push(o.to_vec());
            o.first().map_or(Reply::Failed, |&n| answer(n))
        },
        |e| events.extend(e),
    );
    assert_eq!(f.outcome, Outcome::Success);
    assert_eq!(offers, vec![vec![6]], "one try, healthy node only");
    assert_eq!(f.withheld, (0..6).collect::<Vec<_>>());
    assert_eq!(
        events[0].line(42, "n0"),
        "JobId=42 node n0 skipped: 0 free share(s) of the type on non-faulty GPUs, 2 needed, faulty 0"
    );
    // A required node is never withheld, and HealthAware=no withholds none.
    snap.job.required = vec![0];
    let mut keys = crate::steer::key_memo::KeyMemos::default();
    let mut first = None;
    let start = Call::start(&snap, ctx, &mut keys);
    run(
        start,
        |o| {
            first.get_or_insert_with(|| o.to_vec());
            answer(o[0])
        },
        |_| {},
    );
    assert_eq!(first, Some(vec![0, 6]), "required n0 is offered");
    let off = crate::config::SelectConfig {
        health_aware: false,
        ..cfg()
    };
    let ctx = Ctx { cfg: &off, ..ctx };
    let mut keys = crate::steer::key_memo::KeyMemos::default();
    let f = run(Call::start(&snap, ctx, &mut keys), |o| answer(o[0]), |_| {});
    assert!(f.withheld.is_empty());
}
