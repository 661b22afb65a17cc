//! Where the agent reads gres.conf (issue 25 item 4): where slurmd does, next to slurm.conf
//! even when gputopo.conf lives elsewhere, with its `Include` lines followed; an include it
//! cannot follow makes it refuse to publish rather than fall back to NVML's order.

mod common;

use common::Node;

/// pcie8: NVML index i has minor 7-i. Slurm's GPU 0 is /dev/nvidia3 in these gres.conf
/// files, which is NVML device 4 (bus 9C); NVML's own order would start at bus 1A.
const SLURM_ORDER: &str = "NodeName=node1 Name=gpu File=/dev/nvidia3\nNodeName=node1 Name=gpu File=/dev/nvidia[0-2,4-7]\n";

fn first_bus(n: &Node) -> Option<String> {
    let (_, gpus) = n.health();
    gpus.first().and_then(|g| g.3.clone())
}

#[test]
fn gpu_lines_through_an_include_keep_slurms_order() {
    let n = Node::new(
        "include",
        "pcie8",
        "",
        Some("AutoDetect=off\nInclude gpus.d/node.conf\n"),
    );
    std::fs::create_dir_all(n.dir.join("gpus.d")).expect("dir");
    std::fs::write(n.dir.join("gpus.d/node.conf"), SLURM_ORDER).expect("include");
    assert_eq!(first_bus(&n).as_deref(), Some("00000000:9C:00.0"));
    // An include that cannot be read: no guess, no publishing, and the reason.
    std::fs::remove_file(n.dir.join("gpus.d/node.conf")).expect("rm");
    let (rc, out, err, _) = n.run(&["publish", "--dry-run", "--current-extra", ""]);
    assert_eq!(rc, 7, "{out}{err}");
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains("Include gpus.d/node.conf") && err.contains("node.conf"),
        "{err}"
    );
}

#[test]
fn gres_conf_is_read_next_to_slurm_conf_not_gputopo_conf() {
    // gputopo.conf in the node's scratch dir (GPUTOPO_CONF), slurm.conf and gres.conf in
    // another directory, as on a host with /etc/gputopo/gputopo.conf.
    let mut n = Node::new("gres-elsewhere", "pcie8", "", None);
    let slurm = n.dir.join("slurm");
    std::fs::create_dir_all(&slurm).expect("dir");
    std::fs::write(slurm.join("gres.conf"), SLURM_ORDER).expect("gres.conf");
    n.slurm_conf = slurm.join("slurm.conf");
    assert_eq!(first_bus(&n).as_deref(), Some("00000000:9C:00.0"));
    // GresConf= still wins.
    std::fs::write(
        n.dir.join("gputopo.conf"),
        format!("GresConf={}\n", n.dir.join("none.conf").display()),
    )
    .expect("gputopo.conf");
    assert_eq!(
        first_bus(&n).as_deref(),
        Some("00000000:1A:00.0"),
        "no gres.conf at GresConf=: NVML's order"
    );
}
