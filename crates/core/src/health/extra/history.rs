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
//!
//! The agent keeps a copy in its state file (`StateDir/xid-<node>.json`, key `hist`: the
//! history as it last published it) and joins it with the record's at every publish
//! ([`union`]), so a record that lost its history (an `Extra` cleared by hand, a node
//! re-created by a slurmctld cold start) gets it back from the node.

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

/// The events of `record` and those of `kept` it lacks, oldest first (a stable sort by time,
/// so `record`'s order stands among equal times), cut to the newest [`MAX`].
pub fn union(mut record: Vec<Event>, kept: &[Event]) -> Vec<Event> {
    let missing: Vec<Event> = kept
        .iter()
        .filter(|e| !record.contains(e))
        .cloned()
        .collect();
    if missing.is_empty() {
        return record;
    }
    record.extend(missing);
    record.sort_by_key(|e| e.time);
    append(Vec::new(), record)
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

/// Every change between two readings of a node's record, for the select plugin's log: the
/// agent's verdict changes ([`changes`]) and the drains added and lifted (by the
/// administrator who drained; a lifted drain names nobody, the record does not say who).
pub fn transitions(old: Option<&NodeHealth>, new: &NodeHealth) -> Vec<Event> {
    let mut out = changes(old, new, new.time.unwrap_or(0));
    let before = old.map(NodeHealth::drained_wide).unwrap_or_default();
    for d in new.drained.iter().filter(|d| !before.contains(d.index)) {
        out.push(Event {
            time: d.time,
            index: d.index,
            to: "drained".into(),
            from: new
                .status(d.index)
                .map_or_else(String::new, |s| s.as_str().to_string()),
            src: Source::Admin,
            user: Some(d.user.clone()),
            why: vec![d.reason.clone()],
        });
    }
    let now = new.drained_wide();
    for d in old
        .into_iter()
        .flat_map(|o| o.drained.iter())
        .filter(|d| !now.contains(d.index))
    {
        out.push(Event {
            time: new.time.unwrap_or(0),
            index: d.index,
            to: "resumed".into(),
            from: "drained".into(),
            src: Source::Admin,
            user: None,
            why: Vec::new(),
        });
    }
    out.sort_by_key(|e| e.index);
    out
}

/// One line for slurmctld's log: `node n1 GPU 5 (86:00.0): ok -> faulty by agent
/// (ecc_uncorrectable)`.
pub fn log_line(node: &str, bus: Option<&str>, e: &Event) -> String {
    let bus = bus.map(|b| format!(" ({b})")).unwrap_or_default();
    let from = if e.from.is_empty() { "" } else { &e.from };
    let arrow = if from.is_empty() {
        format!("now {}", e.to)
    } else {
        format!("{from} -> {}", e.to)
    };
    let who = match &e.user {
        Some(u) => format!("{} {u}", e.src.as_str()),
        None => e.src.as_str().to_string(),
    };
    let why = if e.why.is_empty() {
        String::new()
    } else {
        format!(" ({})", e.why.join(", "))
    };
    format!("node {node} GPU {}{bus}: {arrow} by {who}{why}", e.index)
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
    fn transitions_name_drains_and_resumes_with_the_administrator() {
        let mut before = health(vec![
            GpuHealth::from_reasons(0, vec![]),
            GpuHealth::from_reasons(1, vec![]),
        ]);
        before.drained =
            crate::health::extra::drain::add(&[], &[1].into_iter().collect(), "RMA 7", "alice", 5);
        let mut after = health(vec![
            GpuHealth::from_reasons(0, vec![Reason::Xid(79)]),
            GpuHealth::from_reasons(1, vec![]),
        ]);
        let t = transitions(Some(&before), &after);
        let lines: Vec<String> = t
            .iter()
            .map(|e| log_line("n1", Some("3d:00.0"), e))
            .collect();
        assert_eq!(
            lines,
            [
                "node n1 GPU 0 (3d:00.0): ok -> faulty by agent (xid_79)",
                "node n1 GPU 1 (3d:00.0): drained -> resumed by administrator",
            ]
        );
        after.drained = before.drained.clone();
        let t = transitions(Some(&health(vec![])), &after);
        assert_eq!(
            log_line("n1", None, t.last().expect("the drain")),
            "node n1 GPU 1: ok -> drained by administrator alice (RMA 7)"
        );
        assert!(transitions(Some(&after), &after).is_empty());
    }

    #[test]
    fn the_agents_copy_fills_in_what_the_record_lost() {
        let e = |t: u64, to: &str| Event {
            time: t,
            index: 1,
            to: to.into(),
            from: String::new(),
            src: Source::Agent,
            user: None,
            why: vec![],
        };
        let kept = vec![e(1, "faulty"), e(5, "ok")];
        // A cleared record gets the copy back; one that has it all is unchanged.
        assert_eq!(union(vec![], &kept), kept);
        let record = vec![e(1, "faulty"), e(5, "ok"), e(9, "drained")];
        assert_eq!(union(record.clone(), &kept), record);
        // Both sides' events, by time, bounded.
        assert_eq!(
            union(vec![e(3, "drained"), e(9, "resumed")], &kept),
            [e(1, "faulty"), e(3, "drained"), e(5, "ok"), e(9, "resumed")]
        );
        let many: Vec<Event> = (0..30).map(|t| e(t, "ok")).collect();
        let u = union(vec![e(100, "lost")], &many);
        assert_eq!((u.len(), u[MAX - 1].time), (MAX, 100));
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
