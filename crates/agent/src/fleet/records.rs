//! Reading `scontrol show node -o -d` and `scontrol show job -d -o`: one record per line,
//! `Key=Value` words, values that may hold spaces (`Extra`, `Comment`, `Reason`).
//!
//! Why text and not `--json`: `scontrol --json` needs a data_parser plugin, which 22.05's
//! Debian build of scontrol does not have, and its schema changes with every release; the
//! one-line text form is the same from 22.05 to 26.05 for the keys read here.

use anyhow::Context;
use gputopo_core::topology::gres_conf_lines::expand_hostlist;
use gputopo_core::wideset::WideSet;
use std::collections::HashMap;
use std::process::Command;

/// Runs `program args` and returns its standard output. "No jobs in the system" (an empty
/// queue, exit 1 on some releases) is not a failure.
///
/// # Errors
/// When the program cannot be started or exits non-zero for another reason (its standard
/// error is in the message).
pub fn scontrol(program: &str, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("running {program}"))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let err = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() && !err.contains("No jobs") {
        anyhow::bail!("{program} {}: {}", args.join(" "), err.trim());
    }
    Ok(text)
}

/// Where the `=` of a scontrol key starting at byte `i` is (`Extra=`, `CPU_IDs=`,
/// `Gres/gpu=`): keys are words of letters, digits and `_/:`; values may hold spaces, keys
/// never do. Looks only as far as the key, so long values cost nothing here.
fn key_end(b: &[u8], i: usize) -> Option<usize> {
    let len = b
        .get(i..)?
        .iter()
        .position(|&c| !(c.is_ascii_alphanumeric() || matches!(c, b'_' | b'/' | b':')))?;
    (len > 0 && b[i + len] == b'=').then_some(i + len)
}

/// True when `w` starts with a scontrol key and its `=`.
fn is_key(w: &str) -> bool {
    key_end(w.as_bytes(), 0).is_some()
}

/// The value of `Key=` in a one-line scontrol record: up to the next ` Word=`.
pub fn value(line: &str, key: &str) -> Option<String> {
    let pat = format!("{key}=");
    let start = if line.starts_with(&pat) {
        0
    } else {
        line.find(&format!(" {pat}"))? + 1
    };
    let v = &line[start + pat.len()..];
    let end = v
        .match_indices(' ')
        .map(|(i, _)| i)
        .find(|&i| is_key(&v[i + 1..]))
        .unwrap_or(v.len());
    Some(v[..end].trim().to_string())
}

/// The value of `Key=` when it holds `word=...` pairs of its own, as gputopo's placement note
/// in `SystemComment=` does (`gputopo: n1 gpus=0,3 link=NV2 optimal=yes ...`): up to the next
/// ` Word=` whose word is not one of `inner`. Borrows the line.
pub fn value_with_inner<'l>(line: &'l str, key: &str, inner: &[&str]) -> Option<&'l str> {
    let pat = format!(" {key}=");
    let start = line.find(&pat)? + pat.len();
    let v = &line[start..];
    let end = v
        .match_indices(' ')
        .map(|(i, _)| i)
        .find(|&i| {
            let w = &v[i + 1..];
            is_key(w)
                && !inner
                    .iter()
                    .any(|k| w.strip_prefix(k).is_some_and(|r| r.starts_with('=')))
        })
        .unwrap_or(v.len());
    Some(v[..end].trim())
}

/// One record split into its `Key=Value` pairs in one pass, in order (detail records repeat
/// keys: `Nodes=` ... `GRES=` once per node group of a job). The same boundaries as
/// [`value`]. Borrows the line.
#[derive(Debug)]
pub struct Record<'a> {
    pairs: Vec<(&'a str, &'a str)>,
}

