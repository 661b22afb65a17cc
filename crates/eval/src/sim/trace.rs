//! Workload input: the simulator's job CSV, and "trace-shaped" workloads built from the
//! Alibaba GPU v2023 trace (cluster-trace-gpu-v2023, the FGD paper's "openb" data).
//!
//! CSV format (header required, columns by name, extra columns ignored):
//! `submit,duration,gpus_per_node,nodes,user` with times in seconds; `user` may be any token
//! (users are numbered in order of first appearance).
//!
//! Trace-shaped: every task of `ali_gpu_v2023_jobs.csv` with a submit time and a run time
//! becomes one job with those times. Its GPU count is drawn (seeded) from the `num_gpu ≥ 1`
//! mix of `openb_pod_list_multigpu50.csv` (1: 6,989, 2: 222, 4: 206, 8: 556), because the
//! default openb mix has only 75 multi-GPU tasks. Fractional GPUs (`gpu_milli < 1000`) are
//! not modelled: each job holds whole GPUs on one node. Results built this way are labelled
//! "trace-shaped", not a replay of the trace.

use super::Job;
use super::rng::Rng;
use std::collections::HashMap;

/// Column positions of `names` in a CSV header line.
fn columns(header: &str, names: &[&str]) -> Result<Vec<usize>, String> {
    let cols: Vec<&str> = header.split(',').map(str::trim).collect();
    names
        .iter()
        .map(|n| {
            cols.iter()
                .position(|c| c == n)
                .ok_or_else(|| format!("CSV header lacks column `{n}` (has: {header})"))
        })
        .collect()
}

fn field<'a>(fields: &[&'a str], i: usize, line: usize) -> Result<&'a str, String> {
    fields
        .get(i)
        .map(|s| s.trim())
        .ok_or_else(|| format!("line {line}: too few fields"))
}

fn number<T: std::str::FromStr>(s: &str, what: &str, line: usize) -> Result<T, String> {
    s.parse()
        .map_err(|_| format!("line {line}: `{s}` is not a valid {what}"))
}

/// Parses the simulator's job CSV.
///
/// # Errors
/// A message with the line number on a missing column or a bad value.
pub fn read_csv(text: &str) -> Result<Vec<Job>, String> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let (_, header) = lines.next().ok_or("empty trace")?;
    let c = columns(
        header,
        &["submit", "duration", "gpus_per_node", "nodes", "user"],
    )?;
    let mut users: HashMap<String, u32> = HashMap::new();
    let mut jobs = Vec::new();
    for (i, l) in lines {
        let line = i + 1;
        let f: Vec<&str> = l.split(',').collect();
        let submit: f64 = number(field(&f, c[0], line)?, "submit time", line)?;
        let duration: f64 = number(field(&f, c[1], line)?, "duration", line)?;
        if !(submit.is_finite() && duration.is_finite() && submit >= 0.0 && duration >= 0.0) {
            return Err(format!(
                "line {line}: times must be finite and non-negative"
            ));
        }
        let gpus_per_node: u8 = number(field(&f, c[2], line)?, "GPU count", line)?;
        let nodes: u32 = number(field(&f, c[3], line)?, "node count", line)?;
        let next = users.len() as u32;
        let user = *users
            .entry(field(&f, c[4], line)?.to_string())
            .or_insert(next);
        jobs.push(Job {
            submit,
            duration,
            gpus_per_node,
            nodes,
            user,
        });
    }
    Ok(jobs)
}

/// Renders jobs as the simulator's CSV.
pub fn write_csv(jobs: &[Job]) -> String {
    let mut s = String::from("submit,duration,gpus_per_node,nodes,user\n");
    for j in jobs {
        s.push_str(&format!(
            "{},{},{},{},u{}\n",
            j.submit, j.duration, j.gpus_per_node, j.nodes, j.user
        ));
    }
    s
}

