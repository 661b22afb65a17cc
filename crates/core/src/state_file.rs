//! Files slurmctld's plugins keep in `StateSaveLocation`: written crash-safe, read bounded,
//! and set aside (never replaced) when they do not parse.
//!
//! One writer and one reader for every such file (the priority ledger, the persisted health),
//! so the rules are the same everywhere:
//! - Written as `<file>.new.<pid>.<n>` (mode 0600: it says who used what and which GPUs are
//!   bad; owned by SlurmUser when slurmctld runs as root), fsync, rename over `<file>`, fsync of
//!   the directory. A crash leaves the old file or the new one, never a torn one. The temporary
//!   name is the writer's own: a primary and a backup slurmctld share StateSaveLocation, and on
//!   a control change the one stopping saves while the one taking over writes its first pass;
//!   with one shared `<file>.new` each truncated the other's file or renamed it away.
//! - Temporary files a crash left behind are removed by the next [`write()`] once they are older
//!   than [`STALE_TEMP`] (a write takes milliseconds; a younger one may be another
//!   controller's).
//! - Read with a size limit, so a runaway or hostile file cannot make slurmctld allocate
//!   without bound.
//! - A file that does not parse is evidence: it is renamed to `<file>.corrupt-<now>` and the
//!   caller starts empty; if it cannot be set aside, the caller must not write (it would
//!   replace the only copy).
//!
//! The callers do this I/O with no slurmctld lock held (they snapshot under the lock and write
//! after releasing it).

use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

/// Age after which a leftover temporary file is removed (see the module docs).
pub const STALE_TEMP: Duration = Duration::from_secs(600);

/// The prefix of every temporary file of `name`.
fn temp_prefix(name: &str) -> String {
    format!("{name}.new")
}

/// A temporary name no other writer uses: this process's id and a per-process sequence
/// number. Pids of a primary and a backup on two hosts may be equal, so the sequence starts
/// at a per-process random value.
fn temp_name(name: &str) -> String {
    use std::hash::{BuildHasher, RandomState};
    static SEQ: AtomicU64 = AtomicU64::new(0);
    static START: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let start = START.get_or_init(|| RandomState::new().hash_one(std::process::id()));
    let n = start.wrapping_add(SEQ.fetch_add(1, Ordering::Relaxed));
    format!("{}.{}.{n:x}", temp_prefix(name), std::process::id())
}

/// Writes `bytes` to `dir/name` crash-safe (see the module docs); `owner_uid` chowns the file
/// when it is not already owned by that user.
///
/// # Errors
/// The path and the I/O error of the step that failed; the previous file is then intact.
pub fn write(
    dir: &Path,
    name: &str,
    bytes: &[u8],
    owner_uid: Option<u32>,
) -> Result<(), (PathBuf, std::io::Error)> {
    let path = dir.join(name);
    let tmp = dir.join(temp_name(name));
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| (tmp.clone(), e))?;
    let filled = (|| {
        // The mode given to open is masked by the umask: set it either way.
        f.set_permissions(fs::Permissions::from_mode(0o600))?;
        if let Some(uid) = owner_uid {
            if f.metadata()?.uid() != uid {
                std::os::unix::fs::fchown(&f, Some(uid), None)?;
            }
        }
        f.write_all(bytes)?;
        f.sync_all()
    })();
    drop(f);
    // The temporary file is this call's own: remove it on any failure, so a persistent error
    // (a full disk, a failing chown) leaves no file per attempt behind.
    if let Err(e) = filled {
        let _ = fs::remove_file(&tmp);
        return Err((tmp, e));
    }
    if let Err(e) = fs::rename(&tmp, &path) {
        let _ = fs::remove_file(&tmp);
        return Err((path, e));
    }
    remove_stale_temps(dir, name, SystemTime::now());
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| (dir.to_path_buf(), e))?;
    Ok(())
}

/// What [`read`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Contents {
    /// No such file.
    Missing,
    /// The file's text.
    Text(String),
    /// The file is larger than the limit, or not UTF-8: the caller treats it as corrupt.
    Unreadable(String),
}

/// Reads `dir/name`, at most `limit` bytes.
///
/// # Errors
/// The file exists but cannot be opened or read.
pub fn read(dir: &Path, name: &str, limit: u64) -> Result<Contents, (PathBuf, std::io::Error)> {
    let path = dir.join(name);
    let f = match fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Contents::Missing),
        Err(e) => return Err((path, e)),
    };
    let mut bytes = Vec::new();
    f.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| (path.clone(), e))?;
    if bytes.len() as u64 > limit {
        return Ok(Contents::Unreadable(format!("larger than {limit} bytes")));
    }
    Ok(match String::from_utf8(bytes) {
        Ok(t) => Contents::Text(t),
        Err(e) => Contents::Unreadable(format!("not UTF-8: {e}")),
    })
}

