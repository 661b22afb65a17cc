//! slurmctld-only symbols, resolved at run time.
//!
//! `job_list`, `lock_slurmctld`, `find_job_record`, ... are defined by the slurmctld executable
//! (exported with `-export-dynamic`), not by libslurmfull. rustc links cdylibs with `-z now`,
//! so a direct reference would make the `.so` fail to load in slurmd, slurmstepd, sinfo or
//! sshare, which also load it. This module is the only place that reaches such symbols: it looks
//! each one up with `dlsym(RTLD_DEFAULT, name)` once and caches the answer in a `OnceLock`.
//! Outside slurmctld the lookup yields `None`. Declare a symbol with [`ctld_symbol!`].

use std::ffi::{CStr, c_void};
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

    /// The symbol as a function of type `F`, or `None` outside slurmctld. The one place
    /// slurmctld functions get their type: callers name the C prototype once, in `F`.
    ///
    /// # Safety
    /// `F` is an `unsafe extern "C" fn(...)` type matching the symbol's C prototype in the
    /// running slurmctld.
    pub unsafe fn function<F: Copy>(&self) -> Option<F> {
        const { assert!(size_of::<F>() == size_of::<*mut c_void>()) };
        let p = self.address()?.as_ptr();
        // SAFETY: F is a function pointer type of pointer size matching the symbol (caller
        // contract); the address is the symbol's, from dlsym.
        Some(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) })
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

/// Declares a cached slurmctld symbol: `ctld_symbol!(JOB_LIST = "job_list");`
#[macro_export]
macro_rules! ctld_symbol {
    ($(#[$meta:meta])* $vis:vis $ident:ident = $name:literal) => {
        $(#[$meta])*
        $vis static $ident: $crate::slurm::ctld::CtldSymbol = $crate::slurm::ctld::CtldSymbol::new(
            match ::std::ffi::CStr::from_bytes_with_nul(concat!($name, "\0").as_bytes()) {
                Ok(c) => c,
                Err(_) => panic!("symbol name contains NUL"),
            },
        );
    };
}

ctld_symbol!(
    /// `list_t *job_list` (src/slurmctld/job_mgr.c): every job record.
    pub JOB_LIST = "job_list"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slurmctld_symbols_are_absent_outside_slurmctld() {
        assert!(JOB_LIST.address().is_none());
        ctld_symbol!(MALLOC = "malloc");
        assert!(
            MALLOC.address().is_some(),
            "lookup works for a symbol that exists"
        );
    }
}
