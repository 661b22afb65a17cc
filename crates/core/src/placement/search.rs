//! The exact decision on one node: table lookup when possible, branch and bound otherwise.
//!
//! Order of attempts for a request of `k` GPUs out of free mask `F`:
//! 1. no `required` GPUs, node ≤ 8 GPUs: the precomputed tier of `(k, F)` (see
//!    [`super::tables`]) holds every set that maximises (quality, lookahead), in tie-break
//!    order; the answer is its first member with the most `near` GPUs. O(tier size), ≤ 70.
//! 2. larger nodes: a memo of earlier searches keyed by `(k, F, near ∩ F, required)`
//!    (slurmctld asks the same few questions over and over: idle nodes, socket-sized `near`);
//!    on a miss, 3. seeded with the `near`-free answer, and remember.
//! 3. depth-first branch and bound over the free GPUs, `near` ones first (include before
//!    exclude), on the full key including the tie-break. A branch is cut when an upper bound
//!    of every key component below it cannot beat the incumbent:
//!    quality ≤ min(best_k(included ∪ undecided), bottleneck of the included GPUs);
//!    lookahead ≤ the best lookahead rank of a `(|F| − k)`-subset of `F \ included`
//!    (`look_best`: every completion leaves such a subset); near ≤ included-near + min(remaining, undecided-near); tie-break ≤
//!    that of the included GPUs plus the lowest undecided ones.
//!    Bounds are table lookups, so a node costs a few nanoseconds; on uniform (NVSwitch)
//!    boards the first leaf meets the root bound and everything else is cut at once.
//!
//! Results are the same as the exhaustive oracle's; the property tests check that.

use super::tables::TopoTables;

/// A decision: the chosen mask, its objective head (packed quality, lookahead rank) and its
/// `near` count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Decision {
    pub(crate) set: u32,
    pub(crate) head: [u32; 2],
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
            head: [0, t.look(free)],
            near: 0,
        });
    }
    let tiers = t.tiers(k);
    if required == 0 {
        if let Some(tiers) = tiers {
            if near == 0 {
                // The tier's first member, kept in its own array: two loads.
                return Some(Decision {
                    set: u32::from(tiers.first(free)),
                    head: tiers.head(free),
                    near: 0,
                });
            }
            let (sets, head) = tiers.tier(free);
            // No set holds more than `k` near GPUs, nor more than there are: the first set
            // that reaches that is the answer (the tier is in tie-break order).
            let most = near.count_ones().min(k as u32);
            let mut best: Option<(u32, u32)> = None;
            for &s in sets {
                let c = (u32::from(s) & near).count_ones();
                if best.is_none_or(|(_, bc)| c > bc) {
                    best = Some((u32::from(s), c));
                    if c == most {
                        break;
                    }
                }
            }
            return best.map(|(set, near)| Decision { set, head, near });
        }
    }
    let best_k = t.best(k);
    if tiers.is_none() {
        // `near` covering all of `free` is no preference at all.
        let memo_near = if near == free { 0 } else { near };
        let d = match t.memo_get(k, free, memo_near, required) {
            Some((set, head)) => Decision { set, head, near: 0 },
            None => {
                // Seed with the choice that ignores `near`: it has the optimal quality and
                // lookahead, so only sets tying with it on those survive the bounds.
                let seed = if memo_near == 0 {
                    None
                } else {
                    decide(t, free, k, required, 0).map(|d| d.set)
                };
                let d = branch_and_bound(t, best_k, free, k, required, memo_near, seed)?;
                t.memo_put(k, free, memo_near, required, (d.set, d.head));
                d
            }
        };
        return Some(Decision {
            near: (d.set & near).count_ones(),
            ..d
        });
    }
    branch_and_bound(t, best_k, free, k, required, near, None)
}

/// Packs (head, near, tie-break) into one comparable key. `rev` is the set's bits reversed
/// within 16 bits: a bigger `rev` is a lexicographically smaller index list.
fn key(head: [u32; 2], near: u32, rev: u32) -> u128 {
    (u128::from(head[0]) << 96)
        | (u128::from(head[1]) << 64)
        | (u128::from(near) << 16)
        | u128::from(rev)
}

