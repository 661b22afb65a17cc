//! `gputopo simulate` end to end on a small synthetic cluster: the outputs' shape, the
//! CSV trace round trip, and the invariant that gputopo never allocates a faulty GPU.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs `gputopo simulate ARGS` from the repository root.
fn simulate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gputopo"))
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .arg("simulate")
        .args(args)
        .output()
        .expect("gputopo runs")
}

/// Runs `gputopo simulate ARGS`, expects success and returns stdout.
fn succeeds(args: &[&str]) -> String {
    let out = simulate(args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{args:?}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Runs `gputopo simulate ARGS`, expects exit code 1 with `message` on stderr.
fn fails_with(args: &[&str], message: &str) {
    let out = simulate(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
    assert!(stderr.contains(message), "{args:?}: {stderr}");
}

/// A path as a command-line argument (temporary paths are UTF-8 here).
fn arg(p: &Path) -> &str {
    p.to_str().expect("UTF-8 temporary path")
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gputopo-sim-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

/// summary.csv as (header, rows of fields).
fn summary(dir: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let text = std::fs::read_to_string(dir.join("summary.csv")).expect("summary.csv written");
    let mut lines = text
        .lines()
        .map(|l| l.split(',').map(str::to_string).collect::<Vec<_>>());
    let header = lines.next().expect("a header line");
    (header, lines.collect())
}

fn col(header: &[String], name: &str) -> usize {
    header
        .iter()
        .position(|h| h == name)
        .expect("column present")
}

#[test]
fn small_cluster_outputs_and_invariants() {
    let dir = scratch("out");
    let trace = dir.join("trace.csv");
    let common = ["--cluster", "4xdgx1v,1xhgx-h100", "--seed", "7"];
    let faults = ["--faults", "0.05", "--health-unaware"];
    let stdout = succeeds(
        &[
            &common[..],
            &faults,
            &["--synthetic", "300", "--out", arg(&dir)],
            &["--write-trace", arg(&trace)],
        ]
        .concat(),
    );
    for p in [
        "gputopo",
        "slurm-greedy",
        "best-effort",
        "first-fit",
        "optimal",
        "dec/s",
    ] {
        assert!(stdout.contains(p), "table lacks {p}:\n{stdout}");
    }
    let (h, rows) = summary(&dir);
    assert_eq!(rows.len(), 4);
    assert!(rows.iter().all(|r| r.len() == h.len()));
    let gputopo = rows.iter().find(|r| r[0] == "gputopo").unwrap();
    assert_eq!(
        gputopo[col(&h, "faulty_allocs")],
        "0",
        "gputopo is health-aware"
    );
    assert_eq!(gputopo[col(&h, "optimal_share")], "1.0000");
    assert!(
        gputopo[col(&h, "faults")].parse::<u32>().unwrap() > 0,
        "faults were injected"
    );
    let jobs: u32 = gputopo[col(&h, "jobs")].parse().unwrap();
    let done: u32 = gputopo[col(&h, "started")].parse::<u32>().unwrap()
        + gputopo[col(&h, "unrunnable")].parse::<u32>().unwrap();
    assert_eq!((jobs, done), (300, 300));
    for m in [
        "optimal_share",
        "stranded_gpus",
        "wait_mean_s",
        "slowdown_p75",
        "faulty_allocs",
    ] {
        let svg = std::fs::read_to_string(dir.join(format!("{m}.svg"))).unwrap();
        assert!(
            svg.starts_with("<svg") && svg.contains("gputopo"),
            "{m}.svg"
        );
    }

    // Replaying the written trace gives the same results (wall-clock columns aside).
    let again = dir.join("again");
    succeeds(
        &[
            &common[..],
            &faults,
            &["--trace", arg(&trace), "--out", arg(&again)],
        ]
        .concat(),
    );
    let (_, rows2) = summary(&again);
    let logical = |r: &Vec<String>| -> Vec<String> {
        let skip = [col(&h, "decisions_per_s"), col(&h, "wall_s")];
        r.iter()
            .enumerate()
            .filter(|(i, _)| !skip.contains(i))
            .map(|(_, v)| v.clone())
            .collect()
    };
    assert_eq!(
        rows.iter().map(logical).collect::<Vec<_>>(),
        rows2.iter().map(logical).collect::<Vec<_>>()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_inputs_are_clear_errors() {
    fails_with(
        &["--cluster", "2xno-such-board", "--synthetic", "10"],
        "no-such-board",
    );
    fails_with(
        &[
            "--cluster",
            "dgx1v",
            "--synthetic",
            "10",
            "--policies",
            "magic",
        ],
        "unknown policy `magic`",
    );

    let dir = scratch("faults");
    let faults = dir.join("faults.csv");
    let small = [
        "--cluster",
        "2xdgx1v",
        "--synthetic",
        "20",
        "--faults",
        arg(&faults),
    ];
    std::fs::write(&faults, "time,node,gpu\n0,1,3\n").unwrap();
    succeeds(&[&small[..], &["--policies", "gputopo", "--out", arg(&dir)]].concat());
    let (h, rows) = summary(&dir);
    assert_eq!(rows[0][col(&h, "faults")], "1");
    std::fs::write(&faults, "0,2,0\n").unwrap();
    fails_with(&small, "outside the cluster");
    std::fs::write(&faults, "0,1,9\n").unwrap();
    fails_with(&small, "node 1 has no GPU 9");
    let _ = std::fs::remove_dir_all(&dir);
}
