//! Device identity end to end (issue 14): when Slurm numbers GPUs in NVML order, the agent
//! publishes each verdict under Slurm's index for that device, and the plugin never hands the
//! faulty device to a job.
//!
//! One pcie8 node: NVML device i is /dev/nvidia(7-i) (tests/fixtures/nvml/pcie8-ecc5.fx), with an
//! uncorrectable ECC error on /dev/nvidia5 (NVML 2). gres.conf is plain (`Type=` and `File=`
//! in minor order); `fake_gpus.conf`, which slurmd reads in place of NVML, lists the devices the
//! way NVML's autodetection would (`Links=` with -1 at the NVML index), so slurmd merges and
//! numbers them in NVML order: /dev/nvidia5 is Slurm's GPU 2. `slurmd -G` (slurmd's final GPU
//! list, in index order) shows that from Slurm itself.

use super::agent::{Rig, health};
use super::harness::{Cluster, Opts, WAIT, e2e_enabled, select};
use gputopo_core::health::Status;
use std::path::Path;

/// fake_gpus.conf for n1: NVML order, -1 at the NVML index, /dev/nvidia(7-i).
fn fake_gpus() -> String {
    (0..8)
        .map(|i| {
            let links: Vec<&str> = (0..8).map(|j| if i == j { "-1" } else { "0" }).collect();
            let cores = if i < 4 { "0-15" } else { "16-31" };
            format!(
                "l40s|32|{cores}|{}|@DIR@/dev/n1/nvidia{}\n",
                links.join(","),
                7 - i
            )
        })
        .collect()
}

/// slurmd's final GPU list for n1 (`slurmd -G`), device files in Slurm's index order.
fn slurmd_gpus(c: &Cluster) -> (Vec<String>, String) {
    let conf = c.etc().join("slurm.conf");
    let out = c.run(
        "slurmd",
        &["-G", "-f", &conf.display().to_string(), "-N", "n1"],
    );
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let files = text
        .lines()
        .filter(|l| l.contains("Gres Name=gpu "))
        .filter_map(|l| l.split_whitespace().find_map(|w| w.strip_prefix("File=")))
        .map(str::to_string)
        .collect();
    (files, text)
}

fn dev(c: &Cluster, minor: u32) -> String {
    format!("{}/dev/n1/nvidia{minor}", c.dir().display())
}

