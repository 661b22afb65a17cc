//! [`WideSet`]: a set of GPU indices on one node of any size Slurm accepts.
//!
//! [`GpuSet`] is a `u32` so the engine's set operations stay single instructions; it bounds
//! the topology model at [`crate::gpuset::MAX_GPUS`]. Health must not have that bound: a
//! node of 40 or 72 GPUs (MIG-sized instances, large boards) must never be handed a faulty
//! GPU either. `WideSet` carries health and the GPUs written to Slurm's selection bitmap on
//! such nodes; it is only touched when a node is wider than `GpuSet`, so the engine's speed
//! does not depend on it.
//!
//! Indices are Slurm's GRES indices, as for `GpuSet`, below [`MAX_INDEX`] (a bound on what
//! published health may name, so a hostile `Extra` cannot make the plugin allocate much).

use std::fmt;

use crate::gpuset::GpuSet;

/// One more than the highest GPU index a `WideSet` holds.
pub const MAX_INDEX: usize = 4096;

/// A set of GPU indices (0..[`MAX_INDEX`]) on one node.
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct WideSet {
    /// Bit i of word i/64 = GPU i; no trailing zero words (so equal sets compare equal).
    words: Vec<u64>,
}

impl WideSet {
    /// The empty set.
    pub const fn new() -> Self {
        WideSet { words: Vec::new() }
    }

    /// The set {0, .., n-1} (clamped at [`MAX_INDEX`]).
    pub fn first_n(n: usize) -> Self {
        (0..n.min(MAX_INDEX)).collect()
    }

    fn trim(&mut self) {
        while self.words.last() == Some(&0) {
            self.words.pop();
        }
    }

    /// Number of GPUs in the set.
    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// True when the set holds no GPU.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// True when GPU `i` is in the set.
    pub fn contains(&self, i: usize) -> bool {
        self.words
            .get(i / 64)
            .is_some_and(|w| w & (1u64 << (i % 64)) != 0)
    }

    /// Adds GPU `i` (indices from [`MAX_INDEX`] on are ignored).
    pub fn insert(&mut self, i: usize) {
        if i >= MAX_INDEX {
            return;
        }
        if self.words.len() <= i / 64 {
            self.words.resize(i / 64 + 1, 0);
        }
        self.words[i / 64] |= 1u64 << (i % 64);
    }

    /// Removes GPU `i`.
    pub fn remove(&mut self, i: usize) {
        if let Some(w) = self.words.get_mut(i / 64) {
            *w &= !(1u64 << (i % 64));
        }
        self.trim();
    }

    fn zip(&self, o: &WideSet, f: impl Fn(u64, u64) -> u64) -> WideSet {
        let n = self.words.len().max(o.words.len());
        let get = |v: &[u64], i: usize| v.get(i).copied().unwrap_or(0);
        let mut out = WideSet {
            words: (0..n)
                .map(|i| f(get(&self.words, i), get(&o.words, i)))
                .collect(),
        };
        out.trim();
        out
    }

    /// Set union.
    #[must_use]
    pub fn union(&self, o: &WideSet) -> WideSet {
        self.zip(o, |a, b| a | b)
    }

    /// Set intersection.
    #[must_use]
    pub fn intersection(&self, o: &WideSet) -> WideSet {
        self.zip(o, |a, b| a & b)
    }

    /// Set difference (`self` minus `o`).
    #[must_use]
    pub fn difference(&self, o: &WideSet) -> WideSet {
        self.zip(o, |a, b| a & !b)
    }

    /// True when every member of `self` is in `o`.
    pub fn is_subset(&self, o: &WideSet) -> bool {
        self.difference(o).is_empty()
    }

    /// Members in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(wi, &w)| {
            let mut bits = w;
            std::iter::from_fn(move || {
                if bits == 0 {
                    return None;
                }
                let b = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                Some(wi * 64 + b)
            })
        })
    }

    /// The highest member.
    pub fn last(&self) -> Option<usize> {
        let w = *self.words.last()?;
        Some((self.words.len() - 1) * 64 + 63 - w.leading_zeros() as usize)
    }

    /// The members below [`crate::gpuset::MAX_GPUS`] as a [`GpuSet`].
    pub fn narrow(&self) -> GpuSet {
        GpuSet::from_bits(self.words.first().map_or(0, |&w| w as u32))
    }
}

impl From<GpuSet> for WideSet {
    fn from(s: GpuSet) -> Self {
        s.iter().collect()
    }
}

impl FromIterator<usize> for WideSet {
    fn from_iter<I: IntoIterator<Item = usize>>(it: I) -> Self {
        let mut s = WideSet::new();
        for i in it {
            s.insert(i);
        }
        s
    }
}

/// Slurm's compact range form, as in `IDX:0-1,40`.
impl fmt::Display for WideSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ranges = crate::cpulist::to_ranges(self.iter().map(|i| i as u32));
        f.write_str(&crate::cpulist::format_ranges(&ranges))
    }
}

impl fmt::Debug for WideSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{{{self}}}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(v: &[usize]) -> WideSet {
        v.iter().copied().collect()
    }

    #[test]
    fn set_operations_across_words() {
        let a = w(&[0, 35, 70, 71]);
        let b = w(&[35, 100]);
        assert_eq!(a.len(), 4);
        assert!(a.contains(70) && !a.contains(69) && !a.contains(5000));
        assert_eq!(a.union(&b), w(&[0, 35, 70, 71, 100]));
        assert_eq!(a.intersection(&b), w(&[35]));
        assert_eq!(b.difference(&w(&[100])), w(&[35]));
        assert_eq!(w(&[100]).difference(&w(&[100])), WideSet::new(), "trimmed");
        assert!(w(&[35]).is_subset(&a) && !b.is_subset(&a));
        assert_eq!(a.iter().collect::<Vec<_>>(), vec![0, 35, 70, 71]);
        assert_eq!(a.last(), Some(71));
        assert_eq!(a.to_string(), "0,35,70-71");
        assert_eq!(WideSet::first_n(72).len(), 72);
        assert_eq!(a.narrow(), GpuSet::from_bits(1));
        assert_eq!(WideSet::from(GpuSet::from_bits(0b101)), w(&[0, 2]));
    }

    #[test]
    fn out_of_range_indices_are_ignored() {
        let mut s = w(&[MAX_INDEX, MAX_INDEX + 7]);
        assert!(s.is_empty());
        s.insert(MAX_INDEX - 1);
        assert_eq!(s.last(), Some(MAX_INDEX - 1));
        s.remove(MAX_INDEX - 1);
        assert!(s.is_empty());
    }
}
