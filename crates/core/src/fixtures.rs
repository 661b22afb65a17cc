//! Named topology fixtures for tests and benches (behind `cfg(any(test, feature = "fixtures"))`).
//!
//! Each fixture is a file under `contrib/topologies/` in the project's fixture format, compiled
//! in with `include_str!` so tests, benches, the simulator and the local-cluster harness all
//! read the same data. Sources and caveats are in each file's header comment and in
//! `gpu-topology-and-nvml.md` §4.

use crate::topology::{NodeTopology, fixture};

macro_rules! fixtures {
    ($($(#[$doc:meta])* $name:ident => $file:literal,)*) => {
        $(
            $(#[$doc])*
            pub fn $name() -> NodeTopology {
                fixture::parse(include_str!(concat!("../../../contrib/topologies/", $file)))
                    .expect(concat!("invariant: contrib/topologies/", $file, " parses (tested)"))
            }
        )*

        /// Every fixture by name (the file's base name), in a fixed order.
        pub fn all() -> Vec<(&'static str, NodeTopology)> {
            vec![$((stringify!($name), $name()),)*]
        }
    };
}

fixtures! {
    /// DGX-1 with P100: all NV1, quads {0-3},{4-7} fully connected plus i↔i+4.
    dgx1p => "dgx1p.topo",
    /// DGX-1 with V100: the NV1/NV2 hybrid cube mesh.
    dgx1v => "dgx1v.topo",
    /// DGX-2: 16 V100 through NVSwitch, NV6 between all pairs.
    dgx2 => "dgx2.topo",
    /// DGX A100: 8 A100 through NVSwitch, NV12 between all pairs.
    dgx_a100 => "dgx-a100.topo",
    /// HGX H100 8-GPU: NV18 between all pairs through NVSwitch.
    hgx_h100 => "hgx-h100.topo",
    /// 4× RTX 8000 with NV2 bridges on 0-3 and 1-2.
    rtx8000x4 => "rtx8000x4.topo",
    /// 4× A100 PCIe with NV12 bridges on 0-1 and 2-3, SYS across.
    a100_pcie4 => "a100-pcie4.topo",
    /// Dual-socket PCIe-only 8-GPU server (PIX pairs, NODE within a socket, SYS across).
    pcie8 => "pcie8.topo",
    /// HGX B200 8-GPU: NV18 (NVLink 5) between all pairs through NVSwitch.
    hgx_b200 => "hgx-b200.topo",
    /// GB200 NVL72 compute tray: 4 GPUs, NV18 between all pairs through the NVLink Switch.
    gb200_nvl72_tray => "gb200-nvl72-tray.topo",
    /// 8× L40S PCIe: no NVLink, PIX within a socket's switch, SYS across.
    l40s_pcie8 => "l40s-pcie8.topo",
}

/// The NVLink count of every pair, row by row (0 on the diagonal): compares topologies read
/// from different formats.
pub fn nvlink_matrix(t: &NodeTopology) -> Vec<Vec<u8>> {
    (0..t.len())
        .map(|a| {
            (0..t.len())
                .map(|b| if a == b { 0 } else { t.link(a, b).nvlinks })
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::PcieLevel;

    #[test]
    fn fixtures_have_the_documented_links() {
        assert_eq!(all().len(), 11);
        for t in [hgx_b200(), gb200_nvl72_tray()] {
            let n = t.len();
            assert!((0..n).all(|a| (0..n).all(|b| a == b || t.link(a, b).nvlinks == 18)));
        }
        assert_eq!(gb200_nvl72_tray().len(), 4);
        let l = l40s_pcie8();
        assert_eq!(l.max_nvlinks(), 0);
        assert_eq!(l.link(0, 3).pcie, PcieLevel::Pix);
        assert_eq!(l.link(3, 4).pcie, PcieLevel::Sys);
        let d2 = dgx2();
        assert_eq!(d2.len(), 16);
        assert!((0..16).all(|a| (0..16).all(|b| a == b || d2.link(a, b).nvlinks == 6)));
        assert_eq!(d2.link(0, 1).pcie, PcieLevel::Pix);
        assert_eq!(d2.link(0, 3).pcie, PcieLevel::Pxb);
        assert_eq!(d2.link(0, 7).pcie, PcieLevel::Node);
        assert_eq!(d2.link(0, 8).pcie, PcieLevel::Sys);
        let a = dgx_a100();
        assert!((0..8).all(|x| (0..8).all(|y| x == y || a.link(x, y).nvlinks == 12)));
        assert_eq!(hgx_h100().link(3, 4).nvlinks, 18);
        let nv = |t: &NodeTopology, pairs: &[(usize, usize)]| -> Vec<u8> {
            pairs.iter().map(|&(a, b)| t.link(a, b).nvlinks).collect()
        };
        let r = rtx8000x4();
        assert_eq!(nv(&r, &[(0, 3), (1, 2), (0, 1)]), [2, 2, 0]);
        assert_eq!(r.link(0, 1).pcie, PcieLevel::Node);
        assert_eq!(r.link(0, 2).pcie, PcieLevel::Sys);
        let p = a100_pcie4();
        assert_eq!(nv(&p, &[(0, 1), (2, 3), (1, 2)]), [12, 12, 0]);
        assert_eq!(p.link(1, 2).pcie, PcieLevel::Sys);
        assert_eq!(pcie8().max_nvlinks(), 0);
        assert_eq!(dgx1p().link(0, 4).nvlinks, 1);
        assert_eq!(dgx1v().link(0, 4).nvlinks, 2);
    }
}
