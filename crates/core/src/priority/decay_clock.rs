//! Multifactor's decay clock: when the last decay pass ran and when usage was last reset,
//! kept in `StateSaveLocation/priority_last_decay_ran` (priority_multifactor.c
//! `_read_last_decay_ran`, `_write_last_decay_ran`).
//!
//! Why the same file and format as multifactor: association usage is slurmctld's own state
//! (`assoc_usage`), charged up to the last pass; the next pass charges running jobs from this
//! clock. Sharing multifactor's file means a site that switches `PriorityType` between
//! multifactor and gputopo (and back), restarts, or re-executes on reconfigure (24.11) keeps
//! the period: nothing is charged twice and nothing is lost. The format is Slurm's
//! `pack_time` twice: two 64-bit big-endian signed integers.

use std::path::{Path, PathBuf};

/// The file's name in StateSaveLocation.
pub const DECAY_CLOCK_FILE: &str = "priority_last_decay_ran";

/// `g_last_ran` and `g_last_reset` (0: unknown).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecayClock {
    /// When the last decay pass ran.
    pub last_ran: i64,
    /// When usage was last reset (`PriorityUsageResetPeriod`).
    pub last_reset: i64,
}

/// What [`load`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Loaded {
    /// No file: multifactor starts with both times 0.
    Missing,
    /// A whole file.
    Clock(DecayClock),
    /// A short file: what could be read (multifactor with `-i`: the first time if it is
    /// whole, else 0), and why it is short.
    Incomplete(DecayClock, String),
}

impl DecayClock {
    /// The file's bytes.
    pub fn encode(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.last_ran.to_be_bytes());
        b[8..].copy_from_slice(&self.last_reset.to_be_bytes());
        b
    }

    /// Reads the file's bytes; `Err` carries what a short file yields.
    ///
    /// # Errors
    /// Fewer than 16 bytes (extra bytes are ignored, as `safe_unpack_time` does).
    pub fn decode(b: &[u8]) -> Result<DecayClock, DecayClock> {
        let time = |at: usize| {
            b.get(at..at + 8)
                .and_then(|s| <[u8; 8]>::try_from(s).ok())
                .map(i64::from_be_bytes)
        };
        match (time(0), time(8)) {
            (Some(last_ran), Some(last_reset)) => Ok(DecayClock {
                last_ran,
                last_reset,
            }),
            (last_ran, _) => Err(DecayClock {
                last_ran: last_ran.unwrap_or(0),
                last_reset: 0,
            }),
        }
    }
}

/// Reads `dir/priority_last_decay_ran` (its first 16 bytes: a binary file, read bounded).
///
/// # Errors
/// The file exists but cannot be read.
pub fn load(dir: &Path) -> Result<Loaded, (PathBuf, std::io::Error)> {
    use std::io::Read;
    let path = dir.join(DECAY_CLOCK_FILE);
    let f = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Loaded::Missing),
        Err(e) => return Err((path, e)),
    };
    let mut b = Vec::with_capacity(16);
    f.take(16)
        .read_to_end(&mut b)
        .map_err(|e| (path.clone(), e))?;
    Ok(match DecayClock::decode(&b) {
        Ok(c) => Loaded::Clock(c),
        Err(c) => Loaded::Incomplete(c, format!("{} bytes, 16 expected", b.len())),
    })
}

/// Writes the clock crash-safe (see [`crate::state_file::write`]).
///
/// # Errors
/// Any I/O failure (the previous file is then left intact).
pub fn write(
    dir: &Path,
    clock: &DecayClock,
    owner_uid: Option<u32>,
) -> Result<(), (PathBuf, std::io::Error)> {
    crate::state_file::write(dir, DECAY_CLOCK_FILE, &clock.encode(), owner_uid)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("gputopo-clock-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("tmpdir");
        d
    }

    #[test]
    fn slurm_pack_time_layout() {
        let c = DecayClock {
            last_ran: 0x0102_0304_0506_0708,
            last_reset: 1,
        };
        let b = c.encode();
        assert_eq!(&b[..8], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&b[8..], &[0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(DecayClock::decode(&b), Ok(c));
        let mut longer = b.to_vec();
        longer.push(9);
        assert_eq!(DecayClock::decode(&longer), Ok(c));
    }

    #[test]
    fn short_files_yield_what_multifactor_reads() {
        let b = DecayClock {
            last_ran: 1_700_000_000,
            last_reset: 5,
        }
        .encode();
        assert_eq!(
            DecayClock::decode(&b[..12]),
            Err(DecayClock {
                last_ran: 1_700_000_000,
                last_reset: 0
            })
        );
        assert_eq!(DecayClock::decode(&b[..3]), Err(DecayClock::default()));
    }

    #[test]
    fn file_round_trip_missing_and_short() {
        let dir = tmpdir("rt");
        assert_eq!(load(&dir).expect("load"), Loaded::Missing);
        let c = DecayClock {
            last_ran: 1_800_000_000,
            last_reset: 1_790_000_000,
        };
        write(&dir, &c, None).expect("write");
        assert_eq!(load(&dir).expect("load"), Loaded::Clock(c));
        std::fs::write(dir.join(DECAY_CLOCK_FILE), [0u8; 4]).expect("write short");
        assert!(
            matches!(load(&dir).expect("load"), Loaded::Incomplete(d, _) if d == DecayClock::default())
        );
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
