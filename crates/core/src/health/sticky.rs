//! Sticky XIDs: what the agent remembers between health checks.
//!
//! NVML delivers an XID event once, to whoever is listening at that moment, and a health check
//! listens only `XidWaitMs`. Without memory, a GPU that raised XID 79 ("fallen off the bus")
//! would be faulty for one check and healthy again at the next. So each XID the policy does not
//! ignore is remembered per device (keyed by UUID, else PCI bus id, never by index) and keeps
//! counting as evidence until **both**: `XidStickySec` have passed since it was last seen, and
//! `XidClearChecks` health checks in a row read the GPU's events and saw none. A check that
//! could not read the GPU's events does not count as clean.
//!
//! The same file keeps the hysteresis of the telemetry signals ([`XidMemory::step_signals`],
//! policy in `telemetry`), per device and signal, each device's last violation counters
//! ([`XidMemory::step_counters`]) and the widest PCIe link each device has shown in its slot
//! ([`XidMemory::step_pcie`]), so one memory serves them all. It also keeps the agent's copy
//! of the node's GPU state history (`hist`, `super::extra::history`), which publish puts back
//! into a node record that lost it.
//!
//! The state is a small JSON file the agent owns (`StateDir`); [`XidMemory::parse`] rejects
//! anything malformed, and the agent then starts afresh and says so.

use super::extra::history::{self, Event};
use super::kernel_xid::Cursor;
use super::telemetry::{Link, Signal, Telemetry, TelemetryPolicy, Track};
use super::violation::{self, Counter, Limit};
use std::collections::BTreeMap;

/// How long XIDs stick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StickyPolicy {
    /// Seconds an XID holds after it was last seen.
    pub hold_sec: u64,
    /// Clean checks in a row needed as well.
    pub clear_checks: u32,
}

/// One device's remembered XIDs.
#[derive(Clone, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Remembered {
    /// The XIDs seen (sorted, unique).
    pub xids: Vec<u32>,
    /// When one was last seen (Unix seconds).
    pub last: u64,
    /// Clean checks in a row since.
    pub clean: u32,
}

/// The widest and fastest PCIe link one device has shown, and in which slot.
#[derive(Clone, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct LinkSeen {
    /// The best link seen.
    #[serde(flatten)]
    pub best: Link,
    /// The PCI bus id it was seen at: a card moved to another slot starts afresh (the new
    /// slot may be wired narrower).
    #[serde(rename = "b", default, skip_serializing_if = "Option::is_none")]
    pub bus: Option<String>,
}

/// Remembered XIDs by device key.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct XidMemory {
    /// Device key (UUID or bus id) → what is remembered.
    pub gpus: BTreeMap<String, Remembered>,
    /// Device key → signal token → its hysteresis (only tracks that are not idle).
    pub signals: BTreeMap<String, BTreeMap<String, Track>>,
    /// Device key → violation counter token → its last reading ([`super::violation`]).
    pub counters: BTreeMap<String, BTreeMap<String, Counter>>,
    /// Device key → the warm set's hysteresis (only tracks that are not idle).
    pub warm: BTreeMap<String, Track>,
    /// Where the kernel log was read up to (`super::kernel_xid`); `None` before the first read.
    pub klog: Option<Cursor>,
    /// Device key → the best PCIe link it has shown ([`XidMemory::step_pcie`]).
    pub pcie: BTreeMap<String, LinkSeen>,
    /// The node's history as the agent last published it (at most `history::MAX` events).
    pub hist: Vec<Event>,
}

/// Most devices and XIDs per device kept (bounds a hostile or runaway file).
const MAX_DEVICES: usize = 1024;
const MAX_XIDS: usize = 64;
const VERSION: u32 = 1;

#[derive(serde::Serialize, serde::Deserialize)]
struct Wire {
    v: u32,
    gpus: BTreeMap<String, Remembered>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    signals: BTreeMap<String, BTreeMap<String, Track>>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    counters: BTreeMap<String, BTreeMap<String, Counter>>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    warm: BTreeMap<String, Track>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    klog: Option<Cursor>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pcie: BTreeMap<String, LinkSeen>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    hist: Vec<Event>,
}

