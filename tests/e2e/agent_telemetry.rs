//! Agent end-to-end tests of issue 13: sustained telemetry makes the planted GPUs degraded and
//! used last, an NVLink that went down leaves the published topology, the job's
//! `SystemComment` explains the pick (or why it waits), and capability labels
//! route jobs on a mixed fleet (`--constraint` through `gputopo features` on every release,
//! `--extra` on 24.11+). The clusters and fixtures come from `super::agent`.

use super::agent::{extra, health, start, start_with};
use super::harness::{Cluster, WAIT, field, release};
use gputopo_core::gpuset::GpuSet;
use gputopo_core::health::Status;

/// Issue 13 item 7: sustained telemetry signals (two health checks in a row) make exactly the
/// planted GPUs degraded, the NVLinks that went down leave the published matrix, and a 2-GPU
/// job then takes the only unthrottled pair (6,7, now PCIe only) instead of an NVLink pair of
/// throttled GPUs, which gputopo would pick on a cool node. The job's `SystemComment` says so
/// (item 6), a job that only n2's faulty GPUs keep from starting names them there and in
/// `squeue`, a 4-GPU job on n3 takes the cool one of two equal quads, and of two equally
/// good nodes a job lands on the cooler one (item 3).
#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn throttled_gpus_are_used_last_and_a_down_nvlink_leaves_the_topology() {
    let Some((rig, c)) = start(
        "telemetry",
        "dgx1v",
        &[
            ("n1", "dgx1v-telemetry"),
            ("n2", "dgx1v-faults"),
            ("n3", "dgx1v-warm-quad"),
            ("n4", "dgx1v-healthy"),
        ],
        // The fixture's GPU 2 is capped in every check: count it after two, like the others.
        "PowerCapRaiseChecks=2\n",
    ) else {
        return;
    };
    // GPU 4's x4 link is a drop only from a wider link the agent saw it train in its slot
    // (the PCIe baseline): n1's agent first sees it at x16 for a whole check, then at x4.
    let fx = rig.fixture("n1");
    let x4 = std::fs::read_to_string(&fx).expect("n1's fixture");
    assert!(x4.contains("PcieWidth=4/16"), "GPU 4 trained x4");
    std::fs::write(&fx, x4.replace("PcieWidth=4/16", "PcieWidth=16/16")).expect("x16");
    let runs = rig.runs_of("n1");
    c.wait_until("a whole health check of n1 at x16", WAIT, || {
        rig.runs_of("n1") >= runs + 2
    });
    std::fs::write(&fx, &x4).expect("x4");
    let degraded =
        |c: &Cluster| health(c, "n1").map_or(GpuSet::EMPTY, |h| h.with_status(Status::Degraded));
    c.wait_until("n1's telemetry signals to be sustained", WAIT, || {
        degraded(&c) == GpuSet::parse_list("1-5").unwrap_or_default()
    });
    let h = health(&c, "n1").expect("n1 health");
    let reasons: Vec<String> = h
        .gpus
        .iter()
        .flat_map(|g| g.reasons.iter().map(|r| format!("{}:{r}", g.index)))
        .collect();
    assert_eq!(
        reasons,
        [
            "1:thermal",
            "2:power_capped",
            "3:hw_slowdown",
            "4:pcie_degraded",
            "5:nvlink_errors"
        ],
        "{}",
        extra(&c, "n1")
    );
    let links = h.links.as_ref().expect("a complete matrix");
    assert_eq!((links.get(6, 7), links.get(4, 7)), (Some(0), Some(2)));
    let job = c.sbatch(&["-w", "n1", "--gres=gpu:2", "--wrap", "sleep 300"]);
    c.wait_state(job, "RUNNING", WAIT);
    assert_eq!(c.gres_idx(job), vec![("n1".to_string(), vec![6, 7])]);
    // NV2 pairs were free, but only of degraded GPUs: the note says the pick is not the best
    // connected one, and that no degraded GPU is used.
    assert_eq!(
        system_comment(&c, job),
        "gputopo: n1 gpus=6-7 link=PCIe-PIX optimal=no(free best NV2) degraded=none"
    );
    let _ = c.run("scancel", &[&job.to_string()]);
    explains_a_job_held_back_by_faulty_gpus(&c);
    let held = a_warm_quad_gives_way_to_the_equal_cool_quad(&c);
    among_equal_nodes_the_cooler_one_first(&c);
    let _ = c.run("scancel", &[&held.to_string()]);
}

