//! The placement note users read in `scontrol show job` (`SystemComment=`): which GPUs
//! gputopo gave the job on each node and how good they are, or, for a job that waits, which
//! nodes the health filter withheld.
//!
//! Why `SystemComment`: `Comment` belongs to the user and `AdminComment` to administrators
//! (both set with `scontrol update`), so neither may be overwritten. `SystemComment` has no
//! update path in slurmctld (22.05.8, 24.11.5): only Slurm itself writes it (burst buffer
//! plugins append one dated line per failed operation; a credential failure replaces it), it
//! is shown to everyone who may see the job (`scontrol show job`, `squeue -O system_comment`)
//! and goes to accounting with the job. The pending reason cannot carry the note: after a
//! failed `select_p_job_test`, `select_nodes()` sets `WAIT_RESOURCES` and frees `state_desc`
//! (src/slurmctld/node_scheduler.c), so a select plugin's text would never be seen.
//!
//! gputopo owns exactly one line of the comment, the one starting with [`MARK`]; [`merge`]
//! replaces that line and keeps every other line as it was.

use std::fmt;

mod read;
pub use read::{Note, PlacedNode, read};

use crate::gpuset::GpuSet;
use crate::placement::score::pair_gbps;
use crate::placement::{Policy, Request};
use crate::topology::{NodeTopology, PcieLevel};

/// The start of gputopo's line in the comment.
pub const MARK: &str = "gputopo:";

/// The `key=` words inside a node entry of the note (for readers that must tell them from the
/// keys of the record around it, as in `scontrol show job -o`).
pub const NOTE_KEYS: &[&str] = &["gpus", "link", "optimal", "degraded"];

/// Longest note written (bytes); nodes past it are counted, not listed. Burst buffer plugins
/// stop appending once the comment reaches 1024 bytes, so ours stays well below that.
pub const MAX_NOTE: usize = 400;

/// The weakest link inside a GPU set: what bounds the job's collectives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bottleneck {
    /// One GPU: no link is crossed.
    Single,
    /// The weakest pair has this many NVLinks.
    NvLink(u8),
    /// The weakest pair talks over PCIe at this path level.
    Pcie(PcieLevel),
}

impl fmt::Display for Bottleneck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Bottleneck::Single => f.write_str("none(1 GPU)"),
            Bottleneck::NvLink(n) => write!(f, "NV{n}"),
            Bottleneck::Pcie(level) => write!(f, "PCIe-{level}"),
        }
    }
}

/// The weakest pair of `set` on `topo`, by the engine's own pair value.
pub fn bottleneck(topo: &NodeTopology, set: GpuSet) -> Bottleneck {
    let gpus = set.intersection(topo.all()).to_vec();
    let weakest = gpus
        .iter()
        .enumerate()
        .flat_map(|(i, &a)| gpus[i + 1..].iter().map(move |&b| topo.link(a, b)))
        .min_by_key(|&l| pair_gbps(l));
    match weakest {
        None => Bottleneck::Single,
        Some(l) if l.nvlinks > 0 => Bottleneck::NvLink(l.nvlinks),
        Some(l) => Bottleneck::Pcie(l.pcie),
    }
}

/// How good the GPUs of one node are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Quality {
    /// The chosen set's weakest link.
    pub link: Bottleneck,
    /// `None` when no better-connected set of the same size was free (the pick is optimal);
    /// else the weakest link of the best free set (which may, for example, hold degraded GPUs
    /// that gputopo avoided).
    pub better_free: Option<Bottleneck>,
}

/// Judges `set` against the best set of its size among `free` (the GPUs the job could have
/// had here: eligible and not faulty; `set` is counted in).
pub fn assess<P: Policy>(policy: &P, topo: &NodeTopology, set: GpuSet, free: GpuSet) -> Quality {
    let req = Request {
        count: set.len(),
        required: GpuSet::EMPTY,
        near: GpuSet::EMPTY,
    };
    let better_free = policy
        .choose(topo, free.union(set), &req)
        .filter(|best| policy.score(topo, *best) > policy.score(topo, set))
        .map(|best| bottleneck(topo, best));
    Quality {
        link: bottleneck(topo, set),
        better_free,
    }
}

/// gputopo's account of one node of a started job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeNote {
    /// Node name.
    pub node: String,
    /// The job's GPUs there (Slurm GRES indices, as a range list).
    pub gpus: String,
    /// `None` on nodes without topology records (first free GPUs, or beyond the model).
    pub quality: Option<Quality>,
    /// Degraded GPUs among them (range list, empty when none); `None` when not known here
    /// (nodes beyond the topology model), and then not shown.
    pub degraded: Option<String>,
}

