//! The driver's files for a fixture: what a node with these GPUs has under `/proc/driver`,
//! `/sys/bus/pci/drivers/nvidia` and `/dev`, for code that reads them instead of (or beside)
//! NVML. Slurm's `gpu/nvml` plugin reads `/proc/driver/nvidia-caps/mig-minors` for the
//! device files of MIG instances; Slurm 24.11's `gpu/nvidia` (`AutoDetect=nvidia`) reads
//! `/proc/driver/nvidia/gpus/<bus>/information` and `.../drivers/nvidia/<bus>/local_cpulist`;
//! both stat `/dev/nvidia<minor>`. `contrib/nvml-node.sh` mounts the tree over those paths in
//! a private mount namespace, so one host runs several emulated nodes, each with its own.
//!
//! Layout written under DIR: `proc/` (for `/proc/driver`), `sys/` (for
//! `/sys/bus/pci/drivers`) and `dev.list`, one `PATH MAJOR MINOR` line per character device
//! to make under `/dev`.

use crate::fixture::FakeNode;
use std::fmt::Write as _;
use std::path::Path;

/// The major number of `/dev/nvidia<minor>` and `/dev/nvidiactl`.
const NVIDIA_MAJOR: u32 = 195;
/// The major of `/dev/nvidia-caps/*`: the driver takes a dynamic one; this is a common value.
const CAPS_MAJOR: u32 = 234;
/// GPU instances per GPU and compute instances per GPU instance in `mig-minors`.
const GIS: u32 = 15;
const CIS: u32 = 8;

/// `/proc/driver/nvidia-caps/mig-minors` minor of GPU `gpu`'s GPU instance `gi`, and of its
/// compute instance `ci` (`Some`): the driver's layout, `config 1`, `monitor 2`, then per GPU
/// and GI the GI's access minor followed by its eight CIs'.
pub fn cap_minor(gpu: u32, gi: u32, ci: Option<u32>) -> u32 {
    let base = 3 + gpu * GIS * (CIS + 1) + gi * (CIS + 1);
    base + ci.map_or(0, |c| c + 1)
}

/// The text of `mig-minors` for GPU minors `0..gpus`.
pub fn mig_minors(gpus: u32) -> String {
    let mut s = String::from("config 1\nmonitor 2\n");
    for g in 0..gpus {
        for gi in 0..GIS {
            let _ = writeln!(s, "gpu{g}/gi{gi}/access {}", cap_minor(g, gi, None));
            for ci in 0..CIS {
                let _ = writeln!(
                    s,
                    "gpu{g}/gi{gi}/ci{ci}/access {}",
                    cap_minor(g, gi, Some(ci))
                );
            }
        }
    }
    s
}

/// A bus id as sysfs and procfs spell it: `0000:3b:00.0`.
pub fn sysfs_bus(bus_id: &str) -> String {
    let mut parts = bus_id.rsplitn(2, ':');
    let tail = parts.next().unwrap_or("");
    let head = parts.next().unwrap_or("");
    let (domain, bus) = head.split_once(':').unwrap_or(("0", head));
    let domain = u32::from_str_radix(domain, 16).unwrap_or(0);
    format!(
        "{domain:04x}:{}:{}",
        bus.to_ascii_lowercase(),
        tail.to_ascii_lowercase()
    )
}