/// The GPU-count mix (count, weight) of an openb pod list (`num_gpu` column), GPU pods only.
///
/// # Errors
/// On a missing `num_gpu` column or a bad value.
pub fn size_mix(pod_list_csv: &str) -> Result<Vec<(u8, f64)>, String> {
    let mut lines = pod_list_csv.lines().enumerate();
    let (_, header) = lines.next().ok_or("empty pod list")?;
    let c = columns(header, &["num_gpu"])?[0];
    let mut counts: std::collections::BTreeMap<u8, u64> = Default::default();
    for (i, l) in lines.filter(|(_, l)| !l.trim().is_empty()) {
        let f: Vec<&str> = l.split(',').collect();
        let n: u8 = number(field(&f, c, i + 1)?, "num_gpu", i + 1)?;
        if n > 0 {
            *counts.entry(n).or_default() += 1;
        }
    }
    Ok(counts.into_iter().map(|(k, v)| (k, v as f64)).collect())
}

/// Builds a trace-shaped workload (see the module docs) from the jobs file's text and a size
/// mix, drawing sizes with `seed`.
///
/// # Errors
/// On missing columns or bad values in the jobs file, or an empty mix.
pub fn alibaba_shaped(jobs_csv: &str, mix: &[(u8, f64)], seed: u64) -> Result<Vec<Job>, String> {
    if mix.is_empty() {
        return Err("the GPU size mix is empty".into());
    }
    let weights: Vec<f64> = mix.iter().map(|m| m.1).collect();
    let mut rng = Rng::derive(seed, 0xA11);
    let mut lines = jobs_csv.lines().enumerate();
    let (_, header) = lines.next().ok_or("empty jobs file")?;
    let c = columns(header, &["submit_s", "run_s"])?;
    let mut jobs = Vec::new();
    for (i, l) in lines.filter(|(_, l)| !l.trim().is_empty()) {
        let f: Vec<&str> = l.split(',').collect();
        let (s, r) = (field(&f, c[0], i + 1)?, field(&f, c[1], i + 1)?);
        if s.is_empty() || r.is_empty() {
            continue; // pending at trace end: never ran
        }
        let submit: f64 = number(s, "submit_s", i + 1)?;
        let duration: f64 = number(r, "run_s", i + 1)?;
        jobs.push(Job {
            submit,
            duration,
            gpus_per_node: mix[rng.weighted(&weights)].0,
            nodes: 1,
            user: 0,
        });
    }
    Ok(jobs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_round_trip_and_errors() {
        let jobs = read_csv("submit,duration,gpus_per_node,nodes,user\n0,10,2,1,alice\n5,3.5,8,2,bob\n7,1,1,1,alice\n").unwrap();
        assert_eq!(jobs.len(), 3);
        assert_eq!(
            (jobs[1].gpus_per_node, jobs[1].nodes, jobs[1].user),
            (8, 2, 1)
        );
        assert_eq!(jobs[2].user, 0);
        let again = read_csv(&write_csv(&jobs)).unwrap();
        assert_eq!(again, jobs);
        assert!(
            read_csv("submit,duration\n")
                .unwrap_err()
                .contains("gpus_per_node")
        );
        assert!(
            read_csv("submit,duration,gpus_per_node,nodes,user\n0,x,1,1,a\n")
                .unwrap_err()
                .contains("line 2")
        );
        assert!(read_csv("submit,duration,gpus_per_node,nodes,user\n-1,1,1,1,a\n").is_err());
    }

    #[test]
    fn trace_shaped_draws_from_the_mix() {
        let mix = size_mix("name,num_gpu\na,0\nb,1\nc,8\nd,8\n").unwrap();
        assert_eq!(mix, vec![(1, 1.0), (8, 2.0)]);
        let jobs_csv = "job_id,submit_s,run_s\nx,0,10\ny,5,\nz,9,4\n";
        let a = alibaba_shaped(jobs_csv, &mix, 1).unwrap();
        assert_eq!(a.len(), 2);
        assert_eq!(a, alibaba_shaped(jobs_csv, &mix, 1).unwrap());
        assert!(
            a.iter()
                .all(|j| j.gpus_per_node == 1 || j.gpus_per_node == 8)
        );
        assert!(alibaba_shaped(jobs_csv, &[], 1).is_err());
    }
}
