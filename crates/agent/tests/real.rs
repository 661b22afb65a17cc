//! The agent's verdict on every GPU of the fixtures made from real `nvidia-smi -q -x` reports
//! (tests/fixtures/nvidia-smi, issue 27 item 3): what NVML answered "not supported" on those
//! boards (no ECC on consumer boards, no page retirement on Ampere and later, no remapping
//! before Ampere or in MIG mode, no thresholds or power on old boards) is no evidence, and a
//! healthy board is `ok`, also over several checks (sustained telemetry: a slot-limited PCIe
//! link is not degraded, a drop from the widest link the card showed is).

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
fn a_real_a100_with_a_row_remap_pending_is_degraded() {
    // From a real nvidia-smi -q excerpt (text form, fake-nvml-from-smi): an A100 after XID 63,
    // one row marked for remapping at the next reset, 177 correctable DRAM errors. Usable
    // until the reset, so degraded (used last), not faulty; the row remap is the reason.
    let n = Node::new("real-remap", "real-a100-remap-pending", "", None);
    let (rc, gpus) = n.health();
    assert_eq!(rc, 0);
    assert_eq!(
        (gpus[0].1.as_str(), gpus[0].2.clone()),
        ("degraded", s(&["row_remap_pending"]))
    );
}

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

/// One health check per fixture, on a fresh state dir: `publish` (which remembers) for each
/// but the last, `health` for the last; returns GPU 0's verdict.
fn after_checks(test: &str, fixtures: &[&str]) -> (String, Vec<String>) {
    let state =
        std::env::temp_dir().join(format!("gputopo-real-state-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&state);
    let mut n = Node::new(
        test,
        fixtures[0],
        &format!("StateDir={}\n", state.display()),
        None,
    );
    let (last, before) = fixtures.split_last().expect("a fixture");
    for fx in before {
        n.fixture = fx.to_string();
        let (rc, _, err, _) = n.run(&["publish", "--scontrol", "/bin/true", "--current-extra", ""]);
        assert!(rc == 0 || rc == 6, "{err}");
    }
    n.fixture = last.to_string();
    let (_, gpus) = n.health();
    let _ = std::fs::remove_dir_all(&state);
    (gpus[0].1.clone(), gpus[0].2.clone())
}

#[test]
fn a_card_in_a_slot_wired_x8_is_not_degraded() {
    // The A10G (cloud slot) and the Quadro P2000 reports show PCIe x8 of x16 and gen 1 at
    // idle: how their slots are built, not a fault. Sustained over more checks than
    // TelemetryRaiseChecks (2), the boards stay ok: x8 is the widest link they ever showed.
    for f in ["real-a10g", "real-quadro-p2000-v12"] {
        let v = after_checks(&format!("x8-{f}"), &[f; 4]);
        assert_eq!((v.0.as_str(), v.1), ("ok", s(&[])), "{f}");
    }
}

#[test]
fn a_link_that_drops_from_what_the_card_showed_is_degraded() {
    // The same A10G once trained x16 in its slot, then x8: a drop (a reseated card, a failing
    // riser), sustained over two checks. A width that comes back clears it.
    let dir = std::env::temp_dir().join(format!("gputopo-real-fx-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let real = std::fs::read_to_string(common::fixture("real-a10g")).expect("fixture");
    assert!(real.contains("PcieWidth=8/16"), "the report's link");
    let x16 = dir.join("a10g-x16.fx");
    std::fs::write(&x16, real.replace("PcieWidth=8/16", "PcieWidth=16/16")).expect("write");
    let x8 = common::fixture("real-a10g");
    let (x16, x8) = (x16.to_str().expect("utf-8"), x8.to_str().expect("utf-8"));
    let v = after_checks("drop", &[x16, x8, x8]);
    assert_eq!((v.0.as_str(), v.1), ("degraded", s(&["pcie_degraded"])));
    let v = after_checks("drop-one", &[x16, x8]);
    assert_eq!(
        (v.0.as_str(), v.1),
        ("ok", s(&[])),
        "one check is not sustained"
    );
    let v = after_checks("drop-back", &[x16, x8, x8, x16, x16, x16]);
    assert_eq!(
        (v.0.as_str(), v.1),
        ("ok", s(&[])),
        "x16 again for TelemetryClearChecks"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
