//! The per-job multifactor priority: factors, weighted sum, clamping, priority arrays.
//!
//! Mirrors `set_priority_factors` and `_get_priority_internal` in
//! src/plugins/priority/multifactor/priority_multifactor.c (22.05.8 and 24.11.5), including
//! their integer types: the age difference is a `uint32_t`, the job-size terms subtract
//! unsigned integers (and wrap), the sum is a `double` truncated through `uint64_t`.
//! The caller (plugin or simulator) supplies already computed association inputs (the fair-share
//! factor comes from [`super::fair_tree`], [`super::classic`] or [`super::ledger`]).

use super::config::{Flags, PriorityConfig, Release};
use super::{NICE_OFFSET, NO_CONSUME_VAL64, NO_VAL};

/// What multifactor reads from a partition (`part_record_t`).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct PartitionInput {
    /// `PriorityJobFactor`.
    pub priority_job_factor: u16,
    /// `norm_priority` = `PriorityJobFactor / max(PriorityJobFactor)` (set by slurmctld).
    pub norm_priority: f64,
    /// `MaxTime` in minutes (`INFINITE` = 0xffffffff).
    pub max_time_mins: u32,
    /// The partition's TRES totals (`tres_cnt`), indexed like the cluster's TRES table.
    pub tres_cnt: Option<Vec<u64>>,
}

impl PartitionInput {
    /// `norm_priority` as slurmctld computes it (`_calc_part_norm_prio`/`read_config.c`).
    pub fn normalised(priority_job_factor: u16, max_job_factor: u16) -> f64 {
        if max_job_factor == 0 {
            0.0
        } else {
            f64::from(priority_job_factor) / f64::from(max_job_factor)
        }
    }
}

/// What multifactor reads from a QOS (`slurmdb_qos_rec_t`).
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct QosInput {
    /// `priority`.
    pub priority: u32,
    /// `usage->norm_priority` = priority / max QOS priority (set by assoc_mgr).
    pub norm_priority: f64,
}

/// What multifactor reads from the job's association.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct AssocInput {
    /// `priority` (raw).
    pub priority: u32,
    /// `usage->priority_norm` = priority / max association priority.
    pub priority_norm: f64,
    /// The unweighted fair-share factor in [0, 1]: Fair Tree's `fs_factor` or classic
    /// `calc_fs_factor(usage_efctv, shares_norm)`; 0 when fair share is not computed.
    pub fairshare: f64,
}

/// One job, as `set_priority_factors` sees it.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct JobInput {
    /// `direct_set_prio` with the current priority: `Some(p)` (p > 0) bypasses the formula.
    pub direct_priority: Option<u32>,
    /// `details->accrue_time` (0 = not accruing).
    pub accrue_time: i64,
    /// `total_cpus` (0 before the first allocation).
    pub total_cpus: u32,
    /// `details->max_cpus` (`NO_VAL` = unset).
    pub max_cpus: u32,
    /// `details->min_cpus`.
    pub min_cpus: u32,
    /// `details->min_nodes`.
    pub min_nodes: u32,
    /// `time_limit` in minutes (`NO_VAL` = unset).
    pub time_limit_mins: u32,
    /// `part_ptr` (the job's current partition).
    pub partition: Option<PartitionInput>,
    /// `part_ptr_list` for multi-partition jobs (already in Slurm's tier order), else empty.
    pub partitions: Vec<PartitionInput>,
    /// `qos_ptr`.
    pub qos: Option<QosInput>,
    /// `qos_list` for multi-QOS jobs (24.11), else empty.
    pub qos_list: Vec<QosInput>,
    /// `assoc_ptr`.
    pub assoc: Option<AssocInput>,
    /// `tres_alloc_cnt` (if allocated).
    pub tres_alloc: Option<Vec<u64>>,
    /// `tres_req_cnt`.
    pub tres_req: Option<Vec<u64>>,
    /// `site_factor` as stored (with `NICE_OFFSET` added).
    pub site_factor: u32,
    /// `details->nice` as stored (with `NICE_OFFSET` added).
    pub nice: u32,
}

/// Cluster-wide values multifactor reads.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct ClusterInput {
    /// `cluster_cpus`.
    pub cpus: u32,
    /// `active_node_record_count` (24.11) or `node_record_count` (22.05).
    pub nodes: i32,
}

/// The factors as multifactor stores them in `job_ptr->prio_factors` after weighting
/// (what `sprio` prints).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct WeightedFactors {
    /// Age × `PriorityWeightAge`.
    pub age: f64,
    /// Association × `PriorityWeightAssoc`.
    pub assoc: f64,
    /// Fair share × `PriorityWeightFairshare`.
    pub fairshare: f64,
    /// Job size × `PriorityWeightJobSize`.
    pub job_size: f64,
    /// Partition × `PriorityWeightPartition`.
    pub partition: f64,
    /// QOS × `PriorityWeightQOS`.
    pub qos: f64,
    /// Per-TRES factor × weight (empty when `PriorityWeightTRES` is unset).
    pub tres: Vec<f64>,
    /// Site factor as stored (offset by `NICE_OFFSET`).
    pub site: u32,
    /// Nice as stored (offset by `NICE_OFFSET`).
    pub nice: u32,
}

