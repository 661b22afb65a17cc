//! The real engine as the steering rules' [`Placer`]: the `gputopo` policy chooses, and
//! [`engine::score`] (the set's communication quality) compares cons_tres's pick with it.
//!
//! Comparing on quality alone (not the engine's leftover lookahead) means cons_tres's pick
//! is replaced only when the job itself gets better connected GPUs.
//!
//! [`Prepared`] is the same engine for callers that already hold each node's interned tables
//! (slurmctld keeps them with its per-node model): a decision is then a table lookup, without
//! re-deriving the topology's key on every call. Node ranking ([`super::narrow`]) uses it
//! directly, since it needs the engine's full objective for [`crate::placement::RankKey`].

use std::collections::HashMap;

use crate::fast_hash::FastHash;

use super::Placer;
use crate::gpuset::GpuSet;
use crate::placement::engine::{self, Choice, Gputopo};
use crate::placement::objective::Score;
use crate::placement::{Policy, Request, TopoHandle};
use crate::topology::NodeTopology;

/// The engine with the tables of known topologies at hand, by topology identity (address).
///
/// Build one per decision round from topologies the caller keeps alive for the round, so an
/// address cannot be reused by another topology meanwhile; unknown topologies fall back to
/// the engine's own (interning) path, so a miss is only slower, never different.
#[derive(Debug)]
pub struct Prepared<'a> {
    engine: &'a Gputopo,
    /// Keyed by address, hashed with [`FastHash`]: the map is built and probed for every
    /// candidate node on every `select_p_job_test` call, where the default SipHash cost more
    /// than the engine's table lookup itself.
    tables: HashMap<usize, TopoHandle, FastHash>,
}

impl<'a> Prepared<'a> {
    /// The engine with `tables` (each topology with its handle from [`Gputopo::handle`]).
    pub fn new<'t>(
        engine: &'a Gputopo,
        tables: impl IntoIterator<Item = (&'t NodeTopology, TopoHandle)>,
    ) -> Self {
        Prepared {
            engine,
            tables: tables
                .into_iter()
                .map(|(t, h)| (std::ptr::from_ref(t) as usize, h))
                .collect(),
        }
    }

    /// The engine's choice and its objective (on the node's tables when known).
    pub fn choose_detailed(
        &self,
        topo: &NodeTopology,
        free: GpuSet,
        req: &Request,
    ) -> Option<Choice> {
        match self.tables.get(&(std::ptr::from_ref(topo) as usize)) {
            Some(h) => Gputopo::choose_on(h, free, req),
            None => self.engine.choose_detailed(topo, free, req),
        }
    }
}

impl Placer for Prepared<'_> {
    type Score = Score;

    fn choose(&self, topo: &NodeTopology, free: GpuSet, req: &Request) -> Option<GpuSet> {
        match self.tables.get(&(std::ptr::from_ref(topo) as usize)) {
            Some(h) => Gputopo::pick_on(h, free, req),
            None => Policy::choose(self.engine, topo, free, req),
        }
    }

    fn score(&self, topo: &NodeTopology, set: GpuSet) -> Score {
        engine::score(topo, set)
    }
}

impl Placer for Gputopo {
    type Score = Score;

    fn choose(&self, topo: &NodeTopology, free: GpuSet, req: &Request) -> Option<GpuSet> {
        Policy::choose(self, topo, free, req)
    }

    fn score(&self, topo: &NodeTopology, set: GpuSet) -> Score {
        engine::score(topo, set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::steer::HealthMasks;
    use crate::steer::oracle::{dgx1v, set};
    use crate::steer::repick::{Constraints, Decision, NodeInput, repick};

    #[test]
    fn engine_repicks_stock_pairs_on_dgx1v() {
        let t = dgx1v();
        let engine = Gputopo::new();
        let input = |stock: &[usize], free: &[usize]| NodeInput {
            topo: &t,
            stock: set(stock),
            constraints: Constraints {
                allocated: t.all().difference(set(free)),
                ..Constraints::none(&t)
            },
            health: HealthMasks::ALL_OK,
            near: GpuSet::EMPTY,
            whole_node: false,
        };
        // 24.11's idle pick {0,1} (NV1) is replaced by an NV2 pair.
        let d = repick(&engine, &input(&[0, 1], &[0, 1, 2, 3, 4, 5, 6, 7]));
        let Decision::Replace { set: s, .. } = d else {
            panic!("expected a replacement, got {d:?}")
        };
        assert_eq!(t.link(s.to_vec()[0], s.to_vec()[1]).nvlinks, 2);
        // Free {0,1,4}: {0,1} becomes {0,4}.
        let d = repick(&engine, &input(&[0, 1], &[0, 1, 4]));
        assert_eq!(d.final_set(set(&[0, 1])), Some(set(&[0, 4])));
        // The prepared engine answers the same, with and without the node's tables.
        let h = engine.handle(&t).expect("8 GPUs have tables");
        for prepared in [
            Prepared::new(&engine, [(&t, h)]),
            Prepared::new(&engine, []),
        ] {
            let d = repick(&prepared, &input(&[0, 1], &[0, 1, 4]));
            assert_eq!(d.final_set(set(&[0, 1])), Some(set(&[0, 4])));
        }
    }
}
