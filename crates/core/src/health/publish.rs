//! What `gputopo publish` does to the node's Slurm record, decided as a pure function: given
//! the node's record as Slurm shows it, this check's health and the time, [`plan`] returns the
//! `Extra` to publish and the `scontrol` steps that get it there, or why nothing may be
//! published. The agent's runner (`crates/agent/src/node/publish.rs`) only reads the record
//! and carries the steps out.
//!
//! The rules:
//! - A node whose slurm.conf `Gres=` counts another number of GPUs than this check found is
//!   not published: Slurm keeps at most the configured count of a gres.conf's GPUs, so the
//!   indices of a list of another length may be off, and a healthy GPU could be named faulty.
//! - Other JSON keys of `Extra` are kept; a non-JSON value (an administrator's note) is
//!   never overwritten ([`MergeRefused`]); gputopo's own record made unusable is replaced
//!   ([`Plan::replaces_own_malformed`] says why, for the log).
//! - The published time is kept while nothing else changed and it is younger than
//!   `refresh_secs`, so an unchanged report is not rewritten at every check, yet its age
//!   stays within `PublishRefreshSec`.
//! - `Extra` is written only when its value changes.
//! - The node's history (`gputopo_hist`) gets back the events of the agent's copy (`kept`, its
//!   state file) that the record lost; [`Plan::history`] is what the agent keeps next.
//! - With `drain_when_all_faulty`, a node whose every GPU is faulty, or faulty or drained by
//!   an administrator (`gputopo drain`), is drained (unless it already is), so `sinfo -R`
//!   finds it; one bad GPU never drains a node: the select plugin skips exactly that GPU.

use super::extra::history::{self, Event};
use super::extra::labels::Labels;
use super::{
    ExtraError, MergeRefused, NodeHealth, Status, merge_extra_keeping, own_malformed, parse_extra,
};

/// The drain reason gputopo sets (operators see it in `sinfo -R`).
pub const DRAIN_REASON: &str = "gputopo: every GPU is faulty";

/// The drain reason when administrators' drains make up the rest.
pub const DRAIN_REASON_WITH_DRAINS: &str = "gputopo: every GPU is faulty or drained";

/// The node's record as Slurm shows it (`scontrol show node`), the part publishing reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeRecord {
    /// `Extra=` (empty when unset).
    pub extra: String,
    /// `State=` (e.g. `IDLE+DRAIN`; empty when unknown).
    pub state: String,
    /// GPUs counted by slurm.conf's `Gres=`; `None` when it names none or is unknown.
    pub configured_gpus: Option<usize>,
}

impl NodeRecord {
    /// True when Slurm already has the node draining or drained.
    pub fn is_drained(&self) -> bool {
        self.state.to_ascii_uppercase().contains("DRAIN")
    }
}

/// The switches of gputopo.conf that publishing follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PublishPolicy {
    /// `PublishRefreshSec`: the most an unchanged report's time may age.
    pub refresh_secs: u64,
    /// `DrainWhenAllFaulty`.
    pub drain_when_all_faulty: bool,
}

/// One change to the node's Slurm record, in the order the runner applies them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// `scontrol update NodeName=<node> Extra=<value>`.
    WriteExtra(String),
    /// `scontrol update NodeName=<node> State=DRAIN Reason=<reason>`.
    Drain {
        /// The drain reason.
        reason: &'static str,
    },
}

impl Step {
    /// The `scontrol` arguments that apply this step to `node`.
    pub fn scontrol_args(&self, node: &str) -> Vec<String> {
        let node = format!("NodeName={node}");
        match self {
            Step::WriteExtra(extra) => vec!["update".into(), node, format!("Extra={extra}")],
            Step::Drain { reason } => vec![
                "update".into(),
                node,
                "State=DRAIN".into(),
                format!("Reason={reason}"),
            ],
        }
    }
}

/// What publishing will do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The `Extra` value after publishing (written, or already current).
    pub extra: String,
    /// The changes, in order; none when `Extra` is current and nothing needs draining.
    pub steps: Vec<Step>,
    /// The health as published (its time as [`plan`] set it).
    pub health: NodeHealth,
    /// Why the current `Extra` is gputopo's own record made unusable, which this publish
    /// replaces (`None` when it is usable or not ours).
    pub replaces_own_malformed: Option<ExtraError>,
    /// The node's history as [`Plan::extra`] holds it: the agent's copy from now on.
    pub history: Vec<Event>,
}

impl Plan {
    /// True when `Extra` is rewritten.
    pub fn writes_extra(&self) -> bool {
        self.steps.iter().any(|s| matches!(s, Step::WriteExtra(_)))
    }
}

/// Why nothing is published.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// slurm.conf and this check disagree on the number of GPUs.
    #[error(
        "{configured} GPUs configured in slurm.conf (Gres=) but gres.conf gives {found} in \
         Slurm's order"
    )]
    GpuCount {
        /// From `Gres=`.
        configured: usize,
        /// GPUs in this check's health.
        found: usize,
    },
    /// The current `Extra` is not ours to rewrite.
    #[error(transparent)]
    Extra(#[from] MergeRefused),
}

