//! The recent GPU state changes of a node, kept in its `Extra` for `gputopo nodes --history`:
//!
//! ```text
//! "gputopo_hist":[{"t":1764583200,"i":3,"s":"faulty","p":"ok","src":"agent","r":["xid_79"]},
//!                 {"t":1764583300,"i":3,"s":"drained","p":"faulty","src":"admin","u":"alice","r":["RMA 1234"]}]
//! ```
//!
//! Newest last, at most [`MAX`] per node. Both writers append: the agent's publish (a GPU's
//! verdict changed: `ok`, `degraded`, `unknown`, `faulty`, or `lost` for a faulty GPU NVML lost)
//! and `gputopo drain`/`resume` (`drained`, `resumed`). Informational only: nothing decides on
//! it, so a malformed value reads as no history and is replaced by the next writer.

use super::NodeHealth;
use crate::health::{Reason, Status};

/// The `Extra` key of the history.
pub const KEY: &str = "gputopo_hist";

/// Most events kept per node.
pub const MAX: usize = 16;

/// Who changed the GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// The node agent's health check.
    Agent,
    /// An administrator (`gputopo drain`/`resume`).
    Admin,
}

impl Source {
    /// `agent` or `administrator`, for log lines and tables.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Agent => "agent",
            Source::Admin => "administrator",
        }
    }
}

/// One change of one GPU.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Event {
    /// When (Unix seconds).
    #[serde(rename = "t")]
    pub time: u64,
    /// Slurm GRES index.
    #[serde(rename = "i")]
    pub index: usize,
    /// The new state: a status, `lost`, `drained` or `resumed`.
    #[serde(rename = "s")]
    pub to: String,
    /// The state before (empty when unknown).
    #[serde(rename = "p", default, skip_serializing_if = "String::is_empty")]
    pub from: String,
    /// Who.
    pub src: Source,
    /// The administrator's user name.
    #[serde(rename = "u", default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The reasons (tokens, or the administrator's words).
    #[serde(rename = "r", default, skip_serializing_if = "Vec::is_empty")]
    pub why: Vec<String>,
}

/// The history in an `Extra` object's value (`None` or malformed: no history).
pub fn read(value: Option<&serde_json::Value>) -> Vec<Event> {
    value
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default()
}

/// `old` followed by `new`, cut to the newest [`MAX`].
pub fn append(mut old: Vec<Event>, new: impl IntoIterator<Item = Event>) -> Vec<Event> {
    old.extend(new);
    let cut = old.len().saturating_sub(MAX);
    old.drain(..cut);
    old
}

/// A GPU's state as the history names it: its status, or `lost` for a GPU NVML lost.
fn state_of(status: Status, reasons: &[Reason]) -> &'static str {
    if status == Status::Faulty && reasons.contains(&Reason::GpuLost) {
        "lost"
    } else {
        status.as_str()
    }
}

/// The agent's events: each GPU of `new` whose state differs from `old` (the health published
/// before; `None` when there was none, then only GPUs that are not ok are events), at `time`.
pub fn changes(old: Option<&NodeHealth>, new: &NodeHealth, time: u64) -> Vec<Event> {
    new.gpus
        .iter()
        .filter_map(|g| {
            let to = state_of(g.status, &g.reasons);
            let from = match old {
                Some(o) => o
                    .gpus
                    .iter()
                    .find(|p| p.index == g.index)
                    .map_or("", |p| state_of(p.status, &p.reasons)),
                None => "",
            };
            let changed = if from.is_empty() {
                to != "ok"
            } else {
                from != to
            };
            changed.then(|| Event {
                time,
                index: g.index,
                to: to.to_string(),
                from: from.to_string(),
                src: Source::Agent,
                user: None,
                why: g.reasons.iter().map(ToString::to_string).collect(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::GpuHealth;

    fn health(gpus: Vec<GpuHealth>) -> NodeHealth {
        NodeHealth::new(gpus, None, vec![])
    }

    #[test]
    fn changes_name_the_new_and_old_state() {
        let before = health(vec![
            GpuHealth::from_reasons(0, vec![]),
            GpuHealth::from_reasons(1, vec![]),
            GpuHealth::from_reasons(2, vec![Reason::EccCorrectable]),
        ]);
        let after = health(vec![
            GpuHealth::from_reasons(0, vec![]),
            GpuHealth::from_reasons(1, vec![Reason::GpuLost]),
            GpuHealth::from_reasons(2, vec![Reason::Xid(79)]),
        ]);
        let ev = changes(Some(&before), &after, 7);
        let got: Vec<(usize, &str, &str)> = ev
            .iter()
            .map(|e| (e.index, e.from.as_str(), e.to.as_str()))
            .collect();
        assert_eq!(got, [(1, "ok", "lost"), (2, "degraded", "faulty")]);
        assert_eq!(ev[1].why, ["xid_79"]);
        assert!(changes(Some(&after), &after, 8).is_empty());
        // No earlier record: only GPUs that are not ok are news.
        assert_eq!(changes(None, &after, 9).len(), 2);
    }

    #[test]
    fn bounded_and_lenient() {
        let e = |i| Event {
            time: i as u64,
            index: i,
            to: "drained".into(),
            from: "ok".into(),
            src: Source::Admin,
            user: Some("alice".into()),
            why: vec!["RMA".into()],
        };
        let h = append((0..10).map(e).collect(), (10..20).map(e));
        assert_eq!(h.len(), MAX);
        assert_eq!(h[0].index, 20 - MAX);
        let v = serde_json::to_value(&h).expect("json");
        assert_eq!(read(Some(&v)), h);
        assert_eq!(read(Some(&serde_json::json!({"x": 1}))), vec![]);
        assert_eq!(read(None), vec![]);
        assert_eq!(
            serde_json::to_string(&e(3)).expect("json"),
            r#"{"t":3,"i":3,"s":"drained","p":"ok","src":"admin","u":"alice","r":["RMA"]}"#
        );
    }
}
