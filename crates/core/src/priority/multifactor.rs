//! The per-job multifactor priority: factors, weighted sum, clamping, priority arrays.
//!
//! Mirrors `set_priority_factors` and `_get_priority_internal` in
//! src/plugins/priority/multifactor/priority_multifactor.c (22.05.8 and 24.11.5), including
//! their integer types: the age difference is a `uint32_t`, the job-size terms subtract
//! unsigned integers (and wrap), the sum is a `double` truncated through `uint64_t`.
//! The caller (plugin or simulator) supplies already computed association inputs (the fair-share
//! factor comes from [`super::fair_tree`], [`super::classic`] or [`super::ledger`]).

//!
//! Allocation-free: [`job_priority_into`] writes into a [`JobPriority`] the caller reuses for
//! every job of a pass (its TRES and array buffers keep their capacity), and the inputs borrow
//! Slurm's arrays ([`super::job_input`]).

pub use super::job_input::{
    AssocInput, ClusterInput, JobInput, JobPriority, PartitionInput, QosInput, WeightedFactors,
};

use super::config::{Flags, PriorityConfig, Release};
use super::{NICE_OFFSET, NO_VAL};

/// The unweighted factors (multifactor's `set_priority_factors`), into `f` (reset first).
fn unweighted(
    cfg: &PriorityConfig,
    cluster: ClusterInput,
    job: &JobInput,
    now: i64,
    f: &mut WeightedFactors,
) {
    let w = &cfg.weights;
    let flags = cfg.flags;
    f.reset(job.site_factor, job.nice);

    if w.age != 0 && job.accrue_time != 0 {
        // `uint32_t diff = start_time - accrue_time` (time_t difference truncated to 32 bits).
        let diff: u32 = if now > job.accrue_time {
            (now - job.accrue_time) as u32
        } else {
            0
        };
        f.age = if diff < cfg.max_age_secs {
            f64::from(diff) / f64::from(cfg.max_age_secs)
        } else {
            1.0
        };
    }
    if let Some(assoc) = job.assoc {
        if w.fairshare != 0 {
            f.fairshare = assoc.fairshare;
        }
    }
    let js_enabled = match cfg.release {
        Release::V22_05 => w.job_size != 0,
        Release::V24_11 => w.job_size != 0 && cluster.nodes != 0 && cluster.cpus != 0,
    };
    if js_enabled {
        f.job_size = job_size(cfg, cluster, job);
    }
    if let Some(part) = &job.partition {
        if part.priority_job_factor != 0 && w.partition != 0 {
            f.partition = part_factor(flags, part);
        }
    }
    if let Some(assoc) = job.assoc {
        if w.assoc != 0 {
            f.assoc = if flags.has(Flags::NO_NORMAL_ASSOC) {
                f64::from(assoc.priority)
            } else {
                assoc.priority_norm
            };
        }
    }
    if let Some(qos) = job.qos {
        if qos.priority != 0 && w.qos != 0 {
            f.qos = qos_factor(flags, qos);
        }
    }
    if cfg.tres_weights.is_some() {
        f.tres.resize(tres_len(cfg), 0.0);
        fill_tres_factors(&mut f.tres, flags, job, job.partition.as_ref());
    }
}

fn tres_len(cfg: &PriorityConfig) -> usize {
    cfg.tres_weights.as_ref().map_or(0, Vec::len)
}

fn part_factor(flags: Flags, part: &PartitionInput) -> f64 {
    if flags.has(Flags::NO_NORMAL_PART) {
        f64::from(part.priority_job_factor)
    } else {
        part.norm_priority
    }
}

fn qos_factor(flags: Flags, qos: QosInput) -> f64 {
    if flags.has(Flags::NO_NORMAL_QOS) {
        f64::from(qos.priority)
    } else {
        qos.norm_priority
    }
}

/// The job-size factor, clamped to [0, 1].
fn job_size(cfg: &PriorityConfig, cluster: ClusterInput, job: &JobInput) -> f64 {
    let cpu_cnt = if job.total_cpus != 0 {
        job.total_cpus
    } else if job.max_cpus != NO_VAL {
        job.max_cpus
    } else {
        job.min_cpus
    };
    let min_nodes = job.min_nodes;
    let cpus = f64::from(cluster.cpus);
    let nodes = f64::from(cluster.nodes);
    let mut js;
    if cfg.flags.has(Flags::SIZE_RELATIVE) {
        js = f64::from(min_nodes) * cpus / nodes;
        if f64::from(cpu_cnt) > js {
            js = f64::from(cpu_cnt);
        }
        let time_limit = if job.time_limit_mins != NO_VAL {
            job.time_limit_mins
        } else if let Some(part) = &job.partition {
            part.max_time_mins
        } else {
            1
        };
        js /= f64::from(time_limit);
        js /= cpus;
        if cfg.favor_small {
            js = 1.0 - js;
        }
    } else if cfg.favor_small {
        js = match cfg.release {
            // `(double)(node_record_count - min_nodes)`: int - uint32_t is unsigned and wraps.
            Release::V22_05 => f64::from((cluster.nodes as u32).wrapping_sub(min_nodes)) / nodes,
            Release::V24_11 => {
                if i64::from(cluster.nodes) > i64::from(min_nodes) {
                    (f64::from(cluster.nodes) - f64::from(min_nodes)) / nodes
                } else {
                    0.0
                }
            }
        };
        if cpu_cnt != 0 {
            // `(double)(cluster_cpus - cpu_cnt)`: uint32_t arithmetic, wraps.
            js += f64::from(cluster.cpus.wrapping_sub(cpu_cnt)) / cpus;
            js /= 2.0;
        }
    } else {
        js = f64::from(min_nodes) / nodes;
        if cpu_cnt != 0 {
            js += f64::from(cpu_cnt) / cpus;
            js /= 2.0;
        }
    }
    // Like C's two comparisons, clamp leaves NaN as NaN.
    js.clamp(0.0, 1.0)
}

