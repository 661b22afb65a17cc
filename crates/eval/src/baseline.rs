//! The placement policies the evaluation compares gputopo's engine with, each a core
//! [`gputopo_core::placement::Policy`].

pub mod best_effort;
pub mod first_fit;
pub mod slurm_greedy;
