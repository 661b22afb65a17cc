//! How gputopo's records are labelled in Slurm's log ([`slurm_kit::log::Labels`], given to
//! `slurm_kit::log::install` at `init`).

use slurm_kit::log::Labels;

/// The log target of events an administrator must see at Slurm's default level: GPU state
/// changes (`log::info!(target: EVENTS, ...)` prints at Slurm's `info`, not `verbose`).
pub const EVENTS: &str = "gputopo-events";

/// gputopo's labels: the role from the module, [`EVENTS`] as the events target.
pub const LABELS: Labels = Labels {
    prefix: role_prefix,
    events: EVENTS,
};

/// Plugin name printed before every message: the role is the log target's module
/// (`gputopo::plugin::priority::*`, `gputopo::slurm::prio::*` → priority; all else → select).
fn role_prefix(target: &str) -> &'static str {
    if target.contains("::prio") {
        "priority/gputopo"
    } else {
        "select/gputopo"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
