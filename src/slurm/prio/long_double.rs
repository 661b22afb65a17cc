//! `long double` fields of Slurm's usage records (`usage_raw`, `usage_tres_raw[]`,
//! `usage_efctv`, `usage_norm`, `level_fs`), which Rust cannot express: bindgen gives their
//! storage as `u128`, and every read, write and arithmetic operation on them is a call into
//! the C shim (slurm-headers/priority_shim.c), written in multifactor's own expressions so
//! that sums and decays are C's x87 `long double` arithmetic, not an `f64` approximation.

unsafe extern "C" {
    fn gputopo_ld_get(p: *const u128) -> f64;
    fn gputopo_ld_set(p: *mut u128, v: f64);
    fn gputopo_ld_add(p: *mut u128, v: f64);
    fn gputopo_ld_add_prod(p: *mut u128, a: f64, b: u64);
    fn gputopo_ld_scale(p: *mut u128, n: usize, v: f64);
    fn gputopo_ld_zero(p: *mut u128, n: usize);
}

/// `(double) *p`.
///
/// # Safety
/// `p` points to a live `long double` that nobody writes concurrently (the assoc_mgr lock
/// that guards it is held).
pub unsafe fn get(p: *const u128) -> f64 {
    // SAFETY: caller contract; the shim only loads the value.
    unsafe { gputopo_ld_get(p) }
}

/// `*p = v`.
///
/// # Safety
/// `p` points to a live `long double` the caller may write (assoc_mgr write lock held).
pub unsafe fn set(p: *mut u128, v: f64) {
    // SAFETY: caller contract.
    unsafe { gputopo_ld_set(p, v) }
}

/// `*p += (long double) v`.
///
/// # Safety
/// As [`set`].
pub unsafe fn add(p: *mut u128, v: f64) {
    // SAFETY: caller contract.
    unsafe { gputopo_ld_add(p, v) }
}

/// `*p += (long double) a * (long double) b`.
///
/// # Safety
/// As [`set`].
pub unsafe fn add_product(p: *mut u128, a: f64, b: u64) {
    // SAFETY: caller contract.
    unsafe { gputopo_ld_add_prod(p, a, b) }
}

/// `p[i] *= v` for `i < n`.
///
/// # Safety
/// `p` points to at least `n` live `long double`s the caller may write.
pub unsafe fn scale(p: *mut u128, n: usize, v: f64) {
    // SAFETY: caller contract.
    unsafe { gputopo_ld_scale(p, n, v) }
}

/// `p[i] = 0` for `i < n`.
///
/// # Safety
/// As [`scale`].
pub unsafe fn zero(p: *mut u128, n: usize) {
    // SAFETY: caller contract.
    unsafe { gputopo_ld_zero(p, n) }
}
