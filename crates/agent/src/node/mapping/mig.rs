//! MIG instances in Slurm's GPU list. With `AutoDetect=nvml`, slurmd's gpu/nvml plugin lists a
//! GPU in MIG mode as one GPU per MIG device: `File=` is the parent's device file and the
//! capability devices of its GPU instance and compute instance
//! (`/dev/nvidia0,/dev/nvidia-caps/nvidia-cap12,/dev/nvidia-caps/nvidia-cap13`, minors from
//! `/proc/driver/nvidia-caps/mig-minors`), `Type=` the parent's type up to its first `-` plus
//! the profile (`nvidia_a100_3g.20gb`), no `Links=` (`gpu_nvml.c`, `_handle_mig`). A MIG
//! device whose minors are not in that file is left out, as Slurm leaves it out. The agent
//! builds the same records and ties each back to (parent device, MIG device) by those minors;
//! an instance's verdict is its parent GPU's.

use std::collections::HashMap;

/// The driver's file of MIG capability minors.
pub const MIG_MINORS: &str = "/proc/driver/nvidia-caps/mig-minors";

/// One MIG device of an NVML device, as the mapping needs it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MigInstance {
    /// GPU instance id.
    pub gi: u32,
    /// Compute instance id.
    pub ci: u32,
    /// Slurm's type for it (`nvidia_a100_3g.20gb`), when known.
    pub type_name: Option<String>,
    /// Capability minors of its GPU instance and compute instance, when the driver lists them.
    pub caps: Option<(u32, u32)>,
    /// The `Links=` Slurm gives it: none from 24.11 on; before (22.05.8 seen), `-1` at its MIG
    /// index among its GPU's detected MIG devices, which Slurm then sorts by ([`links_before_24_11`]).
    pub links: Option<String>,
}

/// Slurm before 24.11 (22.05.8's `gpu_nvml.c`: "MIG doesn't support NVLinks, but use for
/// sorting") writes each MIG device `Links=` with `-1` at its index among the `count` MIG
/// devices of its GPU, so its final order is all GPUs' first instances, then their second ...
/// (the merge sorts by the `-1`'s position after the file). 24.11 writes none.
pub fn links_before_24_11(k: usize, count: usize) -> String {
    gputopo_core::identity::links_string(count, k, |_| 0)
}

/// Whether Slurm release `(major, minor)` writes MIG `Links=` (22.05.8: yes; 24.11.5: no; the
/// releases between are taken to behave as 22.05, unverified here).
pub fn slurm_writes_mig_links(release: Option<(u32, u32)>) -> bool {
    release.is_some_and(|r| r < (24, 11))
}

