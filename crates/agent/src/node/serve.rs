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

use super::publish;
use super::settings::Settings;
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
