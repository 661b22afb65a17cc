//! Index mapping: NVML's GPU order → Slurm's GRES index.
//!
//! Slurm numbers a node's GPUs in the order of their `File=` device paths in gres.conf (with
//! `AutoDetect=nvml`, in the order of the device minor numbers), not in NVML's enumeration order
//! (PCI bus order). Both sides agree on the device minor number (`/dev/nvidiaN` has minor N),
//! so the agent maps through it:
//!
//! 1. If gres.conf is readable and has `Name=gpu` lines with `File=` for this node, Slurm GPU i is
//!    the NVML device whose minor equals the number at the end of the i-th `File=` path
//!    (`/dev/nvidia3` → 3; ranges like `/dev/nvidia[0-3]` expand in order). The file is read by
//!    the engine's gres.conf parser (`gres_conf_parse`), so a gres.conf the engine rejects
//!    (bad `Links=`, a GPU line without `File=`) is ignored here too, with a note.
//! 2. Otherwise GPUs are sorted by minor number.
//!
//! A GPU that NVML cannot identify (lost before its minor could be read) fills the one slot whose
//! minor no NVML device claimed, when that is unambiguous; otherwise it is reported after the
//! others. A gres.conf slot with no NVML device is reported `unknown` / `not_in_nvml`.

use gputopo_core::topology::gres_conf_parse;
use std::path::Path;

/// One Slurm GPU: its minor and the NVML device behind it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slot {
    /// Device minor number, when known.
    pub minor: Option<u32>,
    /// NVML index, when an NVML device was matched.
    pub nvml: Option<usize>,
}

/// Slurm GPU order for NVML devices whose minors are `minors` (by NVML index; `None` = unknown).
/// `gres` is the gres.conf minor order, when known.
pub fn map(minors: &[Option<u32>], gres: Option<&[u32]>) -> Vec<Slot> {
    let mut slots: Vec<Slot> = match gres {
        Some(order) => order
            .iter()
            .map(|&m| Slot {
                minor: Some(m),
                nvml: minors.iter().position(|&x| x == Some(m)),
            })
            .collect(),
        None => {
            let mut known: Vec<(u32, usize)> = minors
                .iter()
                .enumerate()
                .filter_map(|(i, m)| m.map(|m| (m, i)))
                .collect();
            known.sort();
            known.dedup_by_key(|k| k.0);
            known
                .into_iter()
                .map(|(m, i)| Slot {
                    minor: Some(m),
                    nvml: Some(i),
                })
                .collect()
        }
    };
    let unidentified: Vec<usize> = (0..minors.len()).filter(|&i| minors[i].is_none()).collect();
    if unidentified.is_empty() {
        return slots;
    }
    if gres.is_some() {
        let empty: Vec<usize> = (0..slots.len())
            .filter(|&s| slots[s].nvml.is_none())
            .collect();
        if empty.len() == unidentified.len() {
            for (s, i) in empty.into_iter().zip(unidentified) {
                slots[s].nvml = Some(i);
            }
        }
        return slots;
    }
    // No gres.conf: the minors nobody claimed among 0..count.
    let count = minors.len() as u32;
    let gaps: Vec<u32> = (0..count).filter(|m| !minors.contains(&Some(*m))).collect();
    if gaps.len() == unidentified.len() && slots.iter().all(|s| s.minor < Some(count)) {
        for (m, i) in gaps.into_iter().zip(unidentified) {
            slots.push(Slot {
                minor: Some(m),
                nvml: Some(i),
            });
        }
        slots.sort_by_key(|s| s.minor);
    } else {
        slots.extend(unidentified.into_iter().map(|i| Slot {
            minor: None,
            nvml: Some(i),
        }));
    }
    slots
}

/// The GPU minors of `node` in gres.conf order, or `None` when gres.conf names no GPU files for
/// it. Lines with a `NodeName=` that does not include `node` are skipped.
///
/// # Errors
/// A message when the file cannot be read or a `File=`/`NodeName=` value cannot be expanded.
pub fn gres_minors(path: &Path, node: &str) -> Result<Option<Vec<u32>>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    gres_minors_from(&text, node).map_err(|e| format!("{}: {e}", path.display()))
}