impl XidMemory {
    /// Parses the state file.
    ///
    /// # Errors
    /// Not JSON, another version, or more than the bounds allow.
    pub fn parse(text: &str) -> Result<XidMemory, String> {
        let w: Wire = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if w.v != VERSION {
            return Err(format!("version {} (this gputopo reads {VERSION})", w.v));
        }
        if w.gpus.len() > MAX_DEVICES
            || w.gpus.values().any(|r| r.xids.len() > MAX_XIDS)
            || w.signals.len() > MAX_DEVICES
            || w.signals.values().any(|t| t.len() > Signal::ALL.len())
            || w.counters.len() > MAX_DEVICES
            || w.warm.len() > MAX_DEVICES
            || w.pcie.len() > MAX_DEVICES
            || w.hist.len() > history::MAX
            || w.counters.values().any(|c| c.len() > Limit::ALL.len())
        {
            return Err("too many entries".into());
        }
        Ok(XidMemory {
            gpus: w.gpus,
            signals: w.signals,
            counters: w.counters,
            warm: w.warm,
            klog: w.klog,
            pcie: w.pcie,
            hist: w.hist,
        })
    }

    /// The state file's text.
    pub fn to_json(&self) -> String {
        let w = Wire {
            v: VERSION,
            gpus: self.gpus.clone(),
            signals: self.signals.clone(),
            counters: self.counters.clone(),
            warm: self.warm.clone(),
            klog: self.klog.clone(),
            pcie: self.pcie.clone(),
            hist: self.hist.clone(),
        };
        serde_json::to_string(&w).unwrap_or_else(|_| String::from("{}"))
    }

    /// The XIDs still held for device `key`.
    pub fn held(&self, key: &str) -> &[u32] {
        self.gpus.get(key).map_or(&[], |r| r.xids.as_slice())
    }

    /// Records one health check of device `key` at `now`: `seen` are the XIDs it raised that
    /// the policy does not ignore, `None` when its events could not be read.
    pub fn record(&mut self, key: &str, seen: Option<&[u32]>, now: u64, p: StickyPolicy) {
        match seen {
            Some(xids) if !xids.is_empty() => {
                if !self.gpus.contains_key(key) && self.gpus.len() >= MAX_DEVICES {
                    self.evict_oldest();
                }
                let r = self.gpus.entry(key.to_string()).or_default();
                r.xids.extend_from_slice(xids);
                r.xids.sort_unstable();
                r.xids.dedup();
                r.xids.truncate(MAX_XIDS);
                r.last = now;
                r.clean = 0;
            }
            Some(_) => {
                let Some(r) = self.gpus.get_mut(key) else {
                    return;
                };
                r.clean = r.clean.saturating_add(1);
                if r.clean >= p.clear_checks && now.saturating_sub(r.last) >= p.hold_sec {
                    self.gpus.remove(key);
                }
            }
            None => {}
        }
    }

    /// Steps device `key`'s hysteresis with this check's telemetry (`telemetry::signals`) and
    /// returns the signals that count now. Idle tracks are not kept, so a healthy device
    /// costs nothing in the file.
    pub fn step_signals(
        &mut self,
        key: &str,
        seen: &[(Signal, Option<bool>)],
        p: &TelemetryPolicy,
    ) -> Vec<Signal> {
        if !self.signals.contains_key(key) && self.signals.len() >= MAX_DEVICES {
            if let Some(k) = self.signals.keys().next().cloned() {
                self.signals.remove(&k);
            }
        }
        let tracks = self.signals.entry(key.to_string()).or_default();
        tracks.retain(|token, _| Signal::from_token(token).is_some());
        let mut on = Vec::new();
        for &(signal, s) in seen {
            let t = tracks
                .get(signal.token())
                .copied()
                .unwrap_or_default()
                .step(s, &p.for_signal(signal));
            if t.is_idle() {
                tracks.remove(signal.token());
            } else {
                tracks.insert(signal.token().to_string(), t);
            }
            if t.on {
                on.push(signal);
            }
        }
        if tracks.is_empty() {
            self.signals.remove(key);
        }
        on
    }

