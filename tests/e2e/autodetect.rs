//! Sites that let Slurm find the GPUs itself (issue 27 item 2): gres.conf says only
//! `AutoDetect=nvml`, and slurmd's own `gpu/nvml` plugin (Slurm built `--with-nvml`,
//! contrib/slurm-install.sh) detects the node's GPUs through the project's fake libnvidia-ml
//! (`cluster.sh --nvml`, contrib/nvml-node.sh: the fake on slurmd's library path, the
//! fixture's /dev/nvidia*, /proc/driver/nvidia* in a private mount namespace).
//!
//! Per site: Slurm's detected order, `File=` and `Links=` are what the fixture says (`slurmd -G`
//! in the node's namespace); `gputopo gres-conf` on the node agrees with it; then the node's
//! NVML changes under the running slurmd (the fixture file is replaced: faults appear, a GPU
//! falls off the bus) and the agent publishes every verdict under Slurm's index for that device,
//! the faulty GPUs are never allocated, and jobs get the best-connected sets.
//!
//! Slurm's `Cores=` come from NVML's CPU affinity converted with the host's CPU map: on a
//! 2-CPU test host they are not the fixture's (docs/agent.md), so they are not compared.

use super::agent::{Rig, fake_lib, fake_tree, health};
use super::harness::{Cluster, Opts, WAIT, e2e_enabled, field, release, repo, select, skip};
use gputopo_core::health::Status;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Slurm's plugin directory for the release under test has `gpu/<plugin>`, else why not.
fn gpu_plugin(plugin: &str) -> Result<(), String> {
    let r = release();
    let so = if r == "22.05.8" && plugin == "nvml" {
        // Debian's own, from its contrib section (cluster.sh links it in).
        let out = Command::new(repo().join("contrib/debian-nvml-plugin.sh"))
            .arg("--path")
            .output()
            .expect("contrib/debian-nvml-plugin.sh --path");
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
    } else if r == "22.05.8" {
        PathBuf::from(format!(
            "/usr/lib/x86_64-linux-gnu/slurm-wlm/gpu_{plugin}.so"
        ))
    } else {
        let cache = std::env::var("GPUTOPO_CACHE").unwrap_or_else(|_| "/var/cache/gputopo".into());
        Path::new(&cache).join(format!("slurm-{r}/lib/slurm/gpu_{plugin}.so"))
    };
    let dir = so.parent().unwrap_or(Path::new("/"));
    if so.is_file() {
        Ok(())
    } else {
        Err(format!(
            "Slurm {r} has no gpu/{plugin} plugin in {} (gpu/nvml: built without NVML, \
             contrib/slurm-install.sh builds 24.11.5 with it and fetches Debian's for 22.05.8; \
             gpu/nvidia: 24.11+)",
            dir.display()
        ))
    }
}

/// One AutoDetect=nvml node n1 on `fixture`, its Gres= `gres`, the agent as health check.
fn start(test: &str, fixture: &str, topology: &str, gres: &str) -> Option<(Rig, Cluster)> {
    start_detecting("nvml", test, fixture, topology, gres)
}

/// [`start`] with `AutoDetect=<how>` (`nvml`, or `nvidia` on 24.11+).
fn start_detecting(
    how: &str,
    test: &str,
    fixture: &str,
    topology: &str,
    gres: &str,
) -> Option<(Rig, Cluster)> {
    if !e2e_enabled() {
        return None;
    }
    if let Err(why) = gpu_plugin(how) {
        skip(why);
        return None;
    }
    let rig = Rig::new(test, &[("n1", fixture)]);
    let c = Cluster::up(Opts {
        nodes: 1,
        topology: topology.into(),
        gres_conf: Some((format!("AutoDetect={how}\n"), gres.into())),
        nvml: Some(format!("n1={}", rig.fixture("n1").display())),
        gputopo_conf: Some(rig.conf("KernelLog=none\n")),
        health_program: Some(rig.wrapper()),
        health_interval: 5,
        ..Opts::default()
    });
    Some((rig, c))
}

