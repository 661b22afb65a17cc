//! A GPU that leaves the bus is faulty (issue 27 item 5), never `unknown` and used last:
//! NVML, answering, no longer lists a GPU Slurm still has, or NVML cannot start on a node whose
//! GPU device files are there. A node without the NVML library stays unknown.

mod common;

use common::{Node, s};

/// gres.conf for `node1`: one GPU per file, in the given order.
fn gres(files: &[&str]) -> String {
    files
        .iter()
        .map(|f| format!("NodeName=node1 Name=gpu Type=l40s File={f}\n"))
        .collect()
}

#[test]
fn a_gpu_nvml_no_longer_lists_is_faulty() {
    let files: Vec<String> = (0..8).map(|m| format!("/dev/nvidia{m}")).collect();
    let files: Vec<&str> = files.iter().map(String::as_str).collect();
    let n = Node::new("gone", "pcie8-gone", "", Some(&gres(&files)));
    let (rc, gpus) = n.health();
    let bad: Vec<_> = gpus
        .iter()
        .filter(|g| g.1 != "ok")
        .map(|g| (g.0, g.1.as_str(), g.2.clone()))
        .collect();
    assert_eq!(bad, vec![(5, "faulty", s(&["not_in_nvml"]))]);
    assert_eq!(rc, 4, "some GPU faulty");
    let (rc, extra, _, _) = n.run(&["publish", "--dry-run", "--current-extra", ""]);
    assert_eq!(rc, 0);
    assert!(
        extra.starts_with(r#"{"gpu_faulty":"5","gpu_ok":7,"#),
        "{extra}"
    );
}

#[test]
fn nvml_that_cannot_start_beside_device_files_makes_them_faulty() {
    // /dev/null and /dev/zero stand for two GPUs' device files (character devices that exist
    // on every machine); the third GPU's file is not there.
    let n = Node::new(
        "nodriver-files",
        "driver-not-loaded",
        "",
        Some(&gres(&["/dev/null", "/dev/zero", "/nonexistent/nvidia9"])),
    );
    let (rc, gpus) = n.health();
    assert_eq!(rc, 2, "NVML unavailable");
    let got: Vec<_> = gpus
        .iter()
        .map(|g| (g.0, g.1.as_str(), g.2.clone()))
        .collect();
    assert_eq!(
        got,
        vec![
            (0, "faulty", s(&["gpu_unreachable", "driver_not_loaded"])),
            (1, "faulty", s(&["gpu_unreachable", "driver_not_loaded"])),
            (2, "unknown", s(&["driver_not_loaded"])),
        ]
    );
}

#[test]
fn a_node_without_the_nvml_library_stays_unknown() {
    let mut n = Node::new(
        "nolib-files",
        "pcie8",
        "",
        Some(&gres(&["/dev/null", "/dev/zero"])),
    );
    n.lib = Some("/nonexistent/libnvidia-ml.so.1".into());
    let (rc, gpus) = n.health();
    assert_eq!(rc, 2);
    assert!(
        gpus.iter()
            .all(|g| g.1 == "unknown" && g.2 == s(&["nvml_unavailable"])),
        "{gpus:?}"
    );
}
