//! Writing a file of the priority role's state in StateSaveLocation crash-safe: the ledger
//! (without slurmdbd) and multifactor's decay clock (with slurmdbd).
//!
//! `<file>.new` (mode 0600, owned by SlurmUser when given: such files say who used what, and
//! slurmctld may run as root), fsync, rename over `<file>`, fsync of the directory: a crash
//! leaves the old or the new file, never a torn one. Callers write after releasing the
//! slurmctld locks (slow storage must not stall RPCs).

use std::fs;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Writes `bytes` to `dir/name` as the module docs say.
///
/// # Errors
/// The path that failed and why (the previous file is then left intact).
pub fn write_atomic(
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
