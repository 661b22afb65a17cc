//! Interning of [`TopoTables`]: identical nodes share one set of tables, bounded in count.

use super::tables::{TopoHandle, TopoKey, TopoTables};
use crate::topology::NodeTopology;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Most distinct topologies a [`TableCache`] holds. A cluster has a handful of board types,
/// but the agent's published links (an NVLink going down) make new ones, and the tables of a
/// 16-GPU board take megabytes: past this many, tables no node model holds any more are
/// dropped (and, should every one still be held, the cache starts over; holders keep theirs).
pub const TABLE_CACHE_CAP: usize = 32;

/// Interns [`TopoTables`] by [`TopoKey`], so identical nodes share one set of tables; bounded
/// by [`TABLE_CACHE_CAP`].
#[derive(Default, Debug)]
pub struct TableCache {
    map: Mutex<HashMap<TopoKey, TopoHandle>>,
}

impl TableCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// The shared tables of `topo` (built on first sight of its key), or `None` above
    /// [`MAX_EXACT_GPUS`](super::tables::MAX_EXACT_GPUS) GPUs.
    pub fn handle(&self, topo: &NodeTopology) -> Option<TopoHandle> {
        let key = TopoKey::of(topo)?;
        if let Ok(m) = self.map.lock() {
            if let Some(h) = m.get(&key) {
                return Some(Arc::clone(h));
            }
        }
        // Build outside the lock: a 16-GPU build takes milliseconds.
        let built = Arc::new(TopoTables::from_key(&key));
        match self.map.lock() {
            Ok(mut m) => {
                if m.len() >= TABLE_CACHE_CAP && !m.contains_key(&key) {
                    // Only the cache holds these: no node model uses them any more.
                    m.retain(|_, h| Arc::strong_count(h) > 1);
                    if m.len() >= TABLE_CACHE_CAP {
                        m.clear();
                    }
                }
                Some(Arc::clone(m.entry(key).or_insert(built)))
            }
            Err(_) => Some(built),
        }
    }

    /// Number of distinct topologies held.
    pub fn len(&self) -> usize {
        self.map.lock().map(|m| m.len()).unwrap_or(0)
    }

    /// True when no topology has been interned yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{PcieLevel, fixture};

    fn dgx1v() -> NodeTopology {
        fixture::parse(include_str!("../../../../contrib/topologies/dgx1v.topo")).unwrap()
    }

    #[test]
    fn identical_topologies_share_tables() {
        let cache = TableCache::new();
        let a = dgx1v();
        let mut b = dgx1v();
        b.name = "other".into();
        let ha = cache.handle(&a).unwrap();
        let hb = cache.handle(&b).unwrap();
        assert!(Arc::ptr_eq(&ha, &hb));
        let c = NodeTopology::uniform("u", 8, PcieLevel::Pix).unwrap();
        cache.handle(&c).unwrap();
        assert_eq!(cache.len(), 2);
        let big = NodeTopology::uniform("big", 17, PcieLevel::Pix).unwrap();
        assert!(cache.handle(&big).is_none());
    }

    /// Many distinct topologies (links changing one by one) never grow the cache past its
    /// cap; tables still held by a caller survive eviction and stay shared.
    #[test]
    fn the_cache_is_bounded_and_keeps_tables_in_use() {
        let cache = TableCache::new();
        let held = cache.handle(&dgx1v()).unwrap();
        for n in 0..(3 * TABLE_CACHE_CAP) {
            // A distinct 4-GPU topology per n: PCIe levels from n's digits.
            let mut t = NodeTopology::uniform("u", 4, PcieLevel::Sys).unwrap();
            let levels = [
                PcieLevel::Pix,
                PcieLevel::Pxb,
                PcieLevel::Phb,
                PcieLevel::Node,
            ];
            let mut x = n;
            for (a, b) in [(0, 1), (0, 2), (0, 3), (1, 2)] {
                t.set_pcie(a, b, levels[x % 4]).unwrap();
                x /= 4;
            }
            cache.handle(&t).unwrap();
            assert!(cache.len() <= TABLE_CACHE_CAP, "{} entries", cache.len());
        }
        let again = cache.handle(&dgx1v()).unwrap();
        assert!(Arc::ptr_eq(&held, &again), "tables in use are kept");
    }
}
