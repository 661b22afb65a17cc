//! `gputopo serve`: the agent as a long-lived service (issue 27 item 4), for sites that prefer
//! it to slurmd's HealthCheckProgram (which stays as it is). It listens to NVML's XID events
//! the whole time between checks (a check ends shortly after an XID arrives, so the XID is
//! published at once), reads the kernel log for anything logged while it was not listening
//! (a restart, a check running), and publishes like `publish`: only on a change, or when the
//! published report is `PublishRefreshSec` old. gputopo.conf is read again at every check.
//!
//! Each check is one `publish` with `XidWaitMs` set to the interval; one NVML handle serves
//! every check. A failing check (NVML, scontrol) is logged and the service goes on; only bad
//! arguments stop it. contrib/systemd/gputopo-agent.service runs it under systemd.
//!
//! The Debian package enables that unit on install (Debian's convention), so the service must
//! not publish where nothing asked for it: it stands down (one line, exit 0, which systemd's
//! `Restart=on-failure` leaves stopped) when this host has no slurm.conf (`$SLURM_CONF`, else
//! /etc/slurm/slurm.conf: not configured yet, or a configless node whose settings file does not
//! name the cached copy), or when slurm.conf's `HealthCheckProgram` runs gputopo already (two
//! publishers would race on the node's Extra and the agent's state file). `--dry-run`
//! publishes nothing and always runs.

use super::publish;
use super::settings::Settings;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Arguments of `gputopo serve`.
#[derive(clap::Args)]
pub struct ServeArgs {
    /// What each check publishes, as for `gputopo publish`.
    #[command(flatten)]
    pub publish: publish::Args,
    /// Seconds between checks when no XID arrives.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub interval: u64,
    /// Stop after this many checks (tests); default: run until stopped.
    #[arg(long)]
    pub checks: Option<u64>,
}

/// Runs the service.
///
/// # Errors
/// Only when gputopo.conf cannot be read at the first check (a later bad edit is logged and
/// the previous settings kept).
pub fn run(args: ServeArgs) -> anyhow::Result<i32> {
    if !args.publish.dry_run {
        let conf = std::env::var_os("SLURM_CONF")
            .filter(|v| !v.is_empty())
            .map_or_else(|| PathBuf::from("/etc/slurm/slurm.conf"), PathBuf::from);
        let text = std::fs::read_to_string(&conf).ok();
        if let Some(why) = stand_down(&conf, text.as_deref()) {
            eprintln!("gputopo: serve: not running: {why}");
            return Ok(0);
        }
    }
    let interval = Duration::from_secs(args.interval);
    let mut settings = listen(Settings::load(args.publish.node.clone())?, interval);
    eprintln!(
        "gputopo: serve: node {}: listening for XIDs, checking every {} s",
        settings.node, args.interval
    );
    let mut done = 0u64;
    while args.checks.is_none_or(|n| done < n) {
        match Settings::load(args.publish.node.clone()) {
            Ok(s) => settings = listen(s, interval),
            Err(e) => eprintln!("gputopo: serve: {e:#}; keeping the previous settings"),
        }
        match publish::publish(&args.publish, &settings) {
            Ok(0) => {}
            Ok(code) => eprintln!("gputopo: serve: check exited {code} (see above)"),
            Err(e) => eprintln!("gputopo: serve: check failed: {e:#}"),
        }
        done += 1;
    }
    Ok(0)
}

/// Settings for one service check: listen for XIDs the whole interval, within the deadline.
fn listen(mut s: Settings, interval: Duration) -> Settings {
    let ms = u64::try_from(interval.as_millis()).unwrap_or(u64::MAX);
    s.listen = true;
    s.config.agent.xid_wait_ms = ms;
    s.config.agent.nvml_timeout_ms = s.config.agent.nvml_timeout_ms.saturating_add(ms);
    s
}

/// Why the service must not publish on this host, given slurm.conf at `path` (its text, `None`
/// when unreadable); `None` when it may. Only slurm.conf itself is read for
/// `HealthCheckProgram` (Slurm's last setting wins; an `Include`d one is not seen).
fn stand_down(path: &Path, text: Option<&str>) -> Option<String> {
    let Some(text) = text else {
        return Some(format!(
            "no slurm.conf at {} (set SLURM_CONF in the package's settings file, \
             /etc/default/gputopo or /etc/sysconfig/gputopo, then restart the service)",
            path.display()
        ));
    };
    let program = text
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter_map(|l| l.split_once('='))
        .filter(|(k, _)| k.trim().eq_ignore_ascii_case("HealthCheckProgram"))
        .map(|(_, v)| v.trim())
        .next_back()?;
    program.contains("gputopo").then(|| {
        format!(
            "{} has HealthCheckProgram={program}, which publishes this node's GPU health \
             already; use the service or the health check, not both \
             (`systemctl disable gputopo-agent`, or remove HealthCheckProgram and restart)",
            path.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::stand_down;
    use std::path::Path;

    #[test]
    fn the_service_stands_down_without_slurm_conf_or_beside_the_health_check() {
        let p = Path::new("/etc/slurm/slurm.conf");
        let why = stand_down(p, None).expect("no slurm.conf");
        assert!(
            why.contains("no slurm.conf at /etc/slurm/slurm.conf"),
            "{why}"
        );
        assert_eq!(
            stand_down(p, Some("ClusterName=c\nNodeName=n1 Gres=gpu:8\n")),
            None
        );
        let hc = "ClusterName=c\nhealthcheckprogram = /usr/libexec/gputopo/healthcheck\n";
        let why = stand_down(p, Some(hc)).expect("health check runs gputopo");
        assert!(
            why.contains("HealthCheckProgram=/usr/libexec/gputopo/healthcheck"),
            "{why}"
        );
        // Another site's health check (NHC), a commented one, or a later line that replaces it.
        assert_eq!(
            stand_down(p, Some("HealthCheckProgram=/usr/sbin/nhc\n")),
            None
        );
        assert_eq!(
            stand_down(p, Some("#HealthCheckProgram=/usr/bin/gputopo\n")),
            None
        );
        let later =
            "HealthCheckProgram=/usr/bin/gputopo publish\nHealthCheckProgram=/usr/sbin/nhc\n";
        assert_eq!(stand_down(p, Some(later)), None);
    }
}
