//! The one reader of Slurm's gres.conf lines: which `Name=gpu` lines apply to a node, the
//! devices each names, and the node's `AutoDetect=`. Two readers build on it, each keeping
//! only the keys it needs: the node's topology ([`super::gres_conf_parse`]: `File=` order,
//! `Type=`, `Cores=`, `Links=` validated) and the inputs of Slurm's GPU order
//! ([`crate::identity::gres_conf`]: one record per device, `Count=` lines too).
//!
//! A line applies to a node when its `NodeName=` host list includes it, or when it has no
//! `NodeName=` (it applies to every node). Read without a node, the file must describe one
//! node: `Name=gpu` lines naming different `NodeName=` values are an error. Every problem is
//! a [`LineError`] naming the line and key; no input panics.

use crate::keyvalue::{self, LineError, Pair, get};

/// A `Name=gpu` line that applies to the node being read.
#[derive(Clone, Debug)]
pub struct GpuLine<'a> {
    /// 1-based line number, for errors.
    pub line: usize,
    /// The line's `Key=Value` words.
    pub words: Vec<Pair<'a>>,
}

impl<'a> GpuLine<'a> {
    /// The value of `key` (case-insensitive), when the line has it.
    pub fn get(&self, key: &str) -> Option<&'a str> {
        get(&self.words, key)
    }

    /// The device files the line names, in order (`File=/dev/nvidia[0-3]` is four), or
    /// `None` when it has no `File=`.
    ///
    /// # Errors
    /// A [`LineError`] on `File` for a malformed list.
    pub fn files(&self) -> Result<Option<Vec<String>>, LineError> {
        self.get("File")
            .map(|f| expand_hostlist(f).map_err(|m| LineError::new(self.line, "File", m)))
            .transpose()
    }

    /// The GPUs the line names, as slurmd counts them: `File=` is one GPU per file,
    /// `MultipleFiles=` one GPU over all its files, neither is `Count=` GPUs without a file.
    ///
    /// # Errors
    /// A [`LineError`] for a malformed list, or for `File=` and `MultipleFiles=` on one line
    /// (slurmd refuses it).
    pub fn devices(&self) -> Result<Devices, LineError> {
        match (self.files()?, self.get("MultipleFiles")) {
            (Some(_), Some(_)) => Err(LineError::new(
                self.line,
                "MultipleFiles",
                "File= and MultipleFiles= exclude each other (slurmd refuses the line)",
            )),
            (Some(files), None) => Ok(Devices::Files(files)),
            (None, Some(m)) => expand_hostlist(m)
                .map(Devices::Multiple)
                .map_err(|e| LineError::new(self.line, "MultipleFiles", e)),
            (None, None) => Ok(Devices::Count),
        }
    }
}

/// The GPUs one `Name=gpu` line names ([`GpuLine::devices`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Devices {
    /// `File=`: one GPU per device file, in order.
    Files(Vec<String>),
    /// `MultipleFiles=`: one GPU over several device files. A MIG instance written by hand is
    /// its parent's file and the capability files of its GPU and compute instance; Slurm keeps
    /// the list as the record's file and sorts by it like any `File=`.
    Multiple(Vec<String>),
    /// Neither: the line's `Count=` GPUs (default 1), without device files.
    Count,
}

/// What gres.conf says about one node's GPUs.
#[derive(Clone, Debug, Default)]
pub struct NodeLines<'a> {
    /// Its `Name=gpu` lines, in file order.
    pub gpus: Vec<GpuLine<'a>>,
    /// The `AutoDetect=` value that applies to it (a line naming the node wins over a global
    /// one), lower case.
    pub autodetect: Option<String>,
    /// Read without a node: the `NodeName=` of the GPU lines, when they have one.
    pub node_name: Option<String>,
}

/// The lines of gres.conf `text` that apply to `node` (or, without a node, to the one node
/// the file describes).
///
/// # Errors
/// A [`LineError`] for a malformed line, a bad `NodeName=` list, or (without `node`) GPU
/// lines for several nodes.
pub fn node_lines<'a>(text: &'a str, node: Option<&str>) -> Result<NodeLines<'a>, LineError> {
    let mut out = NodeLines::default();
    let mut node_autodetect = None;
    for (line, words) in keyvalue::lines(text) {
        let words = words?;
        let gpu = get(&words, "Name").is_some_and(|n| n.eq_ignore_ascii_case("gpu"));
        let named = match (get(&words, "NodeName"), node) {
            (None, _) => false,
            (Some(hosts), Some(want)) => {
                let names =
                    expand_hostlist(hosts).map_err(|m| LineError::new(line, "NodeName", m))?;
                if !names.iter().any(|h| h == want) {
                    continue;
                }
                true
            }
            (Some(hosts), None) => {
                if gpu {
                    match &out.node_name {
                        Some(first) if first != hosts => {
                            return Err(LineError::new(
                                line,
                                "NodeName",
                                format!(
                                    "lines for '{first}' and '{hosts}': name the node to read (--node)"
                                ),
                            ));
                        }
                        Some(_) => {}
                        None => out.node_name = Some(hosts.to_string()),
                    }
                }
                true
            }
        };
        if let Some(a) = get(&words, "AutoDetect") {
            let a = Some(a.to_ascii_lowercase());
            if named {
                node_autodetect = a;
            } else {
                out.autodetect = a;
            }
        }
        if gpu {
            out.gpus.push(GpuLine { line, words });
        }
    }
    if node_autodetect.is_some() {
        out.autodetect = node_autodetect;
    }
    Ok(out)
}

