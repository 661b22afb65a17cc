//! The health policy: NVML evidence + thresholds → a [`GpuHealth`] verdict. Pure and total: every
//! combination of readings, including missing ones, yields a verdict.
//!
//! Rules (thresholds come from `gputopo.conf`, see [`crate::config`]):
//! - lost (`NVML_ERROR_GPU_IS_LOST` from any call) → `gpu_lost` (faulty);
//! - ECC enabled and uncorrectable errors, volatile or aggregate, above `EccUncorrectableLimit`
//!   → `ecc_uncorrectable` (faulty); correctable volatile errors at or above
//!   `EccCorrectableDegraded` (0 = off) → `ecc_correctable` (degraded). With ECC disabled or
//!   unsupported the counters are not evidence;
//! - retired pages pending → `retired_pages_pending` (degraded: the pages retire at the next reset);
//! - row remapping failed → `row_remap_failure` (faulty); pending → `row_remap_pending` (degraded);
//! - an XID in `CriticalXids` → `xid_<n>` (faulty); in `IgnoredXids` → nothing (ignored wins);
//!   any other XID → `xid_other_<n>` (degraded);
//! - the worker timed out → `nvml_timeout` (unknown); a query that failed for another reason
//!   than "not supported" → `query_failed:<query>` (unknown), unless the GPU is lost or timed out
//!   (those already explain the missing data);
//! - each telemetry signal the hysteresis holds (`e.sustained`, see `telemetry`) → its token
//!   (degraded). Telemetry that could not be read is not a gap: it is simply no evidence.

use super::telemetry::{Signal, Telemetry};
use super::{GpuHealth, Reason};
use std::borrow::Cow;

/// One NVML reading.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum Reading<T> {
    /// The value NVML returned.
    Value(T),
    /// The GPU or driver does not support this query: no evidence, and not a problem.
    NotSupported,
    /// The query failed (the message is for logs).
    Failed(String),
    /// Not queried (the worker timed out or stopped first).
    #[default]
    Missing,
}

impl<T> Reading<T> {
    /// The value, if any.
    pub fn value(&self) -> Option<&T> {
        match self {
            Reading::Value(v) => Some(v),
            _ => None,
        }
    }

    /// Both values as a pair; otherwise the first non-value (e.g. a link's current and
    /// maximum width, which only mean something together).
    pub fn zip<U>(self, other: Reading<U>) -> Reading<(T, U)> {
        let lift = |r: Reading<()>| match r {
            Reading::NotSupported => Reading::NotSupported,
            Reading::Failed(m) => Reading::Failed(m),
            Reading::Value(()) | Reading::Missing => Reading::Missing,
        };
        match (self, other) {
            (Reading::Value(a), Reading::Value(b)) => Reading::Value((a, b)),
            (Reading::Value(_), b) => lift(b.map_unit()),
            (a, _) => lift(a.map_unit()),
        }
    }

    fn map_unit(self) -> Reading<()> {
        match self {
            Reading::Value(_) => Reading::Value(()),
            Reading::NotSupported => Reading::NotSupported,
            Reading::Failed(m) => Reading::Failed(m),
            Reading::Missing => Reading::Missing,
        }
    }

    fn is_gap(&self) -> bool {
        matches!(self, Reading::Failed(_) | Reading::Missing)
    }
}

/// `nvmlDeviceGetRemappedRows`'s four outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct RowRemap {
    /// Rows remapped for correctable errors.
    pub correctable: u32,
    /// Rows remapped for uncorrectable errors.
    pub uncorrectable: u32,
    /// A remapping is pending (needs a GPU reset).
    pub pending: bool,
    /// A remapping failed.
    pub failure: bool,
}

