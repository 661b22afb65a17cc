//! Multifactor configuration: the weights and flags `_internal_setup` reads from `slurm_conf`.
//!
//! The plugin fills [`PriorityConfig`] from `slurm_conf` at init and at every reconfigure; the
//! simulator builds one directly. Flag values are Slurm's `PRIORITY_FLAGS_*` bits (slurm.h,
//! identical in 22.05 and 24.11), so the plugin passes `slurm_conf.priority_flags` unchanged.

/// Which Slurm release's multifactor to reproduce (the formula differs in small ways).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Release {
    /// 22.05: job size uses `node_record_count` with unsigned wrap, no `qos_list`, the
    /// multi-partition array has one spare trailing slot.
    V22_05,
    /// 23.11 – 24.11: job size uses `active_node_record_count` and is skipped when it or
    /// `cluster_cpus` is 0; multi-QOS jobs get a partition × QOS array.
    #[default]
    V24_11,
}

/// `PriorityFlags` bits (Slurm's `PRIORITY_FLAGS_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Flags(pub u32);

impl Flags {
    /// `ACCRUE_ALWAYS`: age counts from submit time, ignoring dependencies/holds.
    pub const ACCRUE_ALWAYS: u32 = 1 << 0;
    /// `MAX_TRES`: billing uses the max of the TRES (affects usage accrual, not the sum here).
    pub const MAX_TRES: u32 = 1 << 1;
    /// `SMALL_RELATIVE_TO_TIME`: job size divided by the time limit.
    pub const SIZE_RELATIVE: u32 = 1 << 2;
    /// `DEPTH_OBLIVIOUS`: classic fair share with the depth-oblivious effective usage.
    pub const DEPTH_OBLIVIOUS: u32 = 1 << 3;
    /// `CALCULATE_RUNNING`: recompute running jobs too.
    pub const CALCULATE_RUNNING: u32 = 1 << 4;
    /// `FAIR_TREE` (the default; `NO_FAIR_TREE` clears it).
    pub const FAIR_TREE: u32 = 1 << 5;
    /// `INCR_ONLY`: priorities only ever increase.
    pub const INCR_ONLY: u32 = 1 << 6;
    /// `NO_NORMAL_ASSOC`: use the raw association priority.
    pub const NO_NORMAL_ASSOC: u32 = 1 << 7;
    /// `NO_NORMAL_PART`: use the raw `PriorityJobFactor`.
    pub const NO_NORMAL_PART: u32 = 1 << 8;
    /// `NO_NORMAL_QOS`: use the raw QOS priority.
    pub const NO_NORMAL_QOS: u32 = 1 << 9;
    /// `NO_NORMAL_TRES`: use raw TRES counts.
    pub const NO_NORMAL_TRES: u32 = 1 << 10;

    /// Whether `bit` (one of the constants) is set.
    pub fn has(self, bit: u32) -> bool {
        self.0 & bit != 0
    }

    /// Parses a `PriorityFlags=` value (comma separated names, as slurm.conf spells them).
    /// Unknown names are returned as the error. The default (empty) is `FAIR_TREE`.
    pub fn parse(value: &str) -> Result<Flags, String> {
        let mut bits = Self::FAIR_TREE;
        for name in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            match name.to_ascii_uppercase().as_str() {
                "ACCRUE_ALWAYS" => bits |= Self::ACCRUE_ALWAYS,
                "MAX_TRES" => bits |= Self::MAX_TRES,
                "SMALL_RELATIVE_TO_TIME" => bits |= Self::SIZE_RELATIVE,
                // read_config.c: DEPTH_OBLIVIOUS and NO_FAIR_TREE both turn Fair Tree off.
                "DEPTH_OBLIVIOUS" => bits = (bits | Self::DEPTH_OBLIVIOUS) & !Self::FAIR_TREE,
                "NO_FAIR_TREE" => bits &= !Self::FAIR_TREE,
                "FAIR_TREE" => bits |= Self::FAIR_TREE,
                "CALCULATE_RUNNING" => bits |= Self::CALCULATE_RUNNING,
                "INCR_ONLY" => bits |= Self::INCR_ONLY,
                "NO_NORMAL_ALL" => {
                    bits |= Self::NO_NORMAL_ASSOC
                        | Self::NO_NORMAL_PART
                        | Self::NO_NORMAL_QOS
                        | Self::NO_NORMAL_TRES
                }
                "NO_NORMAL_ASSOC" => bits |= Self::NO_NORMAL_ASSOC,
                "NO_NORMAL_PART" => bits |= Self::NO_NORMAL_PART,
                "NO_NORMAL_QOS" => bits |= Self::NO_NORMAL_QOS,
                "NO_NORMAL_TRES" => bits |= Self::NO_NORMAL_TRES,
                other => return Err(other.to_string()),
            }
        }
        Ok(Flags(bits))
    }
}

/// `PriorityWeight*` (all `uint32_t` in `slurm_conf`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Weights {
    /// `PriorityWeightAge`.
    pub age: u32,
    /// `PriorityWeightAssoc`.
    pub assoc: u32,
    /// `PriorityWeightFairshare`.
    pub fairshare: u32,
    /// `PriorityWeightJobSize`.
    pub job_size: u32,
    /// `PriorityWeightPartition`.
    pub partition: u32,
    /// `PriorityWeightQOS`.
    pub qos: u32,
}

/// Everything `_internal_setup` reads, plus the release to mimic.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct PriorityConfig {
    /// Release whose formula to reproduce.
    pub release: Release,
    /// The integer weights.
    pub weights: Weights,
    /// `PriorityWeightTRES` as an array indexed like the cluster's TRES table; `None` when unset
    /// (multifactor's `weight_tres == NULL`: no TRES term at all).
    pub tres_weights: Option<Vec<f64>>,
    /// `PriorityMaxAge` in seconds (Slurm's default is 7 days).
    pub max_age_secs: u32,
    /// `PriorityFavorSmall`.
    pub favor_small: bool,
    /// `PriorityFlags`.
    pub flags: Flags,
    /// `FairShareDampeningFactor` (classic fair share only; 1 by default).
    pub damp_factor: u16,
}

impl PriorityConfig {
    /// Slurm's defaults: all weights 0, max age 7 days, Fair Tree, damp factor 1.
    pub fn slurm_default(release: Release) -> Self {
        PriorityConfig {
            release,
            weights: Weights::default(),
            tres_weights: None,
            max_age_secs: 7 * 24 * 3600,
            favor_small: false,
            flags: Flags(Flags::FAIR_TREE),
            damp_factor: 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_flags_like_read_config() {
        assert_eq!(Flags::parse("").map(|f| f.0), Ok(Flags::FAIR_TREE));
        let f = Flags::parse("NO_FAIR_TREE,NO_NORMAL_PART").expect("valid");
        assert!(!f.has(Flags::FAIR_TREE) && f.has(Flags::NO_NORMAL_PART));
        let f = Flags::parse("DEPTH_OBLIVIOUS").expect("valid");
        assert!(f.has(Flags::DEPTH_OBLIVIOUS) && !f.has(Flags::FAIR_TREE));
        assert_eq!(Flags::parse("BOGUS"), Err("BOGUS".to_string()));
    }
}
