//! The kernel log as the agent reads it for XIDs (`/dev/kmsg` records, or a dmesg/syslog file
//! named by `KernelLog=`): the driver, other drivers and any process that writes to
//! `/dev/kmsg` wrote it. Never a panic; an XID read back names a bus in the one form
//! `normalise_bus` gives, and normalising is idempotent.
#![no_main]

use gputopo_core::health::kernel_xid::{self, KernelXid};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The agent reads the log lossily: bytes that are not UTF-8 do not end the read.
    let text = String::from_utf8_lossy(data);
    for line in text.lines() {
        let msg = match kernel_xid::parse_kmsg(line) {
            Some((seq, usec, msg)) => {
                let _ = kernel_xid::fresh(None, "b", seq, usec, u64::MAX, u64::MAX);
                msg
            }
            None => line,
        };
        if let Some(KernelXid { bus, .. }) = kernel_xid::parse_message(msg) {
            assert_eq!(kernel_xid::normalise_bus(&bus).as_deref(), Some(&*bus));
        }
        if let Some(bus) = kernel_xid::normalise_bus(line.trim()) {
            assert_eq!(kernel_xid::normalise_bus(&bus).as_deref(), Some(&*bus));
        }
    }
});
