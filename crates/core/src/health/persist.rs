//! Each node's last good health, kept in `StateSaveLocation` so that no restart, reconfigure
//! (24.11+ restarts slurmctld for it) or takeover by a backup controller turns a known faulty
//! GPU into a usable one while the node's `Extra` is unusable (issue 25 item 1).
//!
//! What is kept is the node's last good `Extra` **text, verbatim**: the text the plugin last
//! read successfully with [`super::read_extra`]. Read back, each text is parsed again by that
//! same function, so the persisted record holds exactly what the live model holds (verdicts,
//! links, warm GPUs, and whatever later versions add to what `read_extra` parses, per-GPU
//! drains included) with no second format to keep in step.
//!
//! ```text
//! {"v":1,"nodes":{"n1":{"extra":"{\"gpu_faulty\":\"3\",...,\"gputopo\":{\"v\":1,...}}","t":1764583200}}}
//! ```
//!
//! The file is used only as a fallback: a node whose current `Extra` parses uses that; a node
//! whose `Extra` is unusable keeps the last good health this process saw, else the one in the
//! file; an empty `Extra` (the administrator's reset) forgets the node here too. Bounded:
//! [`MAX_FILE_BYTES`], [`MAX_NODES`], [`MAX_EXTRA_BYTES`]. Read and written through
//! [`crate::state_file`] (crash-safe, 0600, set aside when corrupt).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::state_file;

/// The file's name in `StateSaveLocation`.
pub const HEALTH_FILE: &str = "gputopo_health.json";
/// The format version.
pub const VERSION: u32 = 1;
/// Largest file read back.
pub const MAX_FILE_BYTES: u64 = 64 << 20;
/// Most nodes kept.
pub const MAX_NODES: usize = 100_000;
/// Largest `Extra` kept for one node.
pub const MAX_EXTRA_BYTES: usize = 256 << 10;

/// One node's record.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Saved {
    /// The node's last good `Extra`, verbatim.
    pub extra: String,
    /// When this process learned it (Unix seconds).
    pub t: i64,
}

/// Why [`HealthStore::remember`] kept nothing.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotKept {
    /// The text is longer than [`MAX_EXTRA_BYTES`].
    #[error("its Extra is {0} bytes, more than the {MAX_EXTRA_BYTES} kept across restarts")]
    TooLong(usize),
    /// [`MAX_NODES`] are kept already.
    #[error("{MAX_NODES} nodes' health is kept across restarts already")]
    Full,
}

/// Every node's last good `Extra`, by node name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HealthStore {
    nodes: BTreeMap<String, Saved>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct OnDisk {
    v: u32,
    nodes: BTreeMap<String, Saved>,
}

/// What is wrong with a file ([`HealthStore::from_json`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Corrupt(pub String);

