//! Per-node GPU health parsed from node `Extra`, parsed once per change of its content.
//!
//! `select_p_job_test` runs for every pending job in every scheduling cycle and reads the
//! health of every candidate node; the agent changes a node's `Extra` rarely. So the plugin
//! keeps the last `Extra` text per node with its parsed value and re-parses only when the
//! text differs.
//!
//! Health fails closed: when a node's `Extra` turns unusable (malformed, truncated, or no
//! longer carrying gputopo's health), the node keeps its last good health, so a broken
//! publisher never returns a known faulty GPU to service. Each distinct bad value is reported
//! once per node (the caller logs it at error level), even when two bad values alternate.
//! Only an empty `Extra` (`scontrol update NodeName=.. Extra=`, the administrator's reset)
//! forgets a node's health.
//!
//! The parser is passed in (`health::read_extra` in slurmctld), so the cache is generic over
//! what it stores and knows nothing of the JSON format.

use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::fmt::Display;
use std::hash::{Hash, Hasher};

/// How many distinct values per node are remembered as already reported.
const REPORTED_PER_NODE: usize = 8;

/// The message for an `Extra` that no longer carries gputopo's health after it did.
pub const NOT_OURS_ANY_MORE: &str =
    "node Extra no longer holds gputopo health (overwritten by someone else?)";

/// One node's cached `Extra` and what it parsed to.
#[derive(Debug)]
struct Entry<T> {
    extra: String,
    parsed: Result<Option<T>, String>,
    /// The last good value before the current text, kept while the current one is unusable.
    last_good: Option<T>,
    /// Hashes of the texts already reported (most recent last, bounded).
    reported: Vec<u64>,
}

/// The answer for one node.
#[derive(Debug, PartialEq, Eq)]
pub enum Lookup<'a, T> {
    /// No `Extra`, or an `Extra` without gputopo's health in it (and none before).
    NoInfo,
    /// gputopo's health for the node.
    Parsed {
        /// The value.
        value: &'a T,
        /// True when this text was not seen (for this node) before: report its problems.
        first_seen: bool,
    },
    /// The current `Extra` cannot be used; `kept` is the node's last good health, if any,
    /// which stays in force.
    Malformed {
        /// The parser's message (or [`NOT_OURS_ANY_MORE`]).
        error: &'a str,
        /// True the first time this text is seen for this node: log it then only.
        first_seen: bool,
        /// The last good health, still applied.
        kept: Option<&'a T>,
    },
}

impl<T> Lookup<'_, T> {
    /// The health in force: the parsed value, or the last good one kept over a bad value.
    pub fn value(&self) -> Option<&T> {
        match self {
            Lookup::Parsed { value, .. } => Some(value),
            Lookup::Malformed { kept, .. } => *kept,
            Lookup::NoInfo => None,
        }
    }
}

/// The cache: node name → last `Extra` and its parse.
#[derive(Debug)]
pub struct HealthCache<T> {
    entries: HashMap<String, Entry<T>>,
    parses: u64,
}

impl<T> Default for HealthCache<T> {
    fn default() -> Self {
        HealthCache {
            entries: HashMap::new(),
            parses: 0,
        }
    }
}

