//! The `log` facade, written into Slurm's own log (slurmctld.log, slurmd.log, stderr of clients).
//!
//! Everything in gputopo logs with `log::error!`/`warn!`/`info!`/`debug!`/`trace!`; this module
//! is the one `log::Log` implementation. Levels go through one table ([`LEVELS`]); the message
//! is formatted once, interior NULs are replaced, and it is passed to `slurm_log_var` as the
//! argument of a constant `"%s"` format, so a message can never become a format string.
//! `enabled()` compares with Slurm's current level (`get_log_level`); [`sync_level`] refreshes
//! `log::max_level` (called from `init` and on reconfigure).

use std::ffi::{CString, c_int};

use log::{Level, LevelFilter, Log, Metadata, Record};

use crate::ffi;

/// gputopo level → (Slurm level, prefix). Slurm adds "error: " itself for LOG_LEVEL_ERROR;
/// warnings print at INFO with "warning: ", like Slurm's `warning()`.
const LEVELS: [(Level, ffi::log_level_t, &str); 5] = [
    (Level::Error, ffi::log_level_t_LOG_LEVEL_ERROR, ""),
    (Level::Warn, ffi::log_level_t_LOG_LEVEL_INFO, "warning: "),
    (Level::Info, ffi::log_level_t_LOG_LEVEL_VERBOSE, ""),
    (Level::Debug, ffi::log_level_t_LOG_LEVEL_DEBUG, ""),
    (Level::Trace, ffi::log_level_t_LOG_LEVEL_DEBUG2, ""),
];

/// The log target of events an administrator must see at Slurm's default level: GPU state
/// changes (`log::info!(target: EVENTS, ...)` prints at Slurm's `info`, not `verbose`).
pub const EVENTS: &str = "gputopo-events";

/// The Slurm level and prefix of a record: [`LEVELS`], but [`EVENTS`] at `info` prints at
/// Slurm's `info` without a prefix.
fn slurm_level_of(metadata: &Metadata<'_>) -> (ffi::log_level_t, &'static str) {
    if metadata.target() == EVENTS && metadata.level() == Level::Info {
        return (ffi::log_level_t_LOG_LEVEL_INFO, "");
    }
    slurm_level(metadata.level())
}

fn slurm_level(level: Level) -> (ffi::log_level_t, &'static str) {
    LEVELS
        .iter()
        .find(|(l, _, _)| *l == level)
        .map_or((ffi::log_level_t_LOG_LEVEL_INFO, ""), |(_, s, p)| (*s, *p))
}

/// Plugin name printed before every message: the role is the log target's module
/// (`gputopo::plugin::priority::*`, `gputopo::slurm::prio::*` → priority; all else → select).
fn role_prefix(target: &str) -> &'static str {
    if target.contains("::prio") {
        "priority/gputopo"
    } else {
        "select/gputopo"
    }
}

fn current_slurm_level() -> c_int {
    // SAFETY: plain getter of libslurmfull's log state; safe from any thread.
    unsafe { ffi::slurm_get_log_level() }
}

/// The most verbose `log` level Slurm would print at its current level (at Slurm's `info`,
/// `Info`, so [`EVENTS`] get through; `enabled` still drops other `info!` records there).
fn filter_for(slurm: c_int) -> LevelFilter {
    let slurm = i64::from(slurm);
    let level = LEVELS
        .iter()
        .rev()
        .find(|(_, s, _)| i64::from(*s) <= slurm)
        .map_or(LevelFilter::Off, |(l, _, _)| l.to_level_filter());
    if slurm >= i64::from(ffi::log_level_t_LOG_LEVEL_INFO) {
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
            role_prefix(record.target()),
            record.args()
        );
        let Ok(msg) = CString::new(text.replace('\0', "\\0")) else {
            return;
        };
        // SAFETY: constant "%s" format with exactly one NUL-terminated string argument.
        unsafe { ffi::slurm_log_var(level, c"%s".as_ptr(), msg.as_ptr()) };
    }

    fn flush(&self) {}
}

/// Routes the `log` facade into Slurm (first call wins; later calls only resync the level).
#[doc(alias = "log_var")]
pub fn install() {
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
            ("quiet", ffi::log_level_t_LOG_LEVEL_QUIET, LevelFilter::Off),
            ("info", ffi::log_level_t_LOG_LEVEL_INFO, LevelFilter::Info),
            (
                "verbose",
                ffi::log_level_t_LOG_LEVEL_VERBOSE,
                LevelFilter::Info,
            ),
            (
                "debug",
                ffi::log_level_t_LOG_LEVEL_DEBUG,
                LevelFilter::Debug,
            ),
            (
                "debug5",
                ffi::log_level_t_LOG_LEVEL_DEBUG5,
                LevelFilter::Trace,
            ),
        ];
        for (name, slurm, want) in cases {
            assert_eq!(filter_for(slurm as c_int), want, "{name}");
        }
    }

    #[test]
    fn role_prefix_follows_the_module() {
        assert_eq!(
            role_prefix("gputopo::plugin::priority::recalc"),
            "priority/gputopo"
        );
        assert_eq!(role_prefix("gputopo::slurm::prio::job"), "priority/gputopo");
        assert_eq!(
            role_prefix("gputopo::plugin::select::steer"),
            "select/gputopo"
        );
    }
}
