//! The GPU pick on a node whose topology Slurm does not know (plain `File=` lines: no
//! topology records). There cons_tres selects only a count and Slurm's commit takes the
//! lowest free GPU indices (`_job_alloc`, "first fit"). gputopo keeps that order, so a
//! healthy node is scheduled exactly as cons_tres would, and only skips what health rules
//! out: faulty GPUs never, degraded ones only when the healthy ones do not make the count.

use crate::gpuset::GpuSet;
use crate::steer::HealthMasks;
use crate::steer::wide::{self, WideHealth};

/// The `count` lowest free GPUs, healthy before degraded, never faulty; `None` when the
/// non-faulty free GPUs do not make the count (the node must be dropped for this job).
pub fn pick(free: GpuSet, health: HealthMasks, count: usize) -> Option<GpuSet> {
    let health = WideHealth {
        faulty: health.faulty.into(),
        degraded: health.degraded.into(),
    };
    wide::first_fit(&free.into(), &health, count).map(|s| s.narrow())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[usize]) -> GpuSet {
        v.iter().copied().collect()
    }

    #[test]
    fn without_health_it_is_slurms_first_fit() {
        assert_eq!(
            pick(s(&[1, 2, 5, 6]), HealthMasks::ALL_OK, 2),
            Some(s(&[1, 2]))
        );
        assert_eq!(pick(s(&[1, 2]), HealthMasks::ALL_OK, 3), None);
    }

    #[test]
    fn skips_faulty_and_takes_degraded_last() {
        let h = HealthMasks {
            faulty: s(&[0]),
            degraded: s(&[1]),
        };
        assert_eq!(pick(GpuSet::first_n(4), h, 2), Some(s(&[2, 3])));
        assert_eq!(pick(GpuSet::first_n(4), h, 3), Some(s(&[1, 2, 3])));
        assert_eq!(
            pick(GpuSet::first_n(4), h, 4),
            None,
            "only via the faulty GPU"
        );
    }
}
