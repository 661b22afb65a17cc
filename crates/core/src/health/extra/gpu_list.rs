//! The published `gpus` list, read so that a bad entry never hides a good one.
//!
//! Health fails closed: one entry this reader cannot use (a status token it does not know,
//! an index it cannot represent, an index listed twice) must not throw away the rest of the
//! record, least of all another GPU's `faulty` verdict. Each such entry is reported as a
//! problem (the plugin logs it) and resolved towards caution:
//! - an unknown status token reads as [`Status::Unknown`] (used only when needed), never `ok`;
//! - an index listed twice keeps its most severe verdict, with the reasons of both;
//! - an index that is not a number below [`MAX_INDEX`] is dropped (there is no GPU to mark;
//!   indices above the topology model's 32 are kept: health applies on nodes of any size).
//!
//! Unknown fields of an entry (e.g. a device identity a newer agent adds) are ignored.

use crate::health::{Device, GpuHealth, Reason, Status};
use crate::wideset::{MAX_INDEX, WideSet};

/// One entry as published, before validation.
#[derive(serde::Deserialize)]
pub(super) struct RawGpu {
    #[serde(default)]
    i: Option<serde_json::Number>,
    #[serde(default)]
    s: Option<String>,
    #[serde(default)]
    r: Vec<Reason>,
    /// Device identity (informational): read leniently, a malformed value is no identity.
    #[serde(default, deserialize_with = "lenient_u32")]
    m: Option<u32>,
    #[serde(default, deserialize_with = "lenient_string")]
    b: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    u: Option<String>,
}

/// An optional field that never fails the record: anything but a fitting value reads as `None`.
fn lenient<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    let v = <serde_json::Value as serde::Deserialize>::deserialize(d)?;
    Ok(serde_json::from_value(v).ok())
}

fn lenient_u32<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    lenient(d)
}

fn lenient_string<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    lenient(d)
}

/// See [`lenient`]; used for the record's time stamp.
pub(super) fn lenient_u64<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    lenient(d)
}

/// See [`lenient`]; used for the warm GPUs (indices at or above `MAX_INDEX` are dropped).
pub(super) fn lenient_indices<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Vec<usize>>, D::Error> {
    let v: Option<Vec<usize>> = lenient(d)?;
    Ok(v.map(|v| v.into_iter().filter(|&i| i < MAX_INDEX).collect()))
}

/// The verdicts by index (sorted, one per index) and the problems met.
pub(super) fn verdicts(raw: Vec<RawGpu>) -> (Vec<GpuHealth>, Vec<String>) {
    let mut problems = Vec::new();
    let mut gpus: Vec<GpuHealth> = Vec::with_capacity(raw.len());
    let mut seen = WideSet::new();
    for g in raw {
        let index = match g.i.as_ref().and_then(serde_json::Number::as_u64) {
            Some(i) if i < MAX_INDEX as u64 => i as usize,
            _ => {
                let shown = g.i.map_or_else(|| "missing".to_string(), |n| n.to_string());
                problems.push(format!(
                    "GPU index {shown} is not a number below {MAX_INDEX}; entry ignored"
                ));
                continue;
            }
        };
        let status = match g.s.as_deref().map(status_of) {
            Some(Some(s)) => s,
            _ => {
                problems.push(format!(
                    "GPU {index}: status {:?} is not ok|degraded|unknown|faulty; read as unknown",
                    g.s.as_deref().unwrap_or("")
                ));
                Status::Unknown
            }
        };
        if seen.contains(index) {
            problems.push(format!(
                "GPU {index} is listed twice; its most severe verdict is kept"
            ));
            if let Some(prev) = gpus.iter_mut().find(|p| p.index == index) {
                prev.status = prev.status.max(status);
                prev.reasons.extend(g.r);
            }
            continue;
        }
        seen.insert(index);
        gpus.push(GpuHealth {
            index,
            status,
            reasons: g.r,
            device: Device {
                minor: g.m,
                bus: g.b,
                uuid: g.u,
            },
        });
    }
    gpus.sort_by_key(|g| g.index);
    (gpus, problems)
}

fn status_of(token: &str) -> Option<Status> {
    [
        Status::Ok,
        Status::Degraded,
        Status::Unknown,
        Status::Faulty,
    ]
    .into_iter()
    .find(|s| s.as_str() == token)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> (Vec<GpuHealth>, Vec<String>) {
        verdicts(serde_json::from_str(json).unwrap())
    }

    fn statuses(g: &[GpuHealth]) -> Vec<(usize, Status)> {
        g.iter().map(|g| (g.index, g.status)).collect()
    }

    #[test]
    fn good_entries_survive_bad_ones() {
        let (g, p) = parse(
            r#"[{"i":3,"s":"faulty","r":["ecc_uncorrectable"]},{"i":5,"s":"broken"},
                {"i":4096,"s":"ok"},{"i":-1,"s":"ok"},{"i":1.5,"s":"ok"},{"s":"ok"},
                {"i":3,"s":"ok"},{"i":6,"s":"degraded","x":{"pci":"0000:3b:00.0"}}]"#,
        );
        assert_eq!(
            statuses(&g),
            vec![
                (3, Status::Faulty),
                (5, Status::Unknown),
                (6, Status::Degraded)
            ]
        );
        assert_eq!(g[0].reasons, vec![Reason::EccUncorrectable]);
        assert_eq!(p.len(), 6, "{p:?}");
    }

    #[test]
    fn a_duplicate_keeps_the_worst_verdict_whichever_comes_first() {
        let (g, _) = parse(r#"[{"i":2,"s":"ok"},{"i":2,"s":"faulty","r":["lost"]}]"#);
        assert_eq!(statuses(&g), vec![(2, Status::Faulty)]);
        let (g, _) = parse(r#"[{"i":2,"s":"faulty"},{"i":2,"s":"ok"}]"#);
        assert_eq!(statuses(&g), vec![(2, Status::Faulty)]);
    }

    #[test]
    fn clean_lists_have_no_problems() {
        let (g, p) = parse(r#"[{"i":1,"s":"ok"},{"i":0,"s":"unknown"}]"#);
        assert_eq!(statuses(&g), vec![(0, Status::Unknown), (1, Status::Ok)]);
        assert!(p.is_empty());
    }
}
