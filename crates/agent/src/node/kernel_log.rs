//! XIDs the NVIDIA driver logged in the kernel log since the last check (`KernelLog=`,
//! `/dev/kmsg` by default; parsing and the policy of which records count are
//! `gputopo_core::health::kernel_xid`). NVML delivers an XID event only to a listener present at
//! that moment, and a health check listens `XidWaitMs`, so without this an XID between checks
//! is lost.
//!
//! `/dev/kmsg` hands out one record per read, oldest first, and cannot seek to a sequence
//! number: every check reads the ring buffer (bounded) without blocking and keeps the records
//! after the remembered cursor. A record overwritten while reading (`EPIPE`) is skipped. A
//! regular file in kmsg format (tests, a saved `/dev/kmsg`) is read as a snapshot that ends now.

use gputopo_core::health::kernel_xid::{self, Cursor, KernelXid};
use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;
use std::time::Duration;

/// Linux's `O_NONBLOCK` (the agent has no libc binding; the value is fixed by the kernel ABI on
/// every architecture Slurm runs on but alpha, sparc and parisc).
const O_NONBLOCK: i32 = 0o4000;
/// Most bytes read per check (the kernel's ring buffer is at most 32 MiB).
const MAX_BYTES: usize = 64 << 20;

/// What one read found.
#[derive(Debug, Default)]
pub struct Found {
    /// XIDs by GPU bus (`0000:3b:00`), in log order.
    pub by_bus: BTreeMap<String, Vec<u32>>,
    /// Where the next check starts.
    pub cursor: Option<Cursor>,
}

/// Reads the records logged after `prev` (or, without a cursor of this boot, in the last
/// `window`).
///
/// # Errors
/// The log cannot be opened or read (e.g. not root with `kernel.dmesg_restrict=1`).
pub fn read(path: &Path, prev: Option<&Cursor>, window: Duration) -> Result<Found, String> {
    let err = |e: std::io::Error| format!("kernel log {}: {e}", path.display());
    let device = std::fs::metadata(path)
        .map_err(err)?
        .file_type()
        .is_char_device();
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(O_NONBLOCK)
        .open(path)
        .map_err(err)?;
    let mut text = Vec::new();
    let mut buf = vec![0u8; 16 << 10];
    while text.len() < MAX_BYTES {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => text.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(err(e)),
        }
    }
    let text = String::from_utf8_lossy(&text);
    let records: Vec<(u64, u64, &str)> = text.lines().filter_map(kernel_xid::parse_kmsg).collect();
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let now_usec = if device {
        uptime_usec().unwrap_or(u64::MAX)
    } else {
        records.iter().map(|r| r.1).max().unwrap_or(0)
    };
    let window = u64::try_from(window.as_micros()).unwrap_or(u64::MAX);
    let mut found = Found::default();
    for (seq, usec, msg) in &records {
        if !kernel_xid::fresh(prev, &boot, *seq, *usec, now_usec, window) {
            continue;
        }
        if let Some(KernelXid { bus, xid }) = kernel_xid::parse_message(msg) {
            found.by_bus.entry(bus).or_default().push(xid);
        }
    }
    found.cursor = match records.last() {
        Some((seq, _, _)) => Some(Cursor { boot, seq: *seq }),
        None => prev.cloned(),
    };
    Ok(found)
}

fn uptime_usec() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/uptime").ok()?;
    let secs: f64 = s.split_whitespace().next()?.parse().ok()?;
    Some((secs * 1e6) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/kernel-log/kmsg-h100-gb200.kmsg")
    }

    #[test]
    fn a_snapshot_counts_the_window_then_only_what_follows_the_cursor() {
        // No cursor: the last hour of the snapshot (ending at its last record) counts, the
        // XE9680's XID 119 from 13 days earlier does not.
        let f = read(&fixture(), None, Duration::from_secs(3600)).unwrap();
        let got: Vec<(&str, &[u32])> = f
            .by_bus
            .iter()
            .map(|(b, x)| (b.as_str(), x.as_slice()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("0000:29:00", &[79][..]),
                ("0008:01:00", &[149][..]),
                ("0009:01:00", &[149, 154][..]),
            ]
        );
        let c = f.cursor.clone().unwrap();
        assert_eq!(c.seq, 4109);
        // The next check: nothing new.
        let again = read(&fixture(), Some(&c), Duration::from_secs(3600)).unwrap();
        assert!(again.by_bus.is_empty());
        assert_eq!(again.cursor, Some(c.clone()));
        // A cursor before the GB200 records: exactly those after it.
        let mid = Cursor { seq: 4106, ..c };
        let f = read(&fixture(), Some(&mid), Duration::ZERO).unwrap();
        assert_eq!(f.by_bus.values().map(Vec::len).sum::<usize>(), 3);
    }

    #[test]
    fn an_unreadable_log_is_an_error_naming_it() {
        let e = read(Path::new("/nonexistent/kmsg"), None, Duration::ZERO).unwrap_err();
        assert!(e.contains("/nonexistent/kmsg"), "{e}");
    }
}