/// Removes `name`'s temporary files (`<name>.new` and `<name>.new.*`) older than
/// [`STALE_TEMP`] at `now`. Best effort: a file that cannot be listed or removed is left.
fn remove_stale_temps(dir: &Path, name: &str, now: SystemTime) {
    let prefix = temp_prefix(name);
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let file = entry.file_name();
        let Some(file) = file.to_str() else { continue };
        let ours = file == prefix
            || file
                .strip_prefix(prefix.as_str())
                .is_some_and(|rest| rest.starts_with('.'));
        let old = || {
            let modified = entry.metadata().and_then(|m| m.modified()).ok();
            modified.is_some_and(|m| now.duration_since(m).is_ok_and(|age| age > STALE_TEMP))
        };
        if ours && old() {
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// Renames a corrupt `dir/name` to `dir/name.corrupt-<now>` and returns the new path.
///
/// # Errors
/// The rename failed: the caller must not write the file (it would replace the only copy).
pub fn set_aside(dir: &Path, name: &str, now: i64) -> Result<PathBuf, (PathBuf, std::io::Error)> {
    let aside = dir.join(format!("{name}.corrupt-{now}"));
    fs::rename(dir.join(name), &aside).map_err(|e| (aside.clone(), e))?;
    Ok(aside)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("gputopo-state-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).expect("tmpdir");
        d
    }

    /// The temporary files of `name` in `dir`.
    fn temps(dir: &Path, name: &str) -> Vec<String> {
        let mut found: Vec<String> = fs::read_dir(dir)
            .expect("list")
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|f| f.starts_with(&temp_prefix(name)))
            .collect();
        found.sort();
        found
    }

    /// Two controllers sharing StateSaveLocation (threads here) write the same file at once:
    /// every write succeeds and the file is always one writer's whole text.
    #[test]
    fn concurrent_writers_neither_fail_nor_tear() {
        let dir = tmpdir("race");
        let texts = [vec![b'a'; 4096], vec![b'b'; 10]];
        std::thread::scope(|s| {
            for text in &texts {
                let dir = &dir;
                s.spawn(move || {
                    for _ in 0..200 {
                        write(dir, "f", text, None).expect("write");
                    }
                });
            }
            s.spawn(|| {
                for _ in 0..200 {
                    if let Contents::Text(t) = read(&dir, "f", 8192).expect("read") {
                        assert!(texts.iter().any(|w| w.as_slice() == t.as_bytes()), "torn");
                    }
                }
            });
        });
        assert_eq!(temps(&dir, "f"), Vec::<String>::new());
        fs::remove_dir_all(&dir).expect("cleanup");
    }

    /// A crash's leftover is removed once it is old; a fresh one may be another writer's.
    #[test]
    fn stale_temporary_files_are_removed_young_ones_kept() {
        let dir = tmpdir("stale");
        for leftover in ["f.new", "f.new.12.ab", "f.newer", "g.new.1.1"] {
            fs::write(dir.join(leftover), "x").expect("leftover");
        }
        write(&dir, "f", b"1", None).expect("write");
        assert_eq!(temps(&dir, "f"), ["f.new", "f.new.12.ab", "f.newer"]);
        remove_stale_temps(&dir, "f", SystemTime::now() + 2 * STALE_TEMP);
        assert_eq!(temps(&dir, "f"), ["f.newer"]);
        assert!(
            dir.join("g.new.1.1").exists(),
            "another file's temporary is kept"
        );
        fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn write_is_private_and_read_is_bounded() {
        let dir = tmpdir("rw");
        assert_eq!(read(&dir, "f", 10).expect("read"), Contents::Missing);
        write(&dir, "f", b"hello", None).expect("write");
        let meta = fs::metadata(dir.join("f")).expect("file");
        assert_eq!(meta.mode() & 0o777, 0o600);
        assert_eq!(temps(&dir, "f"), Vec::<String>::new());
        assert_eq!(
            read(&dir, "f", 5).expect("read"),
            Contents::Text("hello".into())
        );
        assert!(matches!(
            read(&dir, "f", 4).expect("read"),
            Contents::Unreadable(_)
        ));
        fs::write(dir.join("g"), [0xff, 0xfe]).expect("write");
        assert!(matches!(
            read(&dir, "g", 10).expect("read"),
            Contents::Unreadable(_)
        ));
        let aside = set_aside(&dir, "g", 7).expect("aside");
        assert_eq!(aside, dir.join("g.corrupt-7"));
        assert!(!dir.join("g").exists());
        fs::remove_dir_all(&dir).expect("cleanup");
    }
}
