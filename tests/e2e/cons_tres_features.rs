//! The cons_tres features Slurm enables by the *text* of `SelectType` (issue 11 item 3).
//!
//! Several checks in Slurm ask "is this cons_tres?" with `xstrstr(select_type, "cons_tres")`
//! rather than by the plugin id, so the plugin's type is `select/gputopo_cons_tres`
//! (docs/deployment.md, "Why the name contains cons_tres"). One cluster, every check, the same
//! assertions with the stock plugin (`GPUTOPO_SELECT=cons_tres`), so both answer alike:
//! - `SelectTypeParameters` unset: slurmctld runs with Slurm's default, `CR_CORE_MEMORY`
//!   (24.11+ sets it in read_config.c only for a cons_tres name; 22.05's cons_tres sets it);
//! - `MaxNodeCount` is accepted (read_config.c refuses it for other names);
//! - `TaskPluginParam=SlurmdSpecOverride` (25.05+) is accepted;
//! - dynamic nodes: `scontrol create`/`delete nodename=...` (node_mgr.c), a created node
//!   registers and runs a GPU job, and `slurmd -Z` (slurmd.c and node_mgr.c) registers a node
//!   that runs a GPU job;
//! - job expansion (`--dependency=expand:`) keeps the new job's own GPU request, as for
//!   heterogeneous GRES (job_scheduler.c's `select_hetero`; with another name Slurm copies the
//!   expanded job's request over it).

use super::harness::{Cluster, Opts, WAIT, e2e_enabled, field, release_at_least};

