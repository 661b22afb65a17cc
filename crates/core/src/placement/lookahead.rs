//! The lookahead: what the GPUs a choice leaves free are still worth to the jobs that follow.
//!
//! # Why over every size
//! An earlier lookahead only asked "can the next job of the same size still get a good set?"
//! and "how well do the leftovers pair up?". It was blind to larger groups: on a board of two
//! NVLink quads with {0..5} free, a 2-GPU job took {0,1} and broke the intact quad {0-3}, and
//! a 1-GPU job (for which "the same size" means nothing) took any GPU. So the leftover is now
//! valued at every size the node can still serve, **largest first**: for each size `s` of
//! [`sizes`] (16, 8, 4, 2 as far as the node has them, and the sizes of its NVLink groups) the
//! best [`Score`] an `s`-subset of the leftover still has, then the leftover's maximum-weight
//! pairing. Compared lexicographically, a choice that keeps a larger group whole wins, so
//! intact quads and boards survive small jobs, and a 1-GPU job takes the GPU whose loss hurts
//! the rest least. Every component is monotone in the leftover (more free GPUs never lower a
//! best subset or a matching), which is what the branch and bound's bounds need.
//!
//! # Across nodes: loss
//! Between nodes the same idea is a **loss**: for the sizes 16, 8, 4, 2 the drop of the best
//! subset's *bottleneck* from the node's free GPUs to what the choice leaves, then the drop of
//! its pairing. Node ranking ([`super::rank`]) prefers the smallest loss, largest size first:
//! a 1-GPU job breaks an idle PCIe box (its 8-GPU set is worth a SYS path, 5 GB/s) before an
//! idle NVSwitch board (NV18, 450 GB/s), and a node that is already broken up loses nothing at
//! size 8, so small jobs pack there and idle nodes stay whole for the big jobs. Bottlenecks are
//! NVLink counts or PCIe levels (the bucketed `class` of [`Score`]), comparable between
//! different boards; aggregates are not, so they stay within the node.

use super::score::{NVLINK_GBPS, Score};

/// Most lookahead sizes per node (16, 8, 4, 2 and up to two NVLink group sizes).
pub const MAX_SIZES: usize = 6;

/// The sizes whose loss node ranking compares, largest first.
pub const LOSS_SIZES: [usize; 4] = [16, 8, 4, 2];

/// The value of a leftover, compared lexicographically (bigger is better): per lookahead size
/// (largest first) the best score of a subset of that size, then the pairing (GB/s).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Leftover {
    /// `(size, best score of a size-subset of the leftover)`, largest size first; unused
    /// slots are `(0, Score::NONE)`. The sizes are those of the node ([`sizes`]).
    pub by_size: [(u8, Score); MAX_SIZES],
    /// Maximum-weight pair matching of the leftover (GB/s).
    pub pairs: u32,
}

impl Leftover {
    /// The best score at size `s`, if `s` is one of the node's lookahead sizes.
    pub fn at(&self, s: usize) -> Option<Score> {
        self.by_size
            .iter()
            .find(|(z, _)| usize::from(*z) == s && s > 0)
            .map(|&(_, sc)| sc)
    }
}

/// What a choice costs the jobs that follow (smaller is better), comparable across nodes:
/// the bottleneck of the whole node when the choice breaks an idle node (0 otherwise), then
/// per size of [`LOSS_SIZES`] the drop of the best subset's bottleneck (GB/s), then the drop
/// of the pairing (GB/s).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Loss {
    /// The whole node's bottleneck (GB/s) when the choice breaks an idle node, else 0: what
    /// a job as large as the node loses.
    pub whole: u32,
    /// Bottleneck drop at 16, 8, 4, 2 GPUs.
    pub by_size: [u32; 4],
    /// Pairing drop.
    pub pairs: u32,
}

impl Loss {
    /// The loss of going from free GPUs worth `before` to a leftover worth `after` (both
    /// valued over the same sizes); `whole` is the idle node's own bottleneck when the choice
    /// breaks it (see [`Loss::whole`]).
    pub fn between(whole: Score, before: &Leftover, after: &Leftover) -> Self {
        let mut by_size = [0u32; 4];
        for (slot, &s) in by_size.iter_mut().zip(LOSS_SIZES.iter()) {
            let b = before.at(s).map_or(0, bottleneck_value);
            let a = after.at(s).map_or(0, bottleneck_value);
            *slot = b.saturating_sub(a);
        }
        Loss {
            whole: bottleneck_value(whole),
            by_size,
            pairs: before.pairs.saturating_sub(after.pairs),
        }
    }
}

