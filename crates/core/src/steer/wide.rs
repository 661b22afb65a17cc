//! Health on nodes wider than the topology model ([`crate::gpuset::MAX_GPUS`] GPUs).
//!
//! Such a node is not ranked or re-picked by topology: cons_tres places the job there as it
//! would without gputopo. What still applies is health, on every index Slurm has: the node
//! is dropped when its non-faulty GPUs of the type cannot make the job's count, and
//! cons_tres's pick is corrected when it names a faulty GPU (or a degraded one while a
//! healthy one is free), keeping the rest of cons_tres's pick. Where cons_tres selected a
//! count only (no topology records), the pick is Slurm's own first fit minus faulty GPUs.

use crate::steer::narrow::HealthCounts;
use crate::wideset::WideSet;

/// Per-GPU health of one wide node (see [`crate::steer::HealthMasks`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WideHealth {
    /// Never allocated.
    pub faulty: WideSet,
    /// Allocated only when no healthy GPU is left for the job.
    pub degraded: WideSet,
}

/// A wide node's GPUs as the health rules see them, read once per `select_p_job_test` call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WideNode {
    /// The node's name.
    pub name: String,
    /// Its GPU count.
    pub count: usize,
    /// (type id, GPUs) per topology record; empty on a node without them.
    pub types: Vec<(u32, WideSet)>,
    /// GPUs allocated, or whose shared GRES is in use.
    pub busy: WideSet,
    /// Published health.
    pub health: WideHealth,
}

impl WideNode {
    /// GPUs of the type (all for an untyped request); `None` for a typed request on a node
    /// without topology records (cons_tres matches the type by counts there).
    pub fn of_type(&self, type_id: Option<u32>) -> Option<WideSet> {
        let all = WideSet::first_n(self.count);
        if self.types.is_empty() {
            return type_id.is_none().then_some(all);
        }
        let typed = self
            .types
            .iter()
            .filter(|(t, _)| type_id.is_none_or(|id| id == *t))
            .fold(WideSet::new(), |acc, (_, g)| acc.union(g));
        Some(typed.intersection(&all))
    }
}

/// What happens to cons_tres's pick on a wide node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WideDecision {
    /// cons_tres's pick stands.
    Keep,
    /// Write this set instead (same count).
    Replace(WideSet),
    /// No set of the count without a faulty GPU: drop the node for this job.
    Exclude,
}

/// The `count` lowest GPUs of `free`, healthy before degraded, never faulty; `None` when the
/// non-faulty ones do not make the count. Slurm's commit order on a count-only selection.
pub fn first_fit(free: &WideSet, health: &WideHealth, count: usize) -> Option<WideSet> {
    fill(WideSet::new(), free, health, count)
}

/// Adds GPUs of `free` to `kept` (healthy first, lowest first) until it holds `count`.
fn fill(kept: WideSet, free: &WideSet, health: &WideHealth, count: usize) -> Option<WideSet> {
    let usable = free.difference(&health.faulty).difference(&kept);
    let healthy = usable.difference(&health.degraded);
    let degraded = usable.intersection(&health.degraded);
    let want = count.saturating_sub(kept.len());
    let extra: Vec<usize> = healthy.iter().chain(degraded.iter()).take(want).collect();
    let set = kept.union(&extra.into_iter().collect());
    (set.len() == count).then_some(set)
}

/// Corrects cons_tres's `stock` pick: its healthy members stay, its faulty ones (and its
/// degraded ones, when a healthy GPU of `free` can take their place) are replaced by the
/// lowest usable GPUs of `free` (the GPUs the job may have: of its type, not allocated, not
/// shared, near its cores under enforce-binding). `stock`'s own GPUs count as free.
pub fn correct(stock: &WideSet, free: &WideSet, health: &WideHealth) -> WideDecision {
    let count = stock.len();
    let kept = stock
        .difference(&health.faulty)
        .difference(&health.degraded);
    let free = free.union(stock);
    match fill(kept, &free, health, count) {
        Some(set) if set == *stock => WideDecision::Keep,
        Some(set) => WideDecision::Replace(set),
        None => WideDecision::Exclude,
    }
}

/// The health pre-filter's counts on a wide node ([`HealthCounts::rules_out`] decides):
/// `of_type` the GPUs of the job's type, `free` those of them free now.
pub fn counts(of_type: &WideSet, free: &WideSet, health: &WideHealth) -> HealthCounts {
    HealthCounts {
        have: of_type.difference(&health.faulty).len(),
        faulty_of_type: !of_type.intersection(&health.faulty).is_empty(),
        free: free.len(),
        free_ok: free.difference(&health.faulty).len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(v: impl IntoIterator<Item = usize>) -> WideSet {
        v.into_iter().collect()
    }

    fn faulty(v: &[usize]) -> WideHealth {
        WideHealth {
            faulty: w(v.iter().copied()),
            degraded: WideSet::new(),
        }
    }

    #[test]
    fn first_fit_skips_faulty_beyond_32_and_takes_degraded_last() {
        let h = WideHealth {
            faulty: w([35]),
            degraded: w([33]),
        };
        assert_eq!(first_fit(&w(32..40), &h, 3), Some(w([32, 34, 36])));
        assert_eq!(
            first_fit(&w(32..40), &h, 7),
            Some(w([32, 33, 34, 36, 37, 38, 39]))
        );
        assert_eq!(
            first_fit(&w(32..40), &h, 8),
            None,
            "only with the faulty one"
        );
        assert_eq!(
            first_fit(&w(0..72), &WideHealth::default(), 2),
            Some(w([0, 1])),
            "no health: Slurm's first fit"
        );
    }

    #[test]
    fn correct_replaces_only_the_faulty_member() {
        // cons_tres took 40..=70 on a 72-GPU node; 70 is faulty, 71 is free.
        let stock = w(40..71);
        let d = correct(&stock, &w([71]), &faulty(&[70]));
        assert_eq!(d, WideDecision::Replace(w((40..70).chain([71]))));
        assert_eq!(
            correct(&stock, &w([]), &faulty(&[70])),
            WideDecision::Exclude
        );
        assert_eq!(correct(&stock, &w([71]), &faulty(&[3])), WideDecision::Keep);
    }

    #[test]
    fn correct_swaps_degraded_for_healthy_when_it_can() {
        let h = WideHealth {
            faulty: WideSet::new(),
            degraded: w([50]),
        };
        assert_eq!(
            correct(&w([49, 50]), &w([60]), &h),
            WideDecision::Replace(w([49, 60]))
        );
        assert_eq!(
            correct(&w([49, 50]), &w([]), &h),
            WideDecision::Keep,
            "degraded kept when nothing healthy is free"
        );
    }

    #[test]
    fn the_pre_filter_sees_a_fault_beyond_32() {
        use crate::steer::narrow::Basis;
        let h = faulty(&[35]);
        // 40 GPUs, 39 free (0 busy), faulty 35: a 39-GPU job cannot start now, a 38 can.
        let c = counts(&w(0..40), &w(1..40), &h);
        assert_eq!((c.have, c.free, c.free_ok), (39, 39, 38));
        assert!(c.rules_out(39, Basis::FreeNow));
        assert!(!c.rules_out(39, Basis::Total), "backfill may plan on GPU 0");
        assert!(!c.rules_out(38, Basis::FreeNow));
        assert!(c.rules_out(40, Basis::Total), "never while the fault lasts");
        assert!(c.rules_out(usize::MAX, Basis::Total), "whole node");
    }
}
