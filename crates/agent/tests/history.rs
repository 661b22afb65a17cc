//! The agent keeps the node's GPU state history (`gputopo_hist`, `gputopo nodes --history`) in
//! its state file as well as in the node's record (issue 28 item 4): a record that lost it (an
//! `Extra` cleared by hand, a node re-created by a slurmctld cold start) gets it back at the
//! next publish, from another agent process too.

mod common;

use common::Node;
use serde_json::Value;

#[test]
fn a_cleared_record_gets_the_history_back_from_the_agents_state() {
    // nvswitch8: GPU 3 faulty (XID 79), GPUs 4 and 7 degraded, at the first publish.
    let n = Node::new("history", "nvswitch8", "", None);
    let state = n.dir.join("state");
    std::fs::write(
        n.dir.join("gputopo.conf"),
        format!("KernelLog=none\nStateDir={}\n", state.display()),
    )
    .expect("gputopo.conf");
    let (rc, out, err, _) = n.run(&["publish", "--scontrol", "/bin/true", "--current-extra", ""]);
    assert_eq!(rc, 0, "{out}{err}");
    let file = state.join("xid-node1.json");
    let mut kept: Value =
        serde_json::from_str(&std::fs::read_to_string(&file).expect("state file")).expect("json");
    let hist = kept["hist"].as_array_mut().expect("the history is kept");
    let changed: Vec<(&Value, &Value)> = hist.iter().map(|e| (&e["i"], &e["s"])).collect();
    assert_eq!(
        changed,
        [
            (&3.into(), &"faulty".into()),
            (&4.into(), &"degraded".into()),
            (&7.into(), &"degraded".into())
        ]
    );
    // As if that was a day ago; then the record is cleared, and the next publish (a new
    // process) puts those events back, before its own (the record had no health to compare).
    for e in hist.iter_mut() {
        e["t"] = 1000.into();
    }
    std::fs::write(&file, kept.to_string()).expect("state file");
    let (rc, extra, err, _) = n.run(&["publish", "--dry-run", "--current-extra", ""]);
    assert_eq!(rc, 0, "{err}");
    let v: Value = serde_json::from_str(extra.trim()).expect("the Extra");
    let h = v["gputopo_hist"]
        .as_array()
        .expect("a history in the Extra");
    let old: Vec<bool> = h.iter().map(|e| e["t"] == 1000).collect();
    assert_eq!(old, [true, true, true, false, false, false], "{h:?}");
    assert_eq!(h[0]["i"], 3);
    // A record that has it is left as it is (nothing to rewrite for the history).
    let (rc, again, err, _) = n.run(&["publish", "--dry-run", "--current-extra", extra.trim()]);
    assert_eq!(rc, 0, "{err}");
    let w: Value = serde_json::from_str(again.trim()).expect("the Extra");
    assert_eq!(w["gputopo_hist"], v["gputopo_hist"]);
}
