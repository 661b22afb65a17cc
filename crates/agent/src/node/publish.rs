//! `gputopo publish`: writes this node's GPU health into its Slurm `Extra` field, as JSON under
//! the `gputopo` key (format: `gputopo_core::health::extra`). Meant to run as slurmd's
//! `HealthCheckProgram` (as root; only root, SlurmUser and Slurm admins may update `Extra`).
//!
//! This is the thin runner around a pure plan ([`gputopo_core::health::publish::plan`], where
//! every rule lives and is unit-tested):
//! 1. Read NVML (bounded by `NvmlTimeoutMs`) and judge every GPU ([`report`]).
//! 2. Read the node's record with `scontrol show node NAME` ([`node_record`]).
//! 3. Plan: the merged `Extra` and the `scontrol update` steps (write `Extra` when it changed;
//!    with `DrainWhenAllFaulty=yes` drain a node whose *every* GPU is faulty), or a refusal
//!    (a non-JSON `Extra`, or slurm.conf's GPU count disagreeing with this check).
//!    gputopo's own record made unusable (truncated, corrupted) is replaced, with a message
//!    saying so.
//! 4. Carry the steps out with scontrol, in order.
//! 5. Keep the node's history as now published (`gputopo_hist`) in the state file, from which
//!    step 3 puts it back into a record that lost it (an `Extra` cleared, a node re-created).
//!
//! All scontrol calls together are bounded by `PublishTimeoutSec`; a call still running then is
//! killed. Exit codes: 0 Extra is up to date (written, or already current); 1 usage or
//! configuration error; 5 refused to overwrite a non-JSON `Extra`; 6 scontrol failed or timed out;
//! 7 Slurm's GPUs cannot be tied to NVML devices (nothing published, see `mapping`).
//! NVML problems are not publish failures: they are published (`unknown` GPUs, `e` reasons).

use super::report;
use super::settings::Settings;
use super::xid_state;
use gputopo_core::health::publish::{self, NodeRecord, PublishPolicy, Refusal, Step};
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Exit code: refused to overwrite a non-JSON Extra.
pub const EXIT_REFUSED: i32 = 5;
/// Exit code: scontrol failed or timed out.
pub const EXIT_SCONTROL: i32 = 6;

