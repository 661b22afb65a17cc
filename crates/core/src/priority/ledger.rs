//! gputopo's usage ledger: fair share and its inputs without slurmdbd.
//!
//! Why: without slurmdbd there are no associations, multifactor zeroes the fair-share weight and
//! GPU usage counts for nothing. gputopo keeps its own ledger of decayed GPU-seconds and TRES
//! billing-seconds per (account, user), charged every PriorityCalcPeriod for running jobs, and
//! ranks users with Fair Tree over the tree root → account → user (all `FairShare=1`).
//!
//! Decay is multifactor's: per second `d = 1 - 0.693 / PriorityDecayHalfLife` (1 when the half
//! life is 0), so usage × `d^Δt` after Δt seconds, and a job's new usage over a period of Δt
//! seconds is `Δt · d^Δt` × its GPUs (resp. billing), as `_apply_new_usage` charges it.
//! The fair-share usage of an entry is `gpu_secs · gpu_weight + billing_secs · billing_weight`
//! ([`UsageWeights`], both 1 by default).
//!
//! Persistence: JSON in `StateSaveLocation/gputopo_priority_ledger.json` ([`Ledger::to_json`],
//! [`Ledger::from_json`]); reading and writing the file is [`super::ledger_file`].

use super::fair_tree::{AssocId, AssocTree};
use super::reset::ResetSchedule;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The account every job is charged to and ranked under without slurmdbd.
///
/// Why: without slurmdbd `--account` is free text that nothing checks, so it is not
/// recognised. Keyed by (account, user), a user who submits under a fresh name starts that
/// entry with no usage (the top fair-share factor) and leaves an entry behind that takes
/// months to decay. So without slurmdbd fair share is per user: all of a user's jobs, under any
/// account text, share one entry, and the ledger has at most one entry per user.
pub const UNVERIFIED_ACCOUNT: &str = "";

/// File name of the ledger inside StateSaveLocation.
pub const LEDGER_FILE: &str = "gputopo_priority_ledger.json";
const FORMAT_VERSION: u32 = 1;

/// Errors reading or writing the ledger.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// The file could not be read/written.
    #[error("priority ledger {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The file is not a ledger this version understands.
    #[error("priority ledger {path} is corrupt: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// Decayed usage of one (account, user).
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Usage {
    /// Decayed GPU-seconds.
    pub gpu_secs: f64,
    /// Decayed TRES-billing-seconds.
    pub billing_secs: f64,
}

/// How an entry's usage turns into fair-share usage.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UsageWeights {
    /// Weight of a GPU-second.
    pub gpu: f64,
    /// Weight of a billing-second.
    pub billing: f64,
}

impl Default for UsageWeights {
    fn default() -> Self {
        UsageWeights {
            gpu: 1.0,
            billing: 1.0,
        }
    }
}

/// One running job's consumption over a charge interval.
#[derive(Clone, Debug, PartialEq)]
pub struct UsageCharge {
    /// Account name.
    pub account: String,
    /// User name (or uid as text).
    pub user: String,
    /// GPUs allocated, in GPU equivalents: whole GPUs plus the shares of shared GRES
    /// (`shard`, `mps`) as the part of a GPU they are ([`super::gpu_count::shared_gpu_share`]).
    pub gpus: f64,
    /// TRES billing of the allocation (`billable_tres`).
    pub billing: f64,
    /// Seconds of the interval the job ran (already clipped to its start/end).
    pub run_secs: f64,
}

/// On-disk entry. Usage is written as text (Rust's shortest round-trip form) because
/// serde_json's default float parser is not exact, and the ledger must survive restarts bit
/// for bit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Entry {
    account: String,
    user: String,
    gpu_secs: String,
    billing_secs: String,
}

#[derive(Serialize, Deserialize)]
struct OnDisk {
    version: u32,
    last_decay: i64,
    /// When usage was last cleared by `PriorityUsageResetPeriod` (0: never; files written
    /// before this field existed read as 0).
    #[serde(default)]
    last_reset: i64,
    entries: Vec<Entry>,
}