/// Issue 13 item 3: n3's GPUs 0-3 run warm (80 C of a 90 C slowdown threshold: ok, published
/// in `w`), 4-7 cool; the two quads connect equally (NV1 bottleneck), so with `PreferCool`
/// (the default) a 4-GPU job gets the cool quad, where the engine alone takes the lowest.
/// The job keeps running (its id is returned) for the node-level check.
fn a_warm_quad_gives_way_to_the_equal_cool_quad(c: &Cluster) -> u32 {
    c.wait_until("n3's warm GPUs to be published", WAIT, || {
        health(c, "n3").map(|h| h.warm.narrow()) == GpuSet::parse_list("0-3").ok()
    });
    assert!(
        extra(c, "n3").contains(r#""w":[0,1,2,3]"#),
        "{}",
        extra(c, "n3")
    );
    let job = c.sbatch(&["-w", "n3", "--gres=gpu:4", "--wrap", "sleep 300"]);
    c.wait_state(job, "RUNNING", WAIT);
    assert_eq!(c.gres_idx(job), vec![("n3".to_string(), vec![4, 5, 6, 7])]);
    assert_eq!(
        system_comment(c, job),
        "gputopo: n3 gpus=4-7 link=NV1 optimal=yes degraded=none"
    );
    job
}

/// Issue 13 item 3, node level: with n3's cool quad held, its free GPUs are its warm quad;
/// n4 (all cool) gets its quad 0-3 held, so its free GPUs are its other quad. The two nodes
/// are equally good otherwise (same quad, same fit), so a 4-GPU job that may run on either
/// lands on the cool n4, where cons_tres's own order (lowest index) takes n3.
fn among_equal_nodes_the_cooler_one_first(c: &Cluster) {
    c.wait_until("n4's health to be published", WAIT, || {
        health(c, "n4").is_some_and(|h| h.warm.narrow().is_empty())
    });
    let hold = c.sbatch(&["-w", "n4", "--gres=gpu:4", "--wrap", "sleep 300"]);
    c.wait_state(hold, "RUNNING", WAIT);
    assert_eq!(c.gres_idx(hold), vec![("n4".to_string(), vec![0, 1, 2, 3])]);
    let job = c.sbatch(&["-x", "n1,n2", "--gres=gpu:4", "--wrap", "sleep 300"]);
    c.wait_state(job, "RUNNING", WAIT);
    assert_eq!(c.gres_idx(job), vec![("n4".to_string(), vec![4, 5, 6, 7])]);
    let _ = c.run("scancel", &[&hold.to_string(), &job.to_string()]);
}

/// The `SystemComment=` line of the job's record (empty when absent).
fn system_comment(c: &Cluster, job: u32) -> String {
    c.job_record(job)
        .lines()
        .find_map(|l| l.trim().strip_prefix("SystemComment="))
        .unwrap_or_default()
        .trim_end()
        .to_string()
}

/// Issue 13 item 6, pending side: n2 has GPUs 5 and 6 faulty, so a job that needs all 8 of
/// n2's GPUs waits, and its `SystemComment` (in `scontrol show job` and `squeue`) names the
/// node and the faulty GPUs.
fn explains_a_job_held_back_by_faulty_gpus(c: &Cluster) {
    c.wait_until("n2's faulty GPUs to be published", WAIT, || {
        health(c, "n2").map(|h| h.with_status(Status::Faulty)) == GpuSet::parse_list("5-6").ok()
    });
    let job = c.sbatch(&["-w", "n2", "--gres=gpu:8", "--wrap", "true"]);
    let want = "gputopo: pending, nodes withheld for faulty or drained GPUs: n2[5-6]";
    c.wait_until("the pending job's note", WAIT, || {
        system_comment(c, job) == want
    });
    assert_eq!(c.job_state(job).as_deref(), Some("PENDING"));
    let squeue = c.ok(
        "squeue",
        &["-h", "-j", &job.to_string(), "-O", "system_comment:200"],
    );
    assert_eq!(squeue.trim(), want);
    let _ = c.run("scancel", &[&job.to_string()]);
}

/// Issue 13 item 4: on a mixed fleet (V100 16 GB, A100 80 GB, H100 80 GB) the agent publishes
/// capability labels next to the health, `gputopo features` turns them into `Features=` that
/// route `--constraint` on every release, and on 24.11+ `--extra` routes on the labels
/// themselves (numbers compared as numbers).
#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn capability_labels_route_jobs_on_a_mixed_fleet() {
    let extra_constraints = !release().starts_with("22.");
    let Some((_rig, c)) = start_with(
        "labels",
        "dgx1v",
        &[
            ("n1", "fleet-v100-16"),
            ("n2", "fleet-a100-80"),
            ("n3", "fleet-h100-80"),
        ],
        "",
        extra_constraints.then(|| "SchedulerParameters=bf_interval=1,extra_constraints\n".into()),
    ) else {
        return;
    };
    c.wait_until("every node to publish its labels", WAIT, || {
        ["n1", "n2", "n3"]
            .iter()
            .all(|n| extra(&c, n).contains("\"gpu_model\""))
    });
    assert!(
        extra(&c, "n3").starts_with(
            r#"{"gpu_ok":8,"gpu_model":"H100","gpu_mem_gib":80,"cc":9.0,"gpu_count":8,"nvlink":true,"nvswitch":false,"gputopo":"#
        ),
        "{}",
        extra(&c, "n3")
    );
    let bin = super::harness::gputopo_bin();
    let out = c
        .cmd(&bin.to_string_lossy())
        .arg("features")
        .output()
        .expect("gputopo features");
    let features = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        features,
        "NodeName=n1 Features=v100,gpumem16,cc70,nvlink\n\
         NodeName=n2 Features=a100,gpumem80,cc80,nvlink\n\
         NodeName=n3 Features=h100,gpumem80,cc90,nvlink\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for line in features.lines() {
        let mut words = line.split(' ');
        let (node, f) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
        let f = f.trim_start_matches("Features=");
        let (avail, active) = (
            format!("AvailableFeatures={f}"),
            format!("ActiveFeatures={f}"),
        );
        c.ok("scontrol", &["update", node, &avail, &active]);
    }
    let runs_on = |opt: &str, node: &str| {
        let job = c.sbatch(&[opt, "--gres=gpu:1", "--wrap", "true"]);
        c.wait_state(job, "COMPLETED", WAIT);
        let rec = c.job_record(job);
        assert_eq!(field(&rec, "NodeList"), Some(node), "{opt}:\n{rec}");
    };
    runs_on("--constraint=gpumem80&cc90", "n3");
    runs_on("--constraint=a100", "n2");
    if extra_constraints {
        runs_on("--extra=gpu_mem_gib>=80&cc>=9.0", "n3");
        runs_on("--extra=gpu_mem_gib>=80&cc<9.0", "n2");
        runs_on("--extra=gpu_model=V100", "n1");
    }
}

