//! The core's one cheap hasher, for maps keyed by small integers that no untrusted input
//! chooses (addresses and GPU bitmasks): the per-call maps and memos of node steering
//! ([`crate::placement::Prepared`], [`crate::steer::key_memo`]) and the engine's decision memo
//! (`placement::memo`). They are probed for every candidate node on every
//! `select_p_job_test` call, where std's SipHash (built to resist crafted keys) cost more
//! than the work they save.

use std::hash::{BuildHasherDefault, Hasher};

/// `BuildHasher` for `HashMap`s keyed by addresses or GPU masks.
pub type FastHash = BuildHasherDefault<SplitMix>;

/// Each written word is mixed into the state with the splitmix64 finalizer, so every key bit
/// reaches the bits hashbrown uses (its top bits for tags, its low bits for buckets).
#[derive(Debug, Default, Clone, Copy)]
pub struct SplitMix(u64);

impl Hasher for SplitMix {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        let z = (self.0.rotate_left(5) ^ n).wrapping_add(0x9E37_79B9_7F4A_7C15);
        let z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        let z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        self.0 = z ^ (z >> 31);
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn aligned_addresses_spread_over_buckets() {
        let h = FastHash::default();
        // 64 addresses 64 bytes apart: their low 6 bits are equal, their hashes' are not.
        let low: std::collections::HashSet<u64> = (0..64usize)
            .map(|i| h.hash_one(0x7f00_0000_1000 + 64 * i) & 63)
            .collect();
        assert!(low.len() > 32, "only {} distinct low bits", low.len());
        assert_ne!(h.hash_one((1u32, 2u32)), h.hash_one((2u32, 1u32)));
    }
}