    /// Records device `key`'s violation counters of this check and returns the share of the
    /// time since its previous check each ran throttled ([`violation::shares`]). Counters
    /// this check could not read keep their last reading.
    pub fn step_counters(&mut self, key: &str, now: &[(Limit, Counter)]) -> Vec<(Limit, u32)> {
        if now.is_empty() {
            return Vec::new();
        }
        if !self.counters.contains_key(key) && self.counters.len() >= MAX_DEVICES {
            if let Some(k) = self.counters.keys().next().cloned() {
                self.counters.remove(&k);
            }
        }
        let last = self.counters.entry(key.to_string()).or_default();
        let prev: Vec<(Limit, Counter)> = last
            .iter()
            .filter_map(|(t, c)| Some((Limit::from_token(t)?, *c)))
            .collect();
        last.retain(|t, _| Limit::from_token(t).is_some());
        for &(l, c) in now {
            last.insert(l.token().to_string(), c);
        }
        violation::shares(&prev, now)
    }

    /// Steps device `key`'s warm hysteresis with this check's `seen`
    /// ([`super::telemetry::warm_seen`]) under `WarmRaiseChecks`/`WarmClearChecks` and says
    /// whether it is warm now.
    pub fn step_warm(&mut self, key: &str, seen: Option<bool>, p: &TelemetryPolicy) -> bool {
        let t = self
            .warm
            .get(key)
            .copied()
            .unwrap_or_default()
            .step(seen, &super::telemetry::warm_policy(p));
        if t.is_idle() {
            self.warm.remove(key);
        } else if self.warm.contains_key(key) || self.warm.len() < MAX_DEVICES {
            self.warm.insert(key.to_string(), t);
        }
        t.on
    }

    /// Records the PCIe link device `key` shows this check at bus id `bus` and returns the
    /// widest and fastest it has shown in that slot, this check included (`None` while no link
    /// was ever readable). The baseline of `telemetry::Signal::PcieDegraded`: only a drop from
    /// it is evidence. A device seen at another bus id starts afresh.
    pub fn step_pcie(&mut self, key: &str, bus: Option<&str>, t: &Telemetry) -> Option<Link> {
        let now = Link::current(t);
        let known = self
            .pcie
            .get(key)
            .filter(|s| s.bus.as_deref() == bus)
            .map(|s| s.best);
        let best = known.unwrap_or_default().max(now);
        if best == Link::default() {
            return None;
        }
        if known != Some(best) {
            if !self.pcie.contains_key(key) && self.pcie.len() >= MAX_DEVICES {
                if let Some(k) = self.pcie.keys().next().cloned() {
                    self.pcie.remove(&k);
                }
            }
            self.pcie.insert(
                key.to_string(),
                LinkSeen {
                    best,
                    bus: bus.map(str::to_string),
                },
            );
        }
        Some(best)
    }

