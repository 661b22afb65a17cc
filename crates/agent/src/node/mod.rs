//! The node agent: subcommands that run on a compute node and read its GPUs through NVML
//! (`health`, `topology`, `gres-conf`, `publish`).
//!
//! Flow: [`settings`] finds gputopo.conf, the NVML library and the node name; [`probe`] reads
//! NVML on worker threads under a deadline; [`mapping`] puts the GPUs in Slurm's GRES index order
//! (through device minor numbers); [`report`] judges each GPU with the core's health policy and
//! builds the core's topology model; the subcommands print or publish the result.
//!
//! Exit codes of `health`, `topology` and `gres-conf` (see docs/agent.md):
//! 0 every GPU read, none faulty; 1 usage or configuration error; 2 NVML unavailable (no
//! library, driver not loaded, init failed or timed out); 3 some GPU `unknown` (timeout, failed
//! query, missing device); 4 some GPU `faulty` (and every GPU read).

pub mod conf_include;
pub mod gres_conf;
pub mod health;
pub mod kernel_log;
pub mod mapping;
mod nvml_raw;
pub mod probe;
pub mod publish;
pub mod report;
pub mod serve;
pub mod settings;
pub mod topology;
pub mod xid_state;