impl NodeNote {
    /// The note of a node whose topology gputopo models: `set` judged against the `usable`
    /// GPUs ([`assess`]), with the degraded GPUs among it.
    pub fn ranked<P: Policy>(
        policy: &P,
        topo: &NodeTopology,
        set: GpuSet,
        usable: GpuSet,
        degraded: GpuSet,
    ) -> NodeNote {
        NodeNote {
            node: topo.name.clone(),
            gpus: set.to_string(),
            quality: Some(assess(policy, topo, set, usable)),
            degraded: Some(set.intersection(degraded).to_string()),
        }
    }

    /// The note of a node without topology records (`degraded` known) or beyond the model
    /// (`degraded` unknown: `None`).
    pub fn plain(node: &str, gpus: impl fmt::Display, degraded: Option<GpuSet>) -> NodeNote {
        NodeNote {
            node: node.to_owned(),
            gpus: gpus.to_string(),
            quality: None,
            degraded: degraded.map(|d| d.to_string()),
        }
    }
}

impl fmt::Display for NodeNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} gpus={}", self.node, self.gpus)?;
        match self.quality {
            Some(Quality {
                link,
                better_free: None,
            }) => write!(f, " link={link} optimal=yes")?,
            Some(Quality {
                link,
                better_free: Some(b),
            }) => write!(f, " link={link} optimal=no(free best {b})")?,
            None => f.write_str(" link=unknown")?,
        }
        match self.degraded.as_deref() {
            None => Ok(()),
            Some("") => f.write_str(" degraded=none"),
            Some(d) => write!(f, " degraded={d}"),
        }
    }
}

/// The line for a started job: one entry per node, cut at [`MAX_NOTE`].
pub fn placed(nodes: &[NodeNote]) -> String {
    bounded(
        format!("{MARK} "),
        nodes.iter().map(ToString::to_string),
        "; ",
    )
}

/// The line for a job that waits while the health filter withholds `nodes` (name and the
/// faulty GPUs, a range list that may be empty when unknown), or `None` when it withheld
/// nothing (the job waits for ordinary reasons: gputopo has nothing to say).
pub fn pending(nodes: &[(String, String)]) -> Option<String> {
    if nodes.is_empty() {
        return None;
    }
    let items = nodes.iter().map(|(n, f)| match f.as_str() {
        "" => n.clone(),
        f => format!("{n}[{f}]"),
    });
    Some(bounded(
        format!("{MARK} pending, nodes withheld for faulty or drained GPUs: "),
        items,
        ",",
    ))
}

/// `head` and the `items` joined by `sep`, as many as fit in [`MAX_NOTE`], then
/// `" (+N more)"`.
fn bounded(head: String, items: impl ExactSizeIterator<Item = String>, sep: &str) -> String {
    let total = items.len();
    let mut out = head;
    let mut shown = 0;
    for item in items {
        let extra = if shown == 0 { 0 } else { sep.len() };
        // Leave room for the "(+N more)" tail.
        if shown > 0 && out.len() + extra + item.len() + 16 > MAX_NOTE {
            break;
        }
        if shown > 0 {
            out.push_str(sep);
        }
        out.push_str(&item);
        shown += 1;
    }
    if shown < total {
        out.push_str(&format!(" (+{} more)", total - shown));
    }
    out
}

