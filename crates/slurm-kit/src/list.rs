//! Safe iteration over Slurm's `list_t` (`List` in 22.05).
//!
//! [`ListRef`] borrows a list whose element type its single `unsafe` constructor vouches for.
//! Iteration uses `list_iterator_create`/`list_next` behind [`ListIter`], whose `Drop` calls
//! `list_iterator_destroy`, so an early `return` or `?` cannot leak the iterator (and its lock),
//! and no Rust closure is ever called from C (`list_for_each` is not used).
//!
//! [`ListRef::find_first`] is the one exception, for lookups that run per candidate node on
//! every `select_p_job_test` (an iterator costs an allocation, a free and a lock round per
//! element): `list_find_first_ro` with a plain `extern "C"` predicate ([`FindFn`]) that only
//! compares fields and cannot panic, one read lock for the whole walk.

use std::marker::PhantomData;
use std::ptr::NonNull;

use crate::sys;

/// A Slurm list of `*mut T` elements, borrowed.
#[doc(alias = "list_t")]
#[derive(Debug)]
pub struct ListRef<'a, T> {
    list: NonNull<sys::xlist>,
    _borrow: PhantomData<&'a T>,
}

impl<'a, T> ListRef<'a, T> {
    /// Borrows a list; null becomes `None`.
    ///
    /// # Safety
    /// `list` is null or a live Slurm list whose elements are valid `T`s, and neither the list
    /// nor its elements are freed during `'a`.
    pub unsafe fn from_raw(list: *mut sys::xlist) -> Option<Self> {
        NonNull::new(list).map(|list| Self {
            list,
            _borrow: PhantomData,
        })
    }

    /// Number of elements (`list_count`).
    #[doc(alias = "list_count")]
    pub fn len(&self) -> usize {
        // SAFETY: live list (constructor contract).
        let n = unsafe { sys::slurm_list_count(self.list.as_ptr()) };
        usize::try_from(n).unwrap_or(0)
    }

    /// True when the list has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Iterates the elements in list order as pointers: for callers that write elements
    /// under the lock that guards them (no shared reference to an element is made).
    pub fn iter_ptrs(&self) -> impl Iterator<Item = NonNull<T>> + use<'a, T> {
        let mut it = self.iter();
        std::iter::from_fn(move || it.next_ptr())
    }

    /// Iterates the elements in list order.
    #[doc(alias = "list_iterator_create")]
    #[doc(alias = "list_next")]
    pub fn iter(&self) -> ListIter<'a, T> {
        // SAFETY: live list; the iterator is destroyed by ListIter::drop.
        let it = unsafe { sys::slurm_list_iterator_create(self.list.as_ptr()) };
        ListIter {
            it: NonNull::new(it),
            _borrow: PhantomData,
        }
    }
}

/// A predicate for [`ListRef::find_first`], called by Slurm with (element, key): non-zero
/// for a match. It must not panic (it runs inside C) and must treat the element as a `T`
/// and the key as the `K` it was registered for.
pub type FindFn = unsafe extern "C" fn(*mut std::ffi::c_void, *mut std::ffi::c_void) -> i32;

impl<'a, T> ListRef<'a, T> {
    /// The first element for which `pred(element, key)` is non-zero (`list_find_first_ro`:
    /// one read lock, no iterator).
    ///
    /// # Safety
    /// `pred` reads its first argument as a `*const T` and its second as a `*const K`, and
    /// does not panic.
    #[doc(alias = "list_find_first_ro")]
    pub unsafe fn find_first<K>(&self, pred: FindFn, key: &K) -> Option<&'a T> {
        let key = std::ptr::from_ref(key).cast_mut().cast();
        // SAFETY: live list (constructor contract); `pred` matches the element and key types
        // (caller's contract) and only reads them; `key` outlives the call.
        let elem = unsafe { sys::slurm_list_find_first_ro(self.list.as_ptr(), Some(pred), key) };
        // SAFETY: ListRef's constructor vouched that every element is a valid T living for 'a.
        unsafe { elem.cast::<T>().as_ref() }
    }
}

/// An open Slurm list iterator; destroyed on drop.
#[derive(Debug)]
pub struct ListIter<'a, T> {
    it: Option<NonNull<sys::listIterator>>,
    _borrow: PhantomData<&'a T>,
}

impl<T> ListIter<'_, T> {
    /// The next element as a pointer (no reference made: a caller that holds the lock
    /// guarding the elements for writing may write through it).
    fn next_ptr(&mut self) -> Option<NonNull<T>> {
        let it = self.it?;
        // SAFETY: `it` is a live iterator created by ListRef::iter and not yet destroyed.
        let elem = unsafe { sys::slurm_list_next(it.as_ptr()) };
        NonNull::new(elem.cast::<T>())
    }
}

impl<'a, T> Iterator for ListIter<'a, T> {
    type Item = &'a T;

    fn next(&mut self) -> Option<&'a T> {
        // SAFETY: ListRef's constructor vouched that every element is a valid T living for 'a.
        self.next_ptr().map(|p| unsafe { p.as_ref() })
    }
}

impl<T> Drop for ListIter<'_, T> {
    fn drop(&mut self) {
        if let Some(it) = self.it.take() {
            // SAFETY: created by slurm_list_iterator_create, destroyed exactly once here.
            unsafe { sys::slurm_list_iterator_destroy(it.as_ptr()) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A [`FindFn`] over u32 elements and a u32 key.
    unsafe extern "C" fn same_u32(x: *mut std::ffi::c_void, key: *mut std::ffi::c_void) -> i32 {
        // SAFETY: the test's list holds u32 elements.
        let x = unsafe { *x.cast::<u32>() };
        // SAFETY: the test's key is a u32.
        let key = unsafe { *key.cast::<u32>() };
        i32::from(x == key)
    }

    #[test]
    fn iterates_in_order_and_stops_early_without_leaking() {
        let mut items = [10_u32, 20, 30];
        // SAFETY: a list without destructor; it only points at `items`, which outlive it.
        let raw = unsafe { sys::slurm_list_create(None) };
        for item in &mut items {
            // SAFETY: live list; the element is a valid u32 owned by the test.
            unsafe { sys::slurm_list_append(raw, std::ptr::from_mut(item).cast()) };
        }
        // SAFETY: raw is a live list of u32 elements that outlive the view.
        let list = unsafe { ListRef::<u32>::from_raw(raw) }.expect("non-null");
        assert_eq!(list.len(), 3);
        assert_eq!(list.iter().copied().collect::<Vec<_>>(), [10, 20, 30]);
        // An early stop drops the iterator (list_iterator_destroy); a second pass still works
        // (a leaked iterator would keep the list's lock in debug builds of Slurm).
        assert_eq!(list.iter().find(|v| **v == 20), Some(&20));
        assert_eq!(list.iter().count(), 3);
        // SAFETY: `same_u32` reads a u32 element and a u32 key, and cannot panic.
        assert_eq!(unsafe { list.find_first(same_u32, &20_u32) }, Some(&20));
        // SAFETY: as above.
        assert_eq!(unsafe { list.find_first(same_u32, &40_u32) }, None);
        // SAFETY: no view or iterator is used after this; the list has no element destructor.
        unsafe { sys::slurm_list_destroy(raw) };
    }
}