impl HealthStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Keeps `extra` as `node`'s last good health, learned at `t`. Returns whether the store
    /// changed (an unchanged text keeps its time, so nothing is rewritten).
    ///
    /// # Errors
    /// [`NotKept`] past the bounds; the node's earlier record, if any, stays.
    pub fn remember(&mut self, node: &str, extra: &str, t: i64) -> Result<bool, NotKept> {
        if extra.len() > MAX_EXTRA_BYTES {
            return Err(NotKept::TooLong(extra.len()));
        }
        if let Some(s) = self.nodes.get_mut(node) {
            if s.extra == extra {
                return Ok(false);
            }
            s.extra = extra.to_string();
            s.t = t;
            return Ok(true);
        }
        if self.nodes.len() >= MAX_NODES {
            return Err(NotKept::Full);
        }
        let saved = Saved {
            extra: extra.to_string(),
            t,
        };
        self.nodes.insert(node.to_string(), saved);
        Ok(true)
    }

    /// Forgets `node` (its `Extra` was cleared). Returns whether it was kept.
    pub fn forget(&mut self, node: &str) -> bool {
        self.nodes.remove(node).is_some()
    }

    /// `node`'s record.
    pub fn get(&self, node: &str) -> Option<&Saved> {
        self.nodes.get(node)
    }

    /// Every record, by node name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Saved)> {
        self.nodes.iter().map(|(n, s)| (n.as_str(), s))
    }

    /// Number of nodes kept.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True when no node is kept.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The file's text.
    pub fn to_json(&self) -> String {
        #[derive(serde::Serialize)]
        struct Out<'a> {
            v: u32,
            nodes: &'a BTreeMap<String, Saved>,
        }
        serde_json::to_string(&Out {
            v: VERSION,
            nodes: &self.nodes,
        })
        .unwrap_or_else(|_| String::from("{}"))
    }

    /// Reads a file's text. Records past the bounds are dropped (one message each, at most
    /// eight, then a count), not the whole file.
    ///
    /// # Errors
    /// [`Corrupt`]: not JSON of this shape, or another version.
    pub fn from_json(text: &str) -> Result<(HealthStore, Vec<String>), Corrupt> {
        let disk: OnDisk = serde_json::from_str(text).map_err(|e| Corrupt(e.to_string()))?;
        if disk.v != VERSION {
            return Err(Corrupt(format!(
                "version {} is not supported (this gputopo reads {VERSION})",
                disk.v
            )));
        }
        let mut store = HealthStore::new();
        let mut problems = Vec::new();
        let mut dropped = 0usize;
        for (node, s) in disk.nodes {
            if let Err(e) = store.remember(&node, &s.extra, s.t) {
                dropped += 1;
                if problems.len() < 8 {
                    problems.push(format!("node {node}: {e}; not read back"));
                }
            }
        }
        if dropped > problems.len() {
            problems.push(format!(
                "{} more records not read back",
                dropped - problems.len()
            ));
        }
        Ok((store, problems))
    }
}

/// What [`load`] found.
#[derive(Debug, Default)]
pub struct Loaded {
    /// The records (empty without a file, or when it was corrupt).
    pub store: HealthStore,
    /// Records dropped past the bounds.
    pub problems: Vec<String>,
    /// Where a corrupt file was moved, and why it was corrupt.
    pub set_aside: Option<(PathBuf, String)>,
}

/// Why the file cannot be used at all.
#[derive(Debug, thiserror::Error)]
#[error("persisted GPU health {path}: {source}")]
pub struct FileError {
    /// The file (or where it was to be set aside).
    pub path: PathBuf,
    /// The cause.
    pub source: std::io::Error,
}

/// Reads `dir/gputopo_health.json`; a corrupt one is set aside (see [`crate::state_file`]).
///
/// # Errors
/// The file exists but cannot be read, or is corrupt and cannot be set aside: the caller must
/// then not write the file, and treats every node's earlier health as unknown.
pub fn load(dir: &Path, now: i64) -> Result<Loaded, FileError> {
    let err = |(path, source)| FileError { path, source };
    let text = match state_file::read(dir, HEALTH_FILE, MAX_FILE_BYTES).map_err(err)? {
        state_file::Contents::Missing => return Ok(Loaded::default()),
        state_file::Contents::Text(t) => t,
        state_file::Contents::Unreadable(why) => return aside(dir, now, why),
    };
    match HealthStore::from_json(&text) {
        Ok((store, problems)) => Ok(Loaded {
            store,
            problems,
            set_aside: None,
        }),
        Err(Corrupt(why)) => aside(dir, now, why),
    }
}

fn aside(dir: &Path, now: i64, why: String) -> Result<Loaded, FileError> {
    let path = state_file::set_aside(dir, HEALTH_FILE, now)
        .map_err(|(path, source)| FileError { path, source })?;
    Ok(Loaded {
        set_aside: Some((path, why)),
        ..Loaded::default()
    })
}

/// Writes the file's `text` (from [`HealthStore::to_json`]) crash-safe, mode 0600, owned by
/// `owner_uid` when given. Call with no slurmctld lock held.
///
/// # Errors
/// The I/O error of the step that failed; the previous file is then intact.
pub fn write(dir: &Path, text: &str, owner_uid: Option<u32>) -> Result<(), FileError> {
    state_file::write(dir, HEALTH_FILE, text.as_bytes(), owner_uid)
        .map_err(|(path, source)| FileError { path, source })
}

#[cfg(test)]
mod tests;
