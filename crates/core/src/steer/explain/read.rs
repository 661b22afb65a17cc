//! Reading gputopo's placement note back (for `gputopo metrics`): the inverse of
//! [`super::placed`] and [`super::pending`], so the note's wording has one owner.

use super::MARK;

/// What one node entry of a started job's note says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlacedNode {
    /// Node name.
    pub node: String,
    /// The job's GPUs there, as written (a range list).
    pub gpus: String,
    /// The weakest link (`NV2`, `PCIe-PIX`, `none(1 GPU)`); `None` for `link=unknown`.
    pub link: Option<String>,
    /// `Some(true)` for `optimal=yes`, `Some(false)` for `optimal=no(...)`, `None` when the
    /// note does not say (nodes without topology records).
    pub optimal: Option<bool>,
    /// The degraded GPUs among them, as written (`""` for `none`); `None` when not stated.
    pub degraded: Option<String>,
}

/// gputopo's line of a job's comment, read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Note {
    /// A started job: one entry per node the note lists, and how many it left out
    /// (`(+N more)`).
    Placed {
        /// The listed nodes.
        nodes: Vec<PlacedNode>,
        /// Nodes counted, not listed.
        more: usize,
    },
    /// A waiting job: the nodes withheld, as written (`n2[5-6]`), and how many more.
    Pending {
        /// The listed nodes.
        withheld: Vec<String>,
        /// Nodes counted, not listed.
        more: usize,
    },
}

/// Finds gputopo's line in `comment` (any line starting with [`MARK`]) and reads it; `None`
/// when there is none or it is not in a form this version writes.
pub fn read(comment: &str) -> Option<Note> {
    let line = comment.lines().find(|l| l.starts_with(MARK))?;
    let body = line[MARK.len()..].trim();
    let (body, more) = split_more(body);
    if let Some(rest) = body.strip_prefix("pending, ") {
        let list = rest.split_once(": ").map(|(_, l)| l)?;
        return Some(Note::Pending {
            withheld: split_outside_brackets(list),
            more,
        });
    }
    let nodes = body
        .split("; ")
        .map(placed_node)
        .collect::<Option<Vec<_>>>()?;
    Some(Note::Placed { nodes, more })
}

/// `"... (+3 more)"` → (`"..."`, 3).
fn split_more(body: &str) -> (&str, usize) {
    if let Some(head) = body.strip_suffix(" more)")
        && let Some(at) = head.rfind(" (+")
        && let Ok(n) = head[at + 3..].parse::<usize>()
    {
        return (&head[..at], n);
    }
    (body, 0)
}

/// Items of `n2[5-6],n4` split at commas outside brackets.
fn split_outside_brackets(list: &str) -> Vec<String> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (i, c) in list.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push(list[start..i].to_string());
                start = i + 1;
            }
            _ => {}
        }
    }
    if start < list.len() {
        out.push(list[start..].to_string());
    }
    out
}

/// `n1 gpus=0,3 link=NV2 optimal=yes degraded=none`.
fn placed_node(entry: &str) -> Option<PlacedNode> {
    let mut words = entry.split(' ');
    let node = words.next().filter(|n| !n.is_empty())?.to_string();
    let mut gpus = None;
    let mut out = PlacedNode {
        node,
        gpus: String::new(),
        link: None,
        optimal: None,
        degraded: None,
    };
    let mut last_key = "";
    for w in words {
        let Some((k, v)) = w.split_once('=') else {
            // `none(1 GPU)` and `optimal=no(free best PCIe-PIX)` hold one space each.
            match last_key {
                "link" => {
                    let link = out.link.get_or_insert_with(String::new);
                    link.push(' ');
                    link.push_str(w);
                }
                "optimal" => {}
                _ => return None,
            }
            continue;
        };
        last_key = k;
        match k {
            "gpus" => gpus = Some(v.to_string()),
            "link" => out.link = (v != "unknown").then(|| v.to_string()),
            "optimal" => out.optimal = Some(v == "yes"),
            "degraded" => out.degraded = Some(if v == "none" { "" } else { v }.to_string()),
            _ => return None,
        }
    }
    out.gpus = gpus?;
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::super::{Bottleneck, NodeNote, Quality, pending, placed};
    use super::*;
    use crate::topology::PcieLevel;

    fn entry(node: &str, gpus: &str, quality: Option<Quality>, degraded: Option<&str>) -> NodeNote {
        NodeNote {
            node: node.into(),
            gpus: gpus.into(),
            quality,
            degraded: degraded.map(str::to_string),
        }
    }

    #[test]
    fn reads_back_what_placed_writes() {
        let nodes = [
            entry(
                "n1",
                "6-7",
                Some(Quality {
                    link: Bottleneck::Pcie(PcieLevel::Pix),
                    better_free: Some(Bottleneck::NvLink(2)),
                }),
                Some(""),
            ),
            entry(
                "n2",
                "0",
                Some(Quality {
                    link: Bottleneck::Single,
                    better_free: None,
                }),
                Some("0"),
            ),
            entry("w1", "70-71", None, None),
        ];
        let line = format!("burst_buffer: x=1\n{}", placed(&nodes));
        let Some(Note::Placed { nodes: got, more }) = read(&line) else {
            panic!("{line}")
        };
        assert_eq!(more, 0);
        assert_eq!(
            got,
            vec![
                PlacedNode {
                    node: "n1".into(),
                    gpus: "6-7".into(),
                    link: Some("PCIe-PIX".into()),
                    optimal: Some(false),
                    degraded: Some(String::new()),
                },
                PlacedNode {
                    node: "n2".into(),
                    gpus: "0".into(),
                    link: Some("none(1 GPU)".into()),
                    optimal: Some(true),
                    degraded: Some("0".into()),
                },
                PlacedNode {
                    node: "w1".into(),
                    gpus: "70-71".into(),
                    link: None,
                    optimal: None,
                    degraded: None,
                },
            ]
        );
    }

    #[test]
    fn counts_what_a_long_note_left_out() {
        let many: Vec<NodeNote> = (0..60)
            .map(|i| entry(&format!("node{i:03}"), "0-7", None, Some("")))
            .collect();
        let Some(Note::Placed { nodes, more }) = read(&placed(&many)) else {
            panic!()
        };
        assert_eq!(nodes.len() + more, 60);
        let withheld: Vec<(String, String)> =
            (0..200).map(|i| (format!("n{i}"), "1-2".into())).collect();
        let Some(Note::Pending { withheld: w, more }) =
            read(&pending(&withheld).unwrap_or_default())
        else {
            panic!()
        };
        assert_eq!(w.len() + more, 200);
        assert_eq!(w[0], "n0[1-2]");
    }

    #[test]
    fn pending_and_foreign_lines() {
        let p = pending(&[("n2".into(), "5-6".into()), ("n4".into(), String::new())]);
        assert_eq!(
            read(p.as_deref().unwrap_or_default()),
            Some(Note::Pending {
                withheld: vec!["n2[5-6]".into(), "n4".into()],
                more: 0
            })
        );
        assert_eq!(read("no note here"), None);
        assert_eq!(read("gputopo: n1 colour=blue"), None);
        assert_eq!(read("gputopo: "), None);
    }

    mod fuzz {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn never_panics(s in "\\PC{0,200}") {
                let _ = read(&format!("gputopo: {s}"));
                let _ = read(&s);
            }
        }
    }
}
