//! The inputs of Slurm's GPU order: a node's gres.conf GPU records (one per device) with its
//! `AutoDetect=` value, and `fake_gpus.conf`, the system list slurmd reads instead of NVML.

use super::Record;
use crate::keyvalue::{self, LineError, get};
use crate::topology::gres_conf_parse::expand_hostlist;

/// A node's GPU lines of gres.conf.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeGres {
    /// One record per GPU, in gres.conf order (`File=` ranges expanded, `Count=` split; a
    /// `MultipleFiles=` line is one GPU whose file is the comma list, as Slurm keeps it).
    pub gpus: Vec<Record>,
    /// The `AutoDetect=` value that applies to the node (a line naming it wins over a global
    /// one), lower case.
    pub autodetect: Option<String>,
}

impl NodeGres {
    /// Whether slurmd builds a system list from NVML for this node.
    pub fn autodetects_nvml(&self) -> bool {
        self.autodetect.as_deref() == Some("nvml")
    }

    /// Whether slurmd builds its system list from the driver's files (`AutoDetect=nvidia`,
    /// Slurm 24.11+'s gpu/nvidia: `/proc/driver/nvidia/gpus`, no links), so GPUs are numbered
    /// by device file, that is in minor order.
    pub fn autodetects_nvidia(&self) -> bool {
        self.autodetect.as_deref() == Some("nvidia")
    }
}

/// Most GPUs one record may expand to (bounds work on hostile input).
const MAX_RECORDS: usize = 4096;

/// Reads the `Name=gpu` records and `AutoDetect=` of `node` from gres.conf text. Lines whose
/// `NodeName=` does not include the node are skipped.
///
/// # Errors
/// A [`LineError`] for a malformed line, a bad `NodeName=`/`File=` list or `Count=`.
pub fn read(text: &str, node: &str) -> Result<NodeGres, LineError> {
    let mut out = NodeGres::default();
    let mut node_autodetect = None;
    for (line, words) in keyvalue::lines(text) {
        let words = words?;
        let named = match get(&words, "NodeName") {
            Some(hosts) => {
                let names =
                    expand_hostlist(hosts).map_err(|m| LineError::new(line, "NodeName", m))?;
                if !names.iter().any(|h| h == node) {
                    continue;
                }
                true
            }
            None => false,
        };
        if let Some(a) = get(&words, "AutoDetect") {
            let a = Some(a.to_ascii_lowercase());
            if named {
                node_autodetect = a;
            } else {
                out.autodetect = a;
            }
        }
        if !get(&words, "Name").is_some_and(|n| n.eq_ignore_ascii_case("gpu")) {
            continue;
        }
        let one = |file: Option<String>| Record {
            file,
            type_name: get(&words, "Type").map(str::to_string),
            links: get(&words, "Links").map(str::to_string),
        };
        match (get(&words, "File"), get(&words, "MultipleFiles")) {
            (Some(_), Some(_)) => {
                return Err(LineError::new(
                    line,
                    "MultipleFiles",
                    "File= and MultipleFiles= exclude each other (slurmd refuses the line)",
                ));
            }
            // One GPU over several device files: a MIG instance written by hand is its
            // parent's file and the capability files of its GPU and compute instance. Slurm
            // keeps the list as the record's file and sorts by it like any File=.
            (None, Some(m)) => {
                let files =
                    expand_hostlist(m).map_err(|e| LineError::new(line, "MultipleFiles", e))?;
                if out.gpus.len() >= MAX_RECORDS {
                    return Err(LineError::new(line, "MultipleFiles", "too many GPUs"));
                }
                out.gpus.push(one(Some(files.join(","))));
            }
            (Some(f), None) => {
                let files = expand_hostlist(f).map_err(|m| LineError::new(line, "File", m))?;
                if out.gpus.len() + files.len() > MAX_RECORDS {
                    return Err(LineError::new(line, "File", "too many GPUs"));
                }
                out.gpus.extend(files.into_iter().map(|f| one(Some(f))));
            }
            (None, None) => {
                let count: usize = get(&words, "Count")
                    .unwrap_or("1")
                    .parse()
                    .map_err(|_| LineError::new(line, "Count", "not a number"))?;
                if out.gpus.len() + count > MAX_RECORDS {
                    return Err(LineError::new(line, "Count", "too many GPUs"));
                }
                out.gpus.extend((0..count).map(|_| one(None)));
            }
        }
    }
    if node_autodetect.is_some() {
        out.autodetect = node_autodetect;
    }
    Ok(out)
}

/// Parses `fake_gpus.conf` (`_add_fake_gpus_from_file` in gres_gpu.c): one device per line,
/// `<type>|<sys_cpu_count>|<cpu_range>|<links>|<device_file>[|<unique_id>[|<flags>]]`,
/// `(null)` for an empty field, `#` comment lines.
///
/// # Errors
/// A [`LineError`] for a line with fewer than 5 or more than 7 fields (slurmd logs those as
/// "failed to parse").
pub fn parse_fake_gpus(text: &str) -> Result<Vec<Record>, LineError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let l = raw.trim_end_matches('\r');
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        // strtok_r skips empty tokens.
        let fields: Vec<&str> = l.split('|').filter(|f| !f.is_empty()).collect();
        if !(5..=7).contains(&fields.len()) {
            return Err(LineError::new(
                i + 1,
                "line",
                "expected <type>|<sys_cpu_count>|<cpu_range>|<links>|<device_file>",
            ));
        }
        let val = |k: usize| (fields[k] != "(null)").then(|| fields[k].to_string());
        if out.len() >= MAX_RECORDS {
            return Err(LineError::new(i + 1, "line", "too many GPUs"));
        }
        out.push(Record {
            type_name: val(0),
            links: val(3),
            file: val(4),
        });
    }
    Ok(out)
}
