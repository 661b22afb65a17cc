//! The exact decision on one node: table lookup when possible, branch and bound otherwise.
//!
//! Order of attempts for a request of `k` GPUs out of free mask `F`:
//! 1. no `required` GPUs, node ≤ 8 GPUs: the precomputed tier of `(k, F)` (see
//!    [`super::tables`]) holds every set that maximises (quality, lookahead), in tie-break
//!    order; the answer is its first member with the most `near` GPUs. O(tier size), ≤ 70.
//! 2. no `required`, and `near` cannot matter (it covers all of `F` or none of it): a memo of
//!    earlier searches keyed by `(k, F)`; on a miss, 3. and remember.
//! 3. depth-first branch and bound over the free GPUs in index order (include before exclude,
//!    so leaves come in the final tie-break order and the first of equal keys wins). A branch
//!    is cut when an upper bound of every key component below it cannot beat the incumbent:
//!    quality ≤ min(best_k(included ∪ undecided), bottleneck of the included GPUs);
//!    lookahead_same_k ≤ best_k(F \ included); lookahead_pairs ≤ min(matching(F \ included),
//!    ⌊(|F|−k)/2⌋ · best pair value); near ≤ included-near + min(remaining, undecided-near).
//!    Bounds are table lookups, so a node costs a few nanoseconds; on uniform (NVSwitch)
//!    boards the first leaf meets the root bound and everything else is cut at once.
//!
//! Results are the same as the exhaustive oracle's; the property tests check that.

use super::tables::TopoTables;

/// A decision: the chosen mask, its objective head (quality, lookahead_same_k,
/// lookahead_pairs) and its `near` count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Decision {
    pub(crate) set: u32,
    pub(crate) head: [u32; 3],
    pub(crate) near: u32,
}

/// Chooses `k` GPUs out of `free` containing `required`, preferring `near`; `None` when
/// impossible. Masks are clipped to the node.
pub(crate) fn decide(
    t: &TopoTables,
    free: u32,
    k: usize,
    required: u32,
    near: u32,
) -> Option<Decision> {
    let free = free & t.all_bits();
    let near = near & free;
    if required & !free != 0
        || required.count_ones() as usize > k
        || (free.count_ones() as usize) < k
    {
        return None;
    }
    if k == 0 {
        return Some(Decision {
            set: 0,
            head: [0, 0, t.matching(free)],
            near: 0,
        });
    }
    let size = t.size(k);
    if required == 0 {
        if let Some(tiers) = &size.tiers {
            let (sets, head) = tiers.tier(free);
            let mut best: Option<(u32, u32)> = None;
            for &s in sets {
                let c = (u32::from(s) & near).count_ones();
                if best.is_none_or(|(_, bc)| c > bc) {
                    best = Some((u32::from(s), c));
                }
            }
            return best.map(|(set, near)| Decision { set, head, near });
        }
        if near == 0 || near == free {
            let near_count = if near == 0 { 0 } else { k as u32 };
            if let Some((set, head)) = t.memo_get(k, free) {
                return Some(Decision {
                    set,
                    head,
                    near: near_count,
                });
            }
            let d = branch_and_bound(t, &size.best, free, k, 0, 0)?;
            t.memo_put(k, free, (d.set, d.head));
            return Some(Decision {
                near: near_count,
                ..d
            });
        }
    }
    branch_and_bound(t, &size.best, free, k, required, near)
}

/// Packs (head, near) into one comparable key.
fn key(head: [u32; 3], near: u32) -> u128 {
    (u128::from(head[0]) << 96)
        | (u128::from(head[1]) << 64)
        | (u128::from(head[2]) << 32)
        | u128::from(near)
}

struct Bb<'a> {
    t: &'a TopoTables,
    best_k: &'a [u32],
    free: u32,
    near: u32,
    /// Free, not-required GPUs in index order.
    cand: [u8; 32],
    ncand: usize,
    /// `suffix[i]`: mask of `cand[i..]`.
    suffix: [u32; 33],
    pairs_cap: u32,
    best: Option<(u128, Decision)>,
}

fn branch_and_bound(
    t: &TopoTables,
    best_k: &[u32],
    free: u32,
    k: usize,
    required: u32,
    near: u32,
) -> Option<Decision> {
    let mut cand = [0u8; 32];
    let mut ncand = 0;
    let mut rest = free & !required;
    while rest != 0 {
        cand[ncand] = rest.trailing_zeros() as u8;
        rest &= rest - 1;
        ncand += 1;
    }
    let mut suffix = [0u32; 33];
    for i in (0..ncand).rev() {
        suffix[i] = suffix[i + 1] | (1 << cand[i]);
    }
    let left = free.count_ones() as usize - k;
    let mut bb = Bb {
        t,
        best_k,
        free,
        near,
        cand,
        ncand,
        suffix,
        pairs_cap: (left / 2) as u32 * t.max_pair(),
        best: None,
    };
    bb.dfs(0, required, k - required.count_ones() as usize);
    bb.best.map(|(_, d)| d)
}

impl Bb<'_> {
    fn dfs(&mut self, pos: usize, inc: u32, r: usize) {
        if r == 0 {
            let left = self.free & !inc;
            let head = [
                self.t.quality(inc),
                self.best_k[left as usize],
                self.t.matching(left),
            ];
            let near = (inc & self.near).count_ones();
            let k = key(head, near);
            if self.best.is_none_or(|(bk, _)| k > bk) {
                self.best = Some((
                    k,
                    Decision {
                        set: inc,
                        head,
                        near,
                    },
                ));
            }
            return;
        }
        if self.ncand - pos < r {
            return;
        }
        if let Some((bk, _)) = self.best {
            let undecided = self.suffix[pos];
            let avail = inc | undecided;
            // A set's bottleneck is at most that of any subset with a pair.
            let inc_q = if inc.count_ones() < 2 {
                u32::MAX
            } else {
                self.t.quality(inc) | 0xFFFF
            };
            let ub_q = self.best_k[avail as usize].min(inc_q);
            let left_max = self.free & !inc;
            let ub_l1 = self.best_k[left_max as usize];
            let ub_l2 = self.t.matching(left_max).min(self.pairs_cap);
            let ub_near = (inc & self.near).count_ones()
                + (r as u32).min((undecided & self.near).count_ones());
            if key([ub_q, ub_l1, ub_l2], ub_near) <= bk {
                return;
            }
        }
        let g = self.cand[pos];
        self.dfs(pos + 1, inc | (1 << g), r - 1);
        self.dfs(pos + 1, inc, r);
    }
}
