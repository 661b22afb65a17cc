//! The `gputopo nodes` table: one line per GPU of every node that published health, with its
//! status, device, holder, report age and reasons (see `cmd_nodes` for the command).

use super::records::{gpu_holders, value};
use gputopo_core::health::extra::history;
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
    table(HEAD, &rows)
}

fn node_row(name: &str, status: &str, why: String) -> [String; 7] {
    let d = || "-".to_string();
    [name.into(), d(), status.into(), d(), d(), d(), why]
}

/// Left-aligned columns under a header, two spaces apart (the last one free text).
fn table<const N: usize>(head: [&str; N], rows: &[[String; N]]) -> String {
    let mut w = head.map(str::len);
    for r in rows {
        for (k, c) in r.iter().enumerate() {
            w[k] = w[k].max(c.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: [&str; N]| {
        for (k, c) in cells.iter().enumerate() {
            if k + 1 == N {
                let _ = writeln!(out, "{c}");
            } else {
                let _ = write!(out, "{c:<width$}  ", width = w[k]);
            }
        }
    };
    line(head);
    for r in rows {
        line(r.each_ref().map(String::as_str));
    }
    out
}

const HEAD: [&str; 7] = ["NODE", "GPU", "STATUS", "DEVICE", "JOB", "AGE", "REASONS"];

/// One line per GPU with a verdict or a drain: the verdict (`+drained` when drained), the
/// device, the job holding it, the report's age, and the drain (who, how long ago, why)
/// before the reasons.
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
    let mut indices: Vec<usize> = h.gpus.iter().map(|g| g.index).collect();
    indices.extend(h.drained.iter().map(|d| d.index));
    indices.sort_unstable();
    indices.dedup();
    for index in indices {
        let g = h.gpus.iter().find(|g| g.index == index);
        let drain = h.drained.iter().find(|d| d.index == index);
        if problems && drain.is_none() && g.is_none_or(|g| g.status == Status::Ok) {
            continue;
        }
        let device = match g.map(|g| (&g.device.minor, &g.device.bus)) {
            Some((Some(m), Some(b))) => format!("nvidia{m}@{b}"),
            Some((Some(m), None)) => format!("nvidia{m}"),
            Some((None, Some(b))) => b.clone(),
            _ => "-".into(),
        };
        let job = holders
            .get(&(node.to_string(), index))
            .map_or("-", String::as_str);
        let mut reasons: Vec<String> = drain
            .map(|d| {
                format!(
                    "drained by {} {} ago: {}",
                    d.user,
                    self::age(now.saturating_sub(d.time)),
                    d.reason
                )
            })
            .into_iter()
            .collect();
        if let Some(g) = g {
            reasons.extend(g.reasons.iter().map(ToString::to_string));
        }
        reasons.extend(node_reasons.iter().cloned());
        let reasons = if reasons.is_empty() {
            "-".to_string()
        } else {
            reasons.join(",")
        };
        let status = match (g, drain) {
            (Some(g), Some(_)) => format!("{}+drained", g.status),
            (Some(g), None) => g.status.to_string(),
            (None, _) => "drained".to_string(),
        };
        out.push([
            node.to_string(),
            index.to_string(),
            status,
            device,
            job.to_string(),
            age.clone(),
            reasons,
        ]);
    }
}

/// `gputopo nodes --history`: the recent state changes of every GPU of the nodes in `nodes`
/// (`scontrol show node -o`), per node and GPU, oldest first, with their age at `now`.
pub fn render_history(nodes: &str, now: u64) -> String {
    let mut rows: Vec<[String; 6]> = Vec::new();
    for line in nodes.lines().filter(|l| l.starts_with("NodeName=")) {
        let name = value(line, "NodeName").unwrap_or_default();
        let extra = value(line, "Extra").unwrap_or_default();
        let obj = serde_json::from_str::<serde_json::Value>(&extra).ok();
        let mut events = history::read(obj.as_ref().and_then(|o| o.get(history::KEY)));
        events.sort_by_key(|e| (e.index, e.time));
        for e in events {
            let who = match (&e.user, e.src) {
                (Some(u), _) => format!("{} {u}", e.src.as_str()),
                (None, s) => s.as_str().to_string(),
            };
            let change = if e.from.is_empty() {
                e.to.clone()
            } else {
                format!("{}->{}", e.from, e.to)
            };
            rows.push([
                name.clone(),
                e.index.to_string(),
                format!("{} ago", age(now.saturating_sub(e.time))),
                who,
                change,
                if e.why.is_empty() {
                    "-".into()
                } else {
                    e.why.join(",")
                },
            ]);
        }
    }
    table(["NODE", "GPU", "WHEN", "BY", "CHANGE", "WHY"], &rows)
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

    #[test]
    fn drains_and_the_history_show_who_why_and_when() {
        let nodes = concat!(
            "NodeName=n1 Gres=gpu:2 State=IDLE ",
            r#"Extra={"gpu_drained":"1","gpu_ok":1,"gputopo":{"v":1,"gpus":[{"i":0,"s":"ok"},{"i":1,"s":"ok"}],"t":1000},"#,
            r#""gputopo_drain":{"v":1,"gpus":[{"i":1,"r":"RMA 7","u":"alice","t":1000}]},"#,
            r#""gputopo_hist":[{"t":900,"i":1,"s":"faulty","p":"ok","src":"agent","r":["xid_79"]},{"t":1000,"i":1,"s":"drained","p":"faulty","src":"admin","u":"alice","r":["RMA 7"]}]}"#,
            " State=IDLE\n",
        );
        let t = render(nodes, "", 1100, true);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 2, "{t}");
        assert!(lines[1].contains("ok+drained"), "{t}");
        assert!(
            lines[1].ends_with("drained by alice 100s ago: RMA 7"),
            "{t}"
        );
        let h = render_history(nodes, 1100);
        let rows: Vec<Vec<&str>> = h.lines().map(|l| l.split_whitespace().collect()).collect();
        assert_eq!(rows[0], ["NODE", "GPU", "WHEN", "BY", "CHANGE", "WHY"]);
        assert_eq!(
            rows[1],
            ["n1", "1", "3m", "ago", "agent", "ok->faulty", "xid_79"]
        );
        assert_eq!(
            rows[2],
            [
                "n1",
                "1",
                "100s",
                "ago",
                "administrator",
                "alice",
                "faulty->drained",
                "RMA",
                "7"
            ]
        );
    }

    mod fuzz {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn never_panics(s in "\\PC{0,300}") {
                let _ = render(&format!("NodeName={s}"), &format!("JobId=1 {s}"), 5, false);
                let _ = render_history(&format!("NodeName={s}"), 5);
            }
        }
    }
}
