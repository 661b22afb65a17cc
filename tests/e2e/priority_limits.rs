//! Accounting limits that depend on accrued usage (issue 24 item 1): the same workload under
//! stock `priority/multifactor` and under `priority/gputopo`, with slurmdbd and
//! `AccountingStorageEnforce=associations,limits,safe`, must leave Slurm's accounting policy
//! with the same usage and take the same decisions.
//!
//! In multifactor the priority plugin charges every job's usage to its association chain and
//! QOS (`usage_tres_raw`, `grp_used_wall`, ...) and nothing else in Slurm does; what
//! `GrpTRESMins` and friends enforce is that usage. One slurmdbd serves both clusters (each
//! its own `ClusterName`, so `sacct` keeps their jobs apart); the multifactor cluster runs
//! first, then the gputopo cluster, each from an empty state.

use std::collections::BTreeMap;

use super::harness::{Cluster, Opts, Slurmdbd, WAIT, e2e_enabled};

/// The slurm.conf lines of both clusters, besides slurmdbd's.
const CONF: &str = "\
AccountingStorageEnforce=associations,limits,safe
AccountingStorageTRES=gres/gpu
PriorityCalcPeriod=1
PriorityWeightFairshare=10000
";

/// What one plugin's cluster showed after the workload.
#[derive(Debug, Default)]
struct Observed {
    /// Job name → (state, reason) once the scheduler has decided.
    decisions: BTreeMap<&'static str, (String, String)>,
    /// Account → `GrpTRESMins` usage of gres/gpu (minutes, `scontrol show assoc_mgr`).
    gpu_minutes: BTreeMap<&'static str, u64>,
}

/// Waits until the scheduler has decided about `job` (running or done, or pending for a reason
/// other than waiting its turn) and returns its state and reason.
fn decision(c: &Cluster, job: u32) -> (String, String) {
    let mut seen = (String::new(), String::new());
    c.wait_until(&format!("a decision about job {job}"), WAIT, || {
        let state = c.job_state(job).unwrap_or_default();
        let reason = c.job_reason(job).unwrap_or_default();
        seen = (state.clone(), reason.clone());
        state != "PENDING" || !matches!(reason.as_str(), "None" | "Priority" | "Resources")
    });
    seen
}

/// The used value of `tres` in the `key=limit(used),...` list of `key` in an
/// `scontrol show assoc_mgr` record.
fn used(record: &str, key: &str, tres: &str) -> Option<u64> {
    let list = record
        .split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{key}=")))?;
    list.split(',').find_map(|item| {
        let rest = item.strip_prefix(&format!("{tres}="))?;
        let open = rest.find('(')?;
        rest[open + 1..].trim_end_matches(')').parse().ok()
    })
}

/// The association record of `account` (no user) in `scontrol show assoc_mgr`.
fn account_record(c: &Cluster, account: &str) -> String {
    let out = c.ok(
        "scontrol",
        &[
            "show",
            "assoc_mgr",
            &format!("accounts={account}"),
            "flags=assoc",
        ],
    );
    out.split("ClusterName=")
        .find(|r| r.contains(&format!("Account={account} UserName= ")))
        .unwrap_or_default()
        .to_string()
}

/// The accounts, users and QOS of the workload, with their limits.
fn accounts(dbd: &Slurmdbd) {
    dbd.sacctmgr(&["add", "account", "lim_gpu", "GrpTRESMins=gres/gpu=10"]);
    dbd.sacctmgr(&["add", "user", "root", "account=lim_gpu"]);
}

/// Runs the workload on a fresh cluster with `priority` and reads what it left.
fn run(dbd: &Slurmdbd, cluster: &str, priority: &str, setup: bool) -> Observed {
    let c = Cluster::up(Opts {
        nodes: 1,
        priority: priority.into(),
        extra_conf: Some(format!("{CONF}{}", dbd.conf(cluster))),
        ..Opts::default()
    });
    if setup {
        // After the first slurmctld registered gres/gpu as a TRES: sacctmgr refuses limits
        // on a TRES the database does not know yet. Accounts are made on every registered
        // cluster, so the second cluster finds them.
        accounts(dbd);
    }
    c.wait_until("slurmctld to know the accounts", WAIT, || {
        !account_record(&c, "lim_gpu").is_empty()
    });
    let mut seen = Observed::default();
    // GrpTRESMins=gres/gpu=10: 8 GPUs for 34 s are 4.5 GPU-minutes; the next 8-GPU job asks
    // for 8 more (one minute), which the limit cannot hold any more.
    let gpu = ["-A", "lim_gpu", "--gres=gpu:8", "-t", "1"];
    let first = c.sbatch(&[&gpu[..], &["--wrap", "sleep 34"]].concat());
    c.wait_state(first, "COMPLETED", WAIT);
    let second = c.sbatch(&[&gpu[..], &["--wrap", "sleep 5"]].concat());
    seen.decisions
        .insert("GrpTRESMins second job", decision(&c, second));
    seen.gpu_minutes.insert(
        "lim_gpu",
        used(&account_record(&c, "lim_gpu"), "GrpTRESMins", "gres/gpu").unwrap_or(u64::MAX),
    );
    seen
}

#[test]
#[ignore = "needs root, Slurm, MariaDB and slurmdbd; run by contrib/test-all.sh"]
fn with_slurmdbd_usage_limits_match_multifactor() {
    if !e2e_enabled() {
        return;
    }
    let dbd = Slurmdbd::up(&["lim_mf", "lim_gt"]);
    let stock = run(&dbd, "lim_mf", "multifactor", true);
    let ours = run(&dbd, "lim_gt", "gputopo", false);
    eprintln!("multifactor: {stock:?}\ngputopo: {ours:?}");
    // The reference first: multifactor charged the GPU-minutes and holds the second job.
    assert_eq!(
        stock.gpu_minutes["lim_gpu"], 4,
        "multifactor: 8 GPUs × 34 s"
    );
    assert_eq!(
        stock.decisions["GrpTRESMins second job"],
        ("PENDING".to_string(), "AssocGrpGRESMinutes".to_string()),
        "multifactor"
    );
    assert_eq!(stock.gpu_minutes, ours.gpu_minutes, "GrpTRESMins usage");
    assert_eq!(stock.decisions, ours.decisions, "scheduling decisions");
}