/// The ledger. Keys are (account, user).
#[derive(Clone, Debug, PartialEq)]
pub struct Ledger {
    half_life_secs: u32,
    last_decay: i64,
    last_reset: i64,
    entries: BTreeMap<(String, String), Usage>,
}

impl Ledger {
    /// An empty ledger whose clock starts at `now`.
    pub fn new(half_life_secs: u32, now: i64) -> Self {
        Ledger {
            half_life_secs,
            last_decay: now,
            last_reset: 0,
            entries: BTreeMap::new(),
        }
    }

    /// Changes the half life (reconfigure).
    pub fn set_half_life(&mut self, half_life_secs: u32) {
        self.half_life_secs = half_life_secs;
    }

    /// When usage was last decayed (and running jobs last charged).
    pub fn last_decay(&self) -> i64 {
        self.last_decay
    }

    /// Moves a `last_decay` later than `now` back to `now` (a clock stepped back, or a file from
    /// another host); returns the old value if it was clamped. Otherwise decay would stop until
    /// that time, and usage charged from `last_decay` on would be lost.
    pub fn clamp_last_decay(&mut self, now: i64) -> Option<i64> {
        (self.last_decay > now).then(|| std::mem::replace(&mut self.last_decay, now))
    }

    /// Multifactor's per-second decay factor.
    pub fn decay_factor(&self) -> f64 {
        if self.half_life_secs > 0 {
            1.0 - (0.693 / f64::from(self.half_life_secs))
        } else {
            1.0
        }
    }

    /// Decays all usage from the last decay to `now` (no-op if `now` is not later), and drops
    /// entries whose usage decayed below 1e-9.
    pub fn decay_to(&mut self, now: i64) {
        let delta = now - self.last_decay;
        if delta <= 0 {
            return;
        }
        let mut real = self.decay_factor().powf(delta as f64);
        if real < f64::MIN_POSITIVE {
            real = f64::MIN_POSITIVE;
        }
        for u in self.entries.values_mut() {
            u.gpu_secs *= real;
            u.billing_secs *= real;
        }
        self.entries
            .retain(|_, u| u.gpu_secs >= 1e-9 || u.billing_secs >= 1e-9);
        self.last_decay = now;
    }

    /// Applies `PriorityUsageResetPeriod` at `now` (the decay loop's pass), as multifactor's
    /// decay thread does ([`ResetSchedule::due`]); returns whether usage was cleared.
    pub fn apply_reset(&mut self, schedule: &mut ResetSchedule, now: i64, utc_offset: i64) -> bool {
        let due = schedule.due(&mut self.last_reset, now, utc_offset);
        if due {
            self.entries.clear();
        }
        due
    }

    /// When usage was last cleared by `PriorityUsageResetPeriod` (0: never).
    pub fn last_reset(&self) -> i64 {
        self.last_reset
    }

    /// Adds one job's usage over an interval, decayed as `_apply_new_usage` does.
    pub fn charge(&mut self, c: &UsageCharge) {
        if c.run_secs.is_nan() || c.run_secs <= 0.0 {
            return;
        }
        let run_decay = c.run_secs * self.decay_factor().powf(c.run_secs);
        let u = self
            .entries
            .entry((c.account.clone(), c.user.clone()))
            .or_default();
        u.gpu_secs += run_decay * c.gpus;
        u.billing_secs += run_decay * c.billing;
    }

    /// The usage of one (account, user), if any.
    pub fn usage(&self, account: &str, user: &str) -> Option<Usage> {
        self.entries
            .get(&(account.to_string(), user.to_string()))
            .copied()
    }