/// [`gres_minors`] over the text, read by the engine's gres.conf parser
/// ([`gres_conf_parse::parse_if_any`], which records each `File=` path's minor).
///
/// # Errors
/// A message naming the line when the file is malformed (the parser's checks: `File=`,
/// `NodeName=`, `Cores=`, `Links=`), or naming the GPU whose `File=` path does not end in a
/// minor number.
pub fn gres_minors_from(text: &str, node: &str) -> Result<Option<Vec<u32>>, String> {
    let Some(topo) = gres_conf_parse::parse_if_any(text, Some(node)).map_err(|e| e.to_string())?
    else {
        return Ok(None);
    };
    topo.gpus()
        .iter()
        .map(|g| {
            g.minor.ok_or_else(|| {
                format!(
                    "File: GPU {}'s path does not end in a minor number",
                    g.index
                )
            })
        })
        .collect::<Result<Vec<u32>, String>>()
        .map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gputopo_core::topology::gres_conf_parse::expand_hostlist as expand;

    #[test]
    fn sorts_by_minor_and_fills_the_lost_gap() {
        let s = map(&[Some(7), Some(6), None, Some(4)], None);
        // minors 4,6,7 known; 4 GPUs, so 0..4 has gaps 0,1,2,3 minus {}: ambiguous → appended
        assert_eq!(
            s.last(),
            Some(&Slot {
                minor: None,
                nvml: Some(2)
            })
        );
        let s = map(&[Some(0), Some(1), None, Some(3)], None);
        assert_eq!(
            s.iter().map(|s| (s.minor, s.nvml)).collect::<Vec<_>>(),
            vec![
                (Some(0), Some(0)),
                (Some(1), Some(1)),
                (Some(2), Some(2)),
                (Some(3), Some(3))
            ]
        );
    }

    #[test]
    fn follows_gres_conf_order() {
        let s = map(&[Some(0), Some(1), None], Some(&[1, 2, 0]));
        assert_eq!(
            s.iter().map(|s| s.nvml).collect::<Vec<_>>(),
            vec![Some(1), Some(2), Some(0)]
        );
        let s = map(&[Some(0)], Some(&[0, 5]));
        assert_eq!(
            s[1],
            Slot {
                minor: Some(5),
                nvml: None
            }
        );
    }

    #[test]
    fn reads_gres_conf_for_this_node() {
        let text = "AutoDetect=off\nNodeName=n[1-2] Name=gpu File=/dev/nvidia[2-3]\n\
                    NodeName=n3 Name=gpu File=/dev/nvidia9\nName=gpu Type=x File=/tmp/d/nvidia0\n\
                    Name=mps Count=100\n";
        assert_eq!(gres_minors_from(text, "n2").unwrap(), Some(vec![2, 3, 0]));
        assert_eq!(gres_minors_from(text, "n3").unwrap(), Some(vec![9, 0]));
        assert_eq!(gres_minors_from("Name=mps\n", "n3").unwrap(), None);
        assert!(gres_minors_from("Name=gpu File=/dev/nvidia\n", "x").is_err());
        assert_eq!(
            expand("a,n[08-10]x").unwrap(),
            vec!["a", "n08x", "n09x", "n10x"]
        );
        assert!(expand("n[1-").is_err());
    }
}

#[cfg(test)]
mod fuzz {
    use super::*;
    use gputopo_core::topology::gres_conf_parse::expand_hostlist as expand;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn gres_conf_and_lists_never_panic(s in "\\PC{0,200}") {
            let _ = gres_minors_from(&s, "n1");
            let _ = expand(&s);
        }

        #[test]
        fn near_misses_never_panic(
            pre in "[a-z/]{0,6}", a in "[0-9]{0,3}", b in "[0-9-]{0,4}", post in "[\\]\\[,]{0,2}",
        ) {
            let list = format!("{pre}[{a}-{b}]{post}");
            let _ = expand(&list);
            let _ = gres_minors_from(&format!("NodeName={list} Name=gpu File=/dev/{list}\n"), "n1");
        }

        #[test]
        fn mapping_is_a_permutation(minors in proptest::collection::vec(proptest::option::of(0u32..12), 0..10)) {
            let slots = map(&minors, None);
            let mut seen: Vec<usize> = slots.iter().filter_map(|s| s.nvml).collect();
            seen.sort_unstable();
            let before = seen.len();
            seen.dedup();
            prop_assert_eq!(before, seen.len(), "an NVML device appears twice");
        }
    }
}
