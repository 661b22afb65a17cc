//! `contrib/gpu-check.sh` (issue 27 item 6) without a GPU: the real `gputopo` against the fake
//! NVML, and a stand-in `nvidia-smi` that reports the same GPUs, then the same GPUs with one
//! name and one NVLink count wrong. The script itself has not run on a real GPU yet
//! (docs/agent.md).

mod common;

use common::{fake_lib, fixture};
use std::path::{Path, PathBuf};
use std::process::Command;

const SMI: &str = "#!/bin/sh\ncase \"$*\" in\n  *query-gpu=index,name*) cat \"$SMI_DIR/query.csv\" ;;\n  \
*driver_version*) echo 550.54.15 ;;\n  'topo -m') cat \"$SMI_DIR/topo.txt\" ;;\n  -L) cat \"$SMI_DIR/list.txt\" ;;\n  *) exit 1 ;;\nesac\n";

fn gputopo(args: &[&str], fx: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_gputopo"))
        .args(args)
        .env("GPUTOPO_CONF", "/dev/null")
        .env("GPUTOPO_NVML_LIB", fake_lib())
        .env("FAKE_NVML_FIXTURE", fx)
        .output()
        .expect("gputopo");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs the script with the stand-in; (exit code, last line).
fn check(dir: &Path, fx: &Path) -> (i32, String) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../contrib/gpu-check.sh");
    let out = Command::new("bash")
        .arg(script)
        .env("NVIDIA_SMI", dir.join("nvidia-smi"))
        .env("SMI_DIR", dir)
        .env("GPUTOPO_BIN", env!("CARGO_BIN_EXE_gputopo"))
        .env("GPUTOPO_NVML_LIB", fake_lib())
        .env("FAKE_NVML_FIXTURE", fx)
        .output()
        .expect("bash contrib/gpu-check.sh");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (
        out.status.code().unwrap_or(-1),
        text.lines().last().unwrap_or("").to_string(),
    )
}

#[test]
fn agrees_with_a_matching_nvidia_smi_and_names_each_mismatch() {
    let fx: PathBuf = fixture("dgx1v-healthy");
    let dir = std::env::temp_dir().join(format!("gputopo-gpu-check-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("nvidia-smi"), SMI).unwrap();
    let _ = Command::new("chmod")
        .arg("755")
        .arg(dir.join("nvidia-smi"))
        .status();
    let health: serde_json::Value =
        serde_json::from_str(&gputopo(&["health", "--json"], &fx)).expect("health json");
    let csv: String = health
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            format!(
                "{}, {}, {}, {}\n",
                g["index"],
                g["name"].as_str().unwrap(),
                g["bus_id"].as_str().unwrap(),
                g["uuid"].as_str().unwrap()
            )
        })
        .collect();
    std::fs::write(dir.join("query.csv"), &csv).unwrap();
    let topo = gputopo(&["topology", "--format", "matrix"], &fx);
    std::fs::write(dir.join("topo.txt"), &topo).unwrap();
    std::fs::write(
        dir.join("list.txt"),
        "GPU 0: Tesla V100-SXM2-32GB (UUID: GPU-x)\n",
    )
    .unwrap();

    let (rc, last) = check(&dir, &fx);
    assert_eq!(rc, 0, "{last}");
    assert!(
        last.starts_with("gpu-check: PASS (8 GPUs: 8x Tesla V100-SXM2-32GB; 32 NVLink cells"),
        "{last}"
    );

    std::fs::write(
        dir.join("query.csv"),
        csv.replacen("V100-SXM2-32GB", "V100-SXM2-16GB", 1),
    )
    .unwrap();
    std::fs::write(
        dir.join("topo.txt"),
        topo.replacen("GPU0\t X \tNV1", "GPU0\t X \tNV2", 1),
    )
    .unwrap();
    let (rc, last) = check(&dir, &fx);
    assert_eq!(rc, 1, "{last}");
    assert!(last.starts_with("gpu-check: FAIL 2 mismatch(es)"), "{last}");
    let _ = std::fs::remove_dir_all(&dir);
}
