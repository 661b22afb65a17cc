//! The agent's verdict on every GPU of the fixtures made from real `nvidia-smi -q -x` reports
//! (tests/fixtures/nvidia-smi, issue 27 item 3): what NVML answered "not supported" on those
//! boards (no ECC on consumer boards, no page retirement on Ampere and later, no remapping
//! before Ampere or in MIG mode, no thresholds or power on old boards) is no evidence, and a
//! healthy board is `ok`. A single check: sustained telemetry needs several (see
//! `pcie_width_at_idle_is_sustained_evidence`).

mod common;

use common::{Node, s};

const REAL: [&str; 8] = [
    "real-a100-sxm4-v12",
    "real-a10g",
    "real-tesla-t4",
    "real-quadro-p2000-v12",
    "real-rtx-3080-v13",
    "real-rtx-4000-sff-ada-v13",
    "real-gtx-1070-ti",
    "real-rtx-3090-v12",
];

#[test]
fn every_gpu_of_every_real_report_is_ok() {
    for f in REAL {
        let n = Node::new(&format!("real-{f}"), f, "", None);
        let (rc, gpus) = n.health();
        assert_eq!(rc, 0, "{f}");
        assert!(!gpus.is_empty(), "{f}");
        for g in &gpus {
            assert_eq!(
                (g.1.as_str(), g.2.clone()),
                ("ok", s(&[])),
                "{f} GPU {}",
                g.0
            );
        }
    }
}

#[test]
fn pcie_width_at_idle_is_sustained_evidence() {
    // The A10G's report shows PCIe gen 1 of 4 and width x8 of x16 at idle (a cloud slot
    // wired x8); the policy counts a width below the card's maximum, so after
    // TelemetryRaiseChecks publishes the healthy board is `degraded`/`pcie_degraded`. Recorded
    // here as the finding it is (docs/agent.md, "Real reports").
    let state = std::env::temp_dir().join(format!("gputopo-real-state-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&state);
    let n = Node::new(
        "real-a10g-sustained",
        "real-a10g",
        &format!("StateDir={}\n", state.display()),
        None,
    );
    for _ in 0..2 {
        let (rc, _, err, _) = n.run(&["publish", "--scontrol", "/bin/true", "--current-extra", ""]);
        assert!(rc == 0 || rc == 6, "{err}");
    }
    let (_, gpus) = n.health();
    assert_eq!(
        (gpus[0].1.as_str(), gpus[0].2.clone()),
        ("degraded", s(&["pcie_degraded"]))
    );
    let _ = std::fs::remove_dir_all(&state);
}
