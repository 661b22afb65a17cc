//! gputopo's integration tests, one binary (as ripgrep does): it builds once and shares helpers.
//!
//! - `abi`: the built plugin exports exactly what the Slurm release requires.
//! - `e2e`: real munge, slurmctld and slurmd on this host (the `contrib/` harness). These are
//!   `#[ignore]`d; `contrib/test-all.sh` runs them under cargo-nextest with `GPUTOPO_E2E=1`.
//! - `skip`: how a test that does not apply at run time reports "skipped".

mod abi;
mod e2e;
mod skip;
