//! Per-node GPU health parsed from node `Extra`, parsed once per change of its content.
//!
//! `select_p_job_test` runs for every pending job in every scheduling cycle and reads the
//! health of every candidate node; the agent changes a node's `Extra` rarely. So the plugin
//! keeps the last `Extra` text per node with its parsed value and re-parses only when the
//! text differs. A malformed value is reported once (when it first appears, the caller logs
//! it) and then treated as "no health information": a broken publisher never takes GPUs out
//! of service.
//!
//! The parser is passed in (the agent's `health::parse_extra` in slurmctld), so the cache is
//! generic over what it stores and knows nothing of the JSON format.

use std::collections::HashMap;
use std::fmt::Display;

/// One node's cached `Extra` and what it parsed to.
#[derive(Debug)]
struct Entry<T> {
    extra: String,
    parsed: Result<Option<T>, String>,
}

/// The answer for one node.
#[derive(Debug, PartialEq, Eq)]
pub enum Lookup<'a, T> {
    /// No `Extra`, or an `Extra` without gputopo's health in it.
    NoInfo,
    /// gputopo's health for the node.
    Parsed(&'a T),
    /// The `Extra` text could not be parsed; treat as no information.
    Malformed {
        /// The parser's message.
        error: &'a str,
        /// True only on the lookup that parsed this text: log then, and never again for
        /// the same text.
        first_seen: bool,
    },
}

impl<T> Lookup<'_, T> {
    /// The parsed health, if any.
    pub fn value(&self) -> Option<&T> {
        match self {
            Lookup::Parsed(v) => Some(v),
            _ => None,
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
        let fresh = match self.entries.get(node) {
            Some(e) => e.extra != text,
            None => true,
        };
        if fresh {
            self.parses += 1;
            let parsed = parse(text).map_err(|e| e.to_string());
            self.entries.insert(
                node.to_string(),
                Entry {
                    extra: text.to_string(),
                    parsed,
                },
            );
        }
        match self.entries.get(node).map(|e| &e.parsed) {
            Some(Ok(Some(v))) => Lookup::Parsed(v),
            Some(Err(error)) => Lookup::Malformed {
                error,
                first_seen: fresh,
            },
            Some(Ok(None)) | None => Lookup::NoInfo,
        }
    }

    /// Drops every cached node for which `keep` is false (nodes removed by a reconfigure).
    pub fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.entries.retain(|name, _| keep(name));
    }

    /// Forgets everything (after `scontrol reconfigure`, so a changed parser config applies).
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
    fn malformed_is_reported_once_and_means_no_info() {
        let mut c = HealthCache::new();
        let first = c.lookup("n1", Some("{"), parse);
        assert_eq!(
            first,
            Lookup::Malformed {
                error: "unexpected end of JSON",
                first_seen: true
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
        // Fixed by the agent: parsed again, and a new breakage is reported again.
        assert!(c.lookup("n1", Some("bad=1"), parse).value().is_some());
        assert!(matches!(
            c.lookup("n1", Some("{"), parse),
            Lookup::Malformed {
                first_seen: true,
                ..
            }
        ));
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
