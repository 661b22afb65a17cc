//! Slurm return codes become `Result` here, in one place ([`check`]), the way nvml-wrapper's
//! `nvml_try` does it. Nothing else in the crate compares against `SLURM_SUCCESS`.

use std::ffi::c_int;

use crate::sys;

/// A failure reported by, or found in the data of, Slurm.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SlurmError {
    /// A Slurm function returned something other than `SLURM_SUCCESS`.
    #[error("Slurm returned rc={0}")]
    Rc(c_int),
    /// A C enum or flag field held a value this release's headers do not define.
    #[error("unexpected value {0} from Slurm")]
    UnexpectedValue(i64),
    /// An index was outside a bitmap (checked before every C call).
    #[error("bit {index} is outside a bitmap of {size} bits")]
    OutOfBounds {
        /// The offending index.
        index: usize,
        /// `bit_size` of the bitmap.
        size: usize,
    },
}

/// Maps a Slurm return code to `Result`.
///
/// # Errors
/// [`SlurmError::Rc`] for every value other than `SLURM_SUCCESS`.
#[doc(alias = "SLURM_SUCCESS")]
pub fn check(rc: c_int) -> Result<(), SlurmError> {
    if i64::from(rc) == i64::from(sys::SLURM_SUCCESS) {
        Ok(())
    } else {
        Err(SlurmError::Rc(rc))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_maps_success_and_failure() {
        assert_eq!(check(0), Ok(()));
        assert_eq!(check(sys::SLURM_ERROR), Err(SlurmError::Rc(-1)));
    }
}