/// Runs `args` on n1 as its slurmd sees the machine (contrib/nvml-node.sh with n1's fixture).
fn on_node(c: &Cluster, rig: &Rig, args: &[&str]) -> String {
    let out = Command::new(repo().join("contrib/nvml-node.sh"))
        .arg(c.dir().join("nvml/probe"))
        .arg(rig.fixture("n1"))
        .arg("--")
        .args(args)
        .env("FAKE_NVML_LIB", fake_lib())
        .env("FAKE_NVML_TREE", fake_tree())
        .env("SLURM_CONF", c.etc().join("slurm.conf"))
        .env("GPUTOPO_CONF", c.etc().join("gputopo.conf"))
        .env("SLURMD_NODENAME", "n1")
        .output()
        .expect("run contrib/nvml-node.sh");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `slurmd -G` on n1: Slurm's final GPU list, (File=, Links=, Type=) in index order.
fn detected(c: &Cluster, rig: &Rig) -> (Vec<(String, String, String)>, String) {
    let sbin = which(c, "slurmd");
    let conf = c.etc().join("slurm.conf").display().to_string();
    let text = on_node(c, rig, &[&sbin, "-G", "-f", &conf, "-N", "n1"]);
    let gpus = text
        .lines()
        .filter(|l| l.contains("Gres Name=gpu "))
        .map(|l| (word(l, "File"), word(l, "Links"), word(l, "Type")))
        .collect();
    (gpus, text)
}

/// `KEY=` of a `slurmd -G` or gres.conf line, empty when absent.
fn word(line: &str, key: &str) -> String {
    field(line, key).unwrap_or("").to_string()
}

/// The absolute path of a Slurm program on the cluster's PATH.
fn which(c: &Cluster, prog: &str) -> String {
    let out = c.run("sh", &["-c", &format!("command -v {prog}")]);
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// `gputopo gres-conf` on n1 (no gres.conf GPU lines: NVML order), (File=, Links=) per line.
fn agent_gres(c: &Cluster, rig: &Rig) -> Vec<(String, String)> {
    let bin = super::harness::gputopo_bin().display().to_string();
    on_node(c, rig, &[&bin, "gres-conf", "--node", "n1"])
        .lines()
        .filter(|l| l.starts_with("NodeName=n1 "))
        .map(|l| (word(l, "File"), word(l, "Links")))
        .collect()
}

/// Replaces n1's NVML: from now on the agent reads `fixture` (slurmd keeps what it detected
/// at its start, as on a real node whose GPU fails under a running slurmd).
fn change_nvml(rig: &Rig, fixture: &str) {
    let src = repo()
        .join("tests/fixtures/nvml")
        .join(format!("{fixture}.fx"));
    let dst = rig.fixture("n1");
    let tmp = dst.with_extension("fx.new");
    std::fs::copy(&src, &tmp).expect("copy fixture");
    std::fs::rename(&tmp, &dst).expect("replace fixture");
}

/// Waits until n1 publishes exactly `faulty` (Slurm indices), returns the health.
fn wait_faulty(c: &Cluster, faulty: &[usize]) -> gputopo_core::health::NodeHealth {
    c.wait_until(
        &format!("n1 to publish GPUs {faulty:?} faulty"),
        WAIT,
        || health(c, "n1").is_some_and(|h| h.with_status(Status::Faulty).to_vec() == faulty),
    );
    health(c, "n1").expect("n1 health")
}

fn files(n: usize, minor: impl Fn(usize) -> usize) -> Vec<String> {
    (0..n).map(|i| format!("/dev/nvidia{}", minor(i))).collect()
}

/// Slurm's detected GPUs on n1 (`slurmd -G`), asserting their files are `want` in order; with
/// the `slurmd -G` text for messages.
fn detected_in_order(
    c: &Cluster,
    rig: &Rig,
    want: &[String],
) -> (Vec<(String, String, String)>, String) {
    let (gpus, text) = detected(c, rig);
    let got: Vec<String> = gpus.iter().map(|g| g.0.clone()).collect();
    assert_eq!(got, want, "Slurm's order (slurmd -G):\n{text}");
    (gpus, text)
}

/// `gputopo gres-conf` on n1 writes exactly Slurm's detected files and links.
fn assert_gres_conf_agrees(c: &Cluster, rig: &Rig, gpus: &[(String, String, String)]) {
    let slurm: Vec<(String, String)> = gpus.iter().map(|g| (g.0.clone(), g.1.clone())).collect();
    assert_eq!(agent_gres(c, rig), slurm, "gputopo gres-conf vs slurmd -G");
}

#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn dgx1v_detected_by_slurm_gets_health_and_best_pairs() {
    let Some((rig, c)) = start(
        "ad-dgx1v",
        "dgx1v-healthy",
        "dgx1v",
        "gpu:tesla_v100-sxm2-32gb:8",
    ) else {
        return;
    };
    let (gpus, text) = detected_in_order(&c, &rig, &files(8, |i| i));
    // The cube mesh of the fixture (NVML's link counts, -1 at the NVML index).
    assert_eq!(gpus[0].1, "-1,1,1,2,2,0,0,0", "{text}");
    assert_eq!(gpus[7].1, "0,0,0,1,2,1,2,-1", "{text}");
    assert!(gpus.iter().all(|g| g.2 == "tesla_v100-sxm2-32gb"), "{text}");
    assert_gres_conf_agrees(&c, &rig, &gpus);

    // Under the running slurmd, GPU 5 gets an uncorrectable ECC error and GPU 6 falls off the
    // bus (NVML answers GPU_IS_LOST; the driver still lists it).
    change_nvml(&rig, "dgx1v-faults");
    let h = wait_faulty(&c, &[5, 6]);
    assert_eq!(h.gpus[5].device.minor, Some(5), "{h:?}");
    assert_eq!(h.gpus[6].device.minor, Some(6), "{h:?}");

    // Six GPUs: exactly the healthy ones. Then a pair: an NV2 pair of the healthy ones.
    let six = c.sbatch(&["--gres=gpu:6", "-w", "n1", "--wrap", "sleep 300"]);
    c.wait_state(six, "RUNNING", WAIT);
    let idx = c.gres_idx(six);
    if select() == "gputopo" {
        assert_eq!(idx[0].1, vec![0, 1, 2, 3, 4, 7], "faulty GPUs allocated");
    }
    c.ok("scancel", &[&six.to_string()]);
    c.wait_until("the 6-GPU job to end", WAIT, || c.running_jobs().is_empty());
    let pair = c.sbatch(&["--gres=gpu:2", "-w", "n1", "--wrap", "sleep 300"]);
    c.wait_state(pair, "RUNNING", WAIT);
    let p = &c.gres_idx(pair)[0].1;
    if select() == "gputopo" {
        let nv2 = [
            (0, 3),
            (0, 4),
            (1, 2),
            (1, 5),
            (2, 3),
            (4, 7),
            (6, 7),
            (5, 6),
        ];
        assert!(
            p.len() == 2 && nv2.contains(&(p[0], p[1])) && !p.contains(&5) && !p.contains(&6),
            "{p:?} is not a healthy NV2 pair"
        );
    }
}

#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn nvswitch_board_detected_by_slurm_publishes_nv18() {
    let Some((rig, c)) = start(
        "ad-hgx",
        "nvswitch8",
        "hgx-h100",
        "gpu:nvidia_h100_80gb_hbm3:8",
    ) else {
        return;
    };
    let (gpus, text) = detected_in_order(&c, &rig, &files(8, |i| i));
    // Slurm counts only GPU-to-GPU links: behind NVSwitches it sees none.
    for (i, g) in gpus.iter().enumerate() {
        let want: Vec<&str> = (0..8).map(|j| if i == j { "-1" } else { "0" }).collect();
        assert_eq!(g.1, want.join(","), "{text}");
    }
    // gputopo gres-conf writes the same files in the same order, with the switch links counted.
    let mine = agent_gres(&c, &rig);
    assert_eq!(
        mine.iter().map(|m| m.0.clone()).collect::<Vec<_>>(),
        files(8, |i| i)
    );
    assert!(mine[0].1.starts_with("-1,18,18"), "{mine:?}");
    // The fixture's XID 79 on GPU 3 is published under Slurm's index 3, with the NV18 matrix.
    let h = wait_faulty(&c, &[3]);
    let links = h.links.expect("the NV18 matrix");
    assert_eq!((links.get(0, 7), links.get(3, 4)), (Some(18), Some(18)));
    let job = c.sbatch(&["--gres=gpu:7", "-w", "n1", "--wrap", "sleep 300"]);
    c.wait_state(job, "RUNNING", WAIT);
    if select() == "gputopo" {
        assert_eq!(c.gres_idx(job)[0].1, vec![0, 1, 2, 4, 5, 6, 7]);
    }
}

