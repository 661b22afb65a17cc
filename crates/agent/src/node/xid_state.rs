//! The agent's sticky-XID state file (`StateDir/xid-<node>.json`; policy in
//! `gputopo_core::health::sticky`). Read by every subcommand that judges GPUs, written only by
//! `publish` (the health check), atomically: a temporary file renamed over the old one, so a
//! crash never leaves half a file. A file that does not parse is moved aside (`.corrupt`) with a
//! warning and the agent starts afresh rather than failing the health check.

use gputopo_core::health::sticky::XidMemory;
use std::path::{Path, PathBuf};

/// Default `StateDir`.
pub const DEFAULT_DIR: &str = "/var/lib/gputopo";

/// The state file of `node` in `dir`.
pub fn path(dir: Option<&Path>, node: &str) -> PathBuf {
    let safe: String = node
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    dir.unwrap_or(Path::new(DEFAULT_DIR))
        .join(format!("xid-{safe}.json"))
}

/// Loads the state; the note says what went wrong, if anything.
pub fn load(path: &Path) -> (XidMemory, Option<String>) {
    match std::fs::read(path) {
        Ok(bytes) => match std::str::from_utf8(&bytes)
            .map_err(|e| e.to_string())
            .and_then(XidMemory::parse)
        {
            Ok(m) => (m, None),
            Err(e) => {
                let aside = path.with_extension("json.corrupt");
                let moved = std::fs::rename(path, &aside).is_ok();
                (
                    XidMemory::default(),
                    Some(format!(
                        "XID state {} is corrupt ({e}); {}starting afresh: XIDs seen before are forgotten",
                        path.display(),
                        if moved {
                            format!("moved to {}, ", aside.display())
                        } else {
                            String::new()
                        }
                    )),
                )
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (XidMemory::default(), None),
        Err(e) => (
            XidMemory::default(),
            Some(format!("XID state {}: {e}", path.display())),
        ),
    }
}

/// Saves the state atomically (creating the directory).
///
/// # Errors
/// A message naming the file.
pub fn save(path: &Path, m: &XidMemory) -> Result<(), String> {
    let err = |e: std::io::Error| format!("writing XID state {}: {e}", path.display());
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    let tmp = path.with_extension(format!("json.tmp{}", std::process::id()));
    std::fs::write(&tmp, m.to_json()).map_err(err)?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        err(e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use gputopo_core::health::sticky::StickyPolicy;

    #[test]
    fn survives_corruption_and_round_trips() {
        let dir = std::env::temp_dir().join(format!("gputopo-xid-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let p = path(Some(&dir), "n1/../x");
        assert_eq!(p.file_name().unwrap(), "xid-n1_.._x.json");
        assert_eq!(load(&p), (XidMemory::default(), None));
        let mut m = XidMemory::default();
        let pol = StickyPolicy {
            hold_sec: 1,
            clear_checks: 1,
        };
        m.record("GPU-a", Some(&[79]), 5, pol);
        save(&p, &m).unwrap();
        assert_eq!(load(&p).0, m);
        std::fs::write(&p, b"{\"v\":1,\"gpus\":{\"GPU-a\":{\"xi\xff").unwrap();
        let (m2, note) = load(&p);
        assert_eq!(m2, XidMemory::default());
        assert!(note.unwrap().contains("corrupt"));
        assert!(p.with_extension("json.corrupt").exists());
        assert!(!p.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
