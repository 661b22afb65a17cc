//! Interning of [`TopoTables`]: identical nodes share one set of tables, bounded in count and
//! in bytes.
//!
//! # Why a byte bound
//! The tables of an 8-GPU board take a few KiB, those of a 16-GPU board up to about 11 MiB
//! once every request and leftover size has been seen, plus up to 8 MiB of memoised
//! decisions. A count bound alone let the cache hold 32 such boards (~350 MiB in slurmctld);
//! [`TABLE_CACHE_BYTES`] bounds what it keeps for later instead.

use super::tables::{TopoHandle, TopoKey, TopoTables};
use crate::topology::NodeTopology;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Most distinct topologies a [`TableCache`] holds. A cluster has a handful of board types,
/// but the agent's published links (an NVLink going down) make new ones: past this many,
/// tables no node model holds any more are dropped (and, should every one still be held, the
/// cache starts over; holders keep theirs).
pub const TABLE_CACHE_CAP: usize = 32;

/// Most heap bytes ([`TopoTables::bytes`]) of the tables a [`TableCache`] keeps, checked each
/// time it adds a topology: over it, tables no caller holds are dropped, least recently used
/// first, then the memoised decisions of held ones (rebuilt on demand). Tables callers hold
/// are never freed by the cache, so the total can stay above the cap by what is in use.
pub const TABLE_CACHE_BYTES: usize = 64 << 20;

/// One interned topology and when it was last asked for.
#[derive(Debug)]
struct Entry {
    tables: TopoHandle,
    used: u64,
}

#[derive(Default, Debug)]
struct Inner {
    map: HashMap<TopoKey, Entry>,
    /// Counts lookups: the `used` clock.
    tick: u64,
}

/// Interns [`TopoTables`] by [`TopoKey`], so identical nodes share one set of tables; bounded
/// by [`TABLE_CACHE_CAP`] topologies and [`TABLE_CACHE_BYTES`].
#[derive(Debug)]
pub struct TableCache {
    inner: Mutex<Inner>,
    cap_bytes: usize,
}

impl Default for TableCache {
    fn default() -> Self {
        Self::with_byte_cap(TABLE_CACHE_BYTES)
    }
}

impl TableCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty cache keeping at most `cap_bytes` of tables (see [`TABLE_CACHE_BYTES`]).
    pub fn with_byte_cap(cap_bytes: usize) -> Self {
        TableCache {
            inner: Mutex::default(),
            cap_bytes,
        }
    }

    /// The shared tables of `topo` (built on first sight of its key), or `None` above
    /// [`MAX_EXACT_GPUS`](super::tables::MAX_EXACT_GPUS) GPUs.
    pub fn handle(&self, topo: &NodeTopology) -> Option<TopoHandle> {
        let key = TopoKey::of(topo)?;
        if let Ok(mut g) = self.inner.lock() {
            g.tick += 1;
            let tick = g.tick;
            if let Some(e) = g.map.get_mut(&key) {
                e.used = tick;
                return Some(Arc::clone(&e.tables));
            }
        }
        // Build outside the lock: a 16-GPU build takes milliseconds.
        let built = Arc::new(TopoTables::from_key(&key));
        let Ok(mut g) = self.inner.lock() else {
            return Some(built);
        };
        let used = g.tick;
        let tables = Arc::clone(
            &g.map
                .entry(key)
                .or_insert(Entry {
                    tables: built,
                    used,
                })
                .tables,
        );
        trim(&mut g, self.cap_bytes);
        Some(tables)
    }

    /// Number of distinct topologies held.
    pub fn len(&self) -> usize {
        self.inner.lock().map(|g| g.map.len()).unwrap_or(0)
    }

    /// True when no topology has been interned yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Heap bytes of the tables held ([`TopoTables::bytes`] summed).
    pub fn bytes(&self) -> usize {
        self.inner.lock().map_or(0, |g| total(&g))
    }
}

fn total(g: &Inner) -> usize {
    g.map.values().map(|e| e.tables.bytes()).sum()
}