/// Arguments.
#[derive(clap::Args)]
#[command(
    after_help = "Exit codes: 0 Extra is up to date (written or unchanged); 1 usage or configuration error; \
5 refused to overwrite a non-JSON Extra (an administrator's value); 6 scontrol failed or timed out \
(PublishTimeoutSec); 7 Slurm's GPUs cannot be tied to NVML devices (not published). NVML problems are published as `unknown` GPUs, not failures. Never drains for \
one GPU; DrainWhenAllFaulty=yes drains only when every GPU is faulty. See docs/agent.md."
)]
pub struct Args {
    /// Slurm node name; default $SLURMD_NODENAME, else the short host name.
    #[arg(long, value_name = "NAME")]
    pub node: Option<String>,
    /// scontrol to run; default $GPUTOPO_SCONTROL, else `scontrol` from PATH.
    #[arg(long, value_name = "PATH")]
    pub scontrol: Option<String>,
    /// Print the new Extra value instead of writing it.
    #[arg(long)]
    pub dry_run: bool,
    /// Use this as the current Extra instead of asking scontrol (with --dry-run: no Slurm needed).
    #[arg(long, value_name = "TEXT")]
    pub current_extra: Option<String>,
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<i32> {
    let s = Settings::load(args.node.clone())?;
    publish(&args, &s)
}

/// One health check and publication with resolved settings (`run`, and each cycle of
/// `gputopo serve`).
///
/// # Errors
/// As `run`.
pub fn publish(args: &Args, s: &Settings) -> anyhow::Result<i32> {
    let s = s.clone();
    let r = report::collect_with(&s, true, !args.dry_run);
    r.print_notes();
    if r.refusal.is_some() {
        // Publishing under a guessed index could name a healthy GPU faulty and hand the
        // faulty one to a job; the Extra already there stays.
        eprintln!("gputopo: publish: node {}: not publishing", s.node);
        return Ok(report::EXIT_IDENTITY);
    }
    let a = &s.config.agent;
    let sc = Scontrol {
        program: args
            .scontrol
            .clone()
            .or_else(|| {
                std::env::var("GPUTOPO_SCONTROL")
                    .ok()
                    .filter(|v| !v.is_empty())
            })
            .unwrap_or_else(|| "scontrol".into()),
        deadline: Instant::now() + Duration::from_secs(a.publish_timeout_sec),
    };
    let node = match &args.current_extra {
        Some(e) => NodeRecord {
            extra: e.clone(),
            ..NodeRecord::default()
        },
        None => match sc.run(&["show", "node", &s.node]) {
            Ok(out) => node_record(&out),
            Err(e) => {
                eprintln!("gputopo: publish: reading node {}: {e}", s.node);
                return Ok(EXIT_SCONTROL);
            }
        },
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let policy = PublishPolicy {
        refresh_secs: a.publish_refresh_sec,
        drain_when_all_faulty: a.drain_when_all_faulty,
    };
    // The agent's copy of the node's history (its state file): put back where the record
    // lost it, and kept as this publish leaves it.
    let state = xid_state::path(a.state_dir.as_deref(), &s.node);
    let (mut memory, _) = xid_state::load(&state);
    let kept = std::mem::take(&mut memory.hist);
    let plan = match publish::plan(&node, r.health(), r.labels().as_ref(), now, policy, &kept) {
        Ok(p) => p,
        Err(e @ Refusal::GpuCount { .. }) => {
            eprintln!("gputopo: error: node {}: {e}; not publishing", s.node);
            return Ok(report::EXIT_IDENTITY);
        }
        Err(e @ Refusal::Extra(_)) => {
            eprintln!("gputopo: publish: node {}: {e}", s.node);
            return Ok(EXIT_REFUSED);
        }
    };
    if let Some(e) = &plan.replaces_own_malformed {
        // Ours (it names our key) but unusable: slurmctld keeps the node's last good health
        // meanwhile; rewriting it is the repair (issue 25 item 1).
        eprintln!(
            "gputopo: publish: node {}: {e}; replacing gputopo's own unusable record",
            s.node
        );
    }
    if args.dry_run {
        println!("{}", plan.extra);
        return Ok(report::EXIT_OK);
    }
    let counts = publish::summary(&plan.health);
    if !plan.writes_extra() {
        println!("gputopo: node {}: Extra unchanged ({counts})", s.node);
    }
    for step in &plan.steps {
        let (doing, done) = match step {
            Step::WriteExtra(_) => ("updating", format!("Extra updated ({counts})")),
            Step::Drain { .. } => ("draining", "drained (every GPU is faulty)".to_string()),
        };
        let step_args = step.scontrol_args(&s.node);
        let step_args: Vec<&str> = step_args.iter().map(String::as_str).collect();
        if let Err(e) = sc.run(&step_args) {
            eprintln!("gputopo: publish: {doing} node {}: {e}", s.node);
            return Ok(EXIT_SCONTROL);
        }
        println!("gputopo: node {}: {done}", s.node);
    }
    if plan.history != kept {
        memory.hist = plan.history;
        if let Err(e) = xid_state::save(&state, &memory) {
            eprintln!("gputopo: publish: node {}: {e}", s.node);
        }
    }
    Ok(report::EXIT_OK)
}

/// The part of `scontrol show node` output publishing reads.
pub fn node_record(show: &str) -> NodeRecord {
    NodeRecord {
        extra: field(show, "Extra").unwrap_or_default(),
        state: field(show, "State").unwrap_or_default(),
        // Slurm keeps at most the configured count (slurm.conf Gres=) of a gres.conf's GPUs.
        configured_gpus: field(show, "Gres").and_then(|g| configured_gpus(&g)),
    }
}

/// The number of GPUs in a node's `Gres=` (`gpu:l40s:8(S:0-1)`, `gpu:a:4,gpu:b:4,mps:100`),
/// `None` when it names no GPU or a count does not parse.
pub fn configured_gpus(gres: &str) -> Option<usize> {
    let mut plain = String::with_capacity(gres.len());
    let mut depth = 0u32;
    for c in gres.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ if depth == 0 => plain.push(c),
            _ => {}
        }
    }
    let mut total = None;
    for item in plain.split(',').filter(|i| i.starts_with("gpu")) {
        let n: usize = item.rsplit(':').next()?.parse().ok()?;
        total = Some(total.unwrap_or(0) + n);
    }
    total
}

