//! The fleet as slurmctld knows it, read through `scontrol`: records ([`records`]), the
//! cluster model gputopo derives from them ([`view`]), and its two renderings, the `gputopo
//! nodes` table ([`nodes`]) and the metrics exposition ([`metrics`]).

pub mod drain;
pub mod metrics;
pub mod nodes;
pub mod records;
pub mod view;