/// Brings the cache within its bounds after an insertion (see [`TABLE_CACHE_BYTES`]); the
/// caller holds what it was just handed, so that entry counts as in use.
fn trim(g: &mut Inner, cap_bytes: usize) {
    let mut bytes = total(g);
    if bytes <= cap_bytes && g.map.len() <= TABLE_CACHE_CAP {
        return;
    }
    let mut by_age: Vec<(u64, TopoKey)> = g.map.iter().map(|(k, e)| (e.used, k.clone())).collect();
    by_age.sort_unstable_by_key(|(used, _)| *used);
    // Only the cache holds these: no node model uses them any more.
    for (_, key) in &by_age {
        if bytes <= cap_bytes && g.map.len() <= TABLE_CACHE_CAP {
            return;
        }
        if let Some(e) = g.map.get(key).filter(|e| Arc::strong_count(&e.tables) == 1) {
            bytes = bytes.saturating_sub(e.tables.bytes());
            g.map.remove(key);
        }
    }
    // Every remaining table is in use: free the memos, oldest first.
    for (_, key) in &by_age {
        if bytes <= cap_bytes {
            break;
        }
        if let Some(e) = g.map.get(key) {
            let before = e.tables.bytes();
            e.tables.release_memo();
            bytes = bytes.saturating_sub(before.saturating_sub(e.tables.bytes()));
        }
    }
    if g.map.len() > TABLE_CACHE_CAP {
        g.map.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpuset::GpuSet;
    use crate::placement::Request;
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
            cache.handle(&distinct(n)).unwrap();
            assert!(cache.len() <= TABLE_CACHE_CAP, "{} entries", cache.len());
        }
        let again = cache.handle(&dgx1v()).unwrap();
        assert!(Arc::ptr_eq(&held, &again), "tables in use are kept");
    }

    /// A distinct 4-GPU topology per `n` (PCIe levels from n's digits).
    fn distinct(n: usize) -> NodeTopology {
        let mut t = NodeTopology::uniform("u", 4, PcieLevel::Sys).unwrap();
        let levels = [
            PcieLevel::Pix,
            PcieLevel::Pxb,
            PcieLevel::Phb,
            PcieLevel::Node,
        ];
        let mut x = n;
        for (a, b) in [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3)] {
            t.set_pcie(a, b, levels[x % 4]).unwrap();
            x /= 4;
        }
        t
    }

    /// Past the byte cap the cache drops the least recently used tables nobody holds; tables
    /// in use stay, shared, even when they alone exceed the cap; the memo of held tables is
    /// freed when nothing else is left to drop.
    #[test]
    fn the_cache_is_bounded_in_bytes_least_recently_used_first() {
        let one = TopoTables::new(&distinct(0)).unwrap().bytes();
        let cache = TableCache::with_byte_cap(3 * one + one / 2);
        for n in 0..3 {
            cache.handle(&distinct(n)).unwrap();
        }
        assert_eq!(cache.len(), 3);
        // Topology 0 is asked for again: 1 is now the least recently used.
        let first = cache.handle(&distinct(0)).unwrap();
        drop(first);
        cache.handle(&distinct(3)).unwrap();
        assert_eq!(cache.len(), 3);
        assert!(
            cache.bytes() <= 3 * one + one / 2,
            "{} bytes",
            cache.bytes()
        );
        let again = cache.handle(&distinct(1)).unwrap();
        assert_eq!(Arc::strong_count(&again), 2, "1 was dropped and rebuilt");
        // Tables in use are never dropped, even past the cap.
        let held: Vec<TopoHandle> = (10..16)
            .map(|n| cache.handle(&distinct(n)).unwrap())
            .collect();
        assert!(cache.bytes() > 3 * one + one / 2);
        for (h, n) in held.iter().zip(10..) {
            assert!(
                Arc::ptr_eq(h, &cache.handle(&distinct(n)).unwrap()),
                "{n} stays shared"
            );
        }
        // A held 10-GPU node's memo is freed once nothing unheld is left to drop.
        let big = NodeTopology::uniform("big", 10, PcieLevel::Pix).unwrap();
        let cache = TableCache::with_byte_cap(0);
        let h = cache.handle(&big).unwrap();
        for k in 1..=9 {
            crate::placement::Gputopo::pick_on(&h, GpuSet::first_n(10), &Request::new(k));
        }
        let warm = h.bytes();
        cache.handle(&distinct(0)).unwrap();
        assert!(
            h.bytes() < warm,
            "memo freed: {} of {warm} bytes",
            h.bytes()
        );
        assert!(Arc::ptr_eq(&h, &cache.handle(&big).unwrap()));
    }
}
