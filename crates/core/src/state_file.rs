//! Files slurmctld's plugins keep in `StateSaveLocation`: written crash-safe, read bounded,
//! and set aside (never replaced) when they do not parse.
//!
//! One writer and one reader for every such file (the priority ledger, the persisted health),
//! so the rules are the same everywhere:
//! - Written as `<file>.new` (mode 0600: it says who used what and which GPUs are bad; owned by
//!   SlurmUser when slurmctld runs as root), fsync, rename over `<file>`, fsync of the
//!   directory. A crash leaves the old file or the new one, never a torn one.
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
    let tmp = dir.join(format!("{name}.new"));
    let at = |p: &Path| {
        let p = p.to_path_buf();
        move |e| (p, e)
    };
    {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(at(&tmp))?;
        // A leftover .new from an older version may have another mode: set it either way.
        f.set_permissions(fs::Permissions::from_mode(0o600))
            .map_err(at(&tmp))?;
        if let Some(uid) = owner_uid {
            if f.metadata().map_err(at(&tmp))?.uid() != uid {
                std::os::unix::fs::fchown(&f, Some(uid), None).map_err(at(&tmp))?;
            }
        }
        f.write_all(bytes).map_err(at(&tmp))?;
        f.sync_all().map_err(at(&tmp))?;
    }
    fs::rename(&tmp, &path).map_err(at(&path))?;
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(at(dir))?;
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

    #[test]
    fn write_is_private_and_read_is_bounded() {
        let dir = tmpdir("rw");
        assert_eq!(read(&dir, "f", 10).expect("read"), Contents::Missing);
        write(&dir, "f", b"hello", None).expect("write");
        let meta = fs::metadata(dir.join("f")).expect("file");
        assert_eq!(meta.mode() & 0o777, 0o600);
        assert!(!dir.join("f.new").exists());
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