/// The Slurm release of `scontrol -V` output (`slurm 24.11.5`, `slurm-wlm 22.05.8`).
pub fn parse_release(version: &str) -> Option<(u32, u32)> {
    let v = version.split_whitespace().nth(1)?;
    let mut it = v.split('.');
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// `mig-minors`: `gpu<minor>/gi<gi>/access <cap>` and `gpu<minor>/gi<gi>/ci<ci>/access <cap>`
/// lines, by (GPU minor, GI, CI).
#[derive(Clone, Debug, Default)]
pub struct CapMinors(HashMap<(u32, u32, Option<u32>), u32>);

impl CapMinors {
    /// Parses the file's text; lines of another shape (`config 1`) are skipped.
    pub fn parse(text: &str) -> CapMinors {
        let mut m = HashMap::new();
        for line in text.lines() {
            let mut w = line.split_whitespace();
            let (Some(path), Some(Ok(cap))) = (w.next(), w.next().map(str::parse::<u32>)) else {
                continue;
            };
            let parts: Vec<&str> = path.split('/').collect();
            let num = |s: &str, p: &str| s.strip_prefix(p).and_then(|n| n.parse::<u32>().ok());
            let key = match parts[..] {
                [g, gi, "access"] => num(g, "gpu")
                    .zip(num(gi, "gi"))
                    .map(|(g, gi)| (g, gi, None)),
                [g, gi, ci, "access"] => num(g, "gpu")
                    .zip(num(gi, "gi"))
                    .zip(num(ci, "ci"))
                    .map(|((g, gi), ci)| (g, gi, Some(ci))),
                _ => None,
            };
            if let Some(k) = key {
                m.insert(k, cap);
            }
        }
        CapMinors(m)
    }

    /// Reads [`MIG_MINORS`]; empty when there is none (no MIG-capable driver).
    pub fn read() -> CapMinors {
        std::fs::read_to_string(MIG_MINORS)
            .map_or_else(|_| CapMinors::default(), |t| CapMinors::parse(&t))
    }

    /// The capability minors of GPU `minor`'s instance (`gi`, `ci`).
    pub fn of(&self, minor: u32, gi: u32, ci: u32) -> Option<(u32, u32)> {
        Some((
            *self.0.get(&(minor, gi, None))?,
            *self.0.get(&(minor, gi, Some(ci)))?,
        ))
    }
}

/// Slurm's `File=` of a MIG device.
pub fn files(parent: u32, (gi_cap, ci_cap): (u32, u32)) -> String {
    format!(
        "/dev/nvidia{parent},/dev/nvidia-caps/nvidia-cap{gi_cap},/dev/nvidia-caps/nvidia-cap{ci_cap}"
    )
}

/// (parent minor, GI capability minor, CI capability minor) of a MIG device's `File=`.
pub fn parse_files(file: &str) -> Option<(u32, u32, u32)> {
    let mut it = file.split(',');
    let parent = it.next()?.strip_prefix("/dev/nvidia")?.parse().ok()?;
    let cap = |s: Option<&str>| s?.strip_prefix("/dev/nvidia-caps/nvidia-cap")?.parse().ok();
    let (gi, ci) = (cap(it.next())?, cap(it.next())?);
    it.next().is_none().then_some((parent, gi, ci))
}

/// Slurm's type of a MIG device: its parent's type up to the first `-`, then the profile from
/// the MIG device's own type (`nvidia_a100-sxm4-40gb_mig_3g.20gb` → `_3g.20gb`).
pub fn type_name(parent_type: &str, mig_type: &str) -> Option<String> {
    let base = parent_type.split('-').next()?;
    let profile = &mig_type[mig_type.find("mig_")? + 3..];
    Some(format!("{base}{profile}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_minors_files_and_types() {
        let caps = CapMinors::parse(
            "config 1\nmonitor 2\ngpu0/gi1/access 12\ngpu0/gi1/ci0/access 13\nbad line\n",
        );
        assert_eq!(caps.of(0, 1, 0), Some((12, 13)));
        assert_eq!(caps.of(0, 2, 0), None);
        let f = files(0, (12, 13));
        assert_eq!(
            f,
            "/dev/nvidia0,/dev/nvidia-caps/nvidia-cap12,/dev/nvidia-caps/nvidia-cap13"
        );
        assert_eq!(parse_files(&f), Some((0, 12, 13)));
        assert_eq!(parse_files("/dev/nvidia0"), None);
        assert_eq!(
            parse_files("/dev/nvidia0,/dev/nvidia-caps/nvidia-cap12"),
            None
        );
        assert_eq!(
            type_name("nvidia_a100-sxm4-40gb", "nvidia_a100-sxm4-40gb_mig_3g.20gb").as_deref(),
            Some("nvidia_a100_3g.20gb")
        );
        assert_eq!(
            type_name("nvidia_a100-sxm4-40gb", "nvidia_a100-sxm4-40gb"),
            None
        );
    }

    mod fuzz {
        use super::super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn driver_files_never_panic(s in "\\PC{0,200}") {
                let caps = CapMinors::parse(&s);
                let _ = caps.of(0, 0, 0);
                let _ = parse_files(&s);
                let _ = parse_release(&s);
                let _ = type_name(&s, &s);
            }

            #[test]
            fn near_misses_never_panic(s in "(gpu[0-9]{0,3}/gi[0-9]{0,3}(/ci[0-9]{0,3})?/access [0-9]{0,12}\n){0,8}") {
                let _ = CapMinors::parse(&s);
            }
        }
    }
}
