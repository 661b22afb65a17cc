//! Index mapping: which NVML device is Slurm's GPU i, by device identity.
//!
//! 1. Slurm's own GPU list for the node, in its index order, from the inputs slurmd reads:
//!    gres.conf (`GresConf=`, else next to slurm.conf; `Include` lines followed, or the agent
//!    refuses: [`super::conf_include`]) and, next to it, `fake_gpus.conf`
//!    (slurmd's stand-in for NVML) or, with `AutoDetect=nvml`, the NVML devices themselves.
//!    The rule is Slurm's (`gputopo_core::identity`, with the Slurm code it reproduces).
//! 2. Each Slurm GPU's device file gives its device minor: the minor of the character device
//!    when the file exists, else the number the path ends in (`/dev/nvidia5` → 5). The NVML
//!    device with that minor is the GPU. Positions are never assumed to line up.
//! 3. Without GPU lines for the node (a node without gres.conf, where `gres-conf` is run to
//!    write one) Slurm's autodetection order is used: NVML's (PCI bus) order.
//!
//! Where the identity cannot be established (a Slurm GPU without a device minor, two GPUs with
//! one minor, a gres.conf or fake_gpus.conf that cannot be read) the mapping is an error and
//! the agent refuses to publish. NVML devices whose minor is unreadable fill the Slurm GPUs no
//! device claimed only where that cannot name the wrong GPU (see [`assign`]); a Slurm GPU
//! without a device is reported `faulty` / `not_in_nvml` (it left the bus).

pub mod mig;

use gputopo_core::identity::{self, Record, gres_conf};
use gputopo_core::topology::gres_conf_lines::minor_of;
use std::path::Path;

/// One NVML device, as the mapping needs it.
#[derive(Clone, Debug, Default)]
pub struct Device {
    /// Device minor, when readable.
    pub minor: Option<u32>,
    /// Slurm's GRES type for it (`nvidia_l40s`), when known.
    pub type_name: Option<String>,
    /// NVLink count to each other NVML device, when read.
    pub nvlinks: Option<Vec<u32>>,
    /// The device is lost (NVML says so): its verdict is `faulty`/`gpu_lost` whoever it is.
    pub lost: bool,
    /// Its MIG devices, when MIG is enabled (Slurm lists those instead of the GPU).
    pub migs: Vec<mig::MigInstance>,
}

/// One Slurm GPU and the NVML device behind it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slot {
    /// Slurm's device file for it, when Slurm has one.
    pub file: Option<String>,
    /// Device minor.
    pub minor: Option<u32>,
    /// NVML index, when a device was matched (a MIG instance's parent GPU).
    pub nvml: Option<usize>,
    /// The MIG device of `nvml` this Slurm GPU is (its index in [`Device::migs`]).
    pub mig: Option<usize>,
}

/// The mapping and what to warn about.
#[derive(Clone, Debug, Default)]
pub struct Mapping {
    /// Slurm's GPUs in index order.
    pub slots: Vec<Slot>,
    /// Warnings (GPUs Slurm ignores, the source of the order).
    pub notes: Vec<String>,
}

/// The mapping for `node` from the gres.conf at `gres_path` (and `fake_gpus.conf` beside it).
///
/// # Errors
/// Why Slurm's GPUs cannot be tied to NVML devices; the agent must not publish then.
pub fn map_node(gres_path: &Path, node: &str, devices: &[Device]) -> Result<Mapping, String> {
    let gres = super::conf_include::read(gres_path)?;
    let fake_path = gres_path.with_file_name("fake_gpus.conf");
    let fake = match std::fs::read_to_string(&fake_path) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(format!("{}: {e}", fake_path.display())),
    };
    let mut m = map_texts(
        gres.as_deref(),
        fake.as_deref(),
        node,
        devices,
        device_minor,
    )
    .map_err(|e| format!("{} / {}: {e}", gres_path.display(), fake_path.display()))?;
    if fake.is_some() {
        m.notes.push(format!(
            "{} exists: Slurm's GPU order is the merged order of it and gres.conf",
            fake_path.display()
        ));
    }
    Ok(m)
}

