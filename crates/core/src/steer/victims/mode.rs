//! Which preemption mode Slurm applies to a candidate, and whether it frees the job's GPUs.
//!
//! The preempt plugins decide a job's mode (`_job_preempt_mode` in preempt/partition_prio and
//! preempt/qos, the same in 22.05.8 and 24.11.5): partition_prio takes the partition's
//! `PreemptMode=` when set, else slurm.conf's; qos takes the QOS's when not zero, else
//! slurm.conf's. A job preempted by suspension keeps its GRES: cons_tres plans a suspension by
//! removing only the victim's cores (`JOB_RES_ACTION_RESUME` in `_run_now`; slurm.conf(5):
//! "Suspended jobs will not release GRES"), so reordering such candidates cannot change the
//! GPUs a preemptor gets, only whose cores it takes.

/// `PREEMPT_MODE_SUSPEND` in slurm/slurm.h (0x0001 in every release gputopo builds for).
pub const SUSPEND: u16 = 0x0001;

/// The preempt plugin, as far as the mode rule goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PreemptKind {
    /// preempt/partition_prio (and anything that is not preempt/qos).
    Partition,
    /// preempt/qos.
    Qos,
}

impl PreemptKind {
    /// From slurm.conf's `PreemptType` (e.g. `preempt/qos`).
    pub fn from_preempt_type(t: &str) -> PreemptKind {
        if t.ends_with("/qos") {
            PreemptKind::Qos
        } else {
            PreemptKind::Partition
        }
    }
}

/// The job's mode: `global` is slurm.conf's `PreemptMode`, `part` the partition's (`None`
/// when unset, Slurm's NO_VAL16), `qos` the QOS's (0 when unset).
pub fn job_mode(kind: PreemptKind, global: u16, part: Option<u16>, qos: u16) -> u16 {
    match kind {
        PreemptKind::Partition => part.unwrap_or(global),
        PreemptKind::Qos if qos != 0 => qos,
        PreemptKind::Qos => global,
    }
}

/// True when a job preempted in `mode` keeps its GPUs (it is suspended).
pub fn keeps_gpus(mode: u16) -> bool {
    mode & SUSPEND != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    const REQUEUE: u16 = 0x0002;
    const GANG: u16 = 0x8000;

    #[test]
    fn partition_prio_takes_the_partition_mode_when_set() {
        let k = PreemptKind::from_preempt_type("preempt/partition_prio");
        assert_eq!(k, PreemptKind::Partition);
        assert_eq!(job_mode(k, SUSPEND | GANG, Some(REQUEUE), SUSPEND), REQUEUE);
        assert_eq!(job_mode(k, SUSPEND | GANG, None, REQUEUE), SUSPEND | GANG);
        assert!(keeps_gpus(job_mode(k, SUSPEND | GANG, None, 0)));
        assert!(!keeps_gpus(job_mode(k, SUSPEND | GANG, Some(REQUEUE), 0)));
    }

    #[test]
    fn qos_takes_the_qos_mode_unless_zero() {
        let k = PreemptKind::from_preempt_type("preempt/qos");
        assert_eq!(k, PreemptKind::Qos);
        assert_eq!(job_mode(k, REQUEUE, Some(SUSPEND), SUSPEND), SUSPEND);
        assert_eq!(job_mode(k, REQUEUE, Some(SUSPEND), 0), REQUEUE);
        assert!(!keeps_gpus(job_mode(k, REQUEUE, None, 0)));
    }
}
