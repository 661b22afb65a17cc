//! `gputopo drain NODE --gpu LIST --reason TEXT` and `gputopo resume NODE --gpu LIST`: take
//! single GPUs of a node out of service by hand and return them (the plan:
//! `gputopo_agent::fleet::drain`).
//!
//! Who may: whoever Slurm lets change a node's `Extra`, which is root, SlurmUser and
//! `AdminLevel=Admin` users (slurmctld's own check). The command asks first (`scontrol show
//! config` for SlurmUser, `sacctmgr show user` for the admin level) so a refusal names the rule,
//! and reports slurmctld's own refusal the same way if it still comes.
//!
//! A publish of the node agent that read `Extra` just before this write and writes just after
//! would put the old drains back; so the command reads the node back twice over a second and
//! writes again if its drains are gone (the agent keeps drains it read).

use anyhow::Context;
use gputopo_agent::fleet::drain::{NodeAction, Plan, PlanError, plan};
use gputopo_agent::fleet::records::{scontrol, value};
use gputopo_core::health::read_extra;
use std::process::Command;
use std::time::Duration;

/// Arguments of `drain`.
#[derive(clap::Args)]
pub struct DrainArgs {
    /// The node.
    #[arg(value_name = "NODE")]
    pub node: String,
    /// Its GPUs to drain: Slurm GPU indices (`3`, `0-1,5`), as `gputopo nodes` shows them.
    #[arg(long, value_name = "LIST")]
    pub gpu: String,
    /// Why (shown in `gputopo nodes`, the metrics and the node's history).
    #[arg(long, value_name = "TEXT")]
    pub reason: String,
    /// scontrol to run.
    #[arg(long, value_name = "PATH", default_value = "scontrol")]
    pub scontrol: String,
}

/// Arguments of `resume`.
#[derive(clap::Args)]
pub struct ResumeArgs {
    /// The node.
    #[arg(value_name = "NODE")]
    pub node: String,
    /// Its GPUs to return to service (Slurm GPU indices).
    #[arg(long, value_name = "LIST")]
    pub gpu: String,
    /// scontrol to run.
    #[arg(long, value_name = "PATH", default_value = "scontrol")]
    pub scontrol: String,
}

/// Exit code when the caller may not drain (not root, SlurmUser or AdminLevel=Admin).
const REFUSED: i32 = 2;
/// Exit code when the node's Extra is not gputopo's to rewrite (as `publish`'s 5).
const NOT_OURS: i32 = 5;

/// Runs `drain`.
pub fn run_drain(a: DrainArgs) -> anyhow::Result<i32> {
    if a.reason.trim().is_empty() {
        anyhow::bail!("--reason must say why (it is shown to everyone who looks at the GPU)");
    }
    run(&a.scontrol, &a.node, &a.gpu, Some(&a.reason))
}

/// Runs `resume`.
pub fn run_resume(a: ResumeArgs) -> anyhow::Result<i32> {
    run(&a.scontrol, &a.node, &a.gpu, None)
}

