//! gputopo plugin library.
pub mod ffi;
