//! Writing gputopo's keys into a node's `Extra` object, the one place that knows their order:
//! the flat summary keys first (short and readable in a narrow `sinfo -O Extra` column), then
//! the capability labels, the agent's `gputopo` object, the administrators' drains, the
//! history, and every other key as it was (sorted).

use super::drain::{self, Drain};
use super::history::{self, Event};
use super::{MergeRefused, NodeHealth, flat, labels, own_malformed};
use serde_json::Value;
use serde_json::value::RawValue;
use std::collections::BTreeMap;

/// An `Extra` object: each value as the text it was written in (so a kept value, e.g. the
/// agent's object when an administrator drains, is not reformatted), keys sorted.
pub(super) type Object = BTreeMap<String, Box<RawValue>>;

/// `existing` as a JSON object (empty and `(null)`: none).
///
/// # Errors
/// [`MergeRefused`] when it is a non-JSON string or JSON that is not an object.
pub(super) fn object_of(existing: &str) -> Result<Object, MergeRefused> {
    let t = existing.trim();
    let preview = || t.chars().take(60).collect::<String>();
    if t.is_empty() || t == "(null)" {
        return Ok(Object::new());
    }
    match serde_json::from_str::<Object>(t) {
        Ok(m) => Ok(m),
        Err(_) if serde_json::from_str::<Value>(t).is_ok() => {
            Err(MergeRefused::NotObject(preview()))
        }
        // Our own record, truncated or corrupted: nothing else in it can be read back, and
        // leaving it would keep the node's health stale for good; but drains in it cannot
        // be carried over, so such a record is left for an administrator (the select plugin
        // keeps the node's last good health, drains included).
        Err(_) => match own_malformed(t) {
            Some(e) if t.contains(concat!("\"", "gputopo_drain", "\"")) => {
                Err(MergeRefused::Unreadable(e.0))
            }
            Some(_) => Ok(Object::new()),
            None => Err(MergeRefused::NotJson(preview())),
        },
    }
}

/// The drains `obj` holds (none when it has no drain key).
///
/// # Errors
/// [`MergeRefused::Unreadable`] when its drain value does not parse: writing around it would
/// leave a record the select plugin cannot read, and dropping it would lift drains.
pub(super) fn drains_of(obj: &Object) -> Result<Vec<Drain>, MergeRefused> {
    let Some(v) = obj.get(drain::KEY) else {
        return Ok(Vec::new());
    };
    serde_json::from_str::<drain::Wire>(v.get())
        .map_err(|e| MergeRefused::Unreadable(format!("{}: {e}", drain::KEY)))
        .and_then(|w| drain::check(w).map_err(|e| MergeRefused::Unreadable(e.0)))
}

/// What to write.
pub(super) struct Parts<'a> {
    /// The health the flat keys summarise (`None`: no agent health, only `gpu_drained`).
    pub health: Option<&'a NodeHealth>,
    /// Write `health` as the `gputopo` object (the agent); else keep the object as it is.
    pub write_health: bool,
    /// New capability labels; `None` keeps the published ones in place.
    pub labels: Option<&'a labels::Labels>,
    /// The drains to write (the caller read the object's own with [`drains_of`] to keep them).
    pub drains: Vec<Drain>,
    /// Events to add to the history.
    pub events: Vec<Event>,
    /// The agent's copy of the history (its state file): events the record lacks are put
    /// back ([`history::union`]).
    pub kept: &'a [Event],
}

/// The object `obj` with `parts` written in, as compact JSON.
pub(super) fn write(mut obj: Object, parts: Parts<'_>) -> String {
    let old_health = obj.remove("gputopo");
    for k in flat::OWNED {
        obj.remove(*k);
    }
    let kept: Vec<(String, String)> = labels::KEYS
        .iter()
        .filter_map(|k| obj.remove(*k).map(|v| (k.to_string(), v.get().to_string())))
        .collect();
    let labels: Vec<(String, String)> = match parts.labels {
        Some(l) => l
            .to_flat()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        None => kept,
    };
    obj.remove(drain::KEY);
    let (drain_json, drained) = (drain::to_json(&parts.drains), drain::indices(&parts.drains));
    let old_hist = obj
        .remove(history::KEY)
        .and_then(|v| serde_json::from_str::<Value>(v.get()).ok());
    let hist = history::union(
        history::union(history::read(old_hist.as_ref()), parts.kept),
        &parts.events,
    );

    let mut out = String::from("{");
    let push = |out: &mut String, k: &str, v: &str| {
        if out.len() > 1 {
            out.push(',');
        }
        out.push_str(&Value::String(k.to_string()).to_string());
        out.push(':');
        out.push_str(v);
    };
    let flat = match parts.health {
        Some(h) => flat::health_keys(h, &drained),
        None => flat::drain_keys(&drained),
    };
    for (k, v) in flat {
        push(&mut out, k, &v.to_string());
    }
    for (k, v) in labels {
        push(&mut out, &k, &v);
    }
    match (parts.write_health, parts.health, old_health) {
        (true, Some(h), _) => push(&mut out, "gputopo", &h.to_json()),
        (false, _, Some(v)) => push(&mut out, "gputopo", v.get()),
        _ => {}
    }
    if let Some(d) = drain_json {
        push(&mut out, drain::KEY, &d);
    }
    if !hist.is_empty() {
        let h = serde_json::to_string(&hist).unwrap_or_else(|_| "[]".into());
        push(&mut out, history::KEY, &h);
    }
    for (k, v) in obj {
        push(&mut out, &k, v.get());
    }
    out.push('}');
    out
}