fn text_hash(text: &str) -> u64 {
    let mut h = DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

impl<T> HealthCache<T> {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// The health of `node` whose `Extra` is currently `extra`. `parse` runs only when the
    /// text differs from the cached one; it returns `Ok(None)` for an `Extra` that carries
    /// no gputopo health (an administrator's own value).
    pub fn lookup<E: Display>(
        &mut self,
        node: &str,
        extra: Option<&str>,
        parse: impl FnOnce(&str) -> Result<Option<T>, E>,
    ) -> Lookup<'_, T> {
        let text = extra.unwrap_or("").trim();
        if text.is_empty() {
            self.entries.remove(node);
            return Lookup::NoInfo;
        }
        let mut first_seen = false;
        let changed = self.entries.get(node).is_none_or(|e| e.extra != text);
        if changed {
            self.parses += 1;
            let parsed = parse(text).map_err(|e| e.to_string());
            let e = self
                .entries
                .entry(node.to_string())
                .or_insert_with(|| Entry {
                    extra: String::new(),
                    parsed: Ok(None),
                    last_good: None,
                    reported: Vec::new(),
                });
            if let Ok(Some(old)) = std::mem::replace(&mut e.parsed, parsed) {
                e.last_good = Some(old);
            }
            if matches!(e.parsed, Ok(Some(_))) {
                e.last_good = None;
            }
            e.extra = text.to_string();
            let h = text_hash(text);
            if !e.reported.contains(&h) {
                first_seen = true;
                if e.reported.len() == REPORTED_PER_NODE {
                    e.reported.remove(0);
                }
                e.reported.push(h);
            }
        }
        let Some(e) = self.entries.get(node) else {
            return Lookup::NoInfo;
        };
        match &e.parsed {
            Ok(Some(value)) => Lookup::Parsed { value, first_seen },
            Err(error) => Lookup::Malformed {
                error,
                first_seen,
                kept: e.last_good.as_ref(),
            },
            Ok(None) => match e.last_good.as_ref() {
                Some(kept) => Lookup::Malformed {
                    error: NOT_OURS_ANY_MORE,
                    first_seen,
                    kept: Some(kept),
                },
                None => Lookup::NoInfo,
            },
        }
    }

    /// Gives `node` a last good value from before this process (the persisted health,
    /// `crate::health::persist`), unless the node was looked up already: what this process
    /// read itself is newer. A seed replaces an earlier seed (a reload of the file on a
    /// reconfigure or a takeover). The next lookup parses the node's `Extra` as usual: a good
    /// one replaces the seed, an unusable one keeps it ([`Lookup::Malformed`] with `kept`),
    /// an empty one forgets it.
    pub fn seed(&mut self, node: &str, value: T) {
        match self.entries.get_mut(node) {
            Some(e) if !e.extra.is_empty() => {}
            Some(e) => e.parsed = Ok(Some(value)),
            None => {
                self.entries.insert(
                    node.to_string(),
                    Entry {
                        extra: String::new(),
                        parsed: Ok(Some(value)),
                        last_good: None,
                        reported: Vec::new(),
                    },
                );
            }
        }
    }

    /// Drops every cached node for which `keep` is false (nodes removed by a reconfigure).
    pub fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.entries.retain(|name, _| keep(name));
    }

    /// Forgets everything.
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// Number of nodes cached.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// How many times the parser ran since the cache was made (for counters and tests).
    pub fn parses(&self) -> u64 {
        self.parses
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in parser: `bad=<list>` is health, `{` alone is malformed, anything else
    /// carries no gputopo data.
    fn parse(s: &str) -> Result<Option<String>, String> {
        if let Some(v) = s.strip_prefix("bad=") {
            Ok(Some(v.to_string()))
        } else if s == "{" {
            Err("unexpected end of JSON".into())
        } else {
            Ok(None)
        }
    }

    #[test]
    fn parses_once_per_change() {
        let mut c = HealthCache::new();
        for _ in 0..5 {
            assert_eq!(
                c.lookup("n1", Some("bad=3"), parse).value().cloned(),
                Some("3".into())
            );
        }
        assert_eq!(c.parses(), 1);
        assert_eq!(
            c.lookup("n1", Some("bad=3,4"), parse).value().cloned(),
            Some("3,4".into())
        );
        assert_eq!(c.parses(), 2);
        assert_eq!(
            c.lookup("n2", Some("bad=3,4"), parse).value().cloned(),
            Some("3,4".into())
        );
        assert_eq!(c.parses(), 3);
        assert_eq!(c.len(), 2);
    }

    #[test]
    fn malformed_without_earlier_health_is_reported_once_and_means_no_info() {
        let mut c = HealthCache::new();
        let first = c.lookup("n1", Some("{"), parse);
        assert_eq!(
            first,
            Lookup::Malformed {
                error: "unexpected end of JSON",
                first_seen: true,
                kept: None,
            }
        );
        assert_eq!(first.value(), None);
        for _ in 0..3 {
            assert!(matches!(
                c.lookup("n1", Some("{"), parse),
                Lookup::Malformed {
                    first_seen: false,
                    ..
                }
            ));
        }
        assert_eq!(c.parses(), 1);
        // Fixed by the agent: parsed again; the same breakage again is not logged again,
        // but the good value is kept over it.
        assert!(c.lookup("n1", Some("bad=1"), parse).value().is_some());
        let again = c.lookup("n1", Some("{"), parse);
        assert!(matches!(
            again,
            Lookup::Malformed {
                first_seen: false,
                ..
            }
        ));
        assert_eq!(again.value().cloned(), Some("1".into()));
    }

    #[test]
    fn bad_values_keep_the_last_good_health_and_are_reported_once_each() {
        let mut c = HealthCache::new();
        assert_eq!(
            c.lookup("n1", Some("bad=3"), parse).value().cloned(),
            Some("3".into())
        );
        let mut reports = 0;
        // Two distinct bad values alternating, and an admin string over our JSON.
        for text in ["{", "{x", "rack=7", "{", "{x", "rack=7"] {
            let l = c.lookup("n1", Some(text), |s| {
                if s == "{x" {
                    Err("truncated".to_string())
                } else {
                    parse(s)
                }
            });
            assert_eq!(l.value().cloned(), Some("3".into()), "{text}: fault kept");
            if let Lookup::Malformed { first_seen, .. } = l {
                reports += usize::from(first_seen);
            }
        }
        assert_eq!(reports, 3, "one report per distinct bad value");
        // A new good value replaces it; clearing Extra forgets it.
        assert_eq!(
            c.lookup("n1", Some("bad=5"), parse).value().cloned(),
            Some("5".into())
        );
        assert_eq!(c.lookup("n1", Some(""), parse), Lookup::NoInfo);
    }

    #[test]
    fn a_seed_is_kept_over_a_bad_value_and_yields_to_a_good_one_or_a_reset() {
        let mut c = HealthCache::new();
        c.seed("n1", "3".to_string());
        let l = c.lookup("n1", Some("{"), parse);
        assert_eq!(l.value().cloned(), Some("3".into()), "persisted fault kept");
        assert!(matches!(
            l,
            Lookup::Malformed {
                first_seen: true,
                ..
            }
        ));
        // Looked up now: a later seed (a reload of an older file) does not replace it.
        c.seed("n1", "9".to_string());
        assert_eq!(
            c.lookup("n1", Some("{"), parse).value().cloned(),
            Some("3".into())
        );
        // A seed is replaced by a later seed while the node was not looked up.
        c.seed("n2", "1".to_string());
        c.seed("n2", "2".to_string());
        assert_eq!(
            c.lookup("n2", Some("rack=7"), parse).value().cloned(),
            Some("2".into()),
            "an Extra that is no longer ours keeps the seed"
        );
        c.seed("n3", "1".to_string());
        assert_eq!(
            c.lookup("n3", Some("bad=5"), parse).value().cloned(),
            Some("5".into())
        );
        c.seed("n4", "1".to_string());
        assert_eq!(c.lookup("n4", Some(""), parse), Lookup::NoInfo);
    }

    #[test]
    fn empty_foreign_and_forgotten() {
        let mut c = HealthCache::new();
        assert_eq!(c.lookup("n1", None, parse), Lookup::NoInfo);
        assert_eq!(c.lookup("n1", Some("  "), parse), Lookup::NoInfo);
        assert_eq!(c.lookup("n1", Some("rack=7"), parse), Lookup::NoInfo);
        assert!(c.lookup("n2", Some("bad=0"), parse).value().is_some());
        // Extra cleared: the node's health goes with it.
        assert_eq!(c.lookup("n2", Some(""), parse), Lookup::NoInfo);
        assert!(c.lookup("n3", Some("bad=0"), parse).value().is_some());
        c.retain(|n| n != "n3");
        assert_eq!(c.len(), 1);
        c.clear();
        assert!(c.is_empty());
    }
}
