//! The pick of a shared GRES (`shard`, `mps`) on one node, health applied.
//!
//! A shared GRES is a count of shares per GPU: Slurm keeps one record per sharing device
//! (in practice one per GPU) with its share count, and cons_tres picks which records a job
//! draws its shares from (`_pick_shared_gres`, 24.11; `_pick_specific_topo`, 22.05). By
//! default a job's shares on a node come from one device; with
//! `SelectTypeParameters=MULTIPLE_SHARING_GRES_PJ` (23.11+) from several. cons_tres knows
//! nothing of GPU health, so it hands out shares of a faulty GPU like any other.
//!
//! [`decide`] corrects its pick the way [`super::repick`] corrects a whole-GPU pick: shares
//! never come from a faulty GPU, a degraded (or unknown) GPU's shares are used only when the
//! healthy ones cannot serve the job, and otherwise cons_tres's pick stands. A replacement
//! follows cons_tres's own order (devices near the job's cores first, then by index), keeps
//! the job's total, and uses one device unless several are allowed and needed. Devices
//! cons_tres could not use for the job (wrong type, GPU allocated whole, outside the job's
//! cores with enforce-binding) are never chosen: the caller marks them not eligible.

use crate::gpuset::GpuSet;
use crate::steer::HealthMasks;
use crate::steer::repick::ReplaceReason;

/// One sharing device (a record of the shared GRES) as the pick sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Device {
    /// The GPUs it sits on (one, as Slurm builds shared records).
    pub gpus: GpuSet,
    /// Shares free now: its count less what other jobs hold.
    pub free: u64,
    /// cons_tres could give it to this job (type, whole-GPU use, binding all allow it).
    pub eligible: bool,
    /// It has affinity to the job's cores (cons_tres tries such devices first).
    pub near: bool,
}

/// Everything one node's decision reads.
#[derive(Clone, Copy, Debug)]
pub struct SharedInput<'a> {
    /// The node's devices, by record index.
    pub devices: &'a [Device],
    /// cons_tres's pick: the job's shares per device (same length as `devices`).
    pub stock: &'a [u64],
    /// Per-GPU health.
    pub health: HealthMasks,
    /// Several devices may serve one job (`MULTIPLE_SHARING_GRES_PJ`).
    pub multiple: bool,
}

/// Why cons_tres's pick stays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SharedKeep {
    /// No share was selected here.
    NothingSelected,
    /// The pick and the node's records disagree in shape; the plugin must not guess.
    Mismatch,
    /// The pick takes shares other jobs hold: cons_tres plans a preemption, the job does not
    /// start in this cycle.
    Busy,
    /// Every share comes from a healthy GPU.
    Healthy,
    /// It uses a degraded GPU, but no pick with fewer degraded shares exists.
    NoHealthier,
}

/// The outcome for one node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SharedDecision {
    /// Leave cons_tres's pick.
    Keep(SharedKeep),
    /// Write these shares per device instead (same total).
    Replace {
        /// Shares per device.
        shares: Vec<u64>,
        /// [`ReplaceReason::AvoidsFaulty`] or [`ReplaceReason::AvoidsDegraded`].
        why: ReplaceReason,
    },
    /// The node can serve the job only with a faulty GPU's shares: drop it and ask again.
    ExcludeNode {
        /// Shares the job needs here.
        need: u64,
        /// Shares free on eligible, non-faulty devices.
        have: u64,
    },
}

/// Shares of `shares` that sit on a GPU of `mask`.
fn shares_on(devices: &[Device], shares: &[u64], mask: GpuSet) -> u64 {
    devices
        .iter()
        .zip(shares)
        .filter(|(d, _)| !d.gpus.intersection(mask).is_empty())
        .map(|(_, s)| *s)
        .sum()
}

/// Decides the shares of one node. See the module docs.
pub fn decide(input: &SharedInput<'_>) -> SharedDecision {
    let SharedInput {
        devices,
        stock,
        health,
        multiple,
    } = *input;
    let total: u64 = stock.iter().sum();
    if total == 0 {
        return SharedDecision::Keep(SharedKeep::NothingSelected);
    }
    if stock.len() != devices.len() {
        return SharedDecision::Keep(SharedKeep::Mismatch);
    }
    if devices.iter().zip(stock).any(|(d, s)| *s > d.free) {
        return SharedDecision::Keep(SharedKeep::Busy);
    }
    let faulty = shares_on(devices, stock, health.faulty);
    let degraded = shares_on(devices, stock, health.degraded);
    if faulty == 0 && degraded == 0 {
        return SharedDecision::Keep(SharedKeep::Healthy);
    }
    let pick = pick(devices, health, total, multiple);
    match pick {
        Some(shares) if faulty > 0 => SharedDecision::Replace {
            shares,
            why: ReplaceReason::AvoidsFaulty,
        },
        None if faulty > 0 => SharedDecision::ExcludeNode {
            need: total,
            have: usable(devices, health).map(|(_, d)| d.free).sum(),
        },
        Some(shares) if shares_on(devices, &shares, health.degraded) < degraded => {
            SharedDecision::Replace {
                shares,
                why: ReplaceReason::AvoidsDegraded,
            }
        }
        _ => SharedDecision::Keep(SharedKeep::NoHealthier),
    }
}

/// Eligible devices off every faulty GPU, with their record index.
fn usable(devices: &[Device], health: HealthMasks) -> impl Iterator<Item = (usize, &Device)> {
    devices.iter().enumerate().filter(move |(_, d)| {
        d.eligible && d.free > 0 && d.gpus.intersection(health.faulty).is_empty()
    })
}

/// `total` shares in cons_tres's order with health first: healthy before degraded, near
/// before far, then by index; one device when one can hold them all, else (only when
/// `multiple`) filled device by device. `None` when the usable devices cannot hold them.
pub fn pick(
    devices: &[Device],
    health: HealthMasks,
    total: u64,
    multiple: bool,
) -> Option<Vec<u64>> {
    let mut order: Vec<(usize, &Device)> = usable(devices, health).collect();
    order.sort_by_key(|(i, d)| {
        (
            !d.gpus.intersection(health.degraded).is_empty(),
            !d.near,
            *i,
        )
    });
    let mut shares = vec![0; devices.len()];
    if let Some((i, _)) = order.iter().find(|(_, d)| d.free >= total) {
        shares[*i] = total;
        return Some(shares);
    }
    if !multiple {
        return None;
    }
    let mut left = total;
    for (i, d) in order {
        let take = d.free.min(left);
        shares[i] = take;
        left -= take;
        if left == 0 {
            return Some(shares);
        }
    }
    None
}

#[cfg(test)]
mod tests;
