//! gputopo-eval: what only the evaluation needs, kept out of the library slurmctld loads.
//!
//! - [`sim`]: the trace-driven cluster simulator (placement, faults, preemption, throttling),
//!   driving the core's own engine with a virtual clock.
//! - [`baseline`]: the policies gputopo is compared against: [`baseline::slurm_greedy`] (a
//!   model of stock cons_tres), [`baseline::best_effort`] (go-gpuallocator's partition-score
//!   policy) and [`baseline::first_fit`].
//!
//! Used by the agent's `simulate` command, the benches and the examples behind
//! `docs/results*.md`. Depends on `gputopo-core`; nothing in the core or the plugin depends
//! on this crate.
#![forbid(unsafe_code)]

pub mod baseline;
pub mod sim;
