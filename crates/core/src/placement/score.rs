//! A GPU set's [`Score`] and the pair values it sums: the base of the objective
//! ([`super::objective`]) and of the leftover lookahead ([`super::lookahead`]), kept apart so
//! those two do not import each other.
//!
//! A pair's value is an estimate of its peer-to-peer bandwidth in GB/s per direction:
//! `25 × nvlinks` when the pair has NVLink (NVLink 2/3/4 per link per direction; NVSwitch
//! pairs carry `min(switch links)` links, see `NodeTopology::apply_nvswitch`), and otherwise
//! a representative PCIe Gen3 x16 peer-to-peer figure for the path level:
//!
//! | level | SB | PIX | PXB | PHB | NODE | SYS |
//! |---|---|---|---|---|---|---|
//! | GB/s | 14 | 12 | 11 | 9 | 7 | 5 |
//!
//! The PCIe path of an NVLink pair counts for nothing: NCCL sends that pair's peer traffic over
//! the NVLink and the PCIe path carries none. An earlier version added the PCIe term to NVLink
//! pairs and so, on a DGX-1V with {4,5,6,7} free, took the NV2 pair {6,7} behind one PCIe
//! switch and left the NV1 pair {4,5}, where {4,7} leaves the NV2 pair {5,6}: the PCIe term was
//! compared before the lookahead and decided a question the lookahead should. Every PCIe value
//! is below one NVLink (25), so any NVLink beats every PCIe path and `n` NVLinks beat `n − 1`.
//! NVLink counts above [`NVLINK_CAP`] are treated as the cap (no GPU has more than 18), which
//! keeps a 16-GPU aggregate below 2^16 for the packed tables.
//!
//! A single GPU has no pair: its bottleneck is "unbounded" ([`Score::SINGLE`]), so for `k = 1`
//! all GPUs tie on quality and the lookahead decides.

use crate::topology::{Link, PcieLevel};
use std::fmt;

/// Bandwidth of one NVLink, GB/s per direction.
pub const NVLINK_GBPS: u32 = 25;

/// NVLink counts above this are treated as this (no shipping GPU has more than 18).
pub const NVLINK_CAP: u8 = 20;

/// Representative peer-to-peer bandwidth of a PCIe path level, GB/s per direction.
pub const fn pcie_gbps(level: PcieLevel) -> u32 {
    match level {
        PcieLevel::SameBoard => 14,
        PcieLevel::Pix => 12,
        PcieLevel::Pxb => 11,
        PcieLevel::Phb => 9,
        PcieLevel::Node => 7,
        PcieLevel::Sys => 5,
    }
}

/// The value of one pair: estimated GB/s per direction (see the module docs).
pub fn pair_gbps(link: Link) -> u32 {
    match link.nvlinks.min(NVLINK_CAP) {
        0 => pcie_gbps(link.pcie),
        nv => u32::from(nv) * NVLINK_GBPS,
    }
}

/// Quality of a GPU set for collective communication: bottleneck first, then aggregate.
/// Ordered lexicographically; bigger is better.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Score {
    /// Minimum pair value over the set's pairs (GB/s); [`Score::SINGLE_BOTTLENECK`] for a
    /// set without pairs.
    pub bottleneck: u32,
    /// Sum of pair values over the set's pairs (GB/s).
    pub aggregate: u32,
}

impl Score {
    /// The bottleneck of a set without pairs (one GPU): unbounded.
    pub const SINGLE_BOTTLENECK: u32 = u32::MAX;
    /// The score of a one-GPU set.
    pub const SINGLE: Score = Score {
        bottleneck: Self::SINGLE_BOTTLENECK,
        aggregate: 0,
    };
    /// "No such set": below every real score (used when a leftover is too small).
    pub const NONE: Score = Score {
        bottleneck: 0,
        aggregate: 0,
    };

