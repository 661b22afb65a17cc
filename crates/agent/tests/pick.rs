//! `gputopo pick` and `gputopo topo` through the built binary: the DGX-1V known answers, the
//! JSON shape, every topology input format, and errors (stderr, non-zero exit).

use std::process::{Command, Output};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

fn gputopo(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gputopo"))
        .args(args)
        .current_dir(ROOT)
        .output()
        .expect("run gputopo")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn pick(topo: &str, free: Option<&str>, count: usize, extra: &[&str]) -> Vec<usize> {
    let count = count.to_string();
    let mut args = vec!["pick", "--topology", topo, "--count", &count, "--json"];
    if let Some(f) = free {
        args.extend(["--free", f]);
    }
    args.extend(extra);
    let o = gputopo(&args);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("pick --json prints JSON");
    assert!(v["score"]["aggregate"].is_u64(), "{v}");
    v["gpus"]
        .as_array()
        .expect("gpus is an array")
        .iter()
        .map(|x| x.as_u64().expect("GPU indices are numbers") as usize)
        .collect()
}

const DGX1V: &str = "contrib/topologies/dgx1v.topo";

#[test]
fn dgx1v_known_answers() {
    // Four successive pairs on an idle node: each an NV2 pair.
    let nv2 = [
        [0, 3],
        [0, 4],
        [1, 2],
        [1, 5],
        [2, 3],
        [4, 7],
        [5, 6],
        [6, 7],
    ];
    let mut free: Vec<usize> = (0..8).collect();
    for _ in 0..4 {
        let list: Vec<String> = free.iter().map(|g| g.to_string()).collect();
        let got = pick(DGX1V, Some(&list.join(",")), 2, &[]);
        assert!(
            nv2.iter().any(|p| p[..] == got[..]),
            "{got:?} is not an NV2 pair"
        );
        free.retain(|g| !got.contains(g));
    }
    assert!(free.is_empty());
    let quad = pick(DGX1V, None, 4, &[]);
    assert!(quad == [0, 1, 2, 3] || quad == [4, 5, 6, 7], "{quad:?}");
    assert_eq!(pick(DGX1V, Some("0,1,4"), 2, &[]), [0, 4]);
    assert_eq!(pick(DGX1V, None, 2, &["--required", "4"]), [4, 7]);
    assert_eq!(pick(DGX1V, None, 2, &["--near", "4-7"]), [4, 7]);
    // Leaves the NV2 pair {5,6}, not the NV1 pair {4,5}.
    assert_eq!(pick(DGX1V, Some("4-7"), 2, &[]), [4, 7]);
}

#[test]
fn versus_compares_with_another_answer() {
    let versus = |other: &str| {
        gputopo(&[
            "pick",
            "--topology",
            DGX1V,
            "--free",
            "4-7",
            "--count",
            "2",
            "--versus",
            other,
        ])
    };
    let o = versus("6,7");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let line = stdout(&o);
    assert!(line.starts_with("gpus=4,7 "), "{line}");
    let tail = " versus=6,7 versus_bottleneck=50 versus_aggregate=50 versus_leftover=2:25/25 \
                job=same leftover=better\n";
    assert!(line.ends_with(tail), "{line}");
    assert_eq!(versus("0,1").status.code(), Some(1));
}

#[test]
fn text_output_is_one_key_value_line() {
    let o = gputopo(&[
        "pick",
        "--topology",
        DGX1V,
        "--free",
        "0,1,4",
        "--count",
        "2",
    ]);
    assert!(o.status.success());
    assert_eq!(
        stdout(&o),
        "gpus=0,4 bottleneck=50 aggregate=50 leftover=- leftover_pairs=0 near=0\n"
    );
}

#[test]
fn every_input_format_gives_the_same_answer() {
    for (file, node) in [
        (DGX1V, None),
        ("tests/fixtures/topologies/dgx1v-gres.conf", Some("dgx01")),
        ("tests/fixtures/topologies/dgx1v-topo-m.txt", None),
    ] {
        let mut extra = vec![];
        if let Some(n) = node {
            extra.extend(["--node", n]);
        }
        assert_eq!(pick(file, Some("0,1,4"), 2, &extra), [0, 4], "{file}");
        assert_eq!(pick(file, None, 4, &extra).len(), 4, "{file}");
    }
}

#[test]
fn errors_go_to_stderr_with_non_zero_exit() {
    let cases: [(&[&str], i32, &str); 5] = [
        (&["pick", "--topology", DGX1V, "--count", "9"], 2, "no fit"),
        (
            &[
                "pick",
                "--topology",
                DGX1V,
                "--count",
                "2",
                "--free",
                "0",
                "--required",
                "5",
            ],
            2,
            "not free",
        ),
        (
            &["pick", "--topology", DGX1V, "--count", "2", "--free", "0-9"],
            1,
            "0-7 only",
        ),
        (
            &["pick", "--topology", "no/such/file", "--count", "2"],
            1,
            "no/such/file",
        ),
        (&["topo", "Cargo.toml"], 1, "not a topology"),
    ];
    for (args, code, msg) in cases {
        let o = gputopo(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {err}");
        assert!(err.contains(msg), "{args:?}: {err}");
        assert!(o.stdout.is_empty());
    }
}

#[test]
fn topo_prints_an_nvidia_smi_matrix_that_reads_back() {
    let o = gputopo(&["topo", DGX1V]);
    assert!(o.status.success());
    let out = stdout(&o);
    let mut lines = out.lines();
    assert_eq!(
        lines.next().unwrap(),
        "\tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\tCPU Affinity\tNUMA Affinity"
    );
    assert_eq!(
        lines.next().unwrap(),
        "GPU0\t X \tNV1\tNV1\tNV2\tNV2\tSYS\tSYS\tSYS\t0-15\t0"
    );
    assert!(out.contains("Legend:"));
    let o = gputopo(&["topo", "contrib/topologies/pcie8.topo"]);
    assert!(
        stdout(&o)
            .lines()
            .nth(1)
            .unwrap()
            .starts_with("GPU0\t X \tPIX\tNODE\tNODE\tSYS")
    );
    // The printed matrix is valid --topology input and gives the same picks.
    let dir = std::env::temp_dir().join(format!("gputopo-pick-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("dgx1v.txt");
    std::fs::write(&path, &out).unwrap();
    let p = path.to_str().unwrap();
    assert_eq!(pick(p, Some("0,1,4"), 2, &[]), [0, 4]);
    std::fs::remove_dir_all(&dir).unwrap();
}
