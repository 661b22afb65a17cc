//! The inputs of Slurm's GPU order: a node's gres.conf GPU records (one per device) with its
//! `AutoDetect=` value, and `fake_gpus.conf`, the system list slurmd reads instead of NVML.

use super::Record;
use crate::keyvalue::LineError;
use crate::topology::gres_conf_lines::{Devices, node_lines};

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

/// Reads the `Name=gpu` records and `AutoDetect=` of `node` from gres.conf text (the lines
/// that apply to it: [`node_lines`]).
///
/// # Errors
/// A [`LineError`] for a malformed line, a bad `NodeName=`/`File=` list or `Count=`.
pub fn read(text: &str, node: &str) -> Result<NodeGres, LineError> {
    let lines = node_lines(text, Some(node))?;
    let mut gpus = Vec::new();
    for g in &lines.gpus {
        let one = |file: Option<String>| Record {
            file,
            type_name: g.get("Type").map(str::to_string),
            links: g.get("Links").map(str::to_string),
        };
        match g.devices()? {
            Devices::Files(files) => {
                if gpus.len() + files.len() > MAX_RECORDS {
                    return Err(LineError::new(g.line, "File", "too many GPUs"));
                }
                gpus.extend(files.into_iter().map(|f| one(Some(f))));
            }
            Devices::Multiple(files) => {
                if gpus.len() >= MAX_RECORDS {
                    return Err(LineError::new(g.line, "MultipleFiles", "too many GPUs"));
                }
                gpus.push(one(Some(files.join(","))));
            }
            Devices::Count => {
                let count: usize = g
                    .get("Count")
                    .unwrap_or("1")
                    .parse()
                    .map_err(|_| LineError::new(g.line, "Count", "not a number"))?;
                if gpus.len() + count > MAX_RECORDS {
                    return Err(LineError::new(g.line, "Count", "too many GPUs"));
                }
                gpus.extend((0..count).map(|_| one(None)));
            }
        }
    }
    Ok(NodeGres {
        gpus,
        autodetect: lines.autodetect,
    })
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