    /// The set's interconnect **class**, a bucketed bottleneck (bigger is better): the
    /// bottleneck's NVLink bandwidth (`25 × nvlinks`) when it has NVLink, its PCIe value when
    /// it has none, and `u32::MAX` for a set without pairs. Two NVLink sets whose bottlenecks
    /// differ only in the PCIe tie-break term (NV2 behind one switch, 62, against NV2 through
    /// the host bridge, 59) are in the same class; NV2 vs NV1 and PIX vs SYS are not. Node
    /// ranking compares classes before fit (see [`super::rank`]). Monotone in `bottleneck`.
    pub fn class(self) -> u32 {
        match self.bottleneck {
            Self::SINGLE_BOTTLENECK => u32::MAX,
            b if b >= NVLINK_GBPS => b / NVLINK_GBPS * NVLINK_GBPS,
            b => b,
        }
    }

    /// Packs into the 32-bit form the tables use (valid for nodes of up to 16 GPUs, where
    /// the bottleneck fits 16 bits and the aggregate stays below 2^16).
    pub(crate) fn to_packed(self) -> u32 {
        let b = if self.bottleneck == Self::SINGLE_BOTTLENECK {
            0xFFFF
        } else {
            self.bottleneck.min(0xFFFE)
        };
        (b << 16) | self.aggregate.min(0xFFFF)
    }

    /// The inverse of [`Score::to_packed`].
    pub(crate) fn from_packed(p: u32) -> Self {
        let b = p >> 16;
        Score {
            bottleneck: if b == 0xFFFF {
                Self::SINGLE_BOTTLENECK
            } else {
                b
            },
            aggregate: p & 0xFFFF,
        }
    }
}

impl fmt::Display for Score {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.bottleneck {
            Self::SINGLE_BOTTLENECK => write!(f, "bottleneck=- aggregate={}", self.aggregate),
            b => write!(f, "bottleneck={b} aggregate={}", self.aggregate),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_nvlink_beats_every_pcie_level_and_counts_dominate() {
        let best_pcie = pcie_gbps(PcieLevel::SameBoard);
        let worst_pcie = pcie_gbps(PcieLevel::Sys);
        for n in 1..=NVLINK_CAP {
            let lo = pair_gbps(Link {
                nvlinks: n,
                pcie: PcieLevel::Sys,
            });
            let hi_prev = pair_gbps(Link {
                nvlinks: n - 1,
                pcie: PcieLevel::SameBoard,
            });
            assert!(lo > hi_prev, "NV{n}");
        }
        assert!(best_pcie - worst_pcie < NVLINK_GBPS);
        let levels: Vec<u32> = PcieLevel::ALL.iter().map(|&l| pcie_gbps(l)).collect();
        assert!(levels.windows(2).all(|w| w[0] > w[1]));
    }

    #[test]
    fn class_buckets_nvlink_sets_by_link_count_and_pcie_sets_by_level() {
        let sc = |nvlinks, pcie| Score {
            bottleneck: pair_gbps(Link { nvlinks, pcie }),
            aggregate: 0,
        };
        assert_eq!(sc(2, PcieLevel::Pix).class(), sc(2, PcieLevel::Sys).class());
        assert!(sc(2, PcieLevel::Sys).class() > sc(1, PcieLevel::SameBoard).class());
        assert!(sc(1, PcieLevel::Sys).class() > sc(0, PcieLevel::SameBoard).class());
        assert!(sc(0, PcieLevel::Pix).class() > sc(0, PcieLevel::Pxb).class());
        assert_eq!(Score::SINGLE.class(), u32::MAX);
        assert_eq!(Score::NONE.class(), 0);
    }

    #[test]
    fn packing_preserves_order() {
        let xs = [
            Score::NONE,
            Score {
                bottleneck: 5,
                aggregate: 5,
            },
            Score {
                bottleneck: 5,
                aggregate: 60000,
            },
            Score {
                bottleneck: 514,
                aggregate: 1,
            },
            Score::SINGLE,
        ];
        for w in xs.windows(2) {
            assert!(w[0] < w[1]);
            assert!(w[0].to_packed() < w[1].to_packed());
            assert_eq!(Score::from_packed(w[1].to_packed()), w[1]);
        }
    }
}