/// [`map_node`] over the file contents; `minor(file)` resolves a device file's minor.
///
/// # Errors
/// As [`map_node`].
pub fn map_texts(
    gres: Option<&str>,
    fake: Option<&str>,
    node: &str,
    devices: &[Device],
    minor: impl Fn(&str) -> Option<u32>,
) -> Result<Mapping, String> {
    let conf = match gres {
        Some(t) => gres_conf::read(t, node).map_err(|e| format!("gres.conf {e}"))?,
        None => gres_conf::NodeGres::default(),
    };
    let mut notes = Vec::new();
    // (A GPU in MIG mode is listed by its MIG devices: Slurm's autodetected list below.)
    let mig = devices
        .iter()
        .any(|d| d.migs.iter().any(|m| m.caps.is_some()));
    if fake.is_none() && conf.gpus.is_empty() && !mig && !conf.autodetects_nvidia() {
        notes.push(format!(
            "gres.conf names no GPU of node {node}: GPUs are numbered in NVML (PCI bus) order, \
             Slurm's AutoDetect=nvml order"
        ));
        let slots = devices
            .iter()
            .enumerate()
            .map(|(i, d)| Slot {
                file: d.minor.map(|m| format!("/dev/nvidia{m}")),
                minor: d.minor,
                nvml: Some(i),
                mig: None,
            })
            .collect();
        return Ok(Mapping { slots, notes });
    }
    let system = match fake {
        Some(t) => Some(gres_conf::parse_fake_gpus(t).map_err(|e| format!("fake_gpus.conf {e}"))?),
        None if conf.autodetects_nvml() || (mig && conf.gpus.is_empty()) => {
            Some(nvml_records(devices))
        }
        None if conf.autodetects_nvidia() => Some(driver_records(devices)),
        None => None,
    };
    let conf_gpus = if conf.gpus.is_empty() {
        // slurm.conf's Gres= count: File-less records that take the system devices in order.
        vec![
            Record {
                file: None,
                type_name: None,
                links: None
            };
            system.as_ref().map_or(0, Vec::len)
        ]
    } else {
        conf.gpus
    };
    let order = identity::slurm_order(conf_gpus, system);
    for i in &order.ignored {
        notes.push(format!(
            "Slurm ignores the gres.conf GPU File={}: {}",
            i.record.file.as_deref().unwrap_or("(none)"),
            i.why
        ));
    }
    let all: Vec<Option<String>> = order.gpus.into_iter().map(|r| r.file).collect();
    // MIG instances are tied to (parent, MIG device) by their capability minors; the other
    // GPUs to devices by minor.
    let migs: Vec<Option<(usize, usize, u32)>> = all
        .iter()
        .map(|f| f.as_deref().and_then(|f| locate_mig(f, devices)))
        .collect();
    // A record over several files (MultipleFiles=, or a MIG instance Slurm detected) that is
    // no MIG instance the driver lists here: which device it is cannot be told, so nothing is
    // published under a guessed index (a stale hand-written line after the instances changed).
    if let Some(f) = all
        .iter()
        .zip(&migs)
        .find_map(|(f, m)| f.as_deref().filter(|f| m.is_none() && f.contains(',')))
    {
        return Err(format!(
            "Slurm's GPU with the files {f} is no MIG instance the driver lists \
             ({}): correct gres.conf (`nvidia-smi mig -lgi` lists the GPU instances)",
            mig::MIG_MINORS
        ));
    }
    let files: Vec<Option<String>> = all
        .iter()
        .zip(&migs)
        .filter(|(_, m)| m.is_none())
        .map(|(f, _)| f.clone())
        .collect();
    let minors: Vec<Option<u32>> = files
        .iter()
        .map(|f| f.as_deref().and_then(&minor))
        .collect();
    let nvml: Vec<Option<u32>> = devices.iter().map(|d| d.minor).collect();
    let lost: Vec<bool> = devices.iter().map(|d| d.lost).collect();
    let owners = assign(&files, &minors, &nvml, &lost)?;
    let mut plain = files.into_iter().zip(minors).zip(owners);
    let slots = all
        .into_iter()
        .zip(migs)
        .map(|(file, m)| match m {
            Some((dev, k, parent)) => Slot {
                file,
                minor: Some(parent),
                nvml: Some(dev),
                mig: Some(k),
            },
            None => {
                let ((file, minor), nvml) = plain.next().unwrap_or(((file, None), None));
                Slot {
                    file,
                    minor,
                    nvml,
                    mig: None,
                }
            }
        })
        .collect();
    Ok(Mapping { slots, notes })
}

/// The (device, MIG device, parent minor) a MIG `File=` names.
fn locate_mig(file: &str, devices: &[Device]) -> Option<(usize, usize, u32)> {
    let (parent, gi_cap, ci_cap) = mig::parse_files(file)?;
    devices.iter().enumerate().find_map(|(i, d)| {
        let k = d
            .migs
            .iter()
            .position(|m| d.minor == Some(parent) && m.caps == Some((gi_cap, ci_cap)))?;
        Some((i, k, parent))
    })
}

