//! Rendering a [`NodeTopology`] as Slurm gres.conf lines.
//!
//! One line per GPU, in GRES index order, so that Slurm's index i is our GPU i:
//! `NodeName=n1 Name=gpu Type=v100 File=/dev/nvidia0 Cores=0-19 Links=-1,1,1,2,2,0,0,0`.
//! `Links=` carries the NVLink count to every other GPU (-1 for itself), with NVSwitch
//! semantics already applied, which Slurm's own NVML autodetection gets wrong (all zero).

use super::NodeTopology;
use std::fmt::Write;

/// Renders gres.conf lines for `topo`. `node` is the `NodeName=` value (a host list is fine,
/// or `None` to omit it); `file` gives the device path of GPU i (`/dev/nvidia{i}`).
pub fn render(topo: &NodeTopology, node: Option<&str>, file: impl Fn(usize) -> String) -> String {
    let n = topo.len();
    let mut s = String::new();
    for g in topo.gpus() {
        if let Some(node) = node {
            let _ = write!(s, "NodeName={node} ");
        }
        s.push_str("Name=gpu");
        if let Some(ty) = &topo.gpu_type {
            let _ = write!(s, " Type={ty}");
        }
        let _ = write!(s, " File={}", file(g.index));
        if !g.cores.is_empty() {
            let r = crate::cpulist::to_ranges(g.cores.iter().copied());
            let _ = write!(s, " Cores={}", crate::cpulist::format_ranges(&r));
        }
        let links: Vec<String> = (0..n)
            .map(|o| {
                if o == g.index {
                    "-1".to_string()
                } else {
                    topo.link(g.index, o).nvlinks.to_string()
                }
            })
            .collect();
        let _ = writeln!(s, " Links={}", links.join(","));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::fixture;

    #[test]
    fn renders_links_and_cores() {
        let t = fixture::parse("Node Name=x Type=a100 Gpus=2\nGpu Index=0 Cores=0-3 SwitchLinks=12\nGpu Index=1 Cores=4-7 SwitchLinks=12\n").unwrap();
        let out = render(&t, Some("n[1-2]"), |i| format!("/dev/nvidia{i}"));
        assert_eq!(
            out,
            "NodeName=n[1-2] Name=gpu Type=a100 File=/dev/nvidia0 Cores=0-3 Links=-1,12\n\
             NodeName=n[1-2] Name=gpu Type=a100 File=/dev/nvidia1 Cores=4-7 Links=12,-1\n"
        );
    }
}
