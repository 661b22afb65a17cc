//! `best-effort`: go-gpuallocator's partition-score policy, reimplemented from its algorithm.
//!
//! This is what NVIDIA's Kubernetes device plugin runs for `GetPreferredAllocation`, the
//! topology-aware state of the art outside Slurm, so the evaluation measures gputopo against it.
//!
//! Algorithm (go-gpuallocator `besteffort_policy.go`, documented in gpu-topology-and-nvml.md §1):
//! - pair score = 100 × NVLinks + a PCIe level score (SYS 10, NODE 20, PHB 30, PXB 40, PIX 50,
//!   same board 60); set score = sum of its pair scores; partition score = sum of set scores;
//! - the free GPUs, in index order, are padded with empty slots to a multiple of `k` and every
//!   partition into sets of `k` is enumerated (the first member of each set fixed, so each
//!   partition appears once); a set holds either no padding or all of it;
//! - only partitions with a padding-free set holding every `required` GPU count; the first
//!   partition with the highest score wins, then the first highest-scoring eligible set in it.
//!
//! Deviation: the Go code may return a set that contains padding (fewer than `k` GPUs) when a
//! padded set outscores every full one; a job needs `k` GPUs, so only padding-free sets are
//! eligible here. `k == 1` returns the first eligible free GPU, as the Go shortcut does.
//!
//! Cost: the number of partitions (n = 8: at most 280; n = 16, k = 3: 22 million), with no
//! pruning, exactly like the original. NVLinks are counted as the topology gives them; on
//! NVSwitch boards every pair has the same count, so the choice equals go-gpuallocator's
//! PCIe-only one there.

use gputopo_core::gpuset::GpuSet;
use gputopo_core::placement::{self, Policy, Request};
use gputopo_core::topology::{NodeTopology, PcieLevel};

/// The partition-score policy.
#[derive(Clone, Copy, Debug, Default)]
pub struct BestEffort;

/// go-gpuallocator's score of a PCIe/CPU path level.
pub const fn pcie_score(level: PcieLevel) -> u32 {
    match level {
        PcieLevel::Sys => 10,
        PcieLevel::Node => 20,
        PcieLevel::Phb => 30,
        PcieLevel::Pxb => 40,
        PcieLevel::Pix => 50,
        PcieLevel::SameBoard => 60,
    }
}

/// go-gpuallocator's pair score: 100 per NVLink plus the PCIe level score.
pub fn pair_score(topo: &NodeTopology, a: usize, b: usize) -> u32 {
    let l = topo.link(a, b);
    100 * u32::from(l.nvlinks) + pcie_score(l.pcie)
}

/// go-gpuallocator's set score: the sum of the pair scores.
pub fn set_score(topo: &NodeTopology, set: GpuSet) -> u32 {
    let v = set.to_vec();
    let mut s = 0;
    for (i, &a) in v.iter().enumerate() {
        for &b in &v[i + 1..] {
            s += pair_score(topo, a, b);
        }
    }
    s
}

impl Policy for BestEffort {
    type Score = placement::Score;

    /// The engine's quality: the evaluation compares every policy's sets on one scale.
    fn score(&self, topo: &NodeTopology, set: GpuSet) -> placement::Score {
        placement::score(topo, set)
    }

    fn name(&self) -> &'static str {
        "best-effort"
    }

    fn choose(&self, topo: &NodeTopology, free: GpuSet, req: &Request) -> Option<GpuSet> {
        let free = free.intersection(topo.all());
        let k = req.count;
        if k == 0 || free.len() < k || req.required.len() > k || !req.required.is_subset(free) {
            return None;
        }
        if k == 1 {
            return free
                .iter()
                .find(|&g| req.required.is_subset(GpuSet::EMPTY.with(g)))
                .map(|g| GpuSet::EMPTY.with(g));
        }
        let mut devs: Vec<Option<u8>> = free.iter().map(|g| Some(g as u8)).collect();
        while devs.len() % k != 0 {
            devs.push(None);
        }
        let mut s = Search {
            topo,
            k,
            padding: devs.len() - free.len(),
            required: req.required,
            accum: Vec::new(),
            best: None,
        };
        s.partitions(&devs, 0);
        let (_, best) = s.best?;
        best.iter()
            .filter(|p| !p.padded && req.required.is_subset(p.set))
            .fold(None::<&Part>, |acc, p| match acc {
                Some(a) if a.score >= p.score => Some(a),
                _ => Some(p),
            })
            .map(|p| p.set)
    }
}

/// One set of a partition.
#[derive(Clone, Copy, Debug)]
struct Part {
    set: GpuSet,
    padded: bool,
    score: u32,
}

/// The exhaustive partition walk.
struct Search<'t> {
    topo: &'t NodeTopology,
    k: usize,
    padding: usize,
    required: GpuSet,
    accum: Vec<Part>,
    best: Option<(u32, Vec<Part>)>,
}

