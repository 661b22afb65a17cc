//! `first-fit`: the required GPUs plus the lowest free indices.
//!
//! The simplest baseline, and what go-gpuallocator's `simple` policy and Slurm's
//! `--gpus-per-task` path do. It ignores the interconnect entirely, so it sets the floor the
//! topology-aware policies are measured against.

use gputopo_core::gpuset::GpuSet;
use gputopo_core::placement::{self, Policy, Request};
use gputopo_core::topology::NodeTopology;

/// The lowest-indices policy.
#[derive(Clone, Copy, Debug, Default)]
pub struct FirstFit;

impl Policy for FirstFit {
    type Score = placement::Score;

    /// The engine's quality: the evaluation compares every policy's sets on one scale.
    fn score(&self, topo: &NodeTopology, set: GpuSet) -> placement::Score {
        placement::score(topo, set)
    }

    fn name(&self) -> &'static str {
        "first-fit"
    }

    fn choose(&self, topo: &NodeTopology, free: GpuSet, req: &Request) -> Option<GpuSet> {
        let free = free.intersection(topo.all());
        if req.count > free.len() || !req.required.is_subset(free) || req.required.len() > req.count
        {
            return None;
        }
        let mut set = req.required;
        for g in free.difference(req.required).iter() {
            if set.len() >= req.count {
                break;
            }
            set.insert(g);
        }
        Some(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gputopo_core::topology::PcieLevel;

    #[test]
    fn takes_required_then_lowest_free() {
        let t = NodeTopology::uniform("u", 8, PcieLevel::Phb).unwrap();
        let free = GpuSet::parse_list("1,3-7").unwrap();
        let req = |count, required: &str| Request {
            count,
            required: GpuSet::parse_list(required).unwrap(),
            near: GpuSet::EMPTY,
        };
        assert_eq!(
            FirstFit.choose(&t, free, &req(3, "")),
            GpuSet::parse_list("1,3-4").ok()
        );
        assert_eq!(
            FirstFit.choose(&t, free, &req(2, "6")),
            GpuSet::parse_list("1,6").ok()
        );
        assert_eq!(FirstFit.choose(&t, free, &req(7, "")), None);
        assert_eq!(FirstFit.choose(&t, free, &req(1, "0")), None);
        assert_eq!(FirstFit.choose(&t, free, &req(1, "5-6")), None);
    }
}