/// Decides what publishing `health` (with the capability `labels`, if NVML told them) does to
/// `node` at `now` (seconds since the epoch), with `kept` the agent's copy of the node's
/// history; see the module docs for the rules.
///
/// # Errors
/// [`Refusal`] when nothing may be published.
pub fn plan(
    node: &NodeRecord,
    mut health: NodeHealth,
    labels: Option<&Labels>,
    now: u64,
    policy: PublishPolicy,
    kept: &[Event],
) -> Result<Plan, Refusal> {
    if let Some(configured) = node.configured_gpus.filter(|&n| n != health.gpus.len()) {
        return Err(Refusal::GpuCount {
            configured,
            found: health.gpus.len(),
        });
    }
    let current = node.extra.trim();
    let fresh = parse_extra(current)
        .ok()
        .flatten()
        .and_then(|h| h.time)
        .filter(|&t| t <= now && now - t < policy.refresh_secs);
    health.time = fresh.or(Some(now));
    let mut extra = merge_extra_keeping(current, &health, labels, kept)?;
    if fresh.is_some() && extra != current {
        // Something else changed: the report is new, so is its time.
        health.time = Some(now);
        extra = merge_extra_keeping(current, &health, labels, kept)?;
    }
    let mut steps = Vec::new();
    if extra != current {
        steps.push(Step::WriteExtra(extra.clone()));
    }
    let drained = parse_extra(&extra)
        .ok()
        .flatten()
        .map(|h| h.drained_wide())
        .unwrap_or_default();
    let faulty = |g: &super::GpuHealth| g.status == Status::Faulty;
    let unusable = !health.gpus.is_empty()
        && health
            .gpus
            .iter()
            .all(|g| faulty(g) || drained.contains(g.index));
    if policy.drain_when_all_faulty && unusable && !node.is_drained() {
        let reason = if health.gpus.iter().all(faulty) {
            DRAIN_REASON
        } else {
            DRAIN_REASON_WITH_DRAINS
        };
        steps.push(Step::Drain { reason });
    }
    let history = serde_json::from_str::<serde_json::Value>(&extra)
        .map(|v| history::read(v.get(history::KEY)))
        .unwrap_or_default();
    Ok(Plan {
        extra,
        steps,
        health,
        replaces_own_malformed: own_malformed(current),
        history,
    })
}