/// The device minor number a `File=` path names: the decimal digits it ends with
/// (`/dev/nvidia3` → 3), or `None` when it ends in none (or they overflow).
pub fn minor_of(path: &str) -> Option<u32> {
    let digits = path.len() - path.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    path[path.len() - digits..].parse().ok()
}

/// Expands a Slurm host list or bracketed path list: `n[1-3,7],gpu01` →
/// `n1 n2 n3 n7 gpu01`; `/dev/nvidia[0-1]` → two paths. Zero padding is kept (`n[01-02]`).
/// One bracket group per element.
///
/// # Errors
/// A message for unbalanced brackets, bad ranges, or lists above 4096 names.
pub fn expand_hostlist(s: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    let mut elems = Vec::new();
    for (i, c) in s.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => {
                depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| format!("unbalanced ']' in '{s}'"))?;
            }
            ',' if depth == 0 => {
                elems.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(format!("unbalanced '[' in '{s}'"));
    }
    elems.push(&s[start..]);
    for e in elems.into_iter().map(str::trim).filter(|e| !e.is_empty()) {
        let Some(open) = e.find('[') else {
            out.push(e.to_string());
            continue;
        };
        let close = e[open..]
            .find(']')
            .map(|c| c + open)
            .ok_or_else(|| format!("unbalanced '[' in '{e}'"))?;
        let (prefix, body, suffix) = (&e[..open], &e[open + 1..close], &e[close + 1..]);
        if suffix.contains('[') {
            return Err(format!("'{e}': only one [..] group per name is supported"));
        }
        for part in body.split(',') {
            let part = part.trim();
            let (a, b) = part.split_once('-').unwrap_or((part, part));
            let width = a.len();
            let bad = || format!("'{part}' in '{e}' is not a number or range");
            let (lo, hi): (u64, u64) =
                (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
            if lo > hi || hi - lo >= 4096 || out.len() as u64 + (hi - lo) >= 4096 {
                return Err(format!("range '{part}' in '{e}' is backwards or too large"));
            }
            for x in lo..=hi {
                out.push(format!("{prefix}{x:0width$}{suffix}"));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONF: &str = "AutoDetect=off\n\
        NodeName=n[1-2] AutoDetect=nvml\n\
        NodeName=n[1-4] Name=gpu Type=a100 File=/dev/nvidia[0-1]\n\
        Name=mps Count=100\n\
        NodeName=n9 Name=gpu Count=2\n\
        Name=gpu File=/dev/nvidia7\n";

    #[test]
    fn lines_that_apply_to_a_node() {
        let n1 = node_lines(CONF, Some("n1")).unwrap();
        let at: Vec<usize> = n1.gpus.iter().map(|g| g.line).collect();
        assert_eq!((at, n1.autodetect.as_deref()), (vec![3, 6], Some("nvml")));
        assert_eq!(
            n1.gpus[0].files().unwrap(),
            Some(vec!["/dev/nvidia0".to_string(), "/dev/nvidia1".to_string()])
        );
        let n9 = node_lines(CONF, Some("n9")).unwrap();
        assert_eq!(n9.autodetect.as_deref(), Some("off"), "the global value");
        assert_eq!(
            (n9.gpus[0].get("count"), n9.gpus[0].files()),
            (Some("2"), Ok(None))
        );
    }

    #[test]
    fn without_a_node_the_file_describes_one() {
        let e = node_lines(CONF, None).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (5, "NodeName"));
        let one = node_lines(
            "NodeName=a Name=gpu File=/dev/x0\nName=gpu File=/dev/x1\n",
            None,
        );
        assert_eq!(one.unwrap().node_name.as_deref(), Some("a"));
        let e = node_lines("NodeName=n[1- AutoDetect=off\n", Some("n1")).unwrap_err();
        assert_eq!(e.field, "NodeName");
    }

    #[test]
    fn devices_a_line_names() {
        let text = "Name=gpu File=/dev/nvidia[0-1]\n\
                    Name=gpu MultipleFiles=/dev/nvidia2,/dev/nvidia-caps/nvidia-cap[21-22]\n\
                    Name=gpu Count=2\n\
                    Name=gpu File=/dev/nvidia3 MultipleFiles=/dev/nvidia4\n";
        let lines = node_lines(text, Some("n1")).unwrap();
        let d: Vec<_> = lines.gpus.iter().map(GpuLine::devices).collect();
        let v = |xs: &[&str]| xs.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            d[0],
            Ok(Devices::Files(v(&["/dev/nvidia0", "/dev/nvidia1"])))
        );
        let caps = [
            "/dev/nvidia2",
            "/dev/nvidia-caps/nvidia-cap21",
            "/dev/nvidia-caps/nvidia-cap22",
        ];
        assert_eq!(d[1], Ok(Devices::Multiple(v(&caps))));
        assert_eq!(d[2], Ok(Devices::Count));
        let e = d[3].clone().unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (4, "MultipleFiles"));
    }
}
