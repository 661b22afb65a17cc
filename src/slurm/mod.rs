//! gputopo's safe views of Slurm's records, one module per concern, over slurm-kit's generic
//! wrappers (re-exported below under their old paths: `bitmap`, `list`, `log`, `ctld`, ...).
//!
//! With the kit, this layer owns every dereference of a Slurm pointer and every call into
//! libslurmfull. It exposes Rust types (`JobView`, the kit's `Bitmap`, `ListRef`) and
//! `Result`s; the pure core never sees a C type. slurmctld-only symbols are reached only
//! through [`ctld`].

pub mod conf;
pub mod gpu_bits;
pub mod gres;
pub mod job;
pub mod log_labels;
pub mod node;
pub mod preempt;
pub mod prio;

// The generic wrappers live in the kit; these keep every `crate::slurm::X` path valid.
pub use slurm_kit::{EntryPtr, SlurmError, check};
pub use slurm_kit::{bitmap, ctld, entry, error, list, log};
