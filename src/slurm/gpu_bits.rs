//! The only bridge between Slurm's GPU bitmaps (`slurm_kit::bitmap`, indexed by [`GpuIndex`])
//! and the core's `GpuSet` and `WideSet`: extension traits, so the kit stays free of gputopo's
//! types.

use gputopo_core::{GpuSet, WideSet};
use slurm_kit::SlurmError;
use slurm_kit::bitmap::{BitmapMut, BitmapRef, GpuIndex};

/// Reads a GPU bitmap as a core set.
pub trait ReadGpuSet {
    /// The set GPU indices as a core `GpuSet` (bits beyond what `GpuSet` holds are dropped).
    fn to_gpu_set(&self) -> GpuSet;
    /// The set GPU indices as a core `WideSet` (every index: nodes of any size).
    fn to_wide_set(&self) -> WideSet;
}

impl ReadGpuSet for BitmapRef<'_, GpuIndex> {
    fn to_gpu_set(&self) -> GpuSet {
        self.iter_set()
            .map(|g| g.0)
            .filter(|g| *g < gputopo_core::gpuset::MAX_GPUS)
            .collect()
    }

    fn to_wide_set(&self) -> WideSet {
        self.iter_set().map(|g| g.0).collect()
    }
}

/// Writes a core set into a GPU bitmap.
pub trait WriteGpuSet {
    /// Makes the bitmap equal to `set` (all other bits cleared).
    ///
    /// # Errors
    /// [`SlurmError::OutOfBounds`] when `set` names a GPU beyond the bitmap; the bitmap is then
    /// left unchanged.
    fn write_gpu_set(&mut self, set: GpuSet) -> Result<(), SlurmError>;

    /// [`Self::write_gpu_set`] for a set of any width (nodes beyond `GpuSet`'s 32 GPUs).
    ///
    /// # Errors
    /// As [`Self::write_gpu_set`].
    fn write_wide_set(&mut self, set: &WideSet) -> Result<(), SlurmError>;
}

impl WriteGpuSet for BitmapMut<'_, GpuIndex> {
    fn write_gpu_set(&mut self, set: GpuSet) -> Result<(), SlurmError> {
        self.write_members(set.iter().last(), |g| set.contains(g))
    }

    fn write_wide_set(&mut self, set: &WideSet) -> Result<(), SlurmError> {
        self.write_members(set.last(), |g| set.contains(g))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use slurm_kit::bitmap::Bitmap;

    #[test]
    fn core_sets_round_trip_through_a_slurm_bitmap() {
        let owned: Bitmap<GpuIndex> = Bitmap::new(8).expect("bit_alloc");
        let raw = owned.into_raw();
        // SAFETY: raw is a live bitmap we own; only this view uses it until it is freed below.
        let mut view = unsafe { BitmapMut::<GpuIndex>::from_raw(raw) }.expect("non-null");
        view.write_gpu_set(GpuSet::from_iter([0, 3])).unwrap();
        assert!(view.write_gpu_set(GpuSet::from_iter([9])).is_err());
        assert!(view.write_wide_set(&WideSet::from_iter([8])).is_err());
        // SAFETY: as above; the mutable view is no longer used.
        let read = unsafe { BitmapRef::<GpuIndex>::from_raw(raw) }.expect("non-null");
        assert_eq!(read.to_gpu_set(), GpuSet::from_iter([0, 3]));
        assert_eq!(read.to_wide_set(), WideSet::from_iter([0, 3]));
        let mut raw = raw;
        // SAFETY: frees the bitmap allocated above; no view is used afterwards.
        unsafe { slurm_kit::sys::slurm_bit_free(&mut raw) };
    }
}