fn run(sc: &str, node: &str, gpus: &str, reason: Option<&str>) -> anyhow::Result<i32> {
    let verb = if reason.is_some() { "drain" } else { "resume" };
    let user = user_name();
    if let Some(why) = not_allowed(sc, &user) {
        eprintln!("gputopo {verb}: refused: {why}");
        return Ok(REFUSED);
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let p = match plan(&show(sc, node)?, gpus, reason, &user, now) {
        Ok(p) => p,
        Err(PlanError::Extra(e)) => {
            eprintln!("gputopo {verb}: {node}: {e}");
            return Ok(NOT_OURS);
        }
        Err(e) => anyhow::bail!("{node}: {e}"),
    };
    if !p.unchanged.is_empty() {
        let how = if reason.is_some() {
            "already drained"
        } else {
            "not drained"
        };
        eprintln!("gputopo {verb}: {node}: GPU {} {how}", p.unchanged);
    }
    if let Some(extra) = &p.extra {
        if let Err(code) = write(sc, &p.node, extra, verb)? {
            return Ok(code);
        }
        let r = Request {
            node,
            gpus,
            reason,
            user: &user,
            now,
        };
        verify(sc, &r, &p, verb)?;
        let done = if reason.is_some() {
            "drained"
        } else {
            "returned to service"
        };
        println!("gputopo {verb}: {node}: GPU {} {done}", p.changed);
    }
    match &p.node_action {
        Some(NodeAction::Drain(why)) => {
            scontrol(
                sc,
                &[
                    "update",
                    &format!("NodeName={}", p.node),
                    "State=DRAIN",
                    &format!("Reason={why}"),
                ],
            )?;
            println!("gputopo {verb}: {node}: no usable GPU left, node drained ({why})");
        }
        Some(NodeAction::Resume) => {
            scontrol(
                sc,
                &["update", &format!("NodeName={}", p.node), "State=RESUME"],
            )?;
            println!(
                "gputopo {verb}: {node}: a GPU is usable again, node resumed (gputopo had drained it)"
            );
        }
        None => {}
    }
    Ok(0)
}

/// `scontrol show node -o NODE`, exactly that node.
fn show(sc: &str, node: &str) -> anyhow::Result<String> {
    let text = scontrol(sc, &["show", "node", "-o", node])?;
    text.lines()
        .find(|l| value(l, "NodeName").as_deref() == Some(node))
        .map(str::to_string)
        .with_context(|| format!("no node {node} in scontrol show node"))
}

/// Writes `extra`; `Ok(Err(REFUSED))` when slurmctld refuses the caller.
fn write(sc: &str, node: &str, extra: &str, verb: &str) -> anyhow::Result<Result<(), i32>> {
    match scontrol(
        sc,
        &[
            "update",
            &format!("NodeName={node}"),
            &format!("Extra={extra}"),
        ],
    ) {
        Ok(_) => Ok(Ok(())),
        Err(e) if denied(&format!("{e:#}")) => {
            eprintln!(
                "gputopo {verb}: refused by slurmctld: only root, SlurmUser and AdminLevel=Admin users may change a node's GPUs ({e:#})"
            );
            Ok(Err(REFUSED))
        }
        Err(e) => Err(e),
    }
}

fn denied(msg: &str) -> bool {
    let m = msg.to_ascii_lowercase();
    m.contains("permission denied") || m.contains("access denied") || m.contains("invalid user")
}

/// The request, for writing it again.
struct Request<'a> {
    node: &'a str,
    gpus: &'a str,
    reason: Option<&'a str>,
    user: &'a str,
    now: u64,
}

/// Reads the node back and, while a concurrent agent publish put the old drains back, plans
/// the same request on what is there now and writes it again (twice over about a second).
fn verify(sc: &str, r: &Request<'_>, want: &Plan, verb: &str) -> anyhow::Result<()> {
    for _ in 0..2 {
        std::thread::sleep(Duration::from_millis(500));
        let line = show(sc, r.node)?;
        let extra = value(&line, "Extra").unwrap_or_default();
        let now = read_extra(&extra)
            .ok()
            .flatten()
            .map(|h| h.health.drained_wide())
            .unwrap_or_default();
        if now == want.drained {
            continue;
        }
        eprintln!(
            "gputopo {verb}: {}: Extra changed under us (an agent publish?); writing again",
            r.node
        );
        if let Ok(Plan {
            extra: Some(extra), ..
        }) = plan(&line, r.gpus, r.reason, r.user, r.now)
        {
            let _ = write(sc, &want.node, &extra, verb)?;
        }
    }
    Ok(())
}

/// The caller's user name (`id -un`), with the sudo caller's when run through sudo.
fn user_name() -> String {
    let id = Command::new("id")
        .arg("-un")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into());
    match std::env::var("SUDO_USER") {
        Ok(s) if !s.is_empty() && s != id => format!("{s} (as {id})"),
        _ => id,
    }
}

/// Why the caller may not change node Extra, when Slurm's own rules say so: not root, not
/// SlurmUser (`scontrol show config`), and an admin level (`sacctmgr show user`) other than
/// Administrator. `None` when allowed, or when it cannot be told (no slurmdbd: slurmctld then
/// decides, and its refusal is reported the same way).
fn not_allowed(sc: &str, user: &str) -> Option<String> {
    let me = user.split(' ').next().unwrap_or(user);
    if me == "root" {
        return None;
    }
    let config = scontrol(sc, &["show", "config"]).ok()?;
    let slurm_user = config
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("SlurmUser"))
        .and_then(|r| r.split('=').nth(1))
        .map(|v| v.trim().split('(').next().unwrap_or("").to_string())?;
    if slurm_user == me {
        return None;
    }
    let level = Command::new("sacctmgr")
        .args(["-n", "-P", "show", "user", me, "format=adminlevel"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())?;
    match level.as_str() {
        "Administrator" => None,
        "" => None, // not in the accounting database: let slurmctld decide
        other => Some(format!(
            "{me} has AdminLevel={other}; only root, SlurmUser ({slurm_user}) and AdminLevel=Admin users may drain or resume GPUs"
        )),
    }
}
