//! The node agent: subcommands that run on a compute node and read its GPUs through NVML.

pub mod gres_conf;
pub mod health;
pub mod publish;
pub mod topology;
