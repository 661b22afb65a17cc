//! slurmctld-only symbols, resolved at run time.
//!
//! `job_list`, `lock_slurmctld`, `find_job_record`, ... are defined by the slurmctld executable
//! (exported with `-export-dynamic`), not by libslurmfull. rustc links cdylibs with `-z now`,
//! so a direct reference would make the `.so` fail to load in slurmd, slurmstepd, sinfo or
//! sshare, which also load it. This module is the only place that reaches such symbols: it looks
//! each one up with `dlsym(RTLD_DEFAULT, name)` once and caches the answer in a `OnceLock`.
//! Outside slurmctld the lookup yields `None`. Declare a symbol with
//! [`ctld_symbol!`](crate::ctld_symbol), typed: a function with its C prototype ([`CtldFn`]),
//! a variable with its C type ([`CtldVar`]), so no caller casts an address.

use std::ffi::{CStr, c_void};
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::OnceLock;

/// A lazily resolved slurmctld symbol address (cached after the first lookup, even if absent).
#[derive(Debug)]
pub struct CtldSymbol {
    name: &'static CStr,
    addr: OnceLock<Option<usize>>,
}

impl CtldSymbol {
    /// A symbol to look up by `name` on first use.
    pub const fn new(name: &'static CStr) -> Self {
        Self {
            name,
            addr: OnceLock::new(),
        }
    }

    /// The symbol's name.
    pub fn name(&self) -> &'static CStr {
        self.name
    }

    /// Its address in this process, or `None` outside slurmctld.
    pub fn address(&self) -> Option<NonNull<c_void>> {
        let addr = *self.addr.get_or_init(|| {
            // SAFETY: dlsym with the RTLD_DEFAULT pseudo-handle and a NUL-terminated name.
            let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, self.name.as_ptr()) };
            (!p.is_null()).then_some(p as usize)
        });
        addr.and_then(|a| NonNull::new(a as *mut c_void))
    }
}

/// A slurmctld function resolved at run time, with its C prototype `F` (an
/// `unsafe extern "C" fn(...)` type), so callers get a typed function pointer and never
/// reinterpret an address themselves. Declared with [`ctld_symbol!`](crate::ctld_symbol).
#[derive(Debug)]
pub struct CtldFn<F> {
    symbol: CtldSymbol,
    _prototype: PhantomData<F>,
}

impl<F: Copy> CtldFn<F> {
    /// The function `name`.
    ///
    /// # Safety
    /// Where `name` is defined, its C prototype is exactly `F` (the declaration cites the
    /// slurmctld header it was read from).
    pub const unsafe fn new(name: &'static CStr) -> Self {
        Self {
            symbol: CtldSymbol::new(name),
            _prototype: PhantomData,
        }
    }

    /// The function, or `None` outside slurmctld.
    #[doc(alias = "dlsym")]
    pub fn get(&self) -> Option<F> {
        let addr = self.symbol.address()?;
        // SAFETY: `new`'s contract: the symbol is a function of prototype `F`.
        Some(unsafe { fn_from_symbol::<F>(addr) })
    }
}

/// A slurmctld global variable of C type `T`, resolved at run time. Declared with
/// [`ctld_symbol!`](crate::ctld_symbol).
#[derive(Debug)]
pub struct CtldVar<T> {
    symbol: CtldSymbol,
    _type: PhantomData<*const T>,
}

// SAFETY: only an address is kept (the pointee is read by callers under slurmctld's locks).
unsafe impl<T> Sync for CtldVar<T> {}

impl<T> CtldVar<T> {
    /// The variable `name`, of C type `T` where it is defined.
    pub const fn new(name: &'static CStr) -> Self {
        Self {
            symbol: CtldSymbol::new(name),
            _type: PhantomData,
        }
    }

    /// Its address, or `None` outside slurmctld. Reading or writing it is the caller's
    /// `unsafe`, under the slurmctld lock that protects the variable.
    pub fn ptr(&self) -> Option<NonNull<T>> {
        self.symbol.address().map(NonNull::cast)
    }
}

/// Reads a function pointer of type `F` from a `dlsym` result: the one place in the crate
/// where an address becomes a function (for [`CtldFn`] and the stock plugin's table).
///
/// # Safety
/// `sym` is the address of a function whose C prototype is exactly `F`, a function pointer
/// type.
pub unsafe fn fn_from_symbol<F: Copy>(sym: NonNull<c_void>) -> F {
    const { assert!(size_of::<F>() == size_of::<*mut c_void>()) };
    // SAFETY: F is a (thin) function pointer of the pointer's size; the caller guarantees the
    // prototype, so the address read as F is that function.
    unsafe { std::ptr::from_ref(&sym).cast::<F>().read() }
}

/// Declares a slurmctld symbol, resolved on first use:
/// - a function with its C prototype, `ctld_symbol!(pub LOCK: fn(sys::slurmctld_lock_t) = "lock_slurmctld");`
///   gives a [`CtldFn`] of `unsafe extern "C" fn(slurmctld_lock_t)`; the declaration is where
///   the prototype is vouched for (cite the header);
/// - a variable, `ctld_symbol!(pub JOB_LIST: static *mut sys::xlist = "job_list");` gives a
///   [`CtldVar`].
#[macro_export]
macro_rules! ctld_symbol {
    ($(#[$meta:meta])* $vis:vis $ident:ident: fn($($arg:ty),* $(,)?) $(-> $ret:ty)? = $name:literal) => {
        $(#[$meta])*
        #[doc(alias = $name)]
        $vis static $ident: $crate::ctld::CtldFn<unsafe extern "C" fn($($arg),*) $(-> $ret)?> =
            // SAFETY: the declaration states the function's C prototype (its doc cites where).
            unsafe { $crate::ctld::CtldFn::new($crate::ctld_symbol!(@name $name)) };
    };
    ($(#[$meta:meta])* $vis:vis $ident:ident: static $ty:ty = $name:literal) => {
        $(#[$meta])*
        #[doc(alias = $name)]
        $vis static $ident: $crate::ctld::CtldVar<$ty> =
            $crate::ctld::CtldVar::new($crate::ctld_symbol!(@name $name));
    };
    (@name $name:literal) => {
        match ::std::ffi::CStr::from_bytes_with_nul(concat!($name, "\0").as_bytes()) {
            Ok(c) => c,
            Err(_) => panic!("symbol name contains NUL"),
        }
    };
}

ctld_symbol!(
    /// `list_t *job_list` (src/slurmctld/job_mgr.c): every job record.
    pub JOB_LIST: static *mut crate::sys::xlist = "job_list"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slurmctld_symbols_are_absent_outside_slurmctld() {
        assert!(JOB_LIST.ptr().is_none());
        ctld_symbol!(
            /// `size_t strlen(const char *)`: any function this process has.
            STRLEN: fn(*const std::ffi::c_char) -> usize = "strlen"
        );
        let strlen = STRLEN.get().expect("lookup works for a symbol that exists");
        // SAFETY: a NUL-terminated string.
        assert_eq!(unsafe { strlen(c"four".as_ptr()) }, 4);
    }
}
