//! The decision memo of nodes too big for whole-decision tiers (9-16 GPUs).
//!
//! slurmctld asks the same few questions over and over (idle nodes, socket-sized `near`), so
//! a branch and bound's answer is remembered per (k, free, near, required). A warm decision is
//! then one hash lookup, and that lookup is most of its cost: the key is packed into one `u64`
//! (four 16-bit fields, exact for ≤ 16 GPUs) and hashed with the core's cheap hasher
//! ([`FastHash`]) instead of the standard library's SipHash (no untrusted input chooses these
//! keys: they are GPU masks).

use std::collections::HashMap;
use std::sync::Mutex;

use crate::fast_hash::FastHash;

/// Most memoised decisions kept per topology.
pub const MEMO_CAP: usize = 1 << 18;

/// A memoised decision: chosen mask and objective head (packed quality, lookahead rank).
pub(crate) type Memoised = (u32, [u32; 2]);

/// Memoised decisions of one topology, bounded by [`MEMO_CAP`] (about 8 MiB).
#[derive(Default)]
pub(crate) struct Memo {
    map: Mutex<HashMap<u64, Memoised, FastHash>>,
}

/// The packed key: k, free, near, required (masks of a ≤ 16-GPU node).
fn key(k: usize, free: u32, near: u32, required: u32) -> u64 {
    (k as u64) << 48
        | u64::from(free & 0xFFFF) << 32
        | u64::from(near & 0xFFFF) << 16
        | u64::from(required & 0xFFFF)
}

impl Memo {
    /// Looks up a memoised decision.
    pub(crate) fn get(&self, k: usize, free: u32, near: u32, required: u32) -> Option<Memoised> {
        let m = self.map.lock().ok()?;
        m.get(&key(k, free, near, required)).copied()
    }

    /// Remembers a decision; starts over when [`MEMO_CAP`] entries are held, so memory stays
    /// bounded whatever the workload.
    pub(crate) fn put(&self, k: usize, free: u32, near: u32, required: u32, v: Memoised) {
        if let Ok(mut m) = self.map.lock() {
            if m.len() >= MEMO_CAP {
                m.clear();
            }
            m.insert(key(k, free, near, required), v);
        }
    }

    /// Heap bytes the memo holds: its table's capacity times an entry and its control byte.
    pub(crate) fn bytes(&self) -> usize {
        let entry = std::mem::size_of::<(u64, Memoised)>() + 1;
        self.map.lock().map_or(0, |m| m.capacity() * entry)
    }

    /// Forgets every decision, keeping the table's capacity for the next ones.
    pub(crate) fn clear(&self) {
        if let Ok(mut m) = self.map.lock() {
            m.clear();
        }
    }

    /// Forgets every decision and frees the table (the table cache's byte bound).
    pub(crate) fn release(&self) {
        if let Ok(mut m) = self.map.lock() {
            *m = HashMap::default();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_distinct_per_field_and_the_memo_round_trips() {
        let keys = [
            key(2, 0xFFFF, 0, 0),
            key(3, 0xFFFF, 0, 0),
            key(2, 0xFFFE, 0, 0),
            key(2, 0xFFFF, 1, 0),
            key(2, 0xFFFF, 0, 1),
        ];
        for (i, a) in keys.iter().enumerate() {
            assert!(keys[i + 1..].iter().all(|b| a != b));
        }
        let m = Memo::default();
        assert_eq!(m.get(2, 0xFF, 0, 0), None);
        m.put(2, 0xFF, 0, 0, (3, [7, 9]));
        assert_eq!(m.get(2, 0xFF, 0, 0), Some((3, [7, 9])));
        assert_eq!(m.get(2, 0xFF, 1, 0), None);
        m.clear();
        assert_eq!(m.get(2, 0xFF, 0, 0), None);
    }
}