    fn evict_oldest(&mut self) {
        if let Some(k) = self
            .gpus
            .iter()
            .min_by_key(|(_, r)| r.last)
            .map(|(k, _)| k.clone())
        {
            self.gpus.remove(&k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: StickyPolicy = StickyPolicy {
        hold_sec: 100,
        clear_checks: 3,
    };

    #[test]
    fn holds_for_the_time_and_the_clean_checks() {
        let mut m = XidMemory::default();
        m.record("GPU-a", Some(&[79]), 1000, P);
        assert_eq!(m.held("GPU-a"), &[79]);
        // Three clean checks, but too soon.
        for t in [1010, 1020, 1030] {
            m.record("GPU-a", Some(&[]), t, P);
        }
        assert_eq!(m.held("GPU-a"), &[79]);
        // Late enough; an unreadable check counts for nothing.
        m.record("GPU-a", None, 1200, P);
        assert_eq!(m.held("GPU-a"), &[79]);
        m.record("GPU-a", Some(&[]), 1200, P);
        assert!(m.held("GPU-a").is_empty());
        // Time alone does not clear: the clean count restarts with every new XID.
        m.record("GPU-b", Some(&[48]), 0, P);
        m.record("GPU-b", Some(&[]), 500, P);
        m.record("GPU-b", Some(&[94]), 600, P);
        m.record("GPU-b", Some(&[]), 900, P);
        m.record("GPU-b", Some(&[]), 901, P);
        assert_eq!(m.held("GPU-b"), &[48, 94]);
        m.record("GPU-b", Some(&[]), 902, P);
        assert!(m.held("GPU-b").is_empty());
    }

    #[test]
    fn round_trips_and_rejects_corruption() {
        let mut m = XidMemory::default();
        m.record("GPU-a", Some(&[79, 48, 79]), 7, P);
        let back = XidMemory::parse(&m.to_json()).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.held("GPU-a"), &[48, 79]);
        let hist =
            r#"{"v":1,"gpus":{},"hist":[{"t":7,"i":3,"s":"faulty","src":"agent","r":["xid_79"]}]}"#;
        assert_eq!(XidMemory::parse(hist).unwrap().to_json(), hist);
        let many = format!(
            r#"{{"v":1,"gpus":{{}},"hist":[{}]}}"#,
            [r#"{"t":1,"i":0,"s":"ok","src":"agent"}"#; 17].join(",")
        );
        assert!(XidMemory::parse(&many).is_err(), "more than history::MAX");
        for bad in [
            "",
            "{",
            "null",
            "{\"v\":2,\"gpus\":{}}",
            "{\"v\":1,\"gpus\":{\"a\":{\"xids\":[-1]}}}",
            "\u{0}\u{ff}",
        ] {
            assert!(XidMemory::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn telemetry_tracks_persist_and_idle_ones_vanish() {
        let p = TelemetryPolicy::default();
        let hot = [(Signal::Thermal, Some(true)), (Signal::PcieDegraded, None)];
        let cool = [(Signal::Thermal, Some(false)), (Signal::PcieDegraded, None)];
        let mut m = XidMemory::default();
        assert!(
            m.step_signals("GPU-a", &hot, &p).is_empty(),
            "one check is not sustained"
        );
        // The run survives a round trip through the file, so the next health check counts it.
        let mut m = XidMemory::parse(&m.to_json()).unwrap();
        assert_eq!(m.step_signals("GPU-a", &hot, &p), [Signal::Thermal]);
        for _ in 0..2 {
            assert_eq!(m.step_signals("GPU-a", &cool, &p), [Signal::Thermal]);
        }
        assert!(m.step_signals("GPU-a", &cool, &p).is_empty());
        assert_eq!(m, XidMemory::default(), "nothing left to remember");
        assert_eq!(m.to_json(), r#"{"v":1,"gpus":{}}"#, "old readers' format");
    }

    #[test]
    fn bounded() {
        let mut m = XidMemory::default();
        for i in 0..(MAX_DEVICES as u64 + 5) {
            m.record(&format!("GPU-{i}"), Some(&[79]), i, P);
        }
        assert_eq!(m.gpus.len(), MAX_DEVICES);
        assert!(m.held("GPU-0").is_empty(), "the oldest is evicted");
    }

    #[test]
    fn counters_give_the_share_since_the_previous_check_and_survive_the_file() {
        let c = |at_us, ns| Counter { at_us, ns };
        let mut m = XidMemory::default();
        assert!(
            m.step_counters("GPU-a", &[(Limit::Power, c(0, 0))])
                .is_empty()
        );
        let m2 = XidMemory::parse(&m.to_json()).expect("round trip");
        assert_eq!(m2, m);
        m = m2;
        // 10 s later, 7 s throttled; an unread check keeps the last reading.
        assert!(m.step_counters("GPU-a", &[]).is_empty());
        let now = [(Limit::Power, c(10_000_000, 7_000_000_000))];
        assert_eq!(m.step_counters("GPU-a", &now), vec![(Limit::Power, 70)]);
        assert_eq!(m.step_counters("GPU-a", &now), vec![], "no time passed");
        assert!(
            XidMemory::parse(r#"{"v":1,"gpus":{}}"#).is_ok(),
            "older files"
        );
    }

    #[test]
    fn warm_is_held_per_device_and_idle_devices_cost_nothing() {
        let p = TelemetryPolicy::default();
        let mut m = XidMemory::default();
        assert!(m.step_warm("GPU-a", Some(true), &p), "WarmRaiseChecks=1");
        assert!(!m.step_warm("GPU-b", Some(false), &p));
        let m2 = XidMemory::parse(&m.to_json()).expect("round trip");
        assert_eq!(m2, m);
        m = m2;
        for (seen, on) in [(Some(false), true), (None, true), (Some(false), true)] {
            assert_eq!(m.step_warm("GPU-a", seen, &p), on);
        }
        assert!(!m.step_warm("GPU-a", Some(false), &p), "three clean checks");
        assert!(m.warm.is_empty());
    }

    #[test]
    fn the_best_pcie_link_is_kept_per_slot_and_survives_the_file() {
        let at = |generation, width| Telemetry {
            pcie_gen: crate::health::Reading::Value((generation, 4)),
            pcie_width: crate::health::Reading::Value((width, 16)),
            ..Telemetry::default()
        };
        let link = |generation, width| Some(Link { generation, width });
        let bus = Some("00000000:3B:00.0");
        let mut m = XidMemory::default();
        assert_eq!(m.step_pcie("GPU-a", bus, &Telemetry::default()), None);
        assert!(m.pcie.is_empty(), "nothing readable, nothing kept");
        // Idle at gen 1 x8 (a slot wired x8), then under load gen 4 x8: never wider than x8.
        assert_eq!(m.step_pcie("GPU-a", bus, &at(1, 8)), link(1, 8));
        let mut m = XidMemory::parse(&m.to_json()).expect("round trip");
        assert_eq!(m.step_pcie("GPU-a", bus, &at(4, 8)), link(4, 8));
        assert_eq!(m.step_pcie("GPU-a", bus, &at(1, 8)), link(4, 8));
        // x16 once: from then on x8 is below what the card showed.
        assert_eq!(m.step_pcie("GPU-a", bus, &at(4, 16)), link(4, 16));
        assert_eq!(m.step_pcie("GPU-a", bus, &at(4, 8)), link(4, 16));
        // Moved to another slot: that slot's link is the new baseline.
        assert_eq!(
            m.step_pcie("GPU-a", Some("00000000:5E:00.0"), &at(3, 8)),
            link(3, 8)
        );
        assert!(
            m.to_json()
                .contains(r#""pcie":{"GPU-a":{"g":3,"w":8,"b":"00000000:5E:00.0"}}"#)
        );
        // Files of agents before the baseline read as none; the kernel-log cursor and the
        // baseline live side by side.
        assert!(
            XidMemory::parse(r#"{"v":1,"gpus":{}}"#)
                .unwrap()
                .pcie
                .is_empty()
        );
        let both =
            r#"{"v":1,"gpus":{},"klog":{"boot":"b","seq":7},"pcie":{"GPU-a":{"g":4,"w":16}}}"#;
        assert_eq!(XidMemory::parse(both).unwrap().to_json(), both);
        for i in 0..(MAX_DEVICES + 3) {
            m.step_pcie(&format!("GPU-{i}"), bus, &at(4, 16));
        }
        assert_eq!(m.pcie.len(), MAX_DEVICES, "bounded");
    }

    mod fuzz {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn parse_never_panics(s in "\\PC{0,200}") {
                let _ = XidMemory::parse(&s);
            }
        }
    }
}
