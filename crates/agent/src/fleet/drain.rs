//! `gputopo drain` / `gputopo resume`: what to write for taking GPUs of a node out of service
//! by hand and returning them, from the node's `scontrol show node -o` record. Pure; the
//! command (cmd_drain) runs scontrol.
//!
//! The drains live in the node's `Extra` (`gputopo_core::health::extra::drain`), which Slurm
//! lets only root, SlurmUser and `AdminLevel=Admin` users change: Slurm's own permission is
//! the permission to drain. When every GPU of the node is then unusable (faulty or drained),
//! the node itself is drained with a `gputopo:` reason, so `sinfo -R` finds it; resuming a GPU
//! of such a node resumes it (only when the reason is gputopo's, never an administrator's own).

use super::records::{Record, gpu_count};
use gputopo_core::health::extra::drain;
use gputopo_core::health::extra::history::{Event, Source};
use gputopo_core::health::{MergeRefused, NodeHealth, read_extra, write_drains};
use gputopo_core::wideset::WideSet;

/// The prefix of the node reason gputopo sets (and the only one it ever clears).
pub const NODE_REASON_PREFIX: &str = "gputopo:";

/// What to do to the node's own Slurm state besides `Extra`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeAction {
    /// `State=DRAIN Reason=<reason>`: no GPU of the node is usable any more.
    Drain(String),
    /// `State=RESUME`: a GPU is usable again and the node was drained by gputopo.
    Resume,
}

/// The plan for one node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The node.
    pub node: String,
    /// The new `Extra` (`None`: nothing to change there).
    pub extra: Option<String>,
    /// The drains after the change (to verify the write).
    pub drained: WideSet,
    /// GPUs this request changes, and GPUs it leaves as they were (already drained, or
    /// not drained for a resume).
    pub changed: WideSet,
    /// See [`Plan::changed`].
    pub unchanged: WideSet,
    /// The node's own state.
    pub node_action: Option<NodeAction>,
}

/// Why a request cannot be planned.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The GPU list does not parse or names GPUs the node does not have.
    #[error("{0}")]
    Gpus(String),
    /// The record is not a node record.
    #[error("no such node in scontrol's answer")]
    NoNode,
    /// `Extra` holds a value gputopo must not overwrite.
    #[error(transparent)]
    Extra(#[from] MergeRefused),
}

/// Drain (`reason: Some`) or resume (`None`) `gpus` (a Slurm index list, `3` or `0-1,5`) of
/// the node in `record`, as `user` at `now`.
///
/// # Errors
/// [`PlanError`] for a bad GPU list, a record that is not a node's, or an `Extra` that is
/// not gputopo's to rewrite (an administrator's plain text, an unreadable gputopo record).
pub fn plan(
    record: &str,
    gpus: &str,
    reason: Option<&str>,
    user: &str,
    now: u64,
) -> Result<Plan, PlanError> {
    let rec = Record::parse(record);
    let node = rec.get("NodeName").ok_or(PlanError::NoNode)?.to_string();
    let count = gpu_count(rec.get("Gres").unwrap_or_default());
    let want = parse_gpus(gpus, count, &node)?;
    let extra = rec.get("Extra").unwrap_or_default();
    let extra = if extra == "(null)" { "" } else { extra };
    let health = read_extra(extra)
        .map_err(|e| MergeRefused::Unreadable(e.0))?
        .map(|p| p.health)
        .unwrap_or_default();
    let before = health.drained_wide();
    let (drains, changed, unchanged) = match reason {
        Some(r) => {
            let fresh = want.difference(&before);
            (
                drain::add(&health.drained, &want, r, user, now),
                fresh,
                want.intersection(&before),
            )
        }
        None => (
            drain::remove(&health.drained, &want),
            want.intersection(&before),
            want.difference(&before),
        ),
    };
    let events = events(&health, &changed, reason, user, now);
    let extra = if changed.is_empty() {
        None
    } else {
        Some(write_drains(extra, drains.clone(), events)?)
    };
    let drained = drain::indices(&drains);
    let node_action = node_action(&rec, &health, &drained, count);
    Ok(Plan {
        node,
        extra,
        drained,
        changed,
        unchanged,
        node_action,
    })
}

fn parse_gpus(gpus: &str, count: usize, node: &str) -> Result<WideSet, PlanError> {
    let ranges = gputopo_core::cpulist::parse_ranges(gpus.trim())
        .map_err(|e| PlanError::Gpus(format!("--gpu {gpus:?}: {e}")))?;
    let mut set = WideSet::new();
    for (lo, hi) in ranges {
        for i in lo..=hi {
            let i = i as usize;
            if i >= count {
                return Err(PlanError::Gpus(format!(
                    "--gpu {gpus:?}: {node} has {count} GPUs (indices 0-{}), not {i}",
                    count.saturating_sub(1)
                )));
            }
            set.insert(i);
        }
    }
    if set.is_empty() {
        return Err(PlanError::Gpus("--gpu: no GPU named".into()));
    }
    Ok(set)
}

/// One history event per changed GPU.
fn events(
    health: &NodeHealth,
    changed: &WideSet,
    reason: Option<&str>,
    user: &str,
    now: u64,
) -> Vec<Event> {
    changed
        .iter()
        .map(|i| {
            let status = health.status(i).map_or("", |s| s.as_str());
            let (to, from) = match reason {
                Some(_) => ("drained", status),
                None => ("resumed", "drained"),
            };
            Event {
                time: now,
                index: i,
                to: to.into(),
                from: from.into(),
                src: Source::Admin,
                user: Some(user.to_string()),
                why: reason
                    .map(|r| vec![r.trim().to_string()])
                    .unwrap_or_default(),
            }
        })
        .collect()
}

/// Drain the node when no GPU is usable; resume it when one is and gputopo drained it.
fn node_action(
    rec: &Record<'_>,
    health: &NodeHealth,
    drained: &WideSet,
    count: usize,
) -> Option<NodeAction> {
    if count == 0 {
        return None;
    }
    let state = rec.get("State").unwrap_or_default();
    let node_drained = state.split('+').any(|w| w.starts_with("DRAIN"));
    let ours = rec
        .get("Reason")
        .is_some_and(|r| r.starts_with(NODE_REASON_PREFIX));
    let faulty = health.with_status_wide(gputopo_core::health::Status::Faulty);
    let unusable = faulty.union(drained);
    let all = WideSet::first_n(count);
    if all.is_subset(&unusable) {
        (!node_drained).then(|| {
            NodeAction::Drain(format!(
                "{NODE_REASON_PREFIX} every GPU is drained or faulty (drained {drained}{})",
                if faulty.is_empty() {
                    String::new()
                } else {
                    format!(", faulty {faulty}")
                }
            ))
        })
    } else {
        (node_drained && ours).then_some(NodeAction::Resume)
    }
}

#[cfg(test)]
mod tests;
