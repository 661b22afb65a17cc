//! Safe, typed views of Slurm's `bitstr_t`.
//!
//! Ownership is in the type: [`BitmapRef`]/[`BitmapMut`] borrow a bitmap Slurm owns (a job's
//! `node_bitmap`, a GRES `gres_bit_select[n]`), [`Bitmap`] owns one and frees it with
//! `slurm_bit_free`. Indices are typed ([`NodeIndex`], [`GpuIndex`]) so node and GPU bits never
//! mix, and every index is checked against `bit_size` before the C call (Slurm's own
//! `bit_test` asserts, which would abort slurmctld). Only `slurm_bit_*` functions touch the
//! bits: `bitstr_t` has a private header. A plugin bridges to its own set types with
//! [`BitmapRef::iter_set`] and [`BitmapMut::write_members`] (gputopo: `slurm::gpu_bits`).

use std::marker::PhantomData;
use std::ptr::NonNull;

use crate::SlurmError;
use crate::sys;

/// A typed bit position.
pub trait BitIndex: Copy {
    /// The bit number.
    fn bit(self) -> usize;
    /// The index for a bit number.
    fn from_bit(bit: usize) -> Self;
}

/// Index into slurmctld's node table (`node_record_table_ptr`), as in a job's `node_bitmap`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeIndex(pub usize);

/// Index of a GPU on one node, in GRES bitmap order (the `IDX` Slurm prints).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GpuIndex(pub usize);

impl BitIndex for NodeIndex {
    fn bit(self) -> usize {
        self.0
    }
    fn from_bit(bit: usize) -> Self {
        Self(bit)
    }
}

impl BitIndex for GpuIndex {
    fn bit(self) -> usize {
        self.0
    }
    fn from_bit(bit: usize) -> Self {
        Self(bit)
    }
}

/// The shared read operations; every public type wraps one of these.
#[derive(Debug, Clone, Copy)]
struct Bits(NonNull<sys::bitstr_t>);

impl Bits {
    fn size(self) -> usize {
        // SAFETY: self.0 is a live bitmap (guaranteed by the constructor of the public type).
        let n = unsafe { sys::slurm_bit_size(self.0.as_ptr()) };
        usize::try_from(n).unwrap_or(0)
    }

    fn offset(self, bit: usize) -> Result<sys::bitoff_t, SlurmError> {
        let size = self.size();
        if bit < size {
            sys::bitoff_t::try_from(bit).map_err(|_| SlurmError::OutOfBounds { index: bit, size })
        } else {
            Err(SlurmError::OutOfBounds { index: bit, size })
        }
    }

    fn test(self, bit: usize) -> bool {
        let Ok(off) = self.offset(bit) else {
            return false;
        };
        // SAFETY: live bitmap, and off < bit_size was checked above.
        let set = unsafe { sys::slurm_bit_test(self.0.as_ptr(), off) };
        set != 0
    }

    /// The set bits, ascending. Reads the size once and scans only from the first to the
    /// last set bit (`bit_ffs`/`bit_fls`, which return -1 for none): GPU bitmaps are read
    /// for every candidate node on every `select_p_job_test` call.
    /// An empty bitmap (a free node's `gres_bit_alloc`) costs one call.
    fn set_bits(self) -> impl Iterator<Item = usize> {
        // SAFETY: live bitmap.
        let first = unsafe { sys::slurm_bit_ffs(self.0.as_ptr()) };
        let range = match usize::try_from(first) {
            Err(_) => 0..0,
            Ok(a) => {
                let size = self.size();
                // SAFETY: live bitmap.
                let last = unsafe { sys::slurm_bit_fls(self.0.as_ptr()) };
                match usize::try_from(last) {
                    Ok(b) if a <= b => a..b.saturating_add(1).min(size),
                    _ => 0..0,
                }
            }
        };
        range.filter(move |&bit| {
            let Ok(off) = sys::bitoff_t::try_from(bit) else {
                return false;
            };
            // SAFETY: live bitmap, and bit < bit_size (the range is cut at the size read
            // above; the bitmap is not resized during the borrow).
            unsafe { sys::slurm_bit_test(self.0.as_ptr(), off) != 0 }
        })
    }

    fn count(self) -> usize {
        // SAFETY: live bitmap.
        let n = unsafe { sys::slurm_bit_set_count(self.0.as_ptr()) };
        usize::try_from(n).unwrap_or(0)
    }

    fn clear_all(self) {
        // SAFETY: live bitmap the caller may mutate (BitmapMut/Bitmap).
        unsafe { sys::slurm_bit_clear_all(self.0.as_ptr()) };
    }

    /// Clears every bit, then sets `bits` (the size read once, one `bit_set` per bit: the
    /// candidate bitmap is rewritten before every cons_tres try). Returns how many of
    /// `bits` were outside the bitmap (not set).
    fn set_only(self, bits: impl IntoIterator<Item = usize>) -> usize {
        self.clear_all();
        let size = self.size();
        let mut outside = 0;
        for bit in bits {
            match sys::bitoff_t::try_from(bit) {
                Ok(off) if bit < size => {
                    // SAFETY: live bitmap the caller may mutate (BitmapMut/Bitmap), off < bit_size.
                    unsafe { sys::slurm_bit_set(self.0.as_ptr(), off) };
                }
                _ => outside += 1,
            }
        }
        outside
    }