/// Everything the agent learned about one GPU.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Evidence {
    /// Some NVML call returned `NVML_ERROR_GPU_IS_LOST`.
    pub lost: bool,
    /// The NVML worker did not finish within the deadline.
    pub timed_out: bool,
    /// ECC currently enabled.
    pub ecc_enabled: Reading<bool>,
    /// Uncorrectable ECC errors since the last driver load.
    pub ecc_uncorrected_volatile: Reading<u64>,
    /// Uncorrectable ECC errors over the card's lifetime.
    pub ecc_uncorrected_aggregate: Reading<u64>,
    /// Correctable ECC errors since the last driver load.
    pub ecc_corrected_volatile: Reading<u64>,
    /// Pages are pending retirement.
    pub retired_pages_pending: Reading<bool>,
    /// Row remapping state.
    pub row_remap: Reading<RowRemap>,
    /// XIDs seen during the bounded event wait (`NotSupported` when events are unsupported).
    pub xids: Reading<Vec<u32>>,
    /// Heat, power, clocks, PCIe and NVLink readings of this check (see `telemetry`).
    pub telemetry: Telemetry,
    /// The telemetry signals the hysteresis holds for this device (the caller's memory across
    /// checks, `telemetry::Track`); each becomes a degraded reason.
    pub sustained: Vec<Signal>,
    /// The GPU runs warm, as the hysteresis holds it (`telemetry::warm_seen`): published in
    /// `w` when its verdict is `ok`. Not evidence of a fault.
    pub warm: bool,
}

/// Thresholds and XID lists (the health part of `gputopo.conf`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HealthPolicy {
    /// Faulty when uncorrectable ECC errors (volatile or aggregate) exceed this. Default 0.
    pub ecc_uncorrectable_limit: u64,
    /// Degraded when volatile correctable ECC errors reach this; 0 disables. Default 1000.
    pub ecc_correctable_degraded: u64,
    /// XIDs that make a GPU faulty. Default: 48, 63, 64, 74, 79, 92, 94, 95.
    pub critical_xids: Vec<u32>,
    /// XIDs that are ignored (application errors). Default: 13, 31, 43, 45, 68.
    pub ignored_xids: Vec<u32>,
}

impl Default for HealthPolicy {
    fn default() -> Self {
        HealthPolicy {
            ecc_uncorrectable_limit: 0,
            ecc_correctable_degraded: 1000,
            critical_xids: vec![48, 63, 64, 74, 79, 92, 94, 95],
            ignored_xids: vec![13, 31, 43, 45, 68],
        }
    }
}

/// Judges one GPU (`index` is its Slurm GRES index).
pub fn judge(index: usize, e: &Evidence, p: &HealthPolicy) -> GpuHealth {
    let mut r = Vec::new();
    if e.lost {
        r.push(Reason::GpuLost);
    }
    if e.timed_out {
        r.push(Reason::NvmlTimeout);
    }
    let explained = e.lost || e.timed_out;
    let gap = |r: &mut Vec<Reason>, failed: bool, what: &'static str| {
        if failed && !explained {
            r.push(Reason::QueryFailed(Cow::Borrowed(what)));
        }
    };
    gap(&mut r, e.ecc_enabled.is_gap(), "ecc_mode");
    if e.ecc_enabled.value() == Some(&true) {
        let over = |x: &Reading<u64>| x.value().is_some_and(|&v| v > p.ecc_uncorrectable_limit);
        if over(&e.ecc_uncorrected_volatile) || over(&e.ecc_uncorrected_aggregate) {
            r.push(Reason::EccUncorrectable);
        }
        if p.ecc_correctable_degraded > 0
            && e.ecc_corrected_volatile
                .value()
                .is_some_and(|&v| v >= p.ecc_correctable_degraded)
        {
            r.push(Reason::EccCorrectable);
        }
        gap(
            &mut r,
            e.ecc_uncorrected_volatile.is_gap(),
            "ecc_uncorrected_volatile",
        );
        gap(
            &mut r,
            e.ecc_uncorrected_aggregate.is_gap(),
            "ecc_uncorrected_aggregate",
        );
        gap(
            &mut r,
            e.ecc_corrected_volatile.is_gap(),
            "ecc_corrected_volatile",
        );
    }
    if e.retired_pages_pending.value() == Some(&true) {
        r.push(Reason::RetiredPagesPending);
    }
    gap(&mut r, e.retired_pages_pending.is_gap(), "retired_pages");
    if let Some(rr) = e.row_remap.value() {
        if rr.failure {
            r.push(Reason::RowRemapFailure);
        }
        if rr.pending {
            r.push(Reason::RowRemapPending);
        }
    }
    gap(&mut r, e.row_remap.is_gap(), "remapped_rows");
    if let Some(xids) = e.xids.value() {
        for &x in xids {
            if p.ignored_xids.contains(&x) {
                continue;
            }
            r.push(if p.critical_xids.contains(&x) {
                Reason::Xid(x)
            } else {
                Reason::XidOther(x)
            });
        }
    }
    gap(&mut r, e.xids.is_gap(), "xid_events");
    r.extend(e.sustained.iter().map(|&g| Reason::Sustained(g)));
    GpuHealth::from_reasons(index, r)
}