/// The tie-break component of a set on a ≤ 16-GPU node.
fn rev(set: u32) -> u32 {
    u32::from((set as u16).reverse_bits())
}

struct Bb<'a> {
    t: &'a TopoTables,
    best_k: &'a [u32],
    /// `look_best` for the leftover size `|free| − k`.
    look_best: &'a [u32],
    free: u32,
    near: u32,
    /// Free, not-required GPUs in index order.
    cand: [u8; 32],
    ncand: usize,
    /// `suffix[i]`: mask of `cand[i..]`.
    suffix: [u32; 33],
    best: Option<(u128, Decision)>,
}

fn branch_and_bound(
    t: &TopoTables,
    best_k: &[u32],
    free: u32,
    k: usize,
    required: u32,
    near: u32,
    seed: Option<u32>,
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
    let mut bb = Bb {
        t,
        best_k,
        look_best: t.look_best(free.count_ones() as usize - k),
        free,
        near,
        cand,
        ncand,
        suffix,
        best: None,
    };
    let r = k - required.count_ones() as usize;
    bb.offer(bb.greedy(required, r));
    if let Some(seed) = seed {
        bb.offer(seed);
    }
    bb.dfs(0, required, r);
    bb.best.map(|(_, d)| d)
}

impl Bb<'_> {
    /// Makes `set` (a complete candidate) the incumbent if its key is better.
    fn offer(&mut self, set: u32) {
        let head = self.t.head(self.free, set);
        let near = (set & self.near).count_ones();
        let k = key(head, near, rev(set));
        if self.best.is_none_or(|(bk, _)| k > bk) {
            self.best = Some((k, Decision { set, head, near }));
        }
    }

    /// A good first incumbent, so that the bounds cut early: from `inc`, repeatedly add the
    /// candidate giving the best quality (then near, then lowest index).
    fn greedy(&self, mut inc: u32, r: usize) -> u32 {
        for _ in 0..r {
            let mut best: Option<(u32, u32, u32)> = None;
            for &g in &self.cand[..self.ncand] {
                let bit = 1u32 << g;
                if inc & bit != 0 {
                    continue;
                }
                let cand = (
                    self.t.quality(inc | bit),
                    u32::from(self.near & bit != 0),
                    bit,
                );
                if best.is_none_or(|b| (cand.0, cand.1) > (b.0, b.1)) {
                    best = Some(cand);
                }
            }
            if let Some((_, _, bit)) = best {
                inc |= bit;
            }
        }
        inc
    }

    fn dfs(&mut self, pos: usize, inc: u32, r: usize) {
        if r == 0 {
            self.offer(inc);
            return;
        }
        if self.ncand - pos < r {
            return;
        }
        if let Some((bk, _)) = self.best {
            if self.bound(pos, inc, r) <= bk {
                return;
            }
        }
        let g = self.cand[pos];
        self.dfs(pos + 1, inc | (1 << g), r - 1);
        self.dfs(pos + 1, inc, r);
    }

    /// An upper bound of the key of every completion of `inc` with `r` more GPUs from
    /// `cand[pos..]` (component by component, see the module docs).
    fn bound(&self, pos: usize, inc: u32, r: usize) -> u128 {
        let undecided = self.suffix[pos];
        let avail = inc | undecided;
        // A set's bottleneck is at most that of any subset with a pair.
        let inc_q = if inc.count_ones() < 2 {
            u32::MAX
        } else {
            self.t.quality(inc) | 0xFFFF
        };
        let ub_q = self.best_k[avail as usize].min(inc_q);
        let ub_look = self.look_best[(self.free & !inc) as usize];
        let ub_near =
            (inc & self.near).count_ones() + (r as u32).min((undecided & self.near).count_ones());
        // The lexicographically smallest completion: `inc` plus the r lowest undecided GPUs.
        let mut lowest = 0;
        let mut u = undecided;
        for _ in 0..r {
            lowest |= u & u.wrapping_neg();
            u &= u - 1;
        }
        key([ub_q, ub_look], ub_near, rev(inc | lowest))
    }
}
