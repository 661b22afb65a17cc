//! Safe iteration over Slurm's `list_t` (`List` in 22.05).
//!
//! [`ListRef`] borrows a list whose element type its single `unsafe` constructor vouches for.
//! Iteration uses `list_iterator_create`/`list_next` behind [`ListIter`], whose `Drop` calls
//! `list_iterator_destroy`, so an early `return` or `?` cannot leak the iterator (and its lock),
//! and no Rust closure is ever called from C (`list_for_each` is not used).

use std::marker::PhantomData;
use std::ptr::NonNull;

use crate::ffi;

/// A Slurm list of `*mut T` elements, borrowed.
#[derive(Debug)]
pub struct ListRef<'a, T> {
    list: NonNull<ffi::xlist>,
    _borrow: PhantomData<&'a T>,
}

impl<'a, T> ListRef<'a, T> {
    /// Borrows a list; null becomes `None`.
    ///
    /// # Safety
    /// `list` is null or a live Slurm list whose elements are valid `T`s, and neither the list
    /// nor its elements are freed during `'a`.
    pub unsafe fn from_raw(list: *mut ffi::xlist) -> Option<Self> {
        NonNull::new(list).map(|list| Self {
            list,
            _borrow: PhantomData,
        })
    }

    /// Number of elements (`list_count`).
    pub fn len(&self) -> usize {
        // SAFETY: live list (constructor contract).
        let n = unsafe { ffi::slurm_list_count(self.list.as_ptr()) };
        usize::try_from(n).unwrap_or(0)
    }

    /// True when the list has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Iterates the elements in list order.
    pub fn iter(&self) -> ListIter<'a, T> {
        // SAFETY: live list; the iterator is destroyed by ListIter::drop.
        let it = unsafe { ffi::slurm_list_iterator_create(self.list.as_ptr()) };
        ListIter {
            it: NonNull::new(it),
            _borrow: PhantomData,
        }
    }
}

/// An open Slurm list iterator; destroyed on drop.
#[derive(Debug)]
pub struct ListIter<'a, T> {
    it: Option<NonNull<ffi::listIterator>>,
    _borrow: PhantomData<&'a T>,
}

impl<'a, T> Iterator for ListIter<'a, T> {
    type Item = &'a T;

    fn next(&mut self) -> Option<&'a T> {
        let it = self.it?;
        // SAFETY: `it` is a live iterator created by ListRef::iter and not yet destroyed.
        let elem = unsafe { ffi::slurm_list_next(it.as_ptr()) };
        // SAFETY: ListRef's constructor vouched that every element is a valid T living for 'a.
        unsafe { elem.cast::<T>().as_ref() }
    }
}

impl<T> Drop for ListIter<'_, T> {
    fn drop(&mut self) {
        if let Some(it) = self.it.take() {
            // SAFETY: created by slurm_list_iterator_create, destroyed exactly once here.
            unsafe { ffi::slurm_list_iterator_destroy(it.as_ptr()) };
        }
    }
}
