//! The `gputopo nodes` table: one line per GPU of every node that published health, with its
//! status, device, holder, report age and reasons (see `cmd_nodes` for the command).

use super::records::{gpu_holders, value};
use gputopo_core::health::{NodeHealth, Status, parse_extra};
use std::collections::HashMap;
use std::fmt::Write as _;

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

    mod fuzz {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn never_panics(s in "\\PC{0,300}") {
                let _ = render(&format!("NodeName={s}"), &format!("JobId=1 {s}"), 5, false);
            }
        }
    }
}
