//! XIDs logged by the kernel between checks count (issue 27 item 4): the real `gputopo`
//! reads a recorded `/dev/kmsg` snapshot (`KernelLog=`), ties each XID to its GPU by PCI bus
//! id, judges it with the usual CriticalXids/IgnoredXids policy, remembers it (sticky) and
//! reads only newer records at the next check.

mod common;

use common::{Node, s};
use std::path::Path;

fn kmsg() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/kernel-log/kmsg-h100-gb200.kmsg")
        .display()
        .to_string()
}

#[test]
fn logged_xids_count_by_bus_and_stay_sticky() {
    let state = std::env::temp_dir().join(format!("gputopo-klog-state-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&state);
    let conf = format!(
        "KernelLog={}\nStateDir={}\nXidWaitMs=0\n",
        kmsg(),
        state.display()
    );
    let n = Node::new("klog", "kmsg4", &conf, None);
    let want = vec![
        (0, "faulty".to_string(), s(&["xid_79"])),
        (1, "degraded".to_string(), s(&["xid_other_149"])),
        (
            2,
            "degraded".to_string(),
            s(&["xid_other_149", "xid_other_154"]),
        ),
        (3, "ok".to_string(), s(&[])),
    ];
    let verdicts = |n: &Node| {
        let (_, gpus) = n.health();
        gpus.into_iter()
            .map(|g| (g.0, g.1, g.2))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        verdicts(&n),
        want,
        "the last hour of the log counts, 13 days ago not"
    );
    // publish records the XIDs and the cursor; the next check reads nothing new, and the
    // XIDs stay (sticky) all the same.
    let (rc, _, err, _) = n.run(&["publish", "--dry-run", "--current-extra", ""]);
    assert_eq!(rc, 0, "{err}");
    let (rc, out, err, _) = n.run(&["publish", "--scontrol", "/bin/true", "--current-extra", ""]);
    assert!(rc == 0 || rc == 6, "{out} {err}");
    let saved = std::fs::read_to_string(state.join("xid-node1.json")).expect("state file");
    assert!(
        saved.contains(r#""klog":{"boot":"#) && saved.contains(r#""seq":4109"#),
        "{saved}"
    );
    assert_eq!(verdicts(&n), want, "remembered XIDs hold");
    let _ = std::fs::remove_dir_all(&state);
}

#[test]
fn ignored_xids_in_the_log_are_ignored() {
    let conf = format!("KernelLog={}\nIgnoredXids=149,154\nXidWaitMs=0\n", kmsg());
    let n = Node::new("klog-ignored", "kmsg4", &conf, None);
    let (_, gpus) = n.health();
    let bad: Vec<_> = gpus.iter().filter(|g| g.1 != "ok").map(|g| g.0).collect();
    assert_eq!(bad, vec![0]);
}
