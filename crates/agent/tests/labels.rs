//! Capability labels and NVLink domains through the real nvml-wrapper code path against the
//! fake NVML (issue 13 items 4 and 5): a mixed fleet's H100 node, and two GB200 NVL72 racks of
//! 18 trays × 4 GPUs whose published domains `gputopo topology-conf` turns into one
//! `topology/block` block each.

mod common;

use common::Node;

/// `publish --dry-run` of a fixture: the Extra it would write.
fn extra_of(test: &str, fixture: &str) -> String {
    let n = Node::new(test, fixture, "", None);
    let (rc, out, err, _) = n.run(&["publish", "--dry-run", "--current-extra", ""]);
    assert_eq!(rc, 0, "{err}");
    out.trim().to_string()
}

#[test]
fn an_h100_node_publishes_its_labels_next_to_the_health() {
    let e = extra_of("labels-h100", "fleet-h100-80");
    assert!(
        e.starts_with(
            r#"{"gpu_ok":8,"gpu_model":"H100","gpu_mem_gib":80,"cc":9.0,"gpu_count":8,"nvlink":true,"nvswitch":false,"gputopo":{"v":1,"#
        ),
        "{e}"
    );
}

#[test]
fn a_check_that_reads_no_gpu_keeps_the_published_labels() {
    let n = Node::new("labels-lost", "all-lost", "", None);
    let before =
        r#"{"gpu_model":"V100","gpu_mem_gib":32,"gpu_count":8,"nvlink":true,"nvswitch":false}"#;
    let (rc, out, err, _) = n.run(&["publish", "--dry-run", "--current-extra", before]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        out.contains(r#""gpu_model":"V100","gpu_mem_gib":32,"gpu_count":8,"nvlink":true,"nvswitch":false,"gputopo""#),
        "{out}"
    );
}

#[test]
fn two_gb200_racks_give_two_blocks_of_18_nodes() {
    let racks = [
        extra_of("labels-gb1", "gb200-rack1"),
        extra_of("labels-gb2", "gb200-rack2"),
    ];
    assert!(
        racks[0].contains(
            r#""gpu_model":"GB200","gpu_mem_gib":185,"cc":10.0,"gpu_count":4,"nvlink":true,"nvswitch":true,"nvlink_domain":"5ab1e0000000400080000000000000a1.1","gputopo""#
        ),
        "{}",
        racks[0]
    );
    // A cluster of 36 trays (18 per rack) and a login node without GPUs, as scontrol shows it.
    let n = Node::new("labels-blocks", "gb200-rack1", "", None);
    let mut show = String::new();
    for (r, extra) in racks.iter().enumerate() {
        for t in 1..=18 {
            show.push_str(&format!(
                "NodeName=r{}t{t} Arch=aarch64 Extra={extra} State=IDLE\n",
                r + 1
            ));
        }
    }
    show.push_str("NodeName=login Extra=(null) State=IDLE\n");
    std::fs::write(n.dir.join("show.txt"), &show).expect("show");
    let script = n.dir.join("scontrol");
    std::fs::write(
        &script,
        format!("#!/bin/sh\ncat {}\n", n.dir.join("show.txt").display()),
    )
    .expect("scontrol");
    let _ = std::process::Command::new("chmod")
        .arg("755")
        .arg(&script)
        .status();
    let sc = script.display().to_string();
    let (rc, conf, err, _) = n.run(&["topology-conf", "--scontrol", &sc]);
    assert_eq!(rc, 0, "{err}");
    let blocks: Vec<&str> = conf
        .lines()
        .filter(|l| l.starts_with("BlockName="))
        .collect();
    let rack = |r: usize| {
        (1..=18)
            .map(|t| format!("r{r}t{t}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    assert_eq!(
        blocks,
        [
            format!("BlockName=nvl1 Nodes={}", rack(1)),
            format!("BlockName=nvl2 Nodes={}", rack(2))
        ],
        "{conf}"
    );
    assert!(
        conf.contains("# no NVLink domain published: login"),
        "{conf}"
    );
    // Releases without topology/block (22.05): one leaf switch per domain.
    let (rc, tree, err, _) = n.run(&["topology-conf", "--tree", "--scontrol", &sc]);
    assert_eq!(rc, 0, "{err}");
    let switches: Vec<&str> = tree
        .lines()
        .filter(|l| l.starts_with("SwitchName="))
        .collect();
    assert_eq!(
        switches,
        [
            format!("SwitchName=nvl1 Nodes={}", rack(1)),
            format!("SwitchName=nvl2 Nodes={}", rack(2))
        ],
        "{tree}"
    );
    let (rc, features, _, _) = n.run(&["features", "--scontrol", &sc]);
    assert_eq!(rc, 0);
    assert!(
        features.starts_with("NodeName=r1t1 Features=gb200,gpumem185,cc100,nvlink,nvswitch\n"),
        "{features}"
    );
}
