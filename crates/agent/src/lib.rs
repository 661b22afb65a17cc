//! The library half of the `gputopo` command: what `gputopo nodes` and `gputopo metrics` read
//! from Slurm and make of it, in a library so that the benchmark (benches/metrics.rs) times
//! exactly the code the commands run.
//!
//! Everything else of the command (NVML, publishing, the simulator front end) stays in the
//! binary's own modules.
#![deny(unsafe_code)]

pub mod fleet;