    fn put(self, bit: usize, on: bool) -> Result<(), SlurmError> {
        let off = self.offset(bit)?;
        if on {
            // SAFETY: live bitmap the caller may mutate (BitmapMut/Bitmap), off < bit_size.
            unsafe { sys::slurm_bit_set(self.0.as_ptr(), off) };
        } else {
            // SAFETY: as above.
            unsafe { sys::slurm_bit_clear(self.0.as_ptr(), off) };
        }
        Ok(())
    }
}

macro_rules! read_api {
    () => {
        /// Number of bits (`bit_size`).
        #[doc(alias = "bit_size")]
        pub fn len(&self) -> usize {
            self.bits.size()
        }
        /// True when the bitmap has no bits at all.
        pub fn is_empty(&self) -> bool {
            self.len() == 0
        }
        /// Whether `i` is set; an index outside the bitmap is "not set".
        #[doc(alias = "bit_test")]
        pub fn contains(&self, i: I) -> bool {
            self.bits.test(i.bit())
        }
        /// Number of set bits.
        #[doc(alias = "bit_set_count")]
        pub fn count(&self) -> usize {
            self.bits.count()
        }
        /// The set indices, ascending.
        #[doc(alias = "bit_ffs")]
        #[doc(alias = "bit_fls")]
        pub fn iter_set(&self) -> impl Iterator<Item = I> + '_ {
            self.bits.set_bits().map(I::from_bit)
        }
    };
}

macro_rules! write_api {
    () => {
        /// Sets bit `i`.
        ///
        /// # Errors
        /// [`SlurmError::OutOfBounds`] when `i` is not below [`Self::len`].
        #[doc(alias = "bit_set")]
        pub fn set(&mut self, i: I) -> Result<(), SlurmError> {
            self.bits.put(i.bit(), true)
        }

        /// Clears bit `i`.
        ///
        /// # Errors
        /// [`SlurmError::OutOfBounds`] when `i` is not below [`Self::len`].
        #[doc(alias = "bit_clear")]
        pub fn clear(&mut self, i: I) -> Result<(), SlurmError> {
            self.bits.put(i.bit(), false)
        }

        /// Clears every bit (`bit_clear_all`: one call, not one per bit).
        #[doc(alias = "bit_clear_all")]
        pub fn clear_all(&mut self) {
            self.bits.clear_all();
        }

        /// Makes `members` the only set bits (`bit_clear_all`, then one `bit_set` each, the
        /// size read once); returns how many of them were outside the bitmap (not set).
        pub fn set_only(&mut self, members: impl IntoIterator<Item = I>) -> usize {
            self.bits.set_only(members.into_iter().map(BitIndex::bit))
        }
    };
}

/// A bitmap owned by Slurm, borrowed read-only.
#[doc(alias = "bitstr_t")]
#[derive(Debug)]
pub struct BitmapRef<'a, I: BitIndex> {
    bits: Bits,
    _borrow: PhantomData<(&'a sys::bitstr_t, I)>,
}

impl<I: BitIndex> BitmapRef<'_, I> {
    /// Borrows a Slurm bitmap; null becomes `None`.
    ///
    /// # Safety
    /// `ptr` is null or a valid `bitstr_t` that nobody frees or mutates during `'a`.
    pub unsafe fn from_raw(ptr: *mut sys::bitstr_t) -> Option<Self> {
        NonNull::new(ptr).map(|p| Self {
            bits: Bits(p),
            _borrow: PhantomData,
        })
    }

    read_api!();
}

/// A bitmap owned by Slurm, borrowed for writing.
#[doc(alias = "bitstr_t")]
#[derive(Debug)]
pub struct BitmapMut<'a, I: BitIndex> {
    bits: Bits,
    _borrow: PhantomData<(&'a mut sys::bitstr_t, I)>,
}

impl<I: BitIndex> BitmapMut<'_, I> {
    /// Borrows a Slurm bitmap for writing; null becomes `None`.
    ///
    /// # Safety
    /// `ptr` is null or a valid `bitstr_t` that only this borrow accesses during `'a`.
    pub unsafe fn from_raw(ptr: *mut sys::bitstr_t) -> Option<Self> {
        NonNull::new(ptr).map(|p| Self {
            bits: Bits(p),
            _borrow: PhantomData,
        })
    }

    read_api!();
    write_api!();
}

impl<I: BitIndex> BitmapMut<'_, I> {
    /// Makes the set bits exactly those for which `contains` holds, where `last` is the
    /// highest member (one `bit_set`/`bit_clear` per bit, the size read once).
    ///
    /// # Errors
    /// [`SlurmError::OutOfBounds`] when `last` is beyond the bitmap; the bitmap is then left
    /// unchanged.
    pub fn write_members(
        &mut self,
        last: Option<usize>,
        contains: impl Fn(usize) -> bool,
    ) -> Result<(), SlurmError> {
        let size = self.len();
        if let Some(bad) = last.filter(|g| *g >= size) {
            return Err(SlurmError::OutOfBounds { index: bad, size });
        }
        for bit in 0..size {
            self.bits.put(bit, contains(bit))?;
        }
        Ok(())
    }
}

