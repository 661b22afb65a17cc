//! What a call reports for slurmctld's log. The core decides and describes; the plugin picks
//! the level and writes the line through Slurm's log, with the node's name (which it reads
//! from the snapshot, or from Slurm for a node gputopo does not model).

use crate::wideset::WideSet;

/// One thing worth a log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The health pre-filter withheld a node (debug level).
    Skipped {
        /// Node index.
        node: usize,
        /// Its non-faulty GPUs of the job's type.
        have: usize,
        /// GPUs the job needs per node.
        need: usize,
        /// Its faulty GPUs.
        faulty: WideSet,
    },
    /// The health pre-filter withheld a node for a job of shared GRES alone: its free shares
    /// serve the job only from a faulty GPU (debug level).
    SkippedShares {
        /// Node index.
        node: usize,
        /// Free shares of the job's type on non-faulty GPUs.
        have: u64,
        /// Shares the job needs per node.
        need: u64,
        /// Its faulty GPUs.
        faulty: WideSet,
    },
    /// cons_tres selected no GPU on a node where Slurm's commit would start the job holding
    /// none: the node is excluded for this try (warning level).
    NoGpuSelected {
        /// Node index.
        node: usize,
    },
    /// cons_tres's selection and the node's GPU count disagree in width: its pick is kept
    /// (debug level).
    WidthMismatch {
        /// Node index.
        node: usize,
        /// Bits in the selection.
        width: usize,
        /// GPUs the topology holds.
        gpus: usize,
    },
    /// A placement decision (`LogDecisions=yes`: info level; else debug, when Slurm's
    /// `DebugFlags` has `SelectType` or `Gres`), already worded.
    Decision(String),
}

impl Event {
    /// The node the event is about (`None` for a decision line, which names it itself).
    pub fn node(&self) -> Option<usize> {
        match self {
            Event::Skipped { node, .. }
            | Event::SkippedShares { node, .. }
            | Event::NoGpuSelected { node }
            | Event::WidthMismatch { node, .. } => Some(*node),
            Event::Decision(_) => None,
        }
    }

    /// The log line for job `job`, with `name` the event's node.
    pub fn line(&self, job: u32, name: &str) -> String {
        match self {
            Event::Skipped {
                have, need, faulty, ..
            } => format!(
                "JobId={job} node {name} skipped: {have} non-faulty GPU(s) of the type, {need} needed, faulty {faulty}"
            ),
            Event::SkippedShares {
                have, need, faulty, ..
            } => format!(
                "JobId={job} node {name} skipped: {have} free share(s) of the type on non-faulty GPUs, {need} needed, faulty {faulty}"
            ),
            Event::NoGpuSelected { .. } => format!(
                "JobId={job}: cons_tres selected no GPU on node {name}; node excluded for this try"
            ),
            Event::WidthMismatch { width, gpus, .. } => {
                format!(
                    "JobId={job} node {name}: selection has {width} bits, node {gpus} GPUs; kept"
                )
            }
            Event::Decision(text) => text.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_read_as_the_plugin_wrote_them() {
        let e = Event::Skipped {
            node: 3,
            have: 6,
            need: 8,
            faulty: [2usize, 3].into_iter().collect(),
        };
        assert_eq!(
            e.line(7, "n4"),
            "JobId=7 node n4 skipped: 6 non-faulty GPU(s) of the type, 8 needed, faulty 2-3"
        );
        assert_eq!(e.node(), Some(3));
        assert_eq!(
            Event::NoGpuSelected { node: 0 }.line(9, "n1"),
            "JobId=9: cons_tres selected no GPU on node n1; node excluded for this try"
        );
        assert_eq!(Event::Decision("x".into()).line(1, "n"), "x");
    }
}
