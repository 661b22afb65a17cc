//! The ledger's file in StateSaveLocation: how it is read back and written.
//!
//! Why this shape:
//! - slurmctld calls the priority plugin with its job write lock held, and the recalculation
//!   pass holds it too. Writing (write, fsync, rename, directory fsync) under that lock stalls
//!   every RPC on slow storage, so the plugin takes a [`Ledger::to_json`] snapshot under the
//!   lock and calls [`write()`] after releasing it.
//! - The file says who used what: mode 0600, owned by SlurmUser (slurmctld may run as root).
//! - A file that does not parse is evidence, never overwritten: [`load`] renames it to
//!   `<file>.corrupt-<now>` and starts empty; if it cannot be set aside, the caller must not
//!   write at all ([`LedgerError`]).
//! - A `last_decay` in the future (clock stepped back, copied file) would stop all decay
//!   until that time; it is clamped to `now`.

use super::ledger::{LEDGER_FILE, Ledger, LedgerError};
use std::fs;
use std::path::{Path, PathBuf};

/// What [`load`] found.
#[derive(Debug)]
pub struct Loaded {
    /// The ledger (empty when there was no file or it was corrupt).
    pub ledger: Ledger,
    /// Where a corrupt file was moved, and why it was corrupt.
    pub set_aside: Option<(PathBuf, String)>,
    /// The future `last_decay` that was clamped to `now`.
    pub clamped_from: Option<i64>,
    /// Whether a file was read.
    pub recovered: bool,
}

/// Loads `dir/gputopo_priority_ledger.json` (see the module docs).
///
/// # Errors
/// The file exists but cannot be read, or it is corrupt and cannot be set aside: the caller
/// must then not write the ledger (it would replace the only copy).
pub fn load(dir: &Path, half_life_secs: u32, now: i64) -> Result<Loaded, LedgerError> {
    let path = dir.join(LEDGER_FILE);
    let text = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Loaded {
                ledger: Ledger::new(half_life_secs, now),
                set_aside: None,
                clamped_from: None,
                recovered: false,
            });
        }
        Err(source) => return Err(LedgerError::Io { path, source }),
    };
    match Ledger::from_json(&text, half_life_secs, &path) {
        Ok(mut ledger) => {
            let clamped_from = ledger.clamp_last_decay(now);
            Ok(Loaded {
                ledger,
                set_aside: None,
                clamped_from,
                recovered: true,
            })
        }
        Err(LedgerError::Corrupt { reason, .. }) => {
            let aside = crate::state_file::set_aside(dir, LEDGER_FILE, now)
                .map_err(|(path, source)| LedgerError::Io { path, source })?;
            Ok(Loaded {
                ledger: Ledger::new(half_life_secs, now),
                set_aside: Some((aside, reason)),
                clamped_from: None,
                recovered: false,
            })
        }
        Err(e) => Err(e),
    }
}

/// Writes a snapshot crash-safe ([`crate::state_file::write`]: a temporary file of this
/// writer's own, mode 0600, owner `owner_uid` if given, fsync, rename over `<file>`, fsync of
/// `dir`). A crash leaves the old or the new file.
///
/// # Errors
/// Any I/O failure (the previous file is then left intact).
pub fn write(dir: &Path, snapshot: &str, owner_uid: Option<u32>) -> Result<(), LedgerError> {
    crate::state_file::write(dir, LEDGER_FILE, snapshot.as_bytes(), owner_uid)
        .map_err(|(path, source)| LedgerError::Io { path, source })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::priority::ledger::UsageCharge;
    use std::os::unix::fs::MetadataExt;

    fn tmpdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("gputopo-ledger-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).expect("tmpdir");
        d
    }

    fn used(now: i64) -> Ledger {
        let mut l = Ledger::new(600, now);
        l.charge(&UsageCharge {
            account: "a".into(),
            user: "1000".into(),
            gpus: 2.0,
            billing: 3.25,
            run_secs: 7.0,
        });
        l
    }

    #[test]
    fn round_trip_is_exact_and_private() {
        let dir = tmpdir("rt");
        let l = used(42);
        write(&dir, &l.to_json(), None).expect("write");
        let meta = fs::metadata(dir.join(LEDGER_FILE)).expect("file");
        assert_eq!(meta.mode() & 0o777, 0o600);
        let temp = format!("{LEDGER_FILE}.new");
        let names = fs::read_dir(&dir).expect("list").flatten();
        assert!(
            !names
                .into_iter()
                .any(|e| e.file_name().to_string_lossy().starts_with(&temp))
        );
        let back = load(&dir, 600, 100).expect("load");
        assert!(back.recovered && back.set_aside.is_none() && back.clamped_from.is_none());
        assert_eq!(back.ledger, l);
        // Writing as the file's own owner is a no-op chown.
        write(&dir, &l.to_json(), Some(meta.uid())).expect("write with owner");
        fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn missing_file_starts_empty() {
        let dir = tmpdir("missing");
        let back = load(&dir, 600, 5).expect("missing is fine");
        assert!(!back.recovered && back.ledger.is_empty());
        assert_eq!(back.ledger.last_decay(), 5);
        fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn corrupt_file_is_set_aside_not_replaced() {
        let dir = tmpdir("corrupt");
        fs::write(dir.join(LEDGER_FILE), "{not json").expect("write");
        let back = load(&dir, 600, 77).expect("set aside");
        let (aside, reason) = back.set_aside.expect("set aside");
        assert_eq!(aside, dir.join(format!("{LEDGER_FILE}.corrupt-77")));
        assert!(!reason.is_empty());
        assert_eq!(fs::read_to_string(&aside).expect("kept"), "{not json");
        assert!(!dir.join(LEDGER_FILE).exists());
        assert!(back.ledger.is_empty());
        fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn future_last_decay_is_clamped() {
        let dir = tmpdir("future");
        write(&dir, &used(10_000).to_json(), None).expect("write");
        let back = load(&dir, 600, 500).expect("load");
        assert_eq!(back.clamped_from, Some(10_000));
        assert_eq!(back.ledger.last_decay(), 500);
        fs::remove_dir_all(&dir).expect("cleanup");
    }
}