#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn pcie_box_in_nvml_order_gets_health_on_the_right_device() {
    // NVML index i is /dev/nvidia(7-i); the ECC fault is on /dev/nvidia5, NVML 2.
    let Some((rig, c)) = start("ad-pcie", "pcie8-ecc5", "pcie8", "gpu:nvidia_l40s:8") else {
        return;
    };
    // Slurm numbers them in NVML order.
    let (gpus, _) = detected_in_order(&c, &rig, &files(8, |i| 7 - i));
    assert_gres_conf_agrees(&c, &rig, &gpus);
    let h = wait_faulty(&c, &[2]);
    assert_eq!(h.gpus[2].device.minor, Some(5), "{h:?}");
    super::identity::seven_of_eight_without_gpu_2(&c);
}

#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn autodetect_nvidia_numbers_by_device_file_and_gets_health_right() {
    // Slurm 24.11's gpu/nvidia reads the driver's files, not NVML: on the PCIe box whose NVML
    // order runs against its minors, GPU j is /dev/nvidiaj, so the ECC fault on /dev/nvidia5 is
    // Slurm's GPU 5 here (GPU 2 with AutoDetect=nvml).
    let Some((rig, c)) = start_detecting(
        "nvidia",
        "ad-nvidia",
        "pcie8-ecc5",
        "pcie8",
        "gpu:nvidia_l40s:8",
    ) else {
        return;
    };
    let (gpus, text) = detected_in_order(&c, &rig, &files(8, |i| i));
    assert!(
        gpus.iter()
            .all(|g| g.2 == "nvidia_l40s" && (g.1.is_empty() || g.1 == "(null)")),
        "gpu/nvidia: the model as type, no links:\n{text}"
    );
    let h = wait_faulty(&c, &[5]);
    assert_eq!(h.gpus[5].device.minor, Some(5), "{h:?}");
    let job = c.sbatch(&["--gres=gpu:7", "-w", "n1", "--wrap", "sleep 300"]);
    c.wait_state(job, "RUNNING", WAIT);
    let idx = c.gres_idx(job)[0].1.clone();
    if select() == "gputopo" {
        assert_eq!(idx, vec![0, 1, 2, 3, 4, 6, 7], "faulty GPU 5 allocated");
    }
}

