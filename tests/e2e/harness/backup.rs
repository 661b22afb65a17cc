//! The backup controller of a cluster started with [`super::Opts::backup`]: takeover,
//! failback and its log.

use super::{Cluster, WAIT};

/// The line each slurmctld logs when it takes control (controller.c).
const IN_CONTROL: &str = "Running as primary controller";

impl Cluster {
    /// The backup slurmctld's log so far (`log/slurmctld-backup.log`).
    pub fn backup_log(&self) -> String {
        std::fs::read_to_string(self.dir().join("log/slurmctld-backup.log")).unwrap_or_default()
    }

    /// How many times the backup has taken control so far.
    pub fn backup_takeovers(&self) -> usize {
        self.backup_log().matches(IN_CONTROL).count()
    }

    /// `scontrol takeover`: the backup asks the primary to hand over (the primary saves its
    /// state and exits) and takes control; waits until it has.
    pub fn takeover(&self) {
        let before = self.backup_takeovers();
        self.ok("scontrol", &["takeover"]);
        self.wait_until("the backup to take control", WAIT, || {
            self.backup_takeovers() > before
        });
    }

    /// Failback: starts the primary again, which asks the backup to relinquish control (the
    /// backup saves its state and returns to standby), and waits until the primary is in
    /// control and every node has re-registered.
    pub fn failback(&self) {
        let before = self.slurmctld_log().matches(IN_CONTROL).count();
        self.cluster_sh(&["restart", "slurmctld"]);
        self.wait_until("the primary to take control back", WAIT, || {
            self.slurmctld_log().matches(IN_CONTROL).count() > before
                && ends_in_standby(&self.backup_log())
        });
        self.wait_gres_registered();
    }
}

/// True when the last control change in `log` is the return to standby.
fn ends_in_standby(log: &str) -> bool {
    let standby = log.rfind("slurmctld running in background mode");
    standby.is_some_and(|s| log.rfind(IN_CONTROL).is_none_or(|c| c < s))
}
