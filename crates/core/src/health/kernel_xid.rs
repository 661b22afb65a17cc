//! XIDs from the kernel log. NVML hands an XID event only to whoever listens at that moment,
//! and the health check listens `XidWaitMs`; the NVIDIA driver also logs every XID in the
//! kernel ring buffer (`NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU has fallen off the bus.`),
//! which is where NHC-style checks look. The agent reads the records logged since its last
//! check (`/dev/kmsg`, by sequence number) and counts their XIDs with the same
//! `CriticalXids`/`IgnoredXids`/sticky policy, on the GPU with that PCI bus id.
//!
//! Pure parsing here; reading `/dev/kmsg` is the agent's.

/// One XID the driver logged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelXid {
    /// The GPU's PCI address as the driver prints it, normalised: `0000:3b:00` (domain, bus,
    /// device; lowercase, no function).
    pub bus: String,
    /// The XID.
    pub xid: u32,
}

/// The XID of a driver message (`NVRM: Xid (PCI:0000:3b:00): 79, ...`, also without `PCI:`,
/// or with MIG instance words after the address), or of the driver's "fallen off the bus"
/// line without an XID (`NVRM: GPU at PCI:0000:18:00: GPU has fallen off the bus.`, or
/// `NVRM: GPU 0000:29:00.0: GPU has fallen off the bus.`), which newer drivers print instead:
/// XID 79. Leading timestamps, syslog or journal prefixes are skipped.
pub fn parse_message(msg: &str) -> Option<KernelXid> {
    let at = msg.find("NVRM: ")?;
    let rest = &msg[at + "NVRM: ".len()..];
    if let Some(x) = rest.strip_prefix("Xid (") {
        let (addr, tail) = x.split_once("):")?;
        let bus = normalise_bus(addr.split_whitespace().next()?)?;
        let digits: &str = tail
            .trim_start()
            .split(|c: char| !c.is_ascii_digit())
            .next()?;
        let xid = digits.parse().ok()?;
        return Some(KernelXid { bus, xid });
    }
    if rest.contains("has fallen off the bus") {
        let addr = rest
            .strip_prefix("GPU at ")
            .or_else(|| rest.strip_prefix("GPU "))?
            .split([' ', ',']) // "PCI:0000:18:00:" / "0000:29:00.0:"
            .next()?
            .trim_end_matches(':');
        return Some(KernelXid {
            bus: normalise_bus(addr)?,
            xid: 79,
        });
    }
    None
}

/// A PCI address as the driver or NVML prints it (`PCI:0000:3b:00`, `0000:3B:00.0`,
/// `00000000:3B:00.0`, `3b:00`) in the form [`KernelXid::bus`] uses: `0000:3b:00`.
pub fn normalise_bus(addr: &str) -> Option<String> {
    let a = addr.trim().strip_prefix("PCI:").unwrap_or(addr.trim());
    let a = a.split('.').next()?; // no function
    let parts: Vec<&str> = a.split(':').collect();
    let (domain, bus, dev) = match parts[..] {
        [d, b, v] => (d, b, v),
        [b, v] => ("0", b, v),
        _ => return None,
    };
    let hex = |s: &str, max: u32| {
        u32::from_str_radix(s, 16)
            .ok()
            .filter(|v| *v <= max && !s.is_empty())
    };
    Some(format!(
        "{:04x}:{:02x}:{:02x}",
        hex(domain, 0xffff_ffff)?,
        hex(bus, 0xff)?,
        hex(dev, 0x1f)?
    ))
}

/// One `/dev/kmsg` record, `PRI,SEQ,TIME_USEC,FLAGS[,...];MESSAGE`: its sequence number, its
/// time in µs since boot, and the message. Continuation lines (starting with a space, the
/// record's key/value dictionary) are not records.
pub fn parse_kmsg(line: &str) -> Option<(u64, u64, &str)> {
    let (head, msg) = line.split_once(';')?;
    let mut f = head.split(',');
    let _pri: u32 = f.next()?.parse().ok()?;
    let seq = f.next()?.parse().ok()?;
    let usec = f.next()?.parse().ok()?;
    Some((seq, usec, msg))
}

/// Where the agent stopped reading the kernel log: the boot (`/proc/sys/kernel/random/boot_id`)
/// and the last record's sequence number. Sequence numbers restart at boot.
#[derive(Clone, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Cursor {
    /// Boot id the sequence number belongs to.
    pub boot: String,
    /// The last record read.
    pub seq: u64,
}

/// Which records of a read count: with a cursor of this boot, those after it; without one
/// (the first check, or the first after a reboot), those logged in the last `window_usec`
/// before `now_usec` (both since boot), so an XID just before the agent started counts and
/// one from days ago does not.
pub fn fresh(
    cursor: Option<&Cursor>,
    boot: &str,
    seq: u64,
    usec: u64,
    now_usec: u64,
    window_usec: u64,
) -> bool {
    match cursor {
        Some(c) if c.boot == boot => seq > c.seq,
        _ => usec.saturating_add(window_usec) >= now_usec,
    }
}

#[cfg(test)]
mod tests;