/// One line for the log: GPU count, counts per non-empty status, the report's errors.
pub fn summary(h: &NodeHealth) -> String {
    let mut parts = vec![format!("{} GPUs", h.gpus.len())];
    for st in [
        Status::Ok,
        Status::Degraded,
        Status::Unknown,
        Status::Faulty,
    ] {
        let n = h.gpus.iter().filter(|g| g.status == st).count();
        if n > 0 {
            parts.push(format!("{n} {st}"));
        }
    }
    for e in &h.errors {
        parts.push(e.to_string());
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::{GpuHealth, Reason};

    const NOW: u64 = 1_000_000;
    const POLICY: PublishPolicy = PublishPolicy {
        refresh_secs: 300,
        drain_when_all_faulty: true,
    };

    fn health(faulty: &[usize], n: usize) -> NodeHealth {
        let gpus = (0..n)
            .map(|i| {
                let reasons = if faulty.contains(&i) {
                    vec![Reason::EccUncorrectable]
                } else {
                    vec![]
                };
                GpuHealth::from_reasons(i, reasons)
            })
            .collect();
        NodeHealth::new(gpus, None, vec![])
    }

    /// The Extra a node holds after publishing `h` at `at`.
    fn published(h: &NodeHealth, at: u64) -> String {
        let mut h = h.clone();
        h.time = Some(at);
        crate::health::merge_extra("", &h).expect("empty Extra merges")
    }

    fn record(extra: &str, state: &str, configured: Option<usize>) -> NodeRecord {
        NodeRecord {
            extra: extra.into(),
            state: state.into(),
            configured_gpus: configured,
        }
    }

    /// One case of [`plan`]: the record and health it sees, what it must do.
    struct Case {
        name: &'static str,
        node: NodeRecord,
        health: NodeHealth,
        policy: PublishPolicy,
        writes_extra: bool,
        drains: bool,
        published_time: u64,
    }

    #[test]
    fn drains_count_as_unusable_for_the_node_drain() {
        let h = health(&[0, 1], 3);
        let with_drain = crate::health::write_drains(
            &published(&h, NOW - 10),
            crate::health::extra::drain::add(&[], &[2].into_iter().collect(), "RMA", "a", 1),
            vec![],
        )
        .expect("a drain");
        let p = plan(
            &record(&with_drain, "IDLE", Some(3)),
            h.clone(),
            None,
            NOW,
            POLICY,
            &[],
        )
        .expect("a plan");
        assert!(
            p.steps.contains(&Step::Drain {
                reason: DRAIN_REASON_WITH_DRAINS
            }),
            "{:?}",
            p.steps
        );
        // One usable GPU left: no node drain.
        let p = plan(
            &record(&published(&h, NOW - 10), "IDLE", Some(3)),
            h,
            None,
            NOW,
            POLICY,
            &[],
        )
        .expect("a plan");
        assert!(!p.steps.iter().any(|s| matches!(s, Step::Drain { .. })));
    }

    #[test]
    fn plans_the_steps_publishing_takes() {
        let ok = health(&[], 4);
        let one = health(&[2], 4);
        let all = health(&[0, 1, 2, 3], 4);
        let fresh = published(&ok, NOW - 10);
        let idle = |extra: &str| record(extra, "IDLE", Some(4));
        let base = |name, node, health: &NodeHealth| Case {
            name,
            node,
            health: health.clone(),
            policy: POLICY,
            writes_extra: true,
            drains: false,
            published_time: NOW,
        };
        let cases = [
            base("first report", idle(""), &ok),
            Case {
                writes_extra: false,
                published_time: NOW - 10,
                ..base("unchanged and fresh", idle(&fresh), &ok)
            },
            base("unchanged but stale", idle(&published(&ok, NOW - 300)), &ok),
            base("changed while fresh", idle(&fresh), &one),
            base("from the future", idle(&published(&ok, NOW + 5)), &ok),
            base("one faulty GPU never drains", idle(""), &one),
            Case {
                drains: true,
                ..base(
                    "every GPU faulty drains",
                    record("", "ALLOCATED", None),
                    &all,
                )
            },
            base("already drained", record("", "IDLE+DRAIN", None), &all),
            Case {
                policy: PublishPolicy {
                    drain_when_all_faulty: false,
                    ..POLICY
                },
                ..base("draining is off", idle(""), &all)
            },
        ];
        let drain = Step::Drain {
            reason: DRAIN_REASON,
        };
        for c in cases {
            let name = c.name;
            let p = plan(&c.node, c.health, None, NOW, c.policy, &[]).expect(name);
            assert_eq!(p.writes_extra(), c.writes_extra, "{name}: writes Extra");
            assert_eq!(p.steps.contains(&drain), c.drains, "{name}: drains");
            assert_eq!(p.health.time, Some(c.published_time), "{name}: time");
            if c.writes_extra {
                assert_eq!(p.steps[0], Step::WriteExtra(p.extra.clone()), "{name}");
            } else {
                assert_eq!(p.extra, c.node.extra, "{name}: Extra kept");
            }
        }
    }

    #[test]
    fn refuses_what_must_not_be_published() {
        let ok = health(&[], 4);
        let err = plan(
            &record("", "IDLE", Some(8)),
            ok.clone(),
            None,
            NOW,
            POLICY,
            &[],
        );
        assert_eq!(
            err,
            Err(Refusal::GpuCount {
                configured: 8,
                found: 4
            })
        );
        let err = plan(
            &record("reserved for Bob", "IDLE", Some(4)),
            ok,
            None,
            NOW,
            POLICY,
            &[],
        );
        assert!(matches!(err, Err(Refusal::Extra(MergeRefused::NotJson(_)))));
    }

    #[test]
    fn a_record_that_lost_its_history_gets_the_agents_copy_back() {
        let bad = health(&[1], 2);
        let first = plan(
            &record("", "IDLE", Some(2)),
            bad.clone(),
            None,
            NOW - 60,
            POLICY,
            &[],
        )
        .expect("a plan");
        assert_eq!(
            first.history.len(),
            1,
            "GPU 1 turned faulty: {}",
            first.extra
        );
        // Cleared (or a re-created node): the agent's copy comes back, the event is not doubled.
        let again = plan(
            &record("", "IDLE", Some(2)),
            bad,
            None,
            NOW,
            POLICY,
            &first.history,
        )
        .expect("a plan");
        assert_eq!(again.history[0], first.history[0]);
        assert_eq!(
            again.history.len(),
            2,
            "and this publish's own: {}",
            again.extra
        );
        // A record that has it all is not rewritten for it.
        let kept = plan(
            &record(&again.extra, "IDLE", Some(2)),
            health(&[1], 2),
            None,
            NOW,
            POLICY,
            &first.history,
        )
        .expect("a plan");
        assert!(!kept.writes_extra(), "{}", kept.extra);
        assert_eq!(kept.history, again.history);
    }

    #[test]
    fn keeps_other_keys_of_extra() {
        let p = plan(
            &record(r#"{"rack": "r7"}"#, "IDLE", None),
            health(&[], 2),
            None,
            NOW,
            POLICY,
            &[],
        )
        .expect("a JSON object merges");
        assert!(p.extra.contains(r#""rack":"r7""#), "{}", p.extra);
    }

    #[test]
    fn steps_become_scontrol_arguments() {
        assert_eq!(
            Step::WriteExtra("{}".into()).scontrol_args("n1"),
            ["update", "NodeName=n1", "Extra={}"]
        );
        assert_eq!(
            Step::Drain {
                reason: DRAIN_REASON
            }
            .scontrol_args("n1"),
            [
                "update",
                "NodeName=n1",
                "State=DRAIN",
                "Reason=gputopo: every GPU is faulty"
            ]
        );
    }

    #[test]
    fn summarises_counts_per_status() {
        assert_eq!(summary(&health(&[1], 3)), "3 GPUs, 2 ok, 1 faulty");
    }
}