/// Writes the tree for `node` under `dir` (see the module docs).
///
/// # Errors
/// The file that could not be written.
pub fn write(node: &FakeNode, dir: &Path) -> Result<(), String> {
    let put = |rel: &str, text: &str| -> Result<(), String> {
        let p = dir.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        std::fs::write(&p, text).map_err(|e| format!("{}: {e}", p.display()))
    };
    let mut devs = format!("nvidiactl {NVIDIA_MAJOR} 255\n");
    let max_minor = node.gpus.iter().map(|g| g.minor + 1).max().unwrap_or(0);
    // A lost GPU (fallen off the bus) stays registered with the driver: its /proc entry and
    // device file remain while NVML answers GPU_IS_LOST.
    for g in &node.gpus {
        let bus = sysfs_bus(&g.bus_id);
        let info = format!(
            "Model: \t\t {}\nIRQ:   \t\t 0\nGPU UUID: \t {}\nVideo BIOS: \t 00.00.00.00.00\nBus Type: \t PCIe\n\
             DMA Size: \t 47 bits\nDMA Mask: \t 0x7fffffffffff\nBus Location: \t {bus}\nDevice Minor: \t {}\n\
             GPU Excluded:\t No\n",
            g.name, g.uuid, g.minor
        );
        put(&format!("proc/nvidia/gpus/{bus}/information"), &info)?;
        // FAKE_NVML_CPUS=N: near the host's CPUs 0..N-1, as the fake's CPU affinity answers.
        let host = std::env::var("FAKE_NVML_CPUS")
            .ok()
            .and_then(|n| n.parse::<u32>().ok())
            .filter(|n| *n > 0);
        let cpus = match host {
            Some(n) => format!("0-{}", n - 1),
            None if g.cores.is_empty() => "0".to_string(),
            None => gputopo_core::cpulist::format_ranges(&gputopo_core::cpulist::to_ranges(
                g.cores.iter().copied(),
            )),
        };
        put(
            &format!("sys/nvidia/{bus}/local_cpulist"),
            &format!("{cpus}\n"),
        )?;
        let _ = writeln!(devs, "nvidia{m} {NVIDIA_MAJOR} {m}", m = g.minor);
        for m in g.migs.iter().filter(|_| g.mig.is_some_and(|x| x.current)) {
            for c in [
                cap_minor(g.minor, m.gi, None),
                cap_minor(g.minor, m.gi, Some(m.ci)),
            ] {
                let _ = writeln!(devs, "nvidia-caps/nvidia-cap{c} {CAPS_MAJOR} {c}");
            }
        }
    }
    put(
        "proc/nvidia/version",
        &format!(
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  {}\n",
            node.driver
        ),
    )?;
    put("proc/nvidia-caps/mig-minors", &mig_minors(max_minor))?;
    put("dev.list", &devs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_minors_follow_the_driver_layout() {
        assert_eq!(cap_minor(0, 0, None), 3);
        assert_eq!(cap_minor(0, 0, Some(0)), 4);
        assert_eq!(cap_minor(0, 1, None), 12);
        assert_eq!(cap_minor(1, 0, None), 3 + 135);
        let text = mig_minors(2);
        assert!(
            text.starts_with("config 1\nmonitor 2\ngpu0/gi0/access 3\ngpu0/gi0/ci0/access 4\n")
        );
        assert!(
            text.contains("\ngpu1/gi2/ci3/access 160\n"),
            "{}",
            cap_minor(1, 2, Some(3))
        );
    }

    #[test]
    fn bus_ids_in_sysfs_form() {
        assert_eq!(sysfs_bus("00000000:3B:00.0"), "0000:3b:00.0");
        assert_eq!(sysfs_bus("00000001:07:00.0"), "0001:07:00.0");
    }

    #[test]
    fn writes_a_tree_with_mig_devices() {
        let fx = "Node Name=t Gpus=2\nGpu Index=0 Name=\"NVIDIA A100-SXM4-40GB\" BusId=00000000:07:00.0 Cores=0-7 Mig=on\n\
                  Mig Gpu=0 Gi=1 Ci=0 Profile=3g.20gb\nGpu Index=1 Lost=yes\n";
        let node = crate::fixture::parse(fx).unwrap();
        let dir = std::env::temp_dir().join(format!("fake-nvml-tree-{}", std::process::id()));
        write(&node, &dir).unwrap();
        let info =
            std::fs::read_to_string(dir.join("proc/nvidia/gpus/0000:07:00.0/information")).unwrap();
        assert!(
            info.contains("Model: \t\t NVIDIA A100-SXM4-40GB\n")
                && info.contains("Device Minor: \t 0\n")
        );
        let cpus =
            std::fs::read_to_string(dir.join("sys/nvidia/0000:07:00.0/local_cpulist")).unwrap();
        assert_eq!(cpus, "0-7\n");
        let devs = std::fs::read_to_string(dir.join("dev.list")).unwrap();
        assert_eq!(
            devs,
            "nvidiactl 195 255\nnvidia0 195 0\nnvidia-caps/nvidia-cap12 234 12\nnvidia-caps/nvidia-cap13 234 13\nnvidia1 195 1\n"
        );
        assert!(
            dir.join("proc/nvidia/gpus/0000:11:00.0").exists(),
            "the driver keeps a lost GPU"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