#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn a100_mig_instances_detected_by_slurm_get_their_gpus_health() {
    // Two A100s in MIG mode: GPU 0 has one 3g.20gb and two 1g.5gb instances, GPU 1 two 3g.20gb.
    let Some((rig, c)) = start(
        "ad-mig",
        "a100-mig",
        "a100-pcie4",
        "gpu:nvidia_a100_3g.20gb:3,gpu:nvidia_a100_1g.5gb:2",
    ) else {
        return;
    };
    let (gpus, text) = detected(&c, &rig);
    // Slurm's MIG records: the parent's device file and the GPU and compute instances' caps
    // (minors from /proc/driver/nvidia-caps/mig-minors), the profile as the type, no links.
    let cap = |gpu: u32, gi: u32, ci: u32| {
        let base = 3 + gpu * 135 + gi * 9;
        format!(
            "/dev/nvidia{gpu},/dev/nvidia-caps/nvidia-cap{base},/dev/nvidia-caps/nvidia-cap{}",
            base + 1 + ci
        )
    };
    let mut got: Vec<(String, String)> = gpus.iter().map(|g| (g.0.clone(), g.2.clone())).collect();
    got.sort();
    let mut want = vec![
        (cap(0, 1, 0), "nvidia_a100_3g.20gb".to_string()),
        (cap(0, 5, 0), "nvidia_a100_1g.5gb".to_string()),
        (cap(0, 6, 0), "nvidia_a100_1g.5gb".to_string()),
        (cap(1, 1, 0), "nvidia_a100_3g.20gb".to_string()),
        (cap(1, 2, 0), "nvidia_a100_3g.20gb".to_string()),
    ];
    want.sort();
    assert_eq!(got, want, "slurmd -G:\n{text}");
    // Links=: none from 24.11 on; 22.05.8 writes -1 at the instance's index within its GPU and
    // sorts by it, so the order differs (the agent follows either).
    let gpu0: Vec<usize> = (0..gpus.len())
        .filter(|&i| gpus[i].0.starts_with("/dev/nvidia0,"))
        .collect();
    let gpu1_3g: Vec<usize> = (0..gpus.len())
        .filter(|&i| gpus[i].0.starts_with("/dev/nvidia1,"))
        .collect();
    assert_eq!((gpu0.len(), gpu1_3g.len()), (3, 2), "{text}");
    // GPU 0 gets uncorrectable ECC errors under the running slurmd: the agent publishes its
    // three instances faulty under Slurm's indices for them, GPU 1's two ok.
    change_nvml(&rig, "a100-mig-ecc0");
    let h = wait_faulty(&c, &gpu0);
    assert_eq!(h.gpus.len(), 5, "{h:?}");
    assert!(
        gpu1_3g
            .iter()
            .all(|&i| h.gpus[i].status == Status::Ok && h.gpus[i].device.minor == Some(1)),
        "{h:?}"
    );
    // A 3g.20gb instance: gputopo gives a healthy one (GPU 1's); stock cons_tres, which knows no
    // health, the first, GPU 0's faulty one.
    let job = c.sbatch(&[
        "--gres=gpu:nvidia_a100_3g.20gb:1",
        "-w",
        "n1",
        "--wrap",
        "sleep 300",
    ]);
    c.wait_state(job, "RUNNING", WAIT);
    let idx = c.gres_idx(job)[0].1.clone();
    assert_eq!(idx.len(), 1, "{idx:?}");
    if select() == "gputopo" {
        assert!(
            gpu1_3g.contains(&idx[0]),
            "faulty instance allocated: {idx:?}"
        );
    } else {
        assert_eq!(idx, vec![0], "stock cons_tres knows no health");
    }
}