impl WeightedFactors {
    /// Sum of the weighted TRES terms (`_get_tres_prio_weighted`).
    pub fn tres_sum(&self) -> f64 {
        self.tres.iter().fold(0.0, |acc, v| acc + v)
    }
}

/// The result for one job.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct JobPriority {
    /// The priority (≥ 1 unless `direct_priority` said otherwise).
    pub priority: u32,
    /// The weighted factors (all zero for a directly set priority).
    pub factors: WeightedFactors,
    /// Per-partition × per-QOS priorities (`part_prio->priority_array`, 22.05:
    /// `priority_array`), `None` for single-partition single-QOS jobs.
    pub array: Option<Vec<u32>>,
    /// True when the sum exceeded 32 bits and was clamped (multifactor logs an error).
    pub clamped: bool,
}

/// The unweighted factors (multifactor's `set_priority_factors`).
fn unweighted(
    cfg: &PriorityConfig,
    cluster: ClusterInput,
    job: &JobInput,
    now: i64,
) -> WeightedFactors {
    let w = &cfg.weights;
    let flags = cfg.flags;
    let mut f = WeightedFactors {
        site: job.site_factor,
        nice: job.nice,
        ..Default::default()
    };

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
        f.tres = tres_factors(flags, job, job.partition.as_ref(), tres_len(cfg));
    }
    f
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
        let alloc = job.tres_alloc.as_ref().and_then(|a| a.get(i).copied());
        let value = match alloc {
            Some(v) if v != NO_CONSUME_VAL64 => v,
            _ => job
                .tres_req
                .as_ref()
                .and_then(|r| r.get(i).copied())
                .unwrap_or(0),
        };
        if flags.has(Flags::NO_NORMAL_TRES) {
            *slot = value as f64;
        } else if let Some(total) = part
            .and_then(|p| p.tres_cnt.as_ref())
            .and_then(|t| t.get(i).copied())
        {
            if value != 0 && total != 0 {
                *slot = value as f64 / total as f64;
            }
        }
    }
}

fn tres_factors(flags: Flags, job: &JobInput, part: Option<&PartitionInput>, n: usize) -> Vec<f64> {
    let mut out = vec![0.0; n];
    fill_tres_factors(&mut out, flags, job, part);
    out
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
    if let Some(p) = job.direct_priority {
        if p > 0 {
            return JobPriority {
                priority: p,
                ..Default::default()
            };
        }
    }
    let w = &cfg.weights;
    let mut f = unweighted(cfg, cluster, job, now);
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
    let array = priority_array(cfg, job, &f, prev_array);
    JobPriority {
        priority,
        factors: f,
        array,
        clamped,
    }
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

/// The per-partition (× per-QOS in 24.11) priorities, or `None` for a plain job.
fn priority_array(
    cfg: &PriorityConfig,
    job: &JobInput,
    f: &WeightedFactors,
    prev: Option<&[u32]>,
) -> Option<Vec<u32>> {
    let multi_qos = cfg.release == Release::V24_11 && !job.qos_list.is_empty();
    if job.partitions.is_empty() && !multi_qos {
        return None;
    }
    let parts: Vec<&PartitionInput> = if job.partitions.is_empty() {
        job.partition.iter().collect()
    } else {
        job.partitions.iter().collect()
    };
    let qos_slots: Vec<Option<QosInput>> = if multi_qos {
        job.qos_list.iter().copied().map(Some).collect()
    } else {
        vec![None]
    };
    let len = match cfg.release {
        // 22.05 allocates `list_count + 1` entries; the last one stays 0.
        Release::V22_05 => parts.len() + 1,
        Release::V24_11 => parts.len() * qos_slots.len(),
    };
    let mut out = vec![0u32; len];
    if let Some(prev) = prev {
        // An existing array is reused in place (INCR_ONLY compares against it).
        if prev.len() == len {
            out.copy_from_slice(prev);
        }
    }
    let mut i = 0;
    for part in parts {
        let part_tres = match &cfg.tres_weights {
            Some(weights) => {
                let mut t = tres_factors(cfg.flags, job, Some(part), weights.len());
                weigh_tres(&mut t, weights)
            }
            None => 0.0,
        };
        let part_init = part_factor(cfg.flags, part) * f64::from(cfg.weights.partition);
        for qos in &qos_slots {
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
    Some(out)
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
