//! `gputopo.conf`: where it is, reading it, and keeping the last good settings (in memory
//! and, since 24.11 re-executes slurmctld on reconfigure, in a copy written by the plugin's
//! own thread, never under slurmctld's locks).

use std::path::PathBuf;
use std::sync::{Mutex, OnceLock, PoisonError, mpsc};

use gputopo_core::config::{Config, SelectConfig};

/// Where gputopo.conf is: `$GPUTOPO_CONF`, else next to slurmctld's slurm.conf.
fn config_path() -> PathBuf {
    let slurm_conf = crate::slurm::conf::slurm_conf_path();
    let env = std::env::var_os("GPUTOPO_CONF").map(PathBuf::from);
    gputopo_core::config::config_path(env.as_deref(), slurm_conf.as_deref())
}

/// Reads gputopo.conf (logging the settings) and saves its text as the last good one;
/// `None` for a bad file, logged as an error.
fn read_config() -> Option<SelectConfig> {
    let path = config_path();
    match Config::load_with_text(&path) {
        Ok((c, text)) => {
            log::info!(
                "select config from {}: HealthAware={} TopologyAware={} NodeRanking={} DegradedLast={} PreferAgentTopology={} LogDecisions={}",
                path.display(),
                yes(c.select.health_aware),
                yes(c.select.topology_aware),
                yes(c.select.node_ranking),
                yes(c.select.degraded_last),
                yes(c.select.prefer_agent_topology),
                yes(c.select.log_decisions),
            );
            save_last_good(text);
            Some(c.select)
        }
        Err(e) => {
            log::error!("{e}");
            None
        }
    }
}

/// Where the text of the last gputopo.conf that parsed is kept: 24.11 re-executes
/// slurmctld on `scontrol reconfigure`, so memory alone cannot carry it over.
fn last_good_path() -> Option<PathBuf> {
    crate::slurm::conf::state_save_location().map(|d| d.join("gputopo.conf.last-good"))
}

/// Hands `text` to the saver thread ([`saver`]): the hooks run under slurmctld's locks,
/// where no file is written.
fn save_last_good(text: String) {
    let Some(path) = last_good_path() else { return };
    let sent = saver().and_then(|tx| {
        tx.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .send((path, text))
            .ok()
    });
    if sent.is_none() {
        log::debug!("cannot save the last good gputopo.conf: no saver thread");
    }
}

/// Where the saver thread takes (file, text) pairs from.
type SaveQueue = mpsc::Sender<(PathBuf, String)>;

/// The plugin's own thread that writes the last good gputopo.conf, in order (a later copy
/// never overtaken by an earlier one), each to a temporary name and renamed, so a crash
/// never leaves a truncated copy. Started on first use; `None` if it cannot start.
fn saver() -> Option<&'static Mutex<SaveQueue>> {
    static SAVER: OnceLock<Option<Mutex<SaveQueue>>> = OnceLock::new();
    SAVER
        .get_or_init(|| {
            let (tx, rx) = mpsc::channel::<(PathBuf, String)>();
            std::thread::Builder::new()
                .name("gputopo-conf".into())
                .spawn(move || {
                    for (path, text) in rx {
                        let tmp = path.with_extension("last-good.tmp");
                        let wrote =
                            std::fs::write(&tmp, &text).and_then(|()| std::fs::rename(&tmp, &path));
                        if let Err(e) = wrote {
                            log::debug!("cannot save {}: {e}", path.display());
                        }
                    }
                })
                .ok()
                .map(|_| Mutex::new(tx))
        })
        .as_ref()
}

/// The settings saved by the last good read, if any.
fn saved_last_good() -> Option<SelectConfig> {
    let text = std::fs::read_to_string(last_good_path()?).ok()?;
    Config::parse(&text).ok().map(|c| c.select)
}

/// The settings to use: gputopo.conf when it is good; else `current` (a reconfigure in the
/// same process), else the last good file saved by an earlier read (a 24.11 reconfigure
/// re-executes slurmctld), else the safe defaults. A bad file never resets good settings.
pub(super) fn load_config(current: Option<SelectConfig>) -> SelectConfig {
    if let Some(fresh) = read_config() {
        return fresh;
    }
    if let Some(kept) = current.or_else(saved_last_good) {
        log::error!("keeping the last good select settings");
        return kept;
    }
    log::error!("using the default select settings");
    SelectConfig::default()
}

fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}
