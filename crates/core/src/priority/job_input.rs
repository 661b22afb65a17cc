//! What multifactor reads from slurmctld for one job, and what it writes back.
//!
//! The inputs borrow their arrays (`&[u64]` TRES counts, the partition and QOS lists) instead
//! of owning them: the plugin builds a [`JobInput`] for every pending job on every
//! PriorityCalcPeriod, under slurmctld's job write lock, straight over Slurm's own arrays, and
//! an owned copy would cost allocations per job (issue 10 item 7). A borrowed array may be
//! shorter than the TRES table (its allocation is read by xmalloc's size, never past it): an
//! entry past its end reads as 0, as if the array had been zero-padded.

/// What multifactor reads from a partition (`part_record_t`).
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct PartitionInput<'a> {
    /// `PriorityJobFactor`.
    pub priority_job_factor: u16,
    /// `norm_priority` = `PriorityJobFactor / max(PriorityJobFactor)` (set by slurmctld).
    pub norm_priority: f64,
    /// `MaxTime` in minutes (`INFINITE` = 0xffffffff).
    pub max_time_mins: u32,
    /// The partition's TRES totals (`tres_cnt`), indexed like the cluster's TRES table.
    pub tres_cnt: Option<&'a [u64]>,
}

impl PartitionInput<'_> {
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
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct JobInput<'a> {
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
    pub partition: Option<PartitionInput<'a>>,
    /// `part_ptr_list` for multi-partition jobs (already in Slurm's tier order), else empty.
    pub partitions: &'a [PartitionInput<'a>],
    /// `qos_ptr`.
    pub qos: Option<QosInput>,
    /// `qos_list` for multi-QOS jobs (24.11), else empty.
    pub qos_list: &'a [QosInput],
    /// `assoc_ptr`.
    pub assoc: Option<AssocInput>,
    /// `tres_alloc_cnt` (if allocated).
    pub tres_alloc: Option<&'a [u64]>,
    /// `tres_req_cnt`.
    pub tres_req: Option<&'a [u64]>,
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

    /// Zeroes every term, keeping the TRES buffer's allocation for the next job.
    pub(super) fn reset(&mut self, site: u32, nice: u32) {
        let mut tres = std::mem::take(&mut self.tres);
        tres.clear();
        *self = WeightedFactors {
            site,
            nice,
            tres,
            ..Default::default()
        };
    }
}

/// The result for one job. One value can be reused for every job of a pass
/// ([`super::multifactor::job_priority_into`]): its buffers keep their allocations.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct JobPriority {
    /// The priority (≥ 1 unless `direct_priority` said otherwise).
    pub priority: u32,
    /// The weighted factors (all zero for a directly set priority).
    pub factors: WeightedFactors,
    /// Per-partition × per-QOS priorities (`part_prio->priority_array`, 22.05:
    /// `priority_array`); empty for single-partition single-QOS jobs (a real array has at
    /// least one entry: 22.05 two).
    pub array: Vec<u32>,
    /// True when the sum exceeded 32 bits and was clamped (multifactor logs an error).
    pub clamped: bool,
}

impl JobInput<'_> {
    /// The TRES value multifactor weighs for entry `i`: `tres_alloc_cnt[i]` unless the job
    /// has none there or does not consume it (`NO_CONSUME_VAL64`), else `tres_req_cnt[i]`.
    pub fn tres_value(&self, i: usize) -> u64 {
        let alloc = self.tres_alloc.map(|a| a.get(i).copied().unwrap_or(0));
        match alloc {
            Some(v) if v != super::NO_CONSUME_VAL64 => v,
            _ => self.tres_req.and_then(|r| r.get(i).copied()).unwrap_or(0),
        }
    }
}