/// A score's bottleneck as a loss term: 0 for "no such set" (and for a single GPU, which
/// never occurs at sizes ≥ 2).
pub(crate) fn bottleneck_value(s: Score) -> u32 {
    if s.bottleneck == Score::SINGLE_BOTTLENECK {
        0
    } else {
        s.bottleneck
    }
}

/// The lookahead sizes of an `n`-GPU node whose pairs have values `pair(a, b)` (GB/s, see
/// [`super::score::pair_gbps`]): 16, 8, 4, 2 up to `n`, then the sizes (≥ 2) of its
/// NVLink groups (connected components of the NVLink graph) not already listed, largest
/// first; at most [`MAX_SIZES`], descending.
pub fn sizes(n: usize, pair: impl Fn(usize, usize) -> u32) -> Vec<usize> {
    let mut out: Vec<usize> = LOSS_SIZES.iter().copied().filter(|&s| s <= n).collect();
    // NVLink groups: union-find over pairs with an NVLink (value ≥ one NVLink).
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(p: &mut [usize], mut x: usize) -> usize {
        while p[x] != x {
            p[x] = p[p[x]];
            x = p[x];
        }
        x
    }
    for a in 0..n {
        for b in a + 1..n {
            if pair(a, b) >= NVLINK_GBPS {
                let (ra, rb) = (root(&mut parent, a), root(&mut parent, b));
                parent[ra] = rb;
            }
        }
    }
    let mut group = vec![0usize; n];
    for g in 0..n {
        let r = root(&mut parent, g);
        group[r] += 1;
    }
    let mut extra: Vec<usize> = group
        .into_iter()
        .filter(|&c| c >= 2 && !out.contains(&c))
        .collect();
    extra.sort_unstable_by(|a, b| b.cmp(a));
    extra.dedup();
    out.extend(extra);
    out.truncate(MAX_SIZES);
    out.sort_unstable_by(|a, b| b.cmp(a));
    out
}

/// Builds a [`Leftover`] from the node's sizes and a best-score function.
pub(crate) fn leftover(
    sizes: &[usize],
    mut best: impl FnMut(usize) -> Score,
    pairs: u32,
) -> Leftover {
    let mut by_size = [(0u8, Score::NONE); MAX_SIZES];
    for (slot, &s) in by_size.iter_mut().zip(sizes.iter()) {
        *slot = (s as u8, best(s));
    }
    Leftover { by_size, pairs }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_add_nvlink_groups_largest_first() {
        // Two NVLink triples on 6 GPUs: 4, 2 and the group size 3.
        let pair = |a: usize, b: usize| if a / 3 == b / 3 { 25 } else { 5 };
        assert_eq!(sizes(6, pair), vec![4, 3, 2]);
        // PCIe only: no groups.
        assert_eq!(sizes(8, |_, _| 12), vec![8, 4, 2]);
        assert_eq!(sizes(1, |_, _| 12), Vec::<usize>::new());
        // One NVLink group of 12 on 16 GPUs.
        let pair = |a: usize, b: usize| if a < 12 && b < 12 { 50 } else { 5 };
        assert_eq!(sizes(16, pair), vec![16, 12, 8, 4, 2]);
    }

    #[test]
    fn loss_is_the_bottleneck_drop_per_size() {
        let sc = |b| Score {
            bottleneck: b,
            aggregate: 3 * b,
        };
        let before = leftover(&[8, 4, 2], |s| sc(if s == 8 { 5 } else { 25 }), 100);
        let after = leftover(
            &[8, 4, 2],
            |s| if s == 8 { Score::NONE } else { sc(25) },
            75,
        );
        let l = Loss::between(sc(5), &before, &after);
        assert_eq!(l.whole, 5);
        assert_eq!(l.by_size, [0, 5, 0, 0]);
        assert_eq!(l.pairs, 25);
        assert_eq!(Loss::between(Score::NONE, &after, &after), Loss::default());
    }
}
