//! Shared by the agent's integration tests: the fake NVML library, the fixtures, and a
//! scratch node that runs the real `gputopo` binary against them.
#![allow(dead_code)] // each test binary uses a different part

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub fn fake_lib() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        if let Some(p) = std::env::var_os("FAKE_NVML_LIB") {
            return PathBuf::from(p);
        }
        let exe = std::env::current_exe().expect("test executable path");
        let deps = exe.parent().expect("deps dir").to_path_buf();
        let candidates = [
            deps.join("libfake_nvml.so"),
            deps.parent()
                .map(|d| d.join("libfake_nvml.so"))
                .unwrap_or_default(),
        ];
        if let Some(p) = candidates.iter().find(|p| p.is_file()) {
            return p.clone();
        }
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let st = Command::new(cargo)
            .args(["build", "-p", "fake-nvml"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("running cargo build -p fake-nvml");
        assert!(st.success(), "cargo build -p fake-nvml failed");
        candidates
            .iter()
            .find(|p| p.is_file())
            .cloned()
            .expect("libfake_nvml.so after building it")
    })
}

pub fn fixture(name: &str) -> PathBuf {
    if name.contains('/') {
        return PathBuf::from(name);
    }
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/nvml")
        .join(format!("{name}.fx"))
}

/// One GPU of `health --json`: (index, status, reasons, bus id).
pub type Row = (u64, String, Vec<String>, Option<String>);

/// A scratch directory holding gputopo.conf (and gres.conf when given).
pub struct Node {
    pub dir: PathBuf,
    pub fixture: String,
    pub lib: Option<PathBuf>,
    /// `$SLURM_CONF` of the runs (`dir/slurm.conf`; the file need not exist): slurmd reads
    /// gres.conf next to it.
    pub slurm_conf: PathBuf,
}

impl Node {
    pub fn new(test: &str, fixture_name: &str, conf: &str, gres: Option<&str>) -> Node {
        let dir = std::env::temp_dir().join(format!("gputopo-nvml-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        // The host's kernel log is not the fixture's: read none unless the test names one.
        let conf = if conf.contains("KernelLog") {
            conf.to_string()
        } else {
            format!("{conf}\nKernelLog=none\n")
        };
        std::fs::write(dir.join("gputopo.conf"), conf).expect("gputopo.conf");
        if let Some(g) = gres {
            std::fs::write(dir.join("gres.conf"), g).expect("gres.conf");
        }
        Node {
            slurm_conf: dir.join("slurm.conf"),
            dir,
            fixture: fixture_name.into(),
            lib: None,
        }
    }

    pub fn run(&self, args: &[&str]) -> (i32, String, String, Duration) {
        let lib = self.lib.clone().unwrap_or_else(|| fake_lib().to_path_buf());
        let t = Instant::now();
        let out: Output = Command::new(env!("CARGO_BIN_EXE_gputopo"))
            .args(args)
            .env("GPUTOPO_CONF", self.dir.join("gputopo.conf"))
            .env("GPUTOPO_NVML_LIB", lib)
            .env("FAKE_NVML_FIXTURE", fixture(&self.fixture))
            .env("SLURMD_NODENAME", "node1")
            .env("SLURM_CONF", &self.slurm_conf)
            .output()
            .expect("running gputopo");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
            t.elapsed(),
        )
    }

    /// `health --json` → (exit code, [(index, status, reasons, bus id)]).
    pub fn health(&self) -> (i32, Vec<Row>) {
        let (rc, out, err, _) = self.run(&["health", "--json"]);
        let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out} {err}"));
        let rows = v
            .as_array()
            .expect("array")
            .iter()
            .map(|g| {
                (
                    g["index"].as_u64().expect("index"),
                    g["status"].as_str().expect("status").to_string(),
                    g["reasons"]
                        .as_array()
                        .expect("reasons")
                        .iter()
                        .map(|r| r.as_str().expect("reason").to_string())
                        .collect(),
                    g["bus_id"].as_str().map(str::to_string),
                )
            })
            .collect();
        (rc, rows)
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}