#[cfg(test)]
mod tests {
    use super::super::Status;
    use super::*;

    fn healthy() -> Evidence {
        Evidence {
            ecc_enabled: Reading::Value(true),
            ecc_uncorrected_volatile: Reading::Value(0),
            ecc_uncorrected_aggregate: Reading::Value(0),
            ecc_corrected_volatile: Reading::Value(3),
            retired_pages_pending: Reading::Value(false),
            row_remap: Reading::Value(RowRemap::default()),
            xids: Reading::Value(vec![]),
            ..Evidence::default()
        }
    }

    #[test]
    fn healthy_is_ok_and_each_fault_is_named() {
        let p = HealthPolicy::default();
        assert_eq!(judge(0, &healthy(), &p).status, Status::Ok);
        let mut e = healthy();
        e.ecc_uncorrected_aggregate = Reading::Value(1);
        assert_eq!(judge(0, &e, &p).reasons, vec![Reason::EccUncorrectable]);
        let mut e = healthy();
        e.ecc_corrected_volatile = Reading::Value(1000);
        assert_eq!(judge(0, &e, &p).status, Status::Degraded);
        let mut e = healthy();
        e.xids = Reading::Value(vec![13, 79, 999]);
        let v = judge(0, &e, &p);
        assert_eq!(v.reasons, vec![Reason::Xid(79), Reason::XidOther(999)]);
        let mut e = healthy();
        e.row_remap = Reading::Value(RowRemap {
            failure: true,
            pending: true,
            ..RowRemap::default()
        });
        assert_eq!(judge(0, &e, &p).status, Status::Faulty);
    }

    #[test]
    fn gaps_are_unknown_unless_explained() {
        let p = HealthPolicy::default();
        let mut e = healthy();
        e.row_remap = Reading::Failed("boom".into());
        let v = judge(1, &e, &p);
        assert_eq!(v.status, Status::Unknown);
        assert_eq!(v.reasons, vec![Reason::QueryFailed("remapped_rows".into())]);
        let lost = Evidence {
            lost: true,
            ..Evidence::default()
        };
        assert_eq!(judge(1, &lost, &p).reasons, vec![Reason::GpuLost]);
        let slow = Evidence {
            timed_out: true,
            ..Evidence::default()
        };
        assert_eq!(judge(1, &slow, &p).reasons, vec![Reason::NvmlTimeout]);
        // ECC off or unsupported: counters are not evidence.
        let mut e = healthy();
        e.ecc_enabled = Reading::NotSupported;
        e.ecc_uncorrected_volatile = Reading::NotSupported;
        e.row_remap = Reading::NotSupported;
        e.xids = Reading::NotSupported;
        assert_eq!(judge(1, &e, &p).status, Status::Ok);
    }
}
