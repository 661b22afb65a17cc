//! Safe wrappers over the few Slurm facilities gputopo uses, one module per concern.
//!
//! This layer owns every dereference of a Slurm pointer and every call into libslurmfull.
//! It exposes Rust types (`Bitmap`, `ListRef`, `JobView`) and `Result`s; the pure core never
//! sees a C type. slurmctld-only symbols are reached only through [`ctld`].

pub mod bitmap;
pub mod conf;
pub mod ctld;
pub mod entry;
pub mod error;
pub mod gres;
pub mod job;
pub mod list;
pub mod log;
pub mod node;
pub mod preempt;
pub mod prio;

pub use entry::EntryPtr;
pub use error::{SlurmError, check};