/// The system list NVML's autodetection builds (`gpu_nvml.c`): one device per NVML index,
/// `File=/dev/nvidia<minor>`, `Links=` with -1 at the NVML index; a GPU in MIG mode is one
/// record per MIG device whose capability minors are known ([`mig`]) instead. A device whose
/// minor cannot be read is not detected.
fn nvml_records(devices: &[Device]) -> Vec<Record> {
    let mut out = Vec::new();
    for (i, d) in devices.iter().enumerate() {
        let Some(m) = d.minor else { continue };
        let instances: Vec<Record> = d
            .migs
            .iter()
            .filter_map(|g| {
                Some(Record {
                    file: Some(mig::files(m, g.caps?)),
                    type_name: g.type_name.clone(),
                    links: g.links.clone(),
                })
            })
            .collect();
        if !instances.is_empty() {
            out.extend(instances);
            continue;
        }
        out.push(Record {
            file: Some(format!("/dev/nvidia{m}")),
            type_name: d.type_name.clone(),
            links: Some(identity::links_string(devices.len(), i, |j| {
                d.nvlinks
                    .as_ref()
                    .and_then(|l| l.get(j).copied())
                    .unwrap_or(0)
            })),
        });
    }
    out
}

/// The system list of Slurm 24.11's `AutoDetect=nvidia` (`gpu_nvidia.c`): one record per GPU
/// the driver lists, `File=/dev/nvidia<minor>`, its model as the type, no links.
fn driver_records(devices: &[Device]) -> Vec<Record> {
    devices
        .iter()
        .filter_map(|d| {
            Some(Record {
                file: Some(format!("/dev/nvidia{}", d.minor?)),
                type_name: d.type_name.clone(),
                links: None,
            })
        })
        .collect()
}

/// For each Slurm GPU (device minor `slurm[i]`), the NVML device with that minor. Devices
/// whose minor is unknown fill the Slurm GPUs no device claimed only when that cannot name the
/// wrong GPU: one device for one GPU, or as many lost devices (`lost[k]`, all judged the same:
/// `gpu_lost`) as free GPUs.
///
/// # Errors
/// A Slurm GPU without a minor, a minor named twice on either side.
pub fn assign(
    files: &[Option<String>],
    slurm: &[Option<u32>],
    nvml: &[Option<u32>],
    lost: &[bool],
) -> Result<Vec<Option<usize>>, String> {
    for (i, m) in slurm.iter().enumerate() {
        let Some(m) = m else {
            return Err(format!(
                "Slurm's GPU {i} (File={}) names no device minor, so its device is unknown",
                files[i].as_deref().unwrap_or("(none)")
            ));
        };
        if slurm[..i].contains(&Some(*m)) {
            return Err(format!("two of Slurm's GPUs name device minor {m}"));
        }
    }
    for (k, m) in nvml.iter().enumerate() {
        if m.is_some() && nvml[..k].contains(m) {
            return Err(format!("two NVML devices report minor {}", m.unwrap_or(0)));
        }
    }
    let mut owners: Vec<Option<usize>> = slurm
        .iter()
        .map(|m| nvml.iter().position(|x| x.is_some() && x == m))
        .collect();
    let unknown: Vec<usize> = (0..nvml.len()).filter(|&k| nvml[k].is_none()).collect();
    let empty: Vec<usize> = (0..owners.len()).filter(|&s| owners[s].is_none()).collect();
    let alike = unknown
        .iter()
        .all(|&k| lost.get(k).copied().unwrap_or(false));
    if unknown.len() == empty.len() && (unknown.len() == 1 || alike) {
        for (s, k) in empty.into_iter().zip(unknown) {
            owners[s] = Some(k);
        }
    }
    Ok(owners)
}

/// The GPUs the driver registered, from `<root>/nvidia/gpus/<bus>/information` (`root` is
/// `/proc/driver`): (bus id as the driver writes it, device minor), in PCI bus order, which
/// is NVML's enumeration order. The driver keeps a GPU here after it falls off the bus, when
/// NVML can no longer say which device it was.
pub fn driver_gpus(root: &Path) -> Vec<(String, u32)> {
    let Ok(dir) = std::fs::read_dir(root.join("nvidia/gpus")) else {
        return Vec::new();
    };
    let mut out: Vec<(String, u32)> = dir
        .flatten()
        .filter_map(|e| {
            let text = std::fs::read_to_string(e.path().join("information")).ok()?;
            let minor = text
                .lines()
                .find_map(|l| l.strip_prefix("Device Minor:"))?
                .trim()
                .parse()
                .ok()?;
            Some((e.file_name().to_string_lossy().to_lowercase(), minor))
        })
        .collect();
    out.sort();
    out
}

/// True when `path` is a character device (a GPU's device file the driver made).
pub fn is_device(path: &str) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(path).is_ok_and(|md| md.file_type().is_char_device())
}

/// The minor of device file `path`: the character device's own when it exists, else the
/// number the path ends in.
pub fn device_minor(path: &str) -> Option<u32> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    match std::fs::metadata(path) {
        Ok(md) if md.file_type().is_char_device() => Some(identity::minor_of_rdev(md.rdev())),
        _ => minor_of(path),
    }
}

#[cfg(test)]
mod tests;
