//! End-to-end tests against a real local Slurm cluster started by `contrib/cluster.sh`.

mod agent;
mod agent_telemetry;
mod autodetect;
mod checkpoint;
mod cons_tres_features;
mod drain;
mod engine;
mod foundation;
mod gang;
mod gres_configs;
mod harness;
mod identity;
mod metrics;
mod preempt;
mod preempt_qos;
mod priority;
mod priority_fairshare;
mod priority_ha;
mod priority_ledger;
mod priority_memory;
mod resv_gres;
mod select;
mod shared;
