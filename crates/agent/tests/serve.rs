//! `gputopo serve` (issue 27 item 4): the long-lived service publishes at every check, with the
//! XIDs NVML delivered while it listened, and reads gputopo.conf again each time.

mod common;

use common::Node;

#[test]
fn each_check_publishes_what_it_heard() {
    // nvswitch8: XID 79 on GPU 3 is delivered as soon as the service listens; the check ends
    // right after it (the interval is a minute), twice.
    let n = Node::new("serve", "nvswitch8", "", None);
    let (rc, out, err, _) = n.run(&[
        "serve",
        "--dry-run",
        "--current-extra",
        "",
        "--interval",
        "60",
        "--checks",
        "2",
    ]);
    assert_eq!(rc, 0, "{err}");
    let extras: Vec<&str> = out.lines().filter(|l| l.starts_with('{')).collect();
    assert_eq!(extras.len(), 2, "{out}");
    for e in extras {
        let h = gputopo_core::health::parse_extra(e)
            .expect("valid")
            .expect("ours");
        let faulty: Vec<usize> = h
            .with_status(gputopo_core::health::Status::Faulty)
            .iter()
            .collect();
        assert_eq!(faulty, vec![3], "{e}");
    }
    assert!(
        err.contains("serve: node node1: listening for XIDs, checking every 60 s"),
        "{err}"
    );
}

#[test]
fn a_bad_interval_is_refused() {
    let n = Node::new("serve-bad", "pcie8", "", None);
    let (rc, _, err, _) = n.run(&["serve", "--interval", "0", "--checks", "1"]);
    assert_eq!(rc, 2, "{err}");
}
