//! `gputopo nodes`: the published GPU health of the cluster, readable, wherever a Slurm client
//! works (it only runs `scontrol`).
//!
//! One line per GPU of every node that has published health: the node, the GPU's Slurm index,
//! its status and reasons, the device it is (minor and PCI bus id, as the agent published
//! them), the job holding it, and the age of the node's report (from the `t` the agent writes;
//! `publish` refreshes it every `PublishRefreshSec`). Nodes without gputopo health are listed
//! once, as `unpublished` (or `malformed` with the parser's message).
//!
//! Data: `scontrol show node -o -d` (each node's `Extra`) and `scontrol show job -d -o` (each
//! running job's `Nodes=... GRES=gpu:...(IDX:...)` details).

use anyhow::Context;
use gputopo_core::health::{NodeHealth, Status, parse_extra};
use gputopo_core::topology::gres_conf_lines::expand_hostlist;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::process::Command;

/// Arguments.
#[derive(clap::Args)]
pub struct Args {
    /// Nodes to show (a Slurm host list); default all.
    #[arg(value_name = "NODES")]
    pub nodes: Option<String>,
    /// Only GPUs that are not `ok` (and nodes without readable health).
    #[arg(long)]
    pub problems: bool,
    /// scontrol to run.
    #[arg(long, value_name = "PATH", default_value = "scontrol")]
    pub scontrol: String,
}

/// Runs the subcommand. Exit code 0, or 1 when scontrol fails.
pub fn run(args: Args) -> anyhow::Result<i32> {
    let mut node_args = vec!["show", "node", "-o", "-d"];
    if let Some(n) = &args.nodes {
        node_args.push(n);
    }
    let nodes = scontrol(&args.scontrol, &node_args)?;
    let jobs = scontrol(&args.scontrol, &["show", "job", "-d", "-o"])?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    print!("{}", render(&nodes, &jobs, now, args.problems));
    Ok(0)
}

pub(crate) fn scontrol(program: &str, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("running {program}"))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let err = String::from_utf8_lossy(&out.stderr);
    // "No jobs in the system" is not a failure.
    if !out.status.success() && !err.contains("No jobs") {
        anyhow::bail!("{program} {}: {}", args.join(" "), err.trim());
    }
    Ok(text)
}

/// The table for `scontrol show node -o -d` and `scontrol show job -d -o` output at `now`.
pub fn render(nodes: &str, jobs: &str, now: u64, problems: bool) -> String {
    let holders = gpu_holders(jobs);
    let mut rows: Vec<[String; 7]> = Vec::new();
    for line in nodes.lines().filter(|l| l.starts_with("NodeName=")) {
        let name = value(line, "NodeName").unwrap_or_default();
        let extra = value(line, "Extra").unwrap_or_default();
        match parse_extra(&extra) {
            Ok(Some(h)) => gpu_rows(&mut rows, &name, &h, &holders, now, problems),
            Ok(None) => rows.push(node_row(&name, "unpublished", "-".into())),
            Err(e) => rows.push(node_row(&name, "malformed", e.to_string())),
        }
    }
    table(&rows)
}

fn node_row(name: &str, status: &str, why: String) -> [String; 7] {
    let d = || "-".to_string();
    [name.into(), d(), status.into(), d(), d(), d(), why]
}