/// The comment with gputopo's line set to `ours` (or removed when `None`), every other line
/// kept in order; `None` when that is the comment as it stands (nothing to write). `Some("")`
/// means "no comment left": the caller clears the field.
pub fn merge(existing: Option<&str>, ours: Option<&str>) -> Option<String> {
    let old = existing.unwrap_or("");
    let mut lines: Vec<&str> = old
        .split('\n')
        .filter(|l| !l.is_empty() && !l.starts_with(MARK))
        .collect();
    lines.extend(ours);
    let new = lines.join("\n");
    (new != old).then_some(new)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::steer::oracle::{BruteForce, dgx1v, set};

    #[test]
    fn bottleneck_is_the_weakest_pair() {
        let t = dgx1v();
        assert_eq!(bottleneck(&t, set(&[3])), Bottleneck::Single);
        // DGX-1V: 0-1 NV1, 0-2 NV1, 1-2 NV2, 0-4 NV2; 0-5 crosses the sockets on PCIe.
        assert_eq!(bottleneck(&t, set(&[0, 4])), Bottleneck::NvLink(2));
        assert_eq!(bottleneck(&t, set(&[0, 1, 2])), Bottleneck::NvLink(1));
        assert_eq!(
            bottleneck(&t, set(&[0, 5])),
            Bottleneck::Pcie(PcieLevel::Sys)
        );
        assert_eq!(
            bottleneck(&t, set(&[0, 1, 5])),
            Bottleneck::Pcie(PcieLevel::Sys)
        );
    }

    #[test]
    fn a_pick_is_optimal_unless_a_better_set_was_free() {
        let t = dgx1v();
        let q = assess(&BruteForce, &t, set(&[0, 4]), set(&[0, 1, 4]));
        assert_eq!(q.better_free, None);
        assert_eq!(q.link, Bottleneck::NvLink(2));
        // {0,1} (NV1) while {0,4} (NV2) was free.
        let q = assess(&BruteForce, &t, set(&[0, 1]), set(&[4]));
        assert_eq!(q.link, Bottleneck::NvLink(1));
        assert_eq!(q.better_free, Some(Bottleneck::NvLink(2)));
    }

    #[test]
    fn the_placed_line_names_gpus_link_optimality_and_degraded_gpus() {
        let node = |n: &str, gpus: &str, q, d: &str| NodeNote {
            node: n.into(),
            gpus: gpus.into(),
            quality: q,
            degraded: Some(d.into()),
        };
        let line = placed(&[
            node(
                "n1",
                "6-7",
                Some(Quality {
                    link: Bottleneck::Pcie(PcieLevel::Pix),
                    better_free: Some(Bottleneck::NvLink(2)),
                }),
                "",
            ),
            node(
                "n2",
                "0-3",
                Some(Quality {
                    link: Bottleneck::NvLink(1),
                    better_free: None,
                }),
                "2",
            ),
            node("n3", "0", None, ""),
            NodeNote {
                degraded: None,
                ..node("w1", "70-71", None, "")
            },
        ]);
        assert_eq!(
            line,
            "gputopo: n1 gpus=6-7 link=PCIe-PIX optimal=no(free best NV2) degraded=none; \
             n2 gpus=0-3 link=NV1 optimal=yes degraded=2; n3 gpus=0 link=unknown degraded=none; w1 gpus=70-71 link=unknown"
        );
    }

    #[test]
    fn long_lines_are_cut_with_a_count() {
        let nodes: Vec<NodeNote> = (0..40)
            .map(|i| NodeNote {
                node: format!("node{i:03}"),
                gpus: "0-7".into(),
                quality: None,
                degraded: None,
            })
            .collect();
        let line = placed(&nodes);
        assert!(line.len() <= MAX_NOTE, "{}", line.len());
        assert!(line.starts_with("gputopo: node000 gpus=0-7"), "{line}");
        let shown = line.matches(" gpus=").count();
        assert!(
            line.ends_with(&format!(" (+{} more)", 40 - shown)),
            "{line}"
        );
        let many: Vec<(String, String)> = (0..200).map(|i| (format!("n{i}"), "1".into())).collect();
        let p = pending(&many).expect("a line");
        assert!(p.len() <= MAX_NOTE && p.ends_with(" more)"), "{p}");
    }

    #[test]
    fn pending_names_withheld_nodes_or_says_nothing() {
        assert_eq!(pending(&[]), None);
        assert_eq!(
            pending(&[("n2".into(), "5-6".into()), ("n4".into(), String::new())]).as_deref(),
            Some("gputopo: pending, nodes withheld for faulty or drained GPUs: n2[5-6],n4")
        );
    }

    #[test]
    fn merge_replaces_only_gputopos_line() {
        let ours = "gputopo: n1 gpus=0 link=unknown degraded=none";
        assert_eq!(merge(None, Some(ours)).as_deref(), Some(ours));
        assert_eq!(merge(Some(ours), Some(ours)), None);
        let bb = "12/01/26 10:00:00 burst_buffer/lua: setup: failed";
        let both = format!("{bb}\n{ours}");
        assert_eq!(merge(Some(bb), Some(ours)), Some(both.clone()));
        let newer = "gputopo: pending, nodes withheld for faulty or drained GPUs: n2";
        assert_eq!(
            merge(Some(&both), Some(newer)),
            Some(format!("{bb}\n{newer}"))
        );
        // Removing ours keeps the rest; an absent line is nothing to do.
        assert_eq!(merge(Some(&both), None).as_deref(), Some(bb));
        assert_eq!(merge(Some(bb), None), None);
        assert_eq!(merge(None, None), None);
        assert_eq!(merge(Some(ours), None).as_deref(), Some(""));
    }
}
