//! End-to-end tests against a real local Slurm cluster started by `contrib/cluster.sh`.

mod agent;
mod engine;
mod foundation;
mod harness;
mod priority;
mod select;