#[cfg(test)]
mod tests {
    use super::super::{merge_extra, read_extra, write_drains};
    use super::*;
    use crate::health::{GpuHealth, Reason, Status};
    use crate::wideset::WideSet;

    fn health(faulty: &[usize], n: usize) -> NodeHealth {
        let mut h = NodeHealth::new(
            (0..n)
                .map(|i| {
                    let r = if faulty.contains(&i) {
                        vec![Reason::EccUncorrectable]
                    } else {
                        vec![]
                    };
                    GpuHealth::from_reasons(i, r)
                })
                .collect(),
            None,
            vec![],
        );
        h.time = Some(100);
        h
    }

    fn set(v: &[usize]) -> WideSet {
        v.iter().copied().collect()
    }

    #[test]
    fn a_drain_survives_publishes_and_counts_in_the_flat_keys() {
        let published = merge_extra(r#"{"rack":"r7"}"#, &health(&[5], 8)).expect("merge");
        let d = drain::add(&[], &set(&[3]), "RMA 1234", "alice", 200);
        let drained = write_drains(&published, d, vec![]).expect("drain");
        assert!(
            drained.starts_with(r#"{"gpu_faulty":"5","gpu_drained":"3","gpu_ok":6,"gputopo":{"#),
            "{drained}"
        );
        assert!(
            drained.contains(r#","gputopo_drain":{"v":1,"gpus":[{"i":3,"r":"RMA 1234","u":"alice","t":200}]},"gputopo_hist":["#)
                && drained.ends_with(r#"],"rack":"r7"}"#),
            "{drained}"
        );
        let h = read_extra(&drained).expect("ok").expect("ours").health;
        assert_eq!(h.drained_wide(), set(&[3]));
        assert_eq!(h.excluded_wide(), set(&[3, 5]));
        // The agent's next publish keeps the drain, its place and the flat keys.
        let again = merge_extra(&drained, &health(&[5], 8)).expect("merge");
        assert_eq!(again, drained);
        // Resume: the key goes, gpu_ok counts the GPU again.
        let resumed = write_drains(&again, vec![], vec![]).expect("resume");
        assert!(
            resumed.starts_with(r#"{"gpu_faulty":"5","gpu_ok":7,"gputopo""#),
            "{resumed}"
        );
        assert!(!resumed.contains("gputopo_drain") && !resumed.contains("gpu_drained"));
    }

    #[test]
    fn drains_without_the_agent_and_an_unreadable_drain() {
        let only =
            write_drains("", drain::add(&[], &set(&[0]), "x", "root", 1), vec![]).expect("drain");
        assert_eq!(
            only,
            r#"{"gpu_drained":"0","gputopo_drain":{"v":1,"gpus":[{"i":0,"r":"x","u":"root","t":1}]}}"#
        );
        let h = read_extra(&only).expect("ok").expect("ours").health;
        assert_eq!((h.gpus.len(), h.excluded_wide()), (0, set(&[0])));
        // Someone broke the drain record: the plugin must not read it as "no drain" ...
        let broken = r#"{"gputopo_drain":{"v":1,"gpus":[{"i":"three"}]}}"#;
        assert!(read_extra(broken).is_err());
        // ... and neither the drain command nor the agent writes around it or drops it.
        for refused in [
            write_drains(broken, vec![], vec![]),
            merge_extra(broken, &health(&[], 2)),
        ] {
            assert!(
                matches!(refused, Err(MergeRefused::Unreadable(_))),
                "{refused:?}"
            );
        }
        // Our own record truncated: the agent replaces it, but not when drains were in it.
        let truncated = &only[..only.len() - 9];
        assert!(matches!(
            merge_extra(truncated, &health(&[], 2)),
            Err(MergeRefused::Unreadable(_))
        ));
        let plain = merge_extra("", &health(&[], 2)).expect("merge");
        assert!(merge_extra(&plain[..plain.len() - 5], &health(&[], 2)).is_ok());
    }

    #[test]
    fn publishes_and_drains_append_to_one_bounded_history() {
        let first = merge_extra("", &health(&[], 4)).expect("merge");
        assert!(!first.contains(history::KEY), "nothing changed yet");
        let faulty = merge_extra(&first, &health(&[2], 4)).expect("merge");
        let ev = history::read(
            serde_json::from_str::<Value>(&faulty)
                .expect("json")
                .get(history::KEY),
        );
        assert_eq!(ev.len(), 1);
        assert_eq!(
            (ev[0].index, ev[0].from.as_str(), ev[0].to.as_str()),
            (2, "ok", "faulty")
        );
        let mut text = faulty;
        for i in 0..40 {
            let e = history::Event {
                time: i,
                index: 1,
                to: "drained".into(),
                from: "ok".into(),
                src: history::Source::Admin,
                user: Some("a".into()),
                why: vec![],
            };
            text = write_drains(&text, vec![], vec![e]).expect("write");
        }
        let v: Value = serde_json::from_str(&text).expect("json");
        assert_eq!(history::read(v.get(history::KEY)).len(), history::MAX);
        assert_eq!(
            read_extra(&text)
                .expect("ok")
                .expect("ours")
                .health
                .status(2),
            Some(Status::Faulty)
        );
    }
}