impl Search<'_> {
    fn part(&self, members: &[Option<u8>]) -> Part {
        let set: GpuSet = members.iter().flatten().map(|&g| g as usize).collect();
        Part {
            set,
            padded: set.len() < members.len(),
            score: set_score(self.topo, set),
        }
    }

    /// `iterateGPUPartitions`' inner `iterate`: `devs` is what is left to split.
    fn partitions(&mut self, devs: &[Option<u8>], score: u32) {
        if devs.len() == self.k {
            let p = self.part(devs);
            self.accum.push(p);
            self.leaf(score + p.score);
            self.accum.pop();
            return;
        }
        let mut chosen = vec![0usize; self.k - 1];
        self.sets(devs, 1, 0, &mut chosen, score);
    }

    /// `iterateGPUSets(devs[1:], k-1)` in lexicographic order, `devs[0]` added to each.
    fn sets(
        &mut self,
        devs: &[Option<u8>],
        start: usize,
        depth: usize,
        chosen: &mut Vec<usize>,
        score: u32,
    ) {
        if depth == self.k - 1 {
            let mut members = Vec::with_capacity(self.k);
            members.push(devs[0]);
            members.extend(chosen.iter().map(|&i| devs[i]));
            let pad = members.iter().filter(|m| m.is_none()).count();
            if pad != 0 && pad != self.padding {
                return;
            }
            let p = self.part(&members);
            let rest: Vec<Option<u8>> = devs
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != 0 && !chosen.contains(i))
                .map(|(_, d)| *d)
                .collect();
            self.accum.push(p);
            self.partitions(&rest, score + p.score);
            self.accum.pop();
            return;
        }
        for i in start..devs.len() {
            chosen[depth] = i;
            self.sets(devs, i + 1, depth + 1, chosen, score);
        }
    }

    fn leaf(&mut self, score: u32) {
        let ok = self
            .accum
            .iter()
            .any(|p| !p.padded && self.required.is_subset(p.set));
        if !ok {
            return;
        }
        if self.best.as_ref().is_none_or(|(b, _)| score > *b) {
            self.best = Some((score, self.accum.clone()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topo(name: &str) -> NodeTopology {
        match name {
            "dgx1v" => gputopo_core::fixtures::dgx1v(),
            _ => gputopo_core::fixtures::dgx1p(),
        }
    }

    fn set(s: &str) -> GpuSet {
        GpuSet::parse_list(s).unwrap()
    }

    fn alloc(t: &NodeTopology, avail: &str, required: &str, k: usize) -> Option<GpuSet> {
        let req = Request {
            count: k,
            required: set(required),
            near: GpuSet::EMPTY,
        };
        BestEffort.choose(t, set(avail), &req)
    }

    /// go-gpuallocator `TestBestEffortAllocate` (DGX-1 Volta).
    #[test]
    fn go_gpuallocator_policy_cases() {
        let t = topo("dgx1v");
        let cases: &[(&str, &str, usize, Option<&str>)] = &[
            ("0,2,4,5", "", 2, Some("4,5")),
            ("0,4,5,6", "", 2, Some("5,6")),
            ("0,3,1", "", 2, Some("0,3")),
            ("0,1,4", "", 2, Some("0,4")),
            ("0-7", "4", 1, Some("4")),
            ("0-7", "4", 2, Some("4,7")),
            ("0-7", "4", 4, Some("4-7")),
            ("1-7", "0-3", 4, None),
            ("0-7", "0,2,4,6", 4, Some("0,2,4,6")),
            ("0-7", "1-6", 4, None),
            ("1-5", "1-6", 1, None),
        ];
        for &(avail, req, k, want) in cases {
            assert_eq!(
                alloc(&t, avail, req, k),
                want.map(set),
                "{avail} req {req} k={k}"
            );
        }
    }

    /// go-gpuallocator's allocator sequences: each pick leaves the pool.
    #[test]
    fn go_gpuallocator_sequences() {
        let seqs: &[(&str, usize, &[&str])] = &[
            ("dgx1v", 1, &["0", "1", "2", "3", "4", "5", "6", "7"]),
            ("dgx1v", 2, &["0,3", "1,2", "4,7", "5,6"]),
            ("dgx1v", 4, &["0-3", "4-7"]),
            ("dgx1v", 8, &["0-7"]),
            ("dgx1p", 2, &["0,2", "1,3", "4,6", "5,7"]),
            ("dgx1p", 4, &["0-3", "4-7"]),
        ];
        for &(name, k, want) in seqs {
            let t = topo(name);
            let mut free = t.all();
            for w in want {
                let got = alloc(&t, &free.to_string(), "", k);
                assert_eq!(got, Some(set(w)), "{name} k={k}");
                free = free.difference(set(w));
            }
            assert_eq!(
                alloc(&t, &free.to_string(), "", 1),
                None,
                "{name} k={k} exhausted"
            );
        }
    }

    /// `New4xRTX8000Node` and the 14-GPU "best set is in the last slot" case.
    #[test]
    fn go_gpuallocator_small_fixtures() {
        let gpus = (0..4)
            .map(|i| gputopo_core::topology::Gpu {
                index: i,
                socket: Some((i / 2) as u32),
                ..Default::default()
            })
            .collect();
        let mut rtx = NodeTopology::new("rtx8000", gpus, PcieLevel::Node).unwrap();
        rtx.set_nvlinks(0, 3, 2).unwrap();
        rtx.set_nvlinks(1, 2, 2).unwrap();
        assert_eq!(alloc(&rtx, "0-3", "", 2), Some(set("0,3")));
        assert_eq!(alloc(&rtx, "1-2", "", 2), Some(set("1,2")));
        assert_eq!(alloc(&rtx, "0-3", "", 4), Some(set("0-3")));

        let mut t = NodeTopology::uniform("t14", 14, PcieLevel::Sys).unwrap();
        for i in (0..12).step_by(2) {
            t.set_nvlinks(i, i + 1, 2).unwrap();
        }
        t.set_nvlinks(12, 13, 4).unwrap();
        assert_eq!(alloc(&t, "0-13", "", 2), Some(set("12,13")));
    }

    #[test]
    fn scores_match_the_go_table() {
        let t = topo("dgx1v");
        assert_eq!(pair_score(&t, 0, 3), 230); // PHB + NV2
        assert_eq!(pair_score(&t, 0, 1), 150); // PIX + NV1
        assert_eq!(pair_score(&t, 0, 5), 10); // SYS
        assert_eq!(set_score(&t, set("0,1,3")), 150 + 230 + 130);
    }
}