/// `_get_tres_factors`: per-TRES value, normalised by the partition's total unless
/// `NO_NORMAL_TRES`. Like the C code it writes an entry only when it has a value for it and
/// leaves the others as they were (callers start from zeros, except sprio's per-partition rows,
/// which start from a copy of the weighted factors: a multifactor quirk kept on purpose).
fn fill_tres_factors(out: &mut [f64], flags: Flags, job: &JobInput, part: Option<&PartitionInput>) {
    for (i, slot) in out.iter_mut().enumerate() {
        if let Some(v) = tres_factor(flags, job, part, i) {
            *slot = v;
        }
    }
}

/// Entry `i` of `_get_tres_factors`, or `None` where the C code leaves the slot as it was.
fn tres_factor(
    flags: Flags,
    job: &JobInput,
    part: Option<&PartitionInput>,
    i: usize,
) -> Option<f64> {
    let value = job.tres_value(i);
    if flags.has(Flags::NO_NORMAL_TRES) {
        return Some(value as f64);
    }
    let total = part
        .and_then(|p| p.tres_cnt)
        .and_then(|t| t.get(i).copied())?;
    (value != 0 && total != 0).then(|| value as f64 / total as f64)
}

/// The weighted TRES sum of a fresh (all-zero) factor array for `part`, without the array:
/// the same terms added in the same order as [`fill_tres_factors`] then [`weigh_tres`]
/// (an untouched slot adds `0 · w = 0`).
fn weighted_tres_sum(flags: Flags, job: &JobInput, part: &PartitionInput, weights: &[f64]) -> f64 {
    let mut sum = 0.0;
    for (i, w) in weights.iter().enumerate() {
        sum += tres_factor(flags, job, Some(part), i).unwrap_or(0.0) * w;
    }
    sum
}

/// Multiplies each TRES factor by its weight in place and returns the sum.
fn weigh_tres(factors: &mut [f64], weights: &[f64]) -> f64 {
    let mut sum = 0.0;
    for (f, w) in factors.iter_mut().zip(weights) {
        *f *= w;
        sum += *f;
    }
    sum
}

/// Applies multifactor's clamping: `< 1` → 1, truncation through `uint64_t`, and > 2^32-1
/// → 2^32-1. Returns the value and whether the 32-bit clamp fired.
pub fn clamp_priority(sum: f64) -> (u32, bool) {
    let p = if sum < 1.0 { 1.0 } else { sum };
    // C's (uint64_t) cast truncates; Rust's `as` truncates and saturates (NaN → 0 is the only
    // divergence, and multifactor's factors cannot produce NaN except for a 0-minute time
    // limit with SMALL_RELATIVE_TO_TIME and 0 CPUs).
    let t = p as u64;
    if t > 0xffff_ffff {
        (u32::MAX, true)
    } else {
        (t as u32, false)
    }
}

/// Computes one job's priority exactly as multifactor's `_get_priority_internal` does.
///
/// `now` is the recalculation start time; `prev_array` is the job's current priority array
/// (used with `INCR_ONLY`). The caller applies `INCR_ONLY` to the scalar priority itself
/// (`decay_apply_weighted_factors` keeps the old value when it is larger; `priority_p_set`
/// does not), see [`apply_incr_only`].
pub fn job_priority(
    cfg: &PriorityConfig,
    cluster: ClusterInput,
    job: &JobInput,
    now: i64,
    prev_array: Option<&[u32]>,
) -> JobPriority {
    let mut out = JobPriority::default();
    job_priority_into(cfg, cluster, job, now, prev_array, &mut out);
    out
}