/// `gputopo` on this node against the fake NVML, with the cluster's configuration.
fn agent(c: &Cluster, fixture: &str, args: &[&str]) -> String {
    let fx = super::harness::repo()
        .join("tests/fixtures/nvml")
        .join(fixture);
    let out = c
        .cmd(&super::harness::gputopo_bin().display().to_string())
        .args(args)
        .env("GPUTOPO_CONF", c.etc().join("gputopo.conf"))
        .env("FAKE_NVML_FIXTURE", fx)
        .output()
        .expect("run gputopo");
    assert!(
        out.status.success(),
        "gputopo {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A 7-GPU job on n1, whose GPU 2 is faulty: gputopo leaves out exactly GPU 2; stock
/// cons_tres, which knows nothing of health, takes the first seven and with them GPU 2.
pub(super) fn seven_of_eight_without_gpu_2(c: &Cluster) -> u32 {
    let job = c.sbatch(&["--gres=gpu:7", "-w", "n1", "--wrap", "sleep 300"]);
    c.wait_state(job, "RUNNING", WAIT);
    let idx = c.gres_idx(job);
    assert_eq!(idx.len(), 1, "{idx:?}");
    if select() == "gputopo" {
        assert_eq!(
            idx[0].1,
            vec![0, 1, 3, 4, 5, 6, 7],
            "faulty GPU 2 allocated"
        );
    } else {
        assert!(idx[0].1.contains(&2), "{idx:?}");
    }
    job
}

#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn nvml_ordered_slurm_gets_health_on_the_right_device() {
    if !e2e_enabled() {
        return;
    }
    let rig = Rig::new("identity", &[("n1", "pcie8-ecc5")]);
    let c = Cluster::up(Opts {
        nodes: 1,
        topology: "pcie8".into(),
        plain_gres: true,
        fake_gpus: Some(fake_gpus()),
        gputopo_conf: Some(rig.conf("")),
        health_program: Some(rig.wrapper()),
        health_interval: 5,
        ..Opts::default()
    });

    // Slurm's own order: GPU 2 is /dev/nvidia5 (gres.conf lists it sixth).
    let (files, text) = slurmd_gpus(&c);
    let want: Vec<String> = (0..8).map(|i| dev(&c, 7 - i)).collect();
    assert_eq!(files, want, "slurmd -G:\n{text}");

    // The agent publishes the fault under index 2, naming the device.
    c.wait_until("n1 to publish its GPU health", WAIT, || {
        health(&c, "n1").is_some()
    });
    let h = health(&c, "n1").expect("n1 health");
    let faulty: Vec<usize> = h.with_status(Status::Faulty).iter().collect();
    assert_eq!(faulty, vec![2], "{h:?}");
    assert_eq!(h.gpus[2].device.minor, Some(5));
    assert_eq!(h.gpus[2].device.bus.as_deref(), Some("3d:00.0"));
    assert!(h.time.is_some(), "the report carries its time");

    // A 7-GPU job: gputopo leaves out exactly the faulty device; stock cons_tres, which knows
    // nothing of health, takes the first seven and with them the faulty one.
    let job = seven_of_eight_without_gpu_2(&c);

    // `gputopo nodes` says the same, readably, with the job holding each GPU.
    let table = c.ok(
        &super::harness::gputopo_bin().display().to_string(),
        &["nodes", "n1"],
    );
    let row = |gpu: &str| -> Vec<String> {
        table
            .lines()
            .map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
            .find(|w| w.len() >= 7 && w[0] == "n1" && w[1] == gpu)
            .unwrap_or_else(|| panic!("no row for GPU {gpu}:\n{table}"))
    };
    let two = row("2");
    assert_eq!(&two[2..4], ["faulty", "nvidia5@3d:00.0"], "{table}");
    assert_eq!(two[6], "ecc_uncorrectable", "{table}");
    assert_eq!(
        &row("0")[3..5],
        ["nvidia7@1a:00.0".to_string(), job.to_string()],
        "{table}"
    );

    // `gputopo gres-conf` on this node writes lines slurmd keeps, all eight, in its order;
    // lines in minor order with Links= (what it wrote before) are all rejected.
    let gres = c.etc().join("gres.conf");
    let prefix = format!("{}/dev/n1/nvidia", c.dir().display());
    let generated = agent(
        &c,
        "pcie8.fx",
        &[
            "gres-conf",
            "--node",
            "n1",
            "--file-prefix",
            &prefix,
            "--type",
            "l40s",
        ],
    );
    // Cores= is left out: this 2-core host emulates 32-core nodes (config_overrides), and slurmd
    // translates gres.conf's core ids through the host's real CPU topology before comparing
    // them with fake_gpus.conf's, so no Cores= could match here. Order and Links= are the test.
    let generated: String = generated
        .lines()
        .map(|l| {
            let words: Vec<&str> = l.split(' ').filter(|w| !w.starts_with("Cores=")).collect();
            words.join(" ") + "\n"
        })
        .collect();
    std::fs::write(&gres, &generated).expect("write gres.conf");
    let (files, text) = slurmd_gpus(&c);
    assert_eq!(
        files, want,
        "gres-conf output:\n{generated}\nslurmd -G:\n{text}"
    );
    assert!(!text.contains("mismatching"), "{text}");
    let minor_order: String = (0..8)
        .map(|m| {
            let links: Vec<&str> = (0..8).map(|j| if j == m { "-1" } else { "0" }).collect();
            format!(
                "NodeName=n1 Name=gpu Type=l40s File={prefix}{m} Links={}\n",
                links.join(",")
            )
        })
        .collect();
    std::fs::write(&gres, minor_order).expect("write gres.conf");
    let (files, text) = slurmd_gpus(&c);
    assert!(files.is_empty(), "{text}");
    assert!(text.contains("mismatching Cores or Links"), "{text}");
    assert!(Path::new(&dev(&c, 5)).exists());
}