    /// Merges every entry into its user's [`UNVERIFIED_ACCOUNT`] entry (ledgers written before
    /// accounts stopped being recognised without slurmdbd); returns how many were merged.
    pub fn fold_accounts(&mut self) -> usize {
        let old = std::mem::take(&mut self.entries);
        let mut merged = 0;
        for ((account, user), u) in old {
            merged += usize::from(account != UNVERIFIED_ACCOUNT);
            let e = self
                .entries
                .entry((UNVERIFIED_ACCOUNT.to_string(), user))
                .or_default();
            e.gpu_secs += u.gpu_secs;
            e.billing_secs += u.billing_secs;
        }
        merged
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the ledger is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Fair-share factors by Fair Tree over root → account → user for every ledger entry plus
    /// every `extra` (account, user) without usage (users with pending jobs must rank too).
    /// Returns the factor per (account, user) and the tree (for sshare-like reporting).
    pub fn fair_share<'a>(
        &self,
        weights: UsageWeights,
        extra: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> (BTreeMap<(String, String), f64>, AssocTree) {
        let mut keys: BTreeMap<(String, String), f64> = self
            .entries
            .iter()
            .map(|(k, u)| {
                (
                    k.clone(),
                    u.gpu_secs * weights.gpu + u.billing_secs * weights.billing,
                )
            })
            .collect();
        for (a, u) in extra {
            keys.entry((a.to_string(), u.to_string())).or_insert(0.0);
        }
        let mut tree = AssocTree::new();
        let root = tree.root();
        let mut accounts: BTreeMap<&str, AssocId> = BTreeMap::new();
        let mut users: Vec<((String, String), AssocId)> = Vec::with_capacity(keys.len());
        for ((acct, user), usage) in &keys {
            let a = *accounts
                .entry(acct.as_str())
                .or_insert_with(|| tree.add(root, false, 1, 0.0));
            let id = tree.add(a, true, 1, 0.0);
            tree.add_usage_upwards(id, *usage);
            users.push(((acct.clone(), user.clone()), id));
        }
        tree.normalise_shares(true);
        tree.fair_tree(tree.user_count());
        let out = users
            .into_iter()
            .map(|(k, id)| (k, tree.nodes[id.0].fs_factor))
            .collect();
        (out, tree)
    }

    /// Serialises the ledger.
    pub fn to_json(&self) -> String {
        let disk = OnDisk {
            version: FORMAT_VERSION,
            last_decay: self.last_decay,
            last_reset: self.last_reset,
            entries: self
                .entries
                .iter()
                .map(|((a, u), usage)| Entry {
                    account: a.clone(),
                    user: u.clone(),
                    gpu_secs: usage.gpu_secs.to_string(),
                    billing_secs: usage.billing_secs.to_string(),
                })
                .collect(),
        };
        serde_json::to_string_pretty(&disk).unwrap_or_default()
    }

    /// Parses a serialised ledger.
    ///
    /// # Errors
    /// [`LedgerError::Corrupt`] for bad JSON, an unknown version or negative/non-finite usage.
    pub fn from_json(text: &str, half_life_secs: u32, path: &Path) -> Result<Ledger, LedgerError> {
        let corrupt = |reason: String| LedgerError::Corrupt {
            path: path.to_path_buf(),
            reason,
        };
        let disk: OnDisk = serde_json::from_str(text).map_err(|e| corrupt(e.to_string()))?;
        if disk.version != FORMAT_VERSION {
            return Err(corrupt(format!(
                "version {} (expected {FORMAT_VERSION})",
                disk.version
            )));
        }
        let mut entries = BTreeMap::new();
        for e in disk.entries {
            let parse = |v: &str| v.parse::<f64>().ok().filter(|v| v.is_finite() && *v >= 0.0);
            let (Some(gpu_secs), Some(billing_secs)) = (parse(&e.gpu_secs), parse(&e.billing_secs))
            else {
                return Err(corrupt(format!("bad usage for {}/{}", e.account, e.user)));
            };
            entries.insert(
                (e.account, e.user),
                Usage {
                    gpu_secs,
                    billing_secs,
                },
            );
        }
        Ok(Ledger {
            half_life_secs,
            last_decay: disk.last_decay,
            last_reset: disk.last_reset,
            entries,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::priority::reset::ResetPeriod;

    fn charge(acct: &str, user: &str, gpus: u64, secs: f64) -> UsageCharge {
        UsageCharge {
            account: acct.into(),
            user: user.into(),
            gpus: gpus as f64,
            billing: 0.0,
            run_secs: secs,
        }
    }

    #[test]
    fn decays_by_half_over_half_life_approximately() {
        let mut l = Ledger::new(3600, 0);
        l.charge(&charge("a", "u", 1, 1.0));
        let before = l.usage("a", "u").expect("entry").gpu_secs;
        l.decay_to(3600);
        let after = l.usage("a", "u").expect("entry").gpu_secs;
        // multifactor's linearised factor gives 0.49995..., not exactly 0.5.
        assert!((after / before - 0.5).abs() < 1e-3, "{}", after / before);
    }

    #[test]
    fn no_decay_with_zero_half_life() {
        let mut l = Ledger::new(0, 0);
        l.charge(&charge("a", "u", 2, 10.0));
        l.decay_to(1_000_000);
        assert_eq!(l.usage("a", "u").map(|u| u.gpu_secs), Some(20.0));
    }

    #[test]
    fn heavy_user_ranks_below_idle_user() {
        let mut l = Ledger::new(0, 0);
        l.charge(&charge("a", "heavy", 8, 3600.0));
        let (fs, _) = l.fair_share(UsageWeights::default(), [("a", "idle")]);
        assert_eq!(fs[&("a".to_string(), "idle".to_string())], 1.0);
        assert_eq!(fs[&("a".to_string(), "heavy".to_string())], 0.5);
    }

    #[test]
    fn folding_accounts_keeps_each_users_total() {
        let mut l = Ledger::new(0, 0);
        l.charge(&charge("a", "u", 1, 10.0));
        l.charge(&charge("fresh", "u", 2, 10.0));
        l.charge(&charge(UNVERIFIED_ACCOUNT, "v", 1, 5.0));
        assert_eq!(l.fold_accounts(), 2);
        assert_eq!(l.len(), 2);
        assert_eq!(
            l.usage(UNVERIFIED_ACCOUNT, "u").map(|u| u.gpu_secs),
            Some(30.0)
        );
        assert_eq!(
            l.usage(UNVERIFIED_ACCOUNT, "v").map(|u| u.gpu_secs),
            Some(5.0)
        );
    }

    #[test]
    fn usage_reset_period_clears_like_multifactor() {
        let day = 86_400;
        let t0 = 1_796_121_000; // 2026-12-01 10:30 UTC
        let charge = |l: &mut Ledger| {
            l.charge(&UsageCharge {
                account: UNVERIFIED_ACCOUNT.into(),
                user: "1000".into(),
                gpus: 1.0,
                billing: 1.0,
                run_secs: 60.0,
            })
        };
        let mut l = Ledger::new(0, t0);
        charge(&mut l);
        let mut none = ResetSchedule::new(ResetPeriod::None);
        assert!(!l.apply_reset(&mut none, t0 + 400 * day, 0));
        let mut daily = ResetSchedule::new(ResetPeriod::Daily);
        l.last_reset = 0;
        assert!(!l.apply_reset(&mut daily, t0, 0), "counts from now");
        assert!(!l.apply_reset(&mut daily, t0 + 3600, 0));
        assert_eq!(l.len(), 1);
        assert!(l.apply_reset(&mut daily, t0 + day, 0), "after midnight");
        assert!(l.is_empty());
        let midnight = t0 - 10 * 3600 - 1800 + day;
        assert_eq!(l.last_reset(), midnight);
        charge(&mut l);
        // The reset time survives the file.
        let back = Ledger::from_json(&l.to_json(), 0, Path::new("x")).unwrap();
        assert_eq!(back.last_reset(), midnight);
        assert!(!l.clone().apply_reset(
            &mut ResetSchedule::new(ResetPeriod::Daily),
            midnight + 3600,
            0
        ));
        // NOW clears once per schedule (the loop's start, each reconfigure).
        let mut now = ResetSchedule::new(ResetPeriod::Now);
        assert!(l.apply_reset(&mut now, t0 + 2 * day, 0));
        assert!(l.is_empty());
        charge(&mut l);
        assert!(!l.apply_reset(&mut now, t0 + 2 * day + 60, 0));
        assert_eq!(l.len(), 1);
        // A file without the field reads as "never reset".
        let old = r#"{"version":1,"last_decay":5,"entries":[]}"#;
        let o = Ledger::from_json(old, 0, Path::new("x")).unwrap();
        assert_eq!(o.last_reset(), 0);
    }
}
