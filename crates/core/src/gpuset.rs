//! [`GpuSet`]: a set of GPU indices on one node, as a bitmask.
//!
//! Indices are Slurm's GRES indices (the order of `File=` paths in gres.conf), never NVML's
//! enumeration order; the agent maps between the two through the device minor number.
//! A `u32` mask bounds a node at [`MAX_GPUS`] GPUs, which covers every board shipped so far
//! (16 on DGX-2) with room to spare, and keeps set operations single instructions.

use std::fmt;

/// Most GPUs one node may have in the model.
pub const MAX_GPUS: usize = 32;

/// A set of GPU indices (0..[`MAX_GPUS`]) on one node.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct GpuSet(u32);

impl GpuSet {
    /// The empty set.
    pub const EMPTY: GpuSet = GpuSet(0);

    /// A set from its raw bitmask (bit i = GPU i).
    pub const fn from_bits(bits: u32) -> Self {
        GpuSet(bits)
    }

    /// The raw bitmask (bit i = GPU i).
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// The set {0, .., n-1}. `n` above [`MAX_GPUS`] is clamped.
    pub const fn first_n(n: usize) -> Self {
        if n >= MAX_GPUS {
            GpuSet(u32::MAX)
        } else {
            GpuSet((1u32 << n) - 1)
        }
    }

    /// Number of GPUs in the set.
    pub const fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    /// True when the set holds no GPU.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// True when GPU `i` is in the set. Out-of-range indices are never members.
    pub const fn contains(self, i: usize) -> bool {
        i < MAX_GPUS && self.0 & (1 << i) != 0
    }

    /// The set with GPU `i` added. Out-of-range indices are ignored.
    #[must_use]
    pub const fn with(self, i: usize) -> Self {
        if i < MAX_GPUS {
            GpuSet(self.0 | (1 << i))
        } else {
            self
        }
    }

    /// The set with GPU `i` removed.
    #[must_use]
    pub const fn without(self, i: usize) -> Self {
        if i < MAX_GPUS {
            GpuSet(self.0 & !(1 << i))
        } else {
            self
        }
    }

    /// Adds GPU `i` in place.
    pub fn insert(&mut self, i: usize) {
        *self = self.with(i);
    }

    /// Removes GPU `i` in place.
    pub fn remove(&mut self, i: usize) {
        *self = self.without(i);
    }

    /// Set union.
    #[must_use]
    pub const fn union(self, o: GpuSet) -> Self {
        GpuSet(self.0 | o.0)
    }

    /// Set intersection.
    #[must_use]
    pub const fn intersection(self, o: GpuSet) -> Self {
        GpuSet(self.0 & o.0)
    }

    /// Set difference (`self` minus `o`).
    #[must_use]
    pub const fn difference(self, o: GpuSet) -> Self {
        GpuSet(self.0 & !o.0)
    }

    /// True when every member of `self` is in `o`.
    pub const fn is_subset(self, o: GpuSet) -> bool {
        self.0 & !o.0 == 0
    }

    /// The lowest index in the set.
    pub const fn first(self) -> Option<usize> {
        if self.0 == 0 {
            None
        } else {
            Some(self.0.trailing_zeros() as usize)
        }
    }

    /// Members in ascending order.
    pub fn iter(self) -> impl Iterator<Item = usize> {
        let mut bits = self.0;
        std::iter::from_fn(move || {
            if bits == 0 {
                return None;
            }
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            Some(i)
        })
    }

    /// Members as a sorted vector.
    pub fn to_vec(self) -> Vec<usize> {
        self.iter().collect()
    }

    /// Parses a Slurm-style index list: `0-3,5`, `0,1,4`, or empty for the empty set.
    ///
    /// # Errors
    /// A message naming the bad element when an element is not a number or range below
    /// [`MAX_GPUS`].
    pub fn parse_list(s: &str) -> Result<Self, String> {
        let mut set = GpuSet::EMPTY;
        for (lo, hi) in crate::cpulist::parse_ranges(s)? {
            if hi as usize >= MAX_GPUS {
                return Err(format!(
                    "GPU index {hi} is out of range (at most {})",
                    MAX_GPUS - 1
                ));
            }
            for i in lo..=hi {
                set.insert(i as usize);
            }
        }
        Ok(set)
    }
}

impl FromIterator<usize> for GpuSet {
    fn from_iter<I: IntoIterator<Item = usize>>(it: I) -> Self {
        it.into_iter().fold(GpuSet::EMPTY, GpuSet::with)
    }
}

/// Slurm's compact range form, as in `IDX:0-1,4`.
impl fmt::Display for GpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.to_vec();
        let ranges: Vec<(u32, u32)> = crate::cpulist::to_ranges(v.iter().map(|&i| i as u32));
        f.write_str(&crate::cpulist::format_ranges(&ranges))
    }
}

impl fmt::Debug for GpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{{{self}}}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_ops() {
        let s: GpuSet = [0, 3, 4].into_iter().collect();
        assert_eq!(s.len(), 3);
        assert!(s.contains(3) && !s.contains(1) && !s.contains(99));
        assert_eq!(s.to_string(), "0,3-4");
        assert_eq!(GpuSet::parse_list("0,3-4").unwrap(), s);
        assert_eq!(GpuSet::parse_list("").unwrap(), GpuSet::EMPTY);
        assert!(GpuSet::parse_list("40").is_err());
        assert!(GpuSet::parse_list("a").is_err());
        assert_eq!(GpuSet::first_n(4).bits(), 0b1111);
        assert_eq!(GpuSet::first_n(32).len(), 32);
        assert!(s.is_subset(GpuSet::first_n(8)));
        assert_eq!(s.difference(GpuSet::from_bits(1)).to_vec(), vec![3, 4]);
    }
}
