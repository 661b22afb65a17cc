//! The `log` facade, written into Slurm's own log (slurmctld.log, slurmd.log, stderr of clients).
//!
//! A plugin logs with `log::error!`/`warn!`/`info!`/`debug!`/`trace!`; this module is the one
//! `log::Log` implementation. Levels go through one table (`LEVELS`); the message
//! is formatted once, interior NULs are replaced, and it is passed to `slurm_log_var` as the
//! argument of a constant `"%s"` format, so a message can never become a format string.
//! `enabled()` compares with Slurm's current level (`get_log_level`); [`sync_level`] refreshes
//! `log::max_level` (called from `init` and on reconfigure). The plugin names its records with
//! [`Labels`], given to [`install`].

use std::ffi::{CString, c_int};
use std::sync::OnceLock;

use log::{Level, LevelFilter, Log, Metadata, Record};

use crate::sys;

/// `log` level → (Slurm level, prefix). Slurm adds "error: " itself for LOG_LEVEL_ERROR;
/// warnings print at INFO with "warning: ", like Slurm's `warning()`.
const LEVELS: [(Level, sys::log_level_t, &str); 5] = [
    (Level::Error, sys::log_level_t_LOG_LEVEL_ERROR, ""),
    (Level::Warn, sys::log_level_t_LOG_LEVEL_INFO, "warning: "),
    (Level::Info, sys::log_level_t_LOG_LEVEL_VERBOSE, ""),
    (Level::Debug, sys::log_level_t_LOG_LEVEL_DEBUG, ""),
    (Level::Trace, sys::log_level_t_LOG_LEVEL_DEBUG2, ""),
];

/// How a plugin labels its records in Slurm's log.
#[derive(Debug, Clone, Copy)]
pub struct Labels {
    /// The plugin name printed before every message (`select/gputopo: ...`), chosen from the
    /// record's target (its module path), so one library serving several roles labels each.
    pub prefix: fn(target: &str) -> &'static str,
    /// The log target of events an administrator must see at Slurm's default level:
    /// `log::info!(target: events, ...)` prints at Slurm's `info`, not `verbose`.
    pub events: &'static str,
}

/// Labels before [`install`] runs (tests): no prefix, no events target.
const UNLABELLED: Labels = Labels {
    prefix: |_| "",
    events: "",
};

static LABELS: OnceLock<Labels> = OnceLock::new();

fn labels() -> &'static Labels {
    LABELS.get().unwrap_or(&UNLABELLED)
}

/// The Slurm level and prefix of a record: [`LEVELS`], but the events target at `info` prints
/// at Slurm's `info` without a prefix.
fn slurm_level_of(metadata: &Metadata<'_>) -> (sys::log_level_t, &'static str) {
    let events = labels().events;
    if !events.is_empty() && metadata.target() == events && metadata.level() == Level::Info {
        return (sys::log_level_t_LOG_LEVEL_INFO, "");
    }
    slurm_level(metadata.level())
}

fn slurm_level(level: Level) -> (sys::log_level_t, &'static str) {
    LEVELS
        .iter()
        .find(|(l, _, _)| *l == level)
        .map_or((sys::log_level_t_LOG_LEVEL_INFO, ""), |(_, s, p)| (*s, *p))
}

fn current_slurm_level() -> c_int {
    // SAFETY: plain getter of libslurmfull's log state; safe from any thread.
    unsafe { sys::slurm_get_log_level() }
}

/// The most verbose `log` level Slurm would print at its current level (at Slurm's `info`,
/// `Info`, so the events target gets through; `enabled` still drops other `info!` records there).
fn filter_for(slurm: c_int) -> LevelFilter {
    let slurm = i64::from(slurm);
    let level = LEVELS
        .iter()
        .rev()
        .find(|(_, s, _)| i64::from(*s) <= slurm)
        .map_or(LevelFilter::Off, |(l, _, _)| l.to_level_filter());
    if slurm >= i64::from(sys::log_level_t_LOG_LEVEL_INFO) {
        level.max(LevelFilter::Info)
    } else {
        level
    }
}

struct SlurmLogger;

static LOGGER: SlurmLogger = SlurmLogger;

impl Log for SlurmLogger {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        i64::from(slurm_level_of(metadata).0) <= i64::from(current_slurm_level())
    }

    fn log(&self, record: &Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let (level, prefix) = slurm_level_of(record.metadata());
        let text = format!(
            "{prefix}{}: {}",
            (labels().prefix)(record.target()),
            record.args()
        );
        let Ok(msg) = CString::new(text.replace('\0', "\\0")) else {
            return;
        };
        // SAFETY: constant "%s" format with exactly one NUL-terminated string argument.
        unsafe { sys::slurm_log_var(level, c"%s".as_ptr(), msg.as_ptr()) };
    }

    fn flush(&self) {}
}

/// Routes the `log` facade into Slurm, labelled with `labels` (first call wins; later calls
/// only resync the level).
#[doc(alias = "log_var")]
pub fn install(labels: Labels) {
    // An Err only means the labels are already set (by an earlier init of this library).
    let _already_set = LABELS.set(labels);
    // An Err only means a logger is already set in this process (our own, from an earlier init).
    let _already_set = log::set_logger(&LOGGER);
    sync_level();
}

/// Sets `log::max_level` from Slurm's current log level (init and reconfigure).
#[doc(alias = "get_log_level")]
pub fn sync_level() {
    log::set_max_level(filter_for(current_slurm_level()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slurm_levels_map_to_filters() {
        let cases = [
            ("quiet", sys::log_level_t_LOG_LEVEL_QUIET, LevelFilter::Off),
            ("info", sys::log_level_t_LOG_LEVEL_INFO, LevelFilter::Info),
            (
                "verbose",
                sys::log_level_t_LOG_LEVEL_VERBOSE,
                LevelFilter::Info,
            ),
            (
                "debug",
                sys::log_level_t_LOG_LEVEL_DEBUG,
                LevelFilter::Debug,
            ),
            (
                "debug5",
                sys::log_level_t_LOG_LEVEL_DEBUG5,
                LevelFilter::Trace,
            ),
        ];
        for (name, slurm, want) in cases {
            assert_eq!(filter_for(slurm as c_int), want, "{name}");
        }
    }
}