/// [`job_priority`] into `out`, reusing its buffers: what the plugin calls for every job of a
/// pass with one `out`, so a pass allocates nothing per job.
///
/// `prev_array` may be shorter than the array (Slurm's split copies are): the entries it has
/// are the previous values, the rest start at 0.
pub fn job_priority_into(
    cfg: &PriorityConfig,
    cluster: ClusterInput,
    job: &JobInput,
    now: i64,
    prev_array: Option<&[u32]>,
    out: &mut JobPriority,
) {
    out.clamped = false;
    out.array.clear();
    if let Some(p) = job.direct_priority {
        if p > 0 {
            out.priority = p;
            out.factors.reset(0, 0);
            return;
        }
    }
    let w = &cfg.weights;
    let f = &mut out.factors;
    unweighted(cfg, cluster, job, now, f);
    f.age *= f64::from(w.age);
    f.assoc *= f64::from(w.assoc);
    f.fairshare *= f64::from(w.fairshare);
    f.job_size *= f64::from(w.job_size);
    f.partition *= f64::from(w.partition);
    f.qos *= f64::from(w.qos);
    let tres_sum = match &cfg.tres_weights {
        Some(weights) => weigh_tres(&mut f.tres, weights),
        None => 0.0,
    };
    let sum = f.age
        + f.assoc
        + f.fairshare
        + f.job_size
        + f.partition
        + f.qos
        + tres_sum
        + (i64::from(f.site) - i64::from(NICE_OFFSET)) as f64
        - (i64::from(f.nice) - i64::from(NICE_OFFSET)) as f64;
    let (priority, clamped) = clamp_priority(sum);
    out.priority = priority;
    out.clamped = clamped;
    priority_array(cfg, job, &out.factors, prev_array, &mut out.array);
}

/// What `decay_apply_weighted_factors` stores: with `INCR_ONLY` only a larger value replaces
/// the current one.
pub fn apply_incr_only(flags: Flags, current: u32, new: u32) -> u32 {
    if !flags.has(Flags::INCR_ONLY) || current < new {
        new
    } else {
        current
    }
}

/// The per-partition (× per-QOS in 24.11) priorities into `out` (left empty for a plain job).
fn priority_array(
    cfg: &PriorityConfig,
    job: &JobInput,
    f: &WeightedFactors,
    prev: Option<&[u32]>,
    out: &mut Vec<u32>,
) {
    let multi_qos = cfg.release == Release::V24_11 && !job.qos_list.is_empty();
    if job.partitions.is_empty() && !multi_qos {
        return;
    }
    let parts = if job.partitions.is_empty() {
        job.partition.as_slice()
    } else {
        job.partitions
    };
    let qos_slots = if multi_qos { job.qos_list.len() } else { 1 };
    let len = match cfg.release {
        // 22.05 allocates `list_count + 1` entries; the last one stays 0.
        Release::V22_05 => parts.len() + 1,
        Release::V24_11 => parts.len() * qos_slots,
    };
    out.clear();
    out.resize(len, 0);
    if let Some(prev) = prev {
        // An existing array is reused in place (INCR_ONLY compares against it).
        let n = prev.len().min(len);
        out[..n].copy_from_slice(&prev[..n]);
    }
    let mut i = 0;
    for part in parts {
        let part_tres = match &cfg.tres_weights {
            Some(weights) => weighted_tres_sum(cfg.flags, job, part, weights),
            None => 0.0,
        };
        let part_init = part_factor(cfg.flags, part) * f64::from(cfg.weights.partition);
        for q in 0..qos_slots {
            let qos = if multi_qos { job.qos_list.get(q) } else { None };
            let qos_term = match qos {
                Some(q) if q.priority != 0 && cfg.weights.qos != 0 => {
                    qos_factor(cfg.flags, *q) * f64::from(cfg.weights.qos)
                }
                _ => f.qos,
            };
            // Same association order as C: init + (age + assoc + fs + js + qos + tres + site - nice).
            let sum = part_init
                + (f.age
                    + f.assoc
                    + f.fairshare
                    + f.job_size
                    + qos_term
                    + part_tres
                    + (i64::from(f.site) - i64::from(NICE_OFFSET)) as f64
                    - (i64::from(f.nice) - i64::from(NICE_OFFSET)) as f64);
            let (p, _) = clamp_priority(sum);
            if let Some(slot) = out.get_mut(i) {
                *slot = apply_incr_only(cfg.flags, *slot, p);
            }
            i += 1;
        }
    }
}

/// The factors `sprio` shows for one (partition, QOS) row of a multi-partition/QOS job
/// (`_create_prio_list_qos` in 24.11; 22.05's `_filter_job` has no QOS rows).
pub fn sprio_row(
    cfg: &PriorityConfig,
    job: &JobInput,
    stored: &WeightedFactors,
    part: Option<&PartitionInput>,
    qos: Option<QosInput>,
) -> WeightedFactors {
    let mut f = stored.clone();
    if let Some(part) = part {
        f.partition = part_factor(cfg.flags, part) * f64::from(cfg.weights.partition);
        if !f.tres.is_empty() {
            if let Some(weights) = &cfg.tres_weights {
                fill_tres_factors(&mut f.tres, cfg.flags, job, Some(part));
                weigh_tres(&mut f.tres, weights);
            }
        }
    }
    if let Some(q) = qos {
        if q.priority != 0 && cfg.weights.qos != 0 {
            f.qos = qos_factor(cfg.flags, q) * f64::from(cfg.weights.qos);
        }
    }
    f
}

#[cfg(test)]
#[path = "multifactor_tests.rs"]
mod tests;