/// `scontrol show config` run with `edit(slurm.conf)` written to etc/`name`: the exit status
/// says whether Slurm's commands accept that file (every one parses it the same way).
fn parse_with(c: &Cluster, name: &str, edit: impl Fn(&str) -> String) -> (bool, String) {
    let text = std::fs::read_to_string(c.etc().join("slurm.conf")).expect("read slurm.conf");
    let path = c.etc().join(name);
    std::fs::write(&path, edit(&text)).expect("write a slurm.conf variant");
    let out = c
        .cmd("scontrol")
        .env("SLURM_CONF", &path)
        .args(["show", "config"])
        .output()
        .expect("run scontrol");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A slurm.conf line replaced (or appended when missing).
fn with_line(text: &str, key: &str, line: &str) -> String {
    let mut out: Vec<&str> = text
        .lines()
        .filter(|l| {
            !l.to_ascii_lowercase()
                .starts_with(&format!("{}=", key.to_ascii_lowercase()))
        })
        .collect();
    out.push(line);
    out.join("\n") + "\n"
}

/// Waits until `node` is idle, then runs a 2-GPU batch job on it and returns its output.
fn gpu_job_on(c: &Cluster, node: &str) -> String {
    c.wait_until(&format!("{node} to register idle"), WAIT, || {
        let out = c.run("sinfo", &["-h", "-N", "-n", node, "-o", "%T"]);
        String::from_utf8_lossy(&out.stdout).trim() == "idle"
    });
    let job = c.sbatch(&[
        "-w",
        node,
        "--mem=1000",
        "--gres=gpu:2",
        "--wrap",
        "echo CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES",
    ]);
    c.wait_state(job, "COMPLETED", WAIT);
    c.wait_until(&format!("job {job}'s output"), WAIT, || {
        c.job_output(job).contains("CUDA_VISIBLE_DEVICES=")
    });
    c.job_output(job)
}

/// The gres.conf line of a dynamic node: two of n1's fake devices.
fn add_gres(c: &Cluster, node: &str, devices: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(c.etc().join("gres.conf"))
        .expect("open gres.conf");
    let dev = c.dir().join("dev/n1");
    writeln!(
        f,
        "NodeName={node} Name=gpu File={}/nvidia[{devices}]",
        dev.display()
    )
    .expect("append to gres.conf");
}

const NODE_HW: &str = "CPUs=4 Boards=1 SocketsPerBoard=1 CoresPerSocket=4 ThreadsPerCore=1 RealMemory=4000 Gres=gpu:2";

#[test]
#[ignore = "needs root and Slurm; run by contrib/test-all.sh"]
fn cons_tres_features_gated_on_the_select_type_name_work() {
    if !e2e_enabled() {
        return;
    }
    let c = Cluster::up(Opts {
        extra_conf: Some(
            "SelectTypeParameters=\nMaxNodeCount=6\nSchedulerParameters=bf_interval=1,permit_job_expansion\n"
                .into(),
        ),
        ..Opts::default()
    });
    let config = c.ok("scontrol", &["show", "config"]);

    // Default SelectTypeParameters, and MaxNodeCount accepted (slurmctld started with it).
    let value = |key: &str| {
        config
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once('=')?;
                (k.trim() == key).then(|| v.trim().to_string())
            })
            .unwrap_or_default()
    };
    assert_eq!(value("SelectTypeParameters"), "CR_CORE_MEMORY");
    assert_eq!(value("MaxNodeCount"), "6");
    // The reason: the same file with the old name is refused by every command.
    let (ok, err) = parse_with(&c, "old-name.conf", |t| {
        with_line(t, "SelectType", "SelectType=select/gputopo")
    });
    assert!(
        !ok && err.contains("MaxNodeCount only compatible with cons_tres"),
        "select/gputopo + MaxNodeCount: {err}"
    );

    // TaskPluginParam=SlurmdSpecOverride (25.05+; needs task/cgroup, which only slurmd loads).
    if release_at_least(25, 5) {
        let (ok, err) = parse_with(&c, "spec-override.conf", |t| {
            let t = with_line(t, "TaskPlugin", "TaskPlugin=task/cgroup");
            with_line(&t, "TaskPluginParam", "TaskPluginParam=SlurmdSpecOverride")
        });
        assert!(ok, "TaskPluginParam=SlurmdSpecOverride refused: {err}");
    }

    // Job expansion: the expanding job keeps its own GPU request (heterogeneous GRES).
    let first = c.sbatch(&["--mem=1000", "--gres=gpu:2", "--wrap", "sleep 300"]);
    c.wait_state(first, "RUNNING", WAIT);
    let dep = format!("--dependency=expand:{first}");
    let expand = c.sbatch(&[
        "--hold",
        "--mem=1000",
        &dep,
        "--gres=gpu:1",
        "--wrap",
        "true",
    ]);
    let per_node = field(&c.job_record(expand), "TresPerNode")
        .unwrap_or("")
        .to_string();
    assert!(
        per_node.ends_with("gpu:1"),
        "the expanding job asked for 1 GPU per node, Slurm has TresPerNode={per_node}"
    );
    c.ok("scancel", &[&first.to_string(), &expand.to_string()]);
    // Gone, not only cancelled: n1's slurmd must end the job before it stops below (otherwise
    // its slurmstepd outlives the slurmd and the teardown waits minutes for it).
    c.wait_until("the expansion jobs to end", WAIT, || {
        c.ok("squeue", &["-h", "-o", "%A"]).trim().is_empty()
    });

    // The dynamic nodes' slurmd listen on SlurmdPort, n1's port (22.05 ignores a created
    // node's Port= and starts `slurmd -Z` there), one at a time: n1's slurmd stops first.
    c.stop_slurmd("n1");

    // scontrol create/delete node; a created node registers and runs a GPU job.
    c.ok(
        "scontrol",
        &["create", &format!("NodeName=d0 {NODE_HW} State=FUTURE")],
    );
    let shown = c.ok("scontrol", &["--future", "show", "node", "d0"]);
    assert!(shown.contains("NodeName=d0"), "created node d0: {shown}");
    c.ok("scontrol", &["delete", "NodeName=d0"]);
    let line = format!("NodeName=d1 NodeAddr=127.0.0.1 {NODE_HW}");
    c.ok("scontrol", &["create", &format!("{line} State=FUTURE")]);
    // Its slurmd: the cluster's slurm.conf plus the node's line (the controller has it already).
    let conf = std::fs::read_to_string(c.etc().join("slurm.conf")).expect("read slurm.conf");
    let d1_conf = c.etc().join("slurm-d1.conf");
    std::fs::write(&d1_conf, format!("{conf}{line}\n")).expect("write slurm-d1.conf");
    add_gres(&c, "d1", "2-3");
    std::fs::create_dir_all(c.dir().join("spool/d1")).expect("spool dir");
    c.ok(
        "slurmd",
        &["-f", &d1_conf.display().to_string(), "-N", "d1"],
    );
    let out = gpu_job_on(&c, "d1");
    assert!(out.contains("CUDA_VISIBLE_DEVICES=0,1"), "job on d1: {out}");
    c.stop_slurmd("d1");

    // slurmd -Z: a node that creates itself.
    add_gres(&c, "d2", "0-1");
    std::fs::create_dir_all(c.dir().join("spool/d2")).expect("spool dir");
    let conf = c.etc().join("slurm.conf");
    c.ok(
        "slurmd",
        &[
            "-f",
            &conf.display().to_string(),
            "-N",
            "d2",
            "-Z",
            "--conf",
            NODE_HW,
        ],
    );
    let out = gpu_job_on(&c, "d2");
    assert!(out.contains("CUDA_VISIBLE_DEVICES=0,1"), "job on d2: {out}");
    let state = c.show_node("d2");
    assert!(
        state.contains("DYNAMIC_NORM"),
        "d2 is a dynamic node: {state}"
    );
}