/// The value of `Key=` in `scontrol show node` output. `Extra=` (and `Reason=`, `Comment=`) sit on
/// a line of their own and run to its end, spaces included; other keys end at whitespace.
pub fn field(show: &str, key: &str) -> Option<String> {
    let prefix = format!("{key}=");
    for line in show.lines() {
        let t = line.trim_start();
        if let Some(v) = t.strip_prefix(&prefix) {
            if matches!(key, "Extra" | "Comment" | "Reason") {
                return Some(v.trim_end().to_string());
            }
        }
        for word in t.split_whitespace() {
            if let Some(v) = word.strip_prefix(&prefix) {
                return Some(v.to_string());
            }
        }
    }
    None
}

/// scontrol with a shared deadline.
struct Scontrol {
    program: String,
    deadline: Instant,
}

impl Scontrol {
    /// Runs scontrol; kills it at the deadline.
    fn run(&self, args: &[&str]) -> Result<String, String> {
        let mut child = Command::new(&self.program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("running {}: {e}", self.program))?;
        let mut out = child.stdout.take();
        let mut err = child.stderr.take();
        let reader = std::thread::spawn(move || {
            let (mut o, mut e) = (String::new(), String::new());
            if let Some(s) = out.as_mut() {
                let _ = s.read_to_string(&mut o);
            }
            if let Some(s) = err.as_mut() {
                let _ = s.read_to_string(&mut e);
            }
            (o, e)
        });
        let status = loop {
            match child.try_wait() {
                Ok(Some(st)) => break st,
                Ok(None) if Instant::now() >= self.deadline => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!(
                        "{} {} timed out (PublishTimeoutSec); killed",
                        self.program,
                        args.join(" ")
                    ));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(e) => return Err(format!("waiting for {}: {e}", self.program)),
            }
        };
        let (o, e) = reader.join().unwrap_or_default();
        if status.success() {
            Ok(o)
        } else {
            Err(format!(
                "{} {} failed ({status}): {}",
                self.program,
                args.first().copied().unwrap_or(""),
                e.trim()
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{configured_gpus, field, node_record};

    #[test]
    fn reads_extra_and_state_from_show_node() {
        let show = "NodeName=n1 Arch=x86_64 CoresPerSocket=1\n   State=IDLE+DRAIN ThreadsPerCore=1\n   \
                    Extra={\"a\": \"b c\"}\n\n";
        assert_eq!(field(show, "Extra").as_deref(), Some("{\"a\": \"b c\"}"));
        assert_eq!(field(show, "State").as_deref(), Some("IDLE+DRAIN"));
        assert_eq!(field("NodeName=n1\n", "Extra"), None);
    }

    #[test]
    fn reads_the_node_record() {
        let show = "NodeName=n1 Arch=x86_64\n   Gres=gpu:a100:4(S:0)\n   State=MIXED+DRAIN \
                    ThreadsPerCore=1\n   Extra={\"gputopo\": {}}\n";
        let r = node_record(show);
        assert_eq!(r.extra, "{\"gputopo\": {}}");
        assert_eq!(r.state, "MIXED+DRAIN");
        assert_eq!(r.configured_gpus, Some(4));
        assert!(r.is_drained());
    }

    #[test]
    fn counts_configured_gpus() {
        assert_eq!(configured_gpus("gpu:l40s:8(S:0-1)"), Some(8));
        assert_eq!(configured_gpus("gpu:a:4(S:0,1),gpu:b:2,mps:100"), Some(6));
        assert_eq!(configured_gpus("gpu:3"), Some(3));
        assert_eq!(configured_gpus("mps:100"), None);
        assert_eq!(configured_gpus("gpu:a:x"), None);
        assert_eq!(configured_gpus("(null)"), None);
    }
}
