//! What a cluster shows of usage and limits, read the way an administrator reads it:
//! `scontrol show assoc_mgr` (the limits with their used values), `sshare -l` (raw usage per
//! association and TRES, run-minutes) and `sacct` (the jobs), and how two clusters' readings
//! are compared.
//!
//! The two clusters run the same workload one after the other, so their jobs last a few
//! hundred milliseconds more or less: amounts that grow with time are compared with a
//! tolerance of [`close`]; states, reasons, limits and job records exactly.

use std::collections::BTreeMap;

use super::super::harness::Cluster;

/// Record (`assoc:ACCOUNT` or `qos:NAME`) → field (`GrpTRESMins:gres/gpu`, `GrpWall`,
/// `UsageRaw`, ...) → (limit as text, used value).
pub type AssocMgr = BTreeMap<String, BTreeMap<String, (String, f64)>>;

/// `scontrol -o show assoc_mgr flags=assoc,qos` (one record a line): the account
/// associations (no user) of `accounts`, and the QOS of `qos`, with every usage-bearing field.
pub fn assoc_mgr(c: &Cluster, accounts: &[&str], qos: &[&str]) -> AssocMgr {
    let out = c.ok("scontrol", &["-o", "show", "assoc_mgr", "flags=assoc,qos"]);
    let mut seen = AssocMgr::new();
    for line in out.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let get = |k: &str| words.iter().find_map(|w| w.strip_prefix(&format!("{k}=")));
        let key = if line.starts_with("ClusterName=") {
            match (get("Account"), get("UserName")) {
                (Some(a), Some("")) if accounts.contains(&a) => format!("assoc:{a}"),
                _ => continue,
            }
        } else if let Some(q) = line.strip_prefix("QOS=") {
            // `QOS=name(id)`.
            let name = q.split('(').next().unwrap_or(q);
            if !qos.contains(&name) {
                continue;
            }
            format!("qos:{name}")
        } else {
            continue;
        };
        seen.insert(key, fields(&words));
    }
    seen
}

/// The usage-bearing fields of one record's `Key=Value` words.
fn fields(words: &[&str]) -> BTreeMap<String, (String, f64)> {
    let mut f = BTreeMap::new();
    for w in words {
        let Some((k, v)) = w.split_once('=') else {
            continue;
        };
        match k {
            // QOS `UsageRaw=123.450000`; association `UsageRaw/Norm/Efctv=123.45/0.10/0.10`.
            "UsageRaw" | "UsageRaw/Norm/Efctv" => {
                let raw = v.split('/').next().unwrap_or(v);
                f.insert("UsageRaw".to_string(), (String::new(), num(raw)));
            }
            // `GrpWall=2(1.13)`: limit(used minutes).
            "GrpWall" => {
                let (limit, used) = limit_used(v);
                f.insert(k.to_string(), (limit, used));
            }
            // `GrpTRESMins=cpu=N(used),...,gres/gpu=10(4)`.
            "GrpTRESMins" | "GrpTRESRunMins" | "MaxTRESMins" | "MaxTRESMinsPJ" => {
                for item in v.split(',') {
                    let Some((tres, lu)) = item.split_once('=') else {
                        continue;
                    };
                    f.insert(format!("{k}:{tres}"), limit_used(lu));
                }
            }
            _ => {}
        }
    }
    f
}

/// `limit(used)` → (limit, used); `N` alone → (N, 0).
fn limit_used(v: &str) -> (String, f64) {
    match v.split_once('(') {
        Some((limit, used)) => (limit.to_string(), num(used.trim_end_matches(')'))),
        None => (v.to_string(), 0.0),
    }
}

fn num(s: &str) -> f64 {
    s.parse().unwrap_or(f64::NAN)
}

/// `sshare -l -a -P` per (account, user): RawUsage, and GrpTRESRaw / TRESRunMins per TRES.
pub type Shares = BTreeMap<(String, String), BTreeMap<String, f64>>;