impl<'a> Record<'a> {
    /// Splits `line`: one pass over its bytes, a key looked for only where a word starts.
    pub fn parse(line: &'a str) -> Record<'a> {
        let b = line.as_bytes();
        let mut pairs = Vec::with_capacity(48);
        let mut key: Option<(&'a str, usize)> = None;
        let mut i = 0;
        loop {
            if let Some(eq) = key_end(b, i) {
                if let Some((k, start)) = key {
                    pairs.push((k, line[start..(i - 1).max(start)].trim()));
                }
                key = Some((&line[i..eq], eq + 1));
            }
            match b[i..].iter().position(|&c| c == b' ') {
                Some(p) => i += p + 1,
                None => break,
            }
        }
        if let Some((k, start)) = key {
            pairs.push((k, line[start..].trim()));
        }
        Record { pairs }
    }

    /// The first value of `key`.
    pub fn get(&self, key: &str) -> Option<&'a str> {
        self.pairs.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }

    /// Every `(key, value)` in order.
    pub fn pairs(&self) -> &[(&'a str, &'a str)] {
        &self.pairs
    }
}

/// The GPU indices in a detail `GRES=` or `GresUsed=` value (`gpu:a100:2(IDX:0,3-4),gpu:1(IDX:5)`);
/// other GRES (shards, MPS) and `IDX:N/A` are skipped. Ranges are bounded (4,096 per range).
pub fn gpu_indices(g: &str) -> Vec<usize> {
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

/// The GPU count of a node's `Gres=` value (`gpu:v100:8(S:0-1),gpu:a100:2,shard:32`): the sum
/// of its `gpu` entries.
pub fn gpu_count(gres: &str) -> usize {
    let mut total = 0usize;
    let mut depth = 0usize;
    let mut start = 0;
    let mut entries = Vec::new();
    for (i, c) in gres.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                entries.push(&gres[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    entries.push(&gres[start..]);
    for e in entries {
        let e = e.split('(').next().unwrap_or("");
        let mut parts = e.split(':');
        if parts.next() != Some("gpu") {
            continue;
        }
        let count = parts.next_back().and_then(|c| c.parse::<usize>().ok());
        total = total.saturating_add(count.unwrap_or(0));
    }
    total
}

/// (node, GPU index) → job id, from `scontrol show job -d -o` (running jobs' detail records:
/// `Nodes=n[1-2] CPU_IDs=0-3 Mem=0 GRES=gpu:a100:2(IDX:0,3)`).
pub fn gpu_holders(jobs: &str) -> HashMap<(String, usize), String> {
    let mut map = HashMap::new();
    for line in jobs.lines() {
        let Some(id) = value(line, "JobId") else {
            continue;
        };
        for (node, gpus) in job_gpus(&Record::parse(line)) {
            for idx in gpus.iter() {
                map.insert((node.clone(), idx), id.clone());
            }
        }
    }
    map
}

/// A job's GPUs per node from its detail pairs (`Nodes=` then `GRES=`, per node group).
pub fn job_gpus(rec: &Record<'_>) -> Vec<(String, WideSet)> {
    let mut out = Vec::new();
    let mut nodes: Vec<String> = Vec::new();
    for &(k, v) in rec.pairs() {
        match k {
            "Nodes" => nodes = expand_hostlist(v).unwrap_or_default(),
            "GRES" => {
                let set: WideSet = gpu_indices(v).into_iter().collect();
                if !set.is_empty() {
                    out.extend(nodes.iter().map(|n| (n.clone(), set.clone())));
                }
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn a_record_splits_like_value() {
        let line = "NodeName=n1 Extra={\"note\":\"a b\"} Comment=x y  State=IDLE+DRAIN Gres=gpu:v100:8(S:0-1)";
        let r = Record::parse(line);
        for k in ["NodeName", "Extra", "Comment", "State", "Gres"] {
            assert_eq!(r.get(k).map(str::to_string), value(line, k), "{k}");
        }
        assert_eq!(r.get("Missing"), None);
        assert_eq!(Record::parse("").pairs(), &[]);
        assert_eq!(Record::parse("Key=").get("Key"), Some(""));
    }

    #[test]
    fn a_value_may_hold_its_own_pairs() {
        let line = "JobId=1 WorkDir=/tmp SystemComment=gputopo: n1 gpus=0,3 link=NV2 optimal=yes degraded=none  StdErr=/x Power= TresPerNode=gres:gpu:2";
        let inner = ["gpus", "link", "optimal", "degraded"];
        assert_eq!(
            value_with_inner(line, "SystemComment", &inner),
            Some("gputopo: n1 gpus=0,3 link=NV2 optimal=yes degraded=none")
        );
        assert_eq!(value_with_inner(line, "Comment", &inner), None);
        assert_eq!(
            value_with_inner("JobId=1 SystemComment=x", "SystemComment", &inner),
            Some("x")
        );
    }

    #[test]
    fn gpu_counts_sum_the_gpu_entries() {
        assert_eq!(gpu_count("gpu:v100:8(S:0-1)"), 8);
        assert_eq!(gpu_count("gpu:a:2(S:0),gpu:b:4(S:1),shard:a:16"), 6);
        assert_eq!(gpu_count("gpu:4"), 4);
        assert_eq!(gpu_count("(null)"), 0);
        assert_eq!(gpu_count(""), 0);
    }

    mod fuzz {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn never_panics(s in "\\PC{0,300}") {
                let _ = gpu_indices(&s);
                let _ = gpu_count(&s);
                let _ = value(&s, "Extra");
                let _ = value_with_inner(&s, "Extra", &["a"]);
                let r = Record::parse(&s);
                let _ = job_gpus(&r);
            }
        }
    }
}