/// Issue 13 items 5 and 7: four GB200 trays in two NVLink domains, interleaved (n1, n3 in
/// rack 1; n2, n4 in rack 2). Without a topology plugin Slurm gives a 2-node job the lowest
/// nodes, n1 and n2, across the domains; with the `topology.conf` that `gputopo
/// topology-conf` writes from what the nodes published (`topology/block` on 24.11,
/// `topology/tree` with `--tree` on 22.05, which has no block plugin), the job stays inside
/// one domain (either: on 22.05.8 tree takes n[2,4]), with select/gputopo steering the nodes.
#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn a_two_node_job_stays_inside_one_nvlink_domain() {
    let block = !release().starts_with("22.");
    let Some((_rig, c)) = start(
        "domains",
        "gb200-nvl72-tray",
        &[
            ("n1", "gb200-rack1"),
            ("n2", "gb200-rack2"),
            ("n3", "gb200-rack1"),
            ("n4", "gb200-rack2"),
        ],
        "",
    ) else {
        return;
    };
    c.wait_until("every node to publish its NVLink domain", WAIT, || {
        c.nodes()
            .iter()
            .all(|n| extra(&c, n).contains("\"nvlink_domain\""))
    });
    let two_nodes = |c: &Cluster| {
        let job = c.sbatch(&["-N2", "--gres=gpu:4", "--wrap", "true"]);
        c.wait_state(job, "COMPLETED", WAIT);
        field(&c.job_record(job), "NodeList")
            .unwrap_or("")
            .to_string()
    };
    assert_eq!(two_nodes(&c), "n[1-2]", "no topology: the lowest nodes");
    let bin = super::harness::gputopo_bin();
    let mut cmd = c.cmd(&bin.to_string_lossy());
    cmd.arg("topology-conf");
    if !block {
        cmd.arg("--tree");
    }
    let out = cmd.output().expect("gputopo topology-conf");
    let conf = String::from_utf8_lossy(&out.stdout).into_owned();
    let key = if block { "BlockName" } else { "SwitchName" };
    let groups: Vec<&str> = conf.lines().filter(|l| l.starts_with(key)).collect();
    assert_eq!(
        groups,
        [
            format!("{key}=nvl1 Nodes=n1,n3"),
            format!("{key}=nvl2 Nodes=n2,n4")
        ],
        "{conf}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(c.etc().join("topology.conf"), &conf).expect("topology.conf");
    let plugin = if block {
        "topology/block"
    } else {
        "topology/tree"
    };
    let slurm_conf = c.etc().join("slurm.conf");
    let text = std::fs::read_to_string(&slurm_conf).expect("slurm.conf");
    std::fs::write(&slurm_conf, format!("{text}TopologyPlugin={plugin}\n")).expect("slurm.conf");
    c.restart_slurmctld();
    let inside = two_nodes(&c);
    assert!(
        ["n[1,3]", "n[2,4]"].contains(&inside.as_str()),
        "one NVLink domain, got {inside}"
    );
}
