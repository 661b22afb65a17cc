//! Per-GPU drains: GPUs an administrator took out of service by hand (`gputopo drain`), kept
//! in the node's `Extra` next to the agent's health:
//!
//! ```text
//! {"gpu_drained":"3","gpu_ok":7,...,"gputopo":{...},
//!  "gputopo_drain":{"v":1,"gpus":[{"i":3,"r":"RMA 1234","u":"alice","t":1764583200}]}, ...}
//! ```
//!
//! - `gputopo_drain` is the source of truth: GRES index, reason, who, when (Unix s). Only
//!   `gputopo drain`/`resume` write it; the agent's publish keeps it as it is (it owns the
//!   `gputopo` object and the flat health keys, never this key), so a drain survives every
//!   publish, and everything that keeps `Extra` (slurmctld's node state file, the select
//!   plugin's persisted last good health) keeps drains too.
//! - A drained GPU is never allocated to a new job, whatever its health; running jobs keep it.
//! - Why not Slurm's own state: no Slurm release can drain one GPU of a node (only the node,
//!   or a lower GPU count that renumbers nothing).
//! - Strict: a `gputopo_drain` that does not parse makes the whole record malformed, so the
//!   select plugin keeps the node's last good health (drains included) instead of forgetting
//!   a drain (fail closed).

use super::ExtraError;
use crate::wideset::{MAX_INDEX, WideSet};

/// The `Extra` key of the drains.
pub const KEY: &str = "gputopo_drain";

/// The drain format version.
pub const VERSION: u32 = 1;

/// Longest reason kept (bytes; longer ones are cut at a character boundary by the writer).
pub const MAX_REASON: usize = 200;

/// One drained GPU.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Drain {
    /// Slurm GRES index.
    #[serde(rename = "i")]
    pub index: usize,
    /// Why (the administrator's words).
    #[serde(rename = "r", default)]
    pub reason: String,
    /// Who drained it (user name).
    #[serde(rename = "u", default)]
    pub user: String,
    /// When (Unix seconds).
    #[serde(rename = "t", default)]
    pub time: u64,
}

/// The wire form of the key's value.
#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct Wire {
    pub(super) v: u32,
    #[serde(default)]
    pub(super) gpus: Vec<Drain>,
}

/// The drains of a parsed `gputopo_drain` value, checked: the version, and indices below
/// [`MAX_INDEX`]; sorted by index, one entry per GPU (the first kept).
///
/// # Errors
/// [`ExtraError`] for another version or an index out of range.
pub(super) fn check(w: Wire) -> Result<Vec<Drain>, ExtraError> {
    if w.v != VERSION {
        return Err(ExtraError(format!(
            "{KEY}: version {} is not supported (this gputopo reads {VERSION})",
            w.v
        )));
    }
    if let Some(d) = w.gpus.iter().find(|d| d.index >= MAX_INDEX) {
        return Err(ExtraError(format!(
            "{KEY}: GPU index {} is out of range",
            d.index
        )));
    }
    let mut gpus = w.gpus;
    gpus.sort_by_key(|d| d.index);
    gpus.dedup_by_key(|d| d.index);
    Ok(gpus)
}

/// The key's value for `drains` (compact JSON), `None` when there is none (the key is then
/// left out).
pub fn to_json(drains: &[Drain]) -> Option<String> {
    if drains.is_empty() {
        return None;
    }
    let wire = Wire {
        v: VERSION,
        gpus: drains.to_vec(),
    };
    serde_json::to_string(&wire).ok()
}

/// The drained GPUs as a set.
pub fn indices(drains: &[Drain]) -> WideSet {
    drains.iter().map(|d| d.index).collect()
}

/// `drains` with `gpus` drained for `reason` by `user` at `time` (a GPU already drained keeps
/// its first entry: the drain it is in), sorted by index.
pub fn add(drains: &[Drain], gpus: &WideSet, reason: &str, user: &str, time: u64) -> Vec<Drain> {
    let mut reason = reason.trim().to_string();
    if reason.len() > MAX_REASON {
        let mut cut = MAX_REASON;
        while !reason.is_char_boundary(cut) {
            cut -= 1;
        }
        reason.truncate(cut);
    }
    let mut out = drains.to_vec();
    let have = indices(drains);
    out.extend(
        gpus.iter()
            .filter(|&i| !have.contains(i))
            .map(|index| Drain {
                index,
                reason: reason.clone(),
                user: user.to_string(),
                time,
            }),
    );
    out.sort_by_key(|d| d.index);
    out
}

/// `drains` without `gpus`.
pub fn remove(drains: &[Drain], gpus: &WideSet) -> Vec<Drain> {
    drains
        .iter()
        .filter(|d| !gpus.contains(d.index))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(v: &[usize]) -> WideSet {
        v.iter().copied().collect()
    }

    #[test]
    fn add_and_remove_keep_one_entry_per_gpu() {
        let d = add(&[], &set(&[3, 1]), "  RMA 1234 ", "alice", 10);
        assert_eq!(indices(&d), set(&[1, 3]));
        assert_eq!(d[0].reason, "RMA 1234");
        let d2 = add(&d, &set(&[3, 5]), "slow", "bob", 20);
        assert_eq!(indices(&d2), set(&[1, 3, 5]));
        assert_eq!(
            (d2[1].user.as_str(), d2[1].time),
            ("alice", 10),
            "first drain kept"
        );
        assert_eq!(indices(&remove(&d2, &set(&[1, 5, 9]))), set(&[3]));
        let long = add(&[], &set(&[0]), &"é".repeat(300), "a", 0);
        assert!(long[0].reason.len() <= MAX_REASON);
    }

    #[test]
    fn the_wire_form_is_checked() {
        let json = to_json(&add(&[], &set(&[2]), "x", "root", 5)).expect("json");
        assert_eq!(json, r#"{"v":1,"gpus":[{"i":2,"r":"x","u":"root","t":5}]}"#);
        assert_eq!(to_json(&[]), None);
        let parse = |s: &str| check(serde_json::from_str::<Wire>(s).expect("wire"));
        assert!(parse(r#"{"v":2,"gpus":[]}"#).is_err());
        assert!(parse(r#"{"v":1,"gpus":[{"i":5000}]}"#).is_err());
        let two = parse(r#"{"v":1,"gpus":[{"i":4,"r":"b"},{"i":1},{"i":4,"r":"c"}]}"#).expect("ok");
        assert_eq!(indices(&two), set(&[1, 4]));
        assert_eq!(two[1].reason, "b");
    }
}