/// A bitmap the plugin allocated with `slurm_bit_alloc`; freed on drop (`bit_free`).
#[doc(alias = "bitstr_t")]
#[doc(alias = "bit_free")]
#[derive(Debug)]
pub struct Bitmap<I: BitIndex> {
    bits: Bits,
    _index: PhantomData<I>,
}

impl<I: BitIndex> Bitmap<I> {
    /// Allocates `len` cleared bits from Slurm's allocator (so Slurm may take ownership later).
    #[doc(alias = "bit_alloc")]
    pub fn new(len: usize) -> Option<Self> {
        let n = sys::bitoff_t::try_from(len).ok()?;
        // SAFETY: plain allocation; slurm_bit_alloc returns a valid bitmap (it aborts on OOM).
        let ptr = unsafe { sys::slurm_bit_alloc(n) };
        NonNull::new(ptr).map(|p| Self {
            bits: Bits(p),
            _index: PhantomData,
        })
    }

    read_api!();
    write_api!();

    /// Hands the bitmap to Slurm (e.g. as a `select_p_*` return value); Slurm frees it.
    pub fn into_raw(self) -> *mut sys::bitstr_t {
        let ptr = self.bits.0.as_ptr();
        std::mem::forget(self);
        ptr
    }
}

impl<I: BitIndex> Drop for Bitmap<I> {
    fn drop(&mut self) {
        let mut ptr = self.bits.0.as_ptr();
        // SAFETY: we own this bitmap (allocated by slurm_bit_alloc, never handed out).
        unsafe { sys::slurm_bit_free(&mut ptr) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owned_and_borrowed_views_agree_and_check_bounds() {
        let mut owned: Bitmap<GpuIndex> = Bitmap::new(8).expect("bit_alloc");
        assert_eq!((owned.len(), owned.count()), (8, 0));
        owned.set(GpuIndex(1)).unwrap();
        owned.set(GpuIndex(6)).unwrap();
        assert_eq!(
            owned.set(GpuIndex(8)),
            Err(SlurmError::OutOfBounds { index: 8, size: 8 })
        );
        assert!(!owned.contains(GpuIndex(99)), "out of range reads as unset");

        let raw = owned.into_raw();
        // SAFETY: raw is a live bitmap we own; only this view uses it until it is freed below.
        let mut view = unsafe { BitmapMut::<GpuIndex>::from_raw(raw) }.expect("non-null");
        assert_eq!(
            view.iter_set().collect::<Vec<_>>(),
            [GpuIndex(1), GpuIndex(6)]
        );
        view.write_members(Some(3), |g| g == 0 || g == 3).unwrap();
        assert_eq!(
            view.write_members(Some(9), |g| g == 9),
            Err(SlurmError::OutOfBounds { index: 9, size: 8 })
        );
        // SAFETY: as above; the mutable view is no longer used.
        let read = unsafe { BitmapRef::<GpuIndex>::from_raw(raw) }.expect("non-null");
        assert_eq!(
            read.iter_set().collect::<Vec<_>>(),
            [GpuIndex(0), GpuIndex(3)]
        );
        assert_eq!(read.count(), 2);
        let mut raw = raw;
        // SAFETY: frees the bitmap allocated above; no view is used afterwards.
        unsafe { sys::slurm_bit_free(&mut raw) };
    }

    #[test]
    fn set_bits_scan_between_first_and_last_set_bit() {
        let mut b: Bitmap<NodeIndex> = Bitmap::new(130).expect("bit_alloc");
        assert_eq!(b.iter_set().count(), 0, "no bit set");
        for i in [0, 64, 129] {
            b.set(NodeIndex(i)).unwrap();
        }
        let got: Vec<usize> = b.iter_set().map(|n| n.0).collect();
        assert_eq!(got, [0, 64, 129]);
        b.clear(NodeIndex(0)).unwrap();
        b.clear(NodeIndex(129)).unwrap();
        assert_eq!(b.iter_set().map(|n| n.0).collect::<Vec<_>>(), [64]);
        b.set(NodeIndex(3)).unwrap();
        b.clear_all();
        assert_eq!((b.len(), b.count()), (130, 0), "clear_all keeps the size");
    }

    #[test]
    fn set_only_replaces_the_set_bits_and_counts_those_outside() {
        let mut b: Bitmap<NodeIndex> = Bitmap::new(70).expect("bit_alloc");
        b.set(NodeIndex(5)).unwrap();
        let outside = b.set_only([1, 64, 69, 70, 500].map(NodeIndex));
        assert_eq!(outside, 2);
        assert_eq!(b.iter_set().map(|n| n.0).collect::<Vec<_>>(), [1, 64, 69]);
        assert_eq!(b.set_only([]), 0);
        assert_eq!((b.len(), b.count()), (70, 0));
    }
}
