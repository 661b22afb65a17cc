//! Where a test's files go: its cluster directory ([`cluster_dir`], one per nextest slot, so
//! tests running at the same time never share one), never the checkout
//! ([`stray_batch_output`]).

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

use super::{repo, target_dir};

/// The directory [`Cluster::up`] runs its cluster in: `GPUTOPO_E2E_DIR`, else the test's slot
/// directory (`PREFIX-sSLOT`, [`slot_dir`]). The slot is nextest's `NEXTEST_TEST_GROUP_SLOT`
/// in the `cluster` test group (`.config/nextest.toml`; 0 under `cargo test`), so tests that
/// run at the same time never share a directory; `PREFIX` is `GPUTOPO_E2E_DIR_PREFIX`, else
/// one derived from the target dir. Everything of a test that must not clash with a test
/// running at the same time (ports, sockets, a slurmdbd's MariaDB) is derived from it.
pub fn cluster_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("GPUTOPO_E2E_DIR") {
        return PathBuf::from(dir);
    }
    let prefix = std::env::var("GPUTOPO_E2E_DIR_PREFIX").unwrap_or_else(|_| {
        let mut h = DefaultHasher::new();
        target_dir().hash(&mut h);
        format!("/tmp/gputopo-e2e-{:08x}", h.finish() as u32)
    });
    let slot = std::env::var("NEXTEST_TEST_GROUP_SLOT")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    slot_dir(&prefix, slot)
}

/// The directory of `slot`: `PREFIX-sSLOT`, or `PREFIX-sSLOT-K` when the port block
/// contrib/cluster.sh derives from it (a hash of the path) is a lower slot's. Every test
/// process computes the same answer, slot by slot from 0.
fn slot_dir(prefix: &str, slot: usize) -> PathBuf {
    let mut taken = Vec::new();
    let mut k = 0;
    for i in 0..=slot {
        loop {
            let dir = match k {
                0 => PathBuf::from(format!("{prefix}-s{i}")),
                _ => PathBuf::from(format!("{prefix}-s{i}-{k}")),
            };
            let port = port_base(&dir);
            if !taken.contains(&port) {
                taken.push(port);
                if i == slot {
                    return dir;
                }
                break;
            }
            k += 1;
        }
    }
    unreachable!("the loop returns at slot {slot}")
}

/// The base port contrib/cluster.sh derives from `dir` (`cluster.sh port`).
fn port_base(dir: &Path) -> String {
    let out = Command::new(repo().join("contrib/cluster.sh"))
        .args(["port", "--dir"])
        .arg(dir)
        .output()
        .expect("contrib/cluster.sh port");
    assert!(
        out.status.success(),
        "contrib/cluster.sh port --dir {}",
        dir.display()
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// `slurm-*.out` files in the checkout written since `since`: batch output of a job submitted
/// outside its cluster directory (the harness submits from `DIR/jobs`), which a test must
/// never leave behind.
pub(super) fn stray_batch_output(since: SystemTime) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(repo()) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with("slurm-") && name.ends_with(".out")
        })
        .filter(|e| {
            e.metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t >= since)
        })
        .map(|e| e.path())
        .collect()
}
