use super::*;

const NODE: &str = concat!(
    "NodeName=n1 Arch=x86_64 Gres=gpu:v100:4(S:0-1) GresUsed=gpu:v100:1(IDX:0) State=MIXED ",
    r#"Extra={"gpu_faulty":"2","gpu_ok":3,"gputopo":{"v":1,"gpus":[{"i":0,"s":"ok"},{"i":1,"s":"ok"},{"i":2,"s":"faulty","r":["gpu_lost"]},{"i":3,"s":"ok"}],"t":5}} "#,
    "Reason=(null) Comment=(null)"
);

fn set(v: &[usize]) -> WideSet {
    v.iter().copied().collect()
}

/// `NODE` with its Extra replaced (and a state and reason).
fn with(extra: &str, state: &str, reason: &str) -> String {
    format!("NodeName=n1 Gres=gpu:v100:4(S:0-1) State={state} Extra={extra} Reason={reason}")
}

#[test]
fn a_drain_writes_the_drain_flat_keys_and_history() {
    let p = plan(NODE, "1", Some("RMA 1234"), "alice", 100).expect("plan");
    assert_eq!((p.changed, p.unchanged), (set(&[1]), set(&[])));
    assert_eq!(p.node_action, None);
    let extra = p.extra.expect("a write");
    assert!(
        extra.starts_with(r#"{"gpu_faulty":"2","gpu_drained":"1","gpu_ok":2,"#),
        "{extra}"
    );
    assert!(
        extra.contains(
            r#"{"t":100,"i":1,"s":"drained","p":"ok","src":"admin","u":"alice","r":["RMA 1234"]}"#
        ),
        "{extra}"
    );
    let h = read_extra(&extra).expect("ok").expect("ours").health;
    assert_eq!(h.excluded_wide(), set(&[1, 2]));
    assert_eq!(h.drained[0].reason, "RMA 1234");
    // Again: nothing to write.
    let again = plan(&with(&extra, "MIXED", "(null)"), "1", Some("x"), "bob", 200).expect("plan");
    assert_eq!((again.extra, again.unchanged), (None, set(&[1])));
}

#[test]
fn draining_the_last_usable_gpus_drains_the_node_and_a_resume_undoes_it() {
    let p = plan(NODE, "0-1,3", Some("maintenance"), "root", 100).expect("plan");
    assert_eq!(
        p.node_action,
        Some(NodeAction::Drain(
            "gputopo: every GPU is drained or faulty (drained 0-1,3, faulty 2)".into()
        ))
    );
    let extra = p.extra.expect("a write");
    let drained_node = with(
        &extra,
        "MIXED+DRAIN",
        "gputopo: every GPU is drained or faulty",
    );
    let r = plan(&drained_node, "3", None, "root", 200).expect("plan");
    assert_eq!(r.node_action, Some(NodeAction::Resume));
    assert_eq!(r.drained, set(&[0, 1]));
    assert!(
        r.extra
            .expect("a write")
            .contains(r#""s":"resumed","p":"drained""#)
    );
    // A node an administrator drained for her own reason stays drained.
    let hers = with(&extra, "IDLE+DRAIN", "bad fan [root@2026-12-06T10:00:00]");
    assert_eq!(
        plan(&hers, "3", None, "root", 300)
            .expect("plan")
            .node_action,
        None
    );
}

#[test]
fn bad_requests_are_refused_clearly() {
    let e = plan(NODE, "4", Some("x"), "a", 0).expect_err("out of range");
    assert_eq!(
        e.to_string(),
        r#"--gpu "4": n1 has 4 GPUs (indices 0-3), not 4"#
    );
    assert!(plan(NODE, "one", Some("x"), "a", 0).is_err());
    assert!(plan("JobId=1", "0", Some("x"), "a", 0).is_err());
    let note = with("rack seven", "IDLE", "(null)");
    assert!(matches!(
        plan(&note, "0", Some("x"), "a", 0),
        Err(PlanError::Extra(MergeRefused::NotJson(_)))
    ));
    // No agent yet: a drain still works, and a resume of a GPU not drained changes nothing.
    let bare = with("(null)", "IDLE", "(null)");
    let p = plan(&bare, "0", Some("x"), "a", 1).expect("plan");
    assert!(
        p.extra
            .expect("a write")
            .starts_with(r#"{"gpu_drained":"0","gputopo_drain""#)
    );
    let r = plan(&bare, "0", None, "a", 1).expect("plan");
    assert_eq!((r.extra, r.unchanged), (None, set(&[0])));
}