/// `sshare -a` for the accounts: raw usage, per-TRES raw usage and run minutes.
pub fn sshare(c: &Cluster, accounts: &[&str]) -> Shares {
    let fmt = "Account,User,RawUsage,GrpTRESRaw,TRESRunMins";
    let out = c.ok("sshare", &["-a", "-l", "-n", "-P", "-o", fmt]);
    let mut shares = Shares::new();
    for line in out.lines() {
        let f: Vec<&str> = line.split('|').map(str::trim).collect();
        if f.len() < 5 || !accounts.contains(&f[0]) {
            continue;
        }
        let mut m = BTreeMap::new();
        m.insert("RawUsage".to_string(), num(f[2]));
        for (col, list) in [("GrpTRESRaw", f[3]), ("TRESRunMins", f[4])] {
            for item in list.split(',') {
                if let Some((tres, v)) = item.split_once('=') {
                    m.insert(format!("{col}:{tres}"), num(v));
                }
            }
        }
        shares.insert((f[0].to_string(), f[1].to_string()), m);
    }
    shares
}

/// `sacct` of this cluster per job name: account, QOS, partition, state, allocated TRES, exit
/// code; and the elapsed seconds separately (compared with a tolerance).
pub fn sacct(c: &Cluster, cluster: &str) -> (BTreeMap<String, String>, BTreeMap<String, f64>) {
    let out = c.ok(
        "sacct",
        &[
            "-M",
            cluster,
            "-X",
            "-n",
            "-P",
            "-a",
            "-o",
            "JobName,Account,QOS,Partition,State,AllocTRES,ExitCode,ElapsedRaw",
        ],
    );
    let mut jobs = BTreeMap::new();
    let mut elapsed = BTreeMap::new();
    for line in out.lines() {
        let f: Vec<&str> = line.split('|').collect();
        if f.len() < 8 {
            continue;
        }
        jobs.insert(f[0].to_string(), f[1..7].join("|"));
        elapsed.insert(f[0].to_string(), num(f[7]));
    }
    (jobs, elapsed)
}

/// Whether two readings of an amount that grows with time agree: within 10 % of the larger,
/// or within `slack` (a few seconds' worth of the quantity, for small values).
pub fn close(a: f64, b: f64, slack: f64) -> bool {
    a == b || (a - b).abs() <= slack.max(0.1 * a.abs().max(b.abs()))
}

/// Asserts that every number of `stock` has a close number in `ours` (same keys), `slack`
/// giving each field's absolute allowance.
pub fn assert_close<K: Ord + std::fmt::Debug>(
    what: &str,
    stock: &BTreeMap<K, BTreeMap<String, f64>>,
    ours: &BTreeMap<K, BTreeMap<String, f64>>,
    slack: impl Fn(&str) -> f64,
) {
    assert_eq!(
        stock.keys().collect::<Vec<_>>(),
        ours.keys().collect::<Vec<_>>(),
        "{what}: the same records"
    );
    for (k, s) in stock {
        let o = &ours[k];
        assert_eq!(
            s.keys().collect::<Vec<_>>(),
            o.keys().collect::<Vec<_>>(),
            "{what} {k:?}: the same fields"
        );
        for (field, sv) in s {
            let ov = o[field];
            assert!(
                close(*sv, ov, slack(field)) || (sv.is_nan() && ov.is_nan()),
                "{what} {k:?} {field}: multifactor {sv} gputopo {ov}"
            );
        }
    }
}

/// Record → field → used value.
pub type Used = BTreeMap<String, BTreeMap<String, f64>>;

/// [`AssocMgr`] as numbers only, after checking that the limits are the same text.
pub fn assoc_mgr_numbers(stock: &AssocMgr, ours: &AssocMgr) -> (Used, Used) {
    let limits = |m: &AssocMgr| -> Vec<(String, String, String)> {
        m.iter()
            .flat_map(|(r, f)| {
                f.iter()
                    .map(move |(k, (limit, _))| (r.clone(), k.clone(), limit.clone()))
            })
            .collect()
    };
    assert_eq!(limits(stock), limits(ours), "assoc_mgr: the same limits");
    let used = |m: &AssocMgr| {
        m.iter()
            .map(|(r, f)| {
                (
                    r.clone(),
                    f.iter().map(|(k, (_, u))| (k.clone(), *u)).collect(),
                )
            })
            .collect()
    };
    (used(stock), used(ours))
}
