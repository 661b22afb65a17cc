//! Device identity: which GPU Slurm calls index i on a node, worked out from the same inputs
//! slurmd reads, so the node agent never publishes a verdict under another device's index.
//!
//! Slurm's GPU index order is the order of the node's final GPU records in slurmd
//! (`gres_p_node_config_load` in `src/plugins/gres/gpu/gres_gpu.c`, 22.05.8 and 24.11.5 alike):
//! - **no system list** (gres.conf has no `AutoDetect=nvml` for the node and there is no
//!   `fake_gpus.conf` next to slurm.conf): the gres.conf records as written, a `File=` range
//!   expanded in order ([`gres_conf`]);
//! - **a system list** (NVML devices with `AutoDetect=nvml`, or the lines of `fake_gpus.conf`,
//!   which slurmd reads instead of NVML when it exists): `_merge_system_gres_conf` matches
//!   every gres.conf GPU to a system device by `Type=` and `File=`, *ignores* a configured GPU
//!   whose `Links=` differ from the device's, keeps configured-only GPUs that have a `File=`,
//!   then sorts the result by `File=` (`_sort_gpu_by_file`, natural order) and then by the
//!   position of `-1` in `Links=` (`_sort_gpu_by_links_order`; no `Links=` last). NVML's
//!   autodetection writes that `-1` at the device's NVML index, so in practice Slurm numbers
//!   GPUs in NVML (PCI bus) order ([`merge`]).
//!
//! Each Slurm GPU is then tied to a device by its device file (the minor number of
//! `/dev/nvidiaN`), never by position.

pub mod gres_conf;
mod natural;

pub use natural::natural_cmp;

use std::cmp::Ordering;

/// One GPU record with a count of one, as slurmd keeps it (`gres_slurmd_conf_t`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// `File=` / the device file, when given.
    pub file: Option<String>,
    /// `Type=`, when given.
    pub type_name: Option<String>,
    /// `Links=` as written, when given.
    pub links: Option<String>,
}

/// A configured GPU that Slurm drops while merging, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ignored {
    /// The gres.conf record.
    pub record: Record,
    /// Slurm's reason, in words.
    pub why: String,
}

/// Slurm's final GPU list: index i is `gpus[i]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Order {
    /// The GPUs in Slurm's index order.
    pub gpus: Vec<Record>,
    /// Configured GPUs Slurm ignores (it logs them at error level and the node loses them).
    pub ignored: Vec<Ignored>,
}

/// Slurm's order for the configured GPUs `conf` (one record per device, gres.conf order) and
/// the system list `system` (`None` when there is none: no AutoDetect, no fake_gpus.conf).
pub fn slurm_order(conf: Vec<Record>, system: Option<Vec<Record>>) -> Order {
    match system {
        None => Order {
            gpus: conf,
            ignored: Vec::new(),
        },
        Some(sys) => merge(conf, sys),
    }
}

/// `_merge_system_gres_conf`: match, drop the mismatches, sort by file, then by links.
pub fn merge(mut conf: Vec<Record>, mut sys: Vec<Record>) -> Order {
    // Records with a File= are matched first, the others fill the remaining devices.
    conf.sort_by(|a, b| file_cmp(&a.file, &b.file));
    sys.sort_by(|a, b| file_cmp(&a.file, &b.file));
    let mut taken = vec![false; sys.len()];
    let mut gpus = Vec::new();
    let mut ignored = Vec::new();
    for c in conf {
        let hit = (0..sys.len()).find(|&k| !taken[k] && matches(&c, &sys[k]));
        match hit {
            Some(k) => {
                taken[k] = true;
                match (&c.links, &sys[k].links) {
                    (Some(cl), Some(sl)) if cl != sl => ignored.push(Ignored {
                        why: format!(
                            "Links={cl} differs from the device's Links={sl} (Slurm ignores it: \
                             \"mismatching Cores or Links\")"
                        ),
                        record: c,
                    }),
                    _ => gpus.push(Record {
                        type_name: c.type_name.clone().or_else(|| sys[k].type_name.clone()),
                        ..sys[k].clone()
                    }),
                }
            }
            None if c.file.is_some() => gpus.push(c),
            None => ignored.push(Ignored {
                why: "no File= and no system device left to take (Slurm discards it)".into(),
                record: c,
            }),
        }
    }
    gpus.sort_by(|a, b| file_cmp(&a.file, &b.file));
    gpus.sort_by(|a, b| links_cmp(&a.links, &b.links));
    Order { gpus, ignored }
}

/// `_match_gres`: a configured type must be part of the device's type (Slurm cuts the
/// system type down to the configured one), a configured file must be the device's file.
fn matches(c: &Record, s: &Record) -> bool {
    let type_ok = match (&c.type_name, &s.type_name) {
        (Some(ct), Some(st)) => st.to_ascii_lowercase().contains(&ct.to_ascii_lowercase()),
        (Some(_), None) => false,
        (None, _) => true,
    };
    let file_ok = c.file.as_ref().is_none_or(|f| Some(f) == s.file.as_ref());
    type_ok && file_ok
}

/// `_sort_string_null_last` over files: natural order, no file last.
fn file_cmp(a: &Option<String>, b: &Option<String>) -> Ordering {
    match (a, b) {
        (Some(x), Some(y)) => natural_cmp(x, y),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
    }
}

/// `_sort_gpu_by_links_order`: by the position of `-1`, no links last.
fn links_cmp(a: &Option<String>, b: &Option<String>) -> Ordering {
    match (a, b) {
        (None, Some(_)) => Ordering::Greater,
        (Some(_), None) => Ordering::Less,
        _ => self_position(a.as_deref()).cmp(&self_position(b.as_deref())),
    }
}

/// `gres_links_validate`: the index of the single `-1`; -1 without links; -2 when malformed.
pub fn self_position(links: Option<&str>) -> i64 {
    let Some(l) = links else { return -1 };
    let mut pos = -1;
    for (i, tok) in l.split(',').enumerate() {
        match tok.parse::<i64>() {
            Ok(-1) if pos == -1 => pos = i as i64,
            Ok(v) if (0..=1024).contains(&v) || v == -2 => {}
            _ => return -2,
        }
    }
    if pos == -1 { -2 } else { pos }
}

/// Links with `-1` at `own` among `n` GPUs and `counts(j)` elsewhere, the way NVML's
/// autodetection writes them (`gpu_nvml.c`: `links[index] = NVLINK_SELF`).
pub fn links_string(n: usize, own: usize, counts: impl Fn(usize) -> u32) -> String {
    (0..n)
        .map(|j| {
            if j == own {
                "-1".to_string()
            } else {
                counts(j).to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The device minor of a device number (`st_rdev`), as glibc's `minor()` computes it.
pub fn minor_of_rdev(rdev: u64) -> u32 {
    (((rdev >> 12) & 0xffff_ff00) | (rdev & 0xff)) as u32
}

#[cfg(test)]
mod tests;