/// Left-aligned columns under a header, two spaces apart.
fn table(rows: &[[String; 7]]) -> String {
    const HEAD: [&str; 7] = ["NODE", "GPU", "STATUS", "DEVICE", "JOB", "AGE", "REASONS"];
    let mut w = HEAD.map(str::len);
    for r in rows {
        for (k, c) in r.iter().enumerate() {
            w[k] = w[k].max(c.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: [&str; 7]| {
        for (k, c) in cells.iter().enumerate() {
            if k == 6 {
                let _ = writeln!(out, "{c}");
            } else {
                let _ = write!(out, "{c:<width$}  ", width = w[k]);
            }
        }
    };
    line(HEAD);
    for r in rows {
        line(r.each_ref().map(String::as_str));
    }
    out
}

fn gpu_rows(
    out: &mut Vec<[String; 7]>,
    node: &str,
    h: &NodeHealth,
    holders: &HashMap<(String, usize), String>,
    now: u64,
    problems: bool,
) {
    let age = h
        .time
        .map_or_else(|| "?".to_string(), |t| age(now.saturating_sub(t)));
    let node_reasons: Vec<String> = h.errors.iter().map(ToString::to_string).collect();
    for g in h
        .gpus
        .iter()
        .filter(|g| !problems || g.status != Status::Ok)
    {
        let device = match (&g.device.minor, &g.device.bus) {
            (Some(m), Some(b)) => format!("nvidia{m}@{b}"),
            (Some(m), None) => format!("nvidia{m}"),
            (None, Some(b)) => b.clone(),
            (None, None) => "-".into(),
        };
        let job = holders
            .get(&(node.to_string(), g.index))
            .map_or("-", String::as_str);
        let mut reasons: Vec<String> = g.reasons.iter().map(ToString::to_string).collect();
        reasons.extend(node_reasons.iter().cloned());
        let reasons = if reasons.is_empty() {
            "-".to_string()
        } else {
            reasons.join(",")
        };
        out.push([
            node.to_string(),
            g.index.to_string(),
            g.status.to_string(),
            device,
            job.to_string(),
            age.clone(),
            reasons,
        ]);
    }
}

fn age(s: u64) -> String {
    match s {
        0..=119 => format!("{s}s"),
        120..=7199 => format!("{}m", s / 60),
        _ => format!("{}h", s / 3600),
    }
}

/// (node, GPU index) → job id, from `scontrol show job -d -o` (running jobs' detail records:
/// `Nodes=n[1-2] CPU_IDs=0-3 Mem=0 GRES=gpu:a100:2(IDX:0,3)`).
pub fn gpu_holders(jobs: &str) -> HashMap<(String, usize), String> {
    let mut map = HashMap::new();
    for line in jobs.lines() {
        let Some(id) = value(line, "JobId") else {
            continue;
        };
        let mut nodes: Vec<String> = Vec::new();
        for word in line.split_whitespace() {
            if let Some(n) = word.strip_prefix("Nodes=") {
                nodes = expand_hostlist(n).unwrap_or_default();
            } else if let Some(g) = word.strip_prefix("GRES=") {
                for idx in gpu_indices(g) {
                    for n in &nodes {
                        map.insert((n.clone(), idx), id.clone());
                    }
                }
            }
        }
    }
    map
}

/// The GPU indices in a detail `GRES=` value (`gpu:a100:2(IDX:0,3-4),gpu:1(IDX:5)`).
fn gpu_indices(g: &str) -> Vec<usize> {
    let mut out = Vec::new();
    let mut rest = g;
    while let Some(start) = rest.find("(IDX:") {
        let kind = &rest[..start];
        let after = &rest[start + 5..];
        let end = after.find(')').unwrap_or(after.len());
        if kind.rsplit(',').next().unwrap_or("").starts_with("gpu") {
            for part in after[..end].split(',') {
                let (a, b) = part.split_once('-').unwrap_or((part, part));
                if let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) {
                    out.extend(a..=b.min(a + 4096));
                }
            }
        }
        rest = &after[end.min(after.len())..];
    }
    out
}

/// The value of `Key=` in a one-line scontrol record: up to the next ` Word=` (values such as
/// `Extra` may hold spaces, keys never do).
pub(crate) fn value(line: &str, key: &str) -> Option<String> {
    let pat = format!("{key}=");
    let start = if line.starts_with(&pat) {
        0
    } else {
        line.find(&format!(" {pat}"))? + 1
    };
    let v = &line[start + pat.len()..];
    let is_key = |w: &str| {
        w.find('=').is_some_and(|e| {
            e > 0
                && w[..e]
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_/:".contains(c))
        })
    };
    let end = v
        .match_indices(' ')
        .map(|(i, _)| i)
        .find(|&i| is_key(&v[i + 1..]))
        .unwrap_or(v.len());
    Some(v[..end].trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODES: &str = concat!(
        "NodeName=n1 Arch=x86_64 Gres=gpu:l40s:8(S:0-1) GresUsed=gpu:l40s:2(IDX:0-1) ",
        r#"Extra={"gputopo":{"v":1,"gpus":[{"i":0,"s":"ok","m":7,"b":"1a:00.0"},{"i":2,"s":"faulty","r":["ecc_uncorrectable"],"m":5,"b":"3d:00.0"}],"t":1000},"note":"a b"} "#,
        "State=MIXED Comment=x y\n",
        "NodeName=n2 Arch=x86_64 State=IDLE\n",
        "NodeName=n3 Extra={\"gputopo\":{\"v\":9}} State=IDLE\n",
    );
    const JOBS: &str = "JobId=7 JobName=a JobState=RUNNING NodeList=n1 NumNodes=1 JOB_GRES=gpu:l40s:2   Nodes=n1 CPU_IDs=0 Mem=0 GRES=gpu:l40s:2(IDX:0-1) MinCPUsNode=1\n\
                        JobId=8 JobName=b JobState=PENDING NodeList=(null)\n";

    #[test]
    fn one_line_per_gpu_with_job_and_age() {
        let t = render(NODES, JOBS, 1090, false);
        let lines: Vec<Vec<&str>> = t.lines().map(|l| l.split_whitespace().collect()).collect();
        assert_eq!(
            lines[0],
            ["NODE", "GPU", "STATUS", "DEVICE", "JOB", "AGE", "REASONS"]
        );
        assert_eq!(
            lines[1],
            ["n1", "0", "ok", "nvidia7@1a:00.0", "7", "90s", "-"]
        );
        assert_eq!(
            lines[2],
            [
                "n1",
                "2",
                "faulty",
                "nvidia5@3d:00.0",
                "-",
                "90s",
                "ecc_uncorrectable"
            ]
        );
        assert_eq!(lines[3], ["n2", "-", "unpublished", "-", "-", "-", "-"]);
        assert_eq!(lines[4][2], "malformed");
        let p = render(NODES, JOBS, 1000 + 7200, true);
        assert!(!p.contains(" ok "));
        assert!(p.contains(" 2h "));
    }

    #[test]
    fn values_and_indices() {
        assert_eq!(
            value("NodeName=n1 Comment=a b State=X", "Comment").as_deref(),
            Some("a b")
        );
        assert_eq!(value("NodeName=n1 State=X", "Extra"), None);
        assert_eq!(
            gpu_indices("gpu:a:3(IDX:0,3-4),mps:0(IDX:N/A)"),
            vec![0, 3, 4]
        );
        assert_eq!(
            gpu_indices("gpu:1(IDX:0-99999999999)").len(),
            4097,
            "bounded"
        );
        let h = gpu_holders("JobId=3 Nodes=n[1-2] CPU_IDs=0 GRES=gpu:2(IDX:1-2)\n");
        assert_eq!(h.get(&("n2".to_string(), 2)).map(String::as_str), Some("3"));
    }

    mod fuzz {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn never_panics(s in "\\PC{0,300}") {
                let _ = render(&format!("NodeName={s}"), &format!("JobId=1 {s}"), 5, false);
                let _ = gpu_indices(&s);
                let _ = value(&s, "Extra");
            }
        }
    }
}
