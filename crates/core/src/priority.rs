//! Slurm's `priority/multifactor` math, reproduced exactly, and gputopo's extensions.
//!
//! Why: `priority/gputopo` must give the same numbers as stock multifactor from the same
//! slurm.conf keys, so a site can switch without surprises; and without slurmdbd it keeps age
//! and fair share working (multifactor switches both off). Everything here is a pure function
//! of plain input structs plus config: no clocks, no Slurm, so the plugin, the simulator and
//! the benches run the same code. The plugin (`src/plugin/priority*`) converts Slurm records
//! into these inputs and writes the results back.
//!
//! - [`config`]: weights, `PriorityFlags` bits, the release whose behaviour to reproduce.
//! - [`multifactor`]: the per-job factors, the weighted sum, clamping and the per-partition ×
//!   per-QOS priority array (`_get_priority_internal` / `set_priority_factors`);
//!   [`job_input`] what it reads (borrowed, so a pass allocates nothing per job).
//! - [`recalc`]: the rules of one recalculation pass (which jobs are scored, charged, listed
//!   by sprio; eligible time; charge windows; array length).
//! - [`fair_tree`]: Fair Tree ranking (`fair_tree.c`) over an association tree.
//! - [`classic`]: classic fair share (`_set_usage_efctv`, DEPTH_OBLIVIOUS, `calc_fs_factor`).
//! - [`ledger`]: gputopo's usage ledger (GPU-seconds and TRES billing per account/user with
//!   exponential decay) and the fair-share tree built from it; [`ledger_file`] its file;
//!   [`reset`] `PriorityUsageResetPeriod`.
//! - [`usage`]: association and QOS usage with slurmdbd, charged as multifactor charges it
//!   (what the accounting limits read); [`decay_clock`] multifactor's last-decay state file.
//!
//! Float semantics: multifactor computes factors in C `double`, which is `f64` here. Slurm keeps
//! association usage (`usage_raw`, `usage_norm`, `usage_efctv`, `level_fs`) in `long double`
//! (x87 80-bit); this module uses `f64` for those. The difference is below 1e-15 relative and
//! only shows when a weighted sum lands within that distance of an integer (truncation) or when
//! two Fair Tree `level_fs` values differ only in the extra bits (tie detection).

pub mod classic;
pub mod config;
pub mod decay_clock;
pub mod fair_tree;
pub mod gpu_count;
pub mod job_input;
pub mod ledger;
pub mod ledger_file;
pub mod multifactor;
pub mod recalc;
pub mod reset;
pub mod usage;

pub use config::{Flags, PriorityConfig, Release, Weights};
pub use fair_tree::{AssocId, AssocNode, AssocTree};
pub use ledger::{Ledger, LedgerError, UsageCharge};
pub use multifactor::{
    AssocInput, ClusterInput, JobInput, JobPriority, PartitionInput, QosInput, WeightedFactors,
    job_priority, job_priority_into,
};

/// Slurm's `NO_VAL` (32-bit "not set").
pub const NO_VAL: u32 = 0xffff_fffe;
/// Slurm's `NO_CONSUME_VAL64`: a TRES the job holds without consuming it.
pub const NO_CONSUME_VAL64: u64 = 0xffff_ffff_ffff_fffd;
/// Slurm's `NICE_OFFSET`: nice and site factor are stored with this offset added.
pub const NICE_OFFSET: u32 = 0x8000_0000;
/// Slurm's `SLURMDB_FS_USE_PARENT`: `FairShare=parent`.
pub const FS_USE_PARENT: u32 = 0x7fff_ffff;
