//! ABI helpers for a plugin's export macros: the identity strings Slurm reads in place
//! ([`c_array`]) and the conversion of entry-point arguments into what safe hooks receive
//! ([`HookArg`]). gputopo's macros (`plugin::export`: `plugin_identity!`, `forwarding_table!`,
//! `own_entry_points!`) expand to these.

use crate::EntryPtr;

/// Copies a NUL-terminated string literal into a fixed array at compile time, rejecting a
/// missing final NUL or an interior one: the identity symbols (`const char plugin_name[]`,
/// `plugin_type[]`) are C strings Slurm reads in place.
pub const fn c_array<const N: usize>(s: &str) -> [u8; N] {
    let bytes = s.as_bytes();
    assert!(bytes.len() == N, "length mismatch");
    assert!(
        N > 0 && bytes[N - 1] == 0,
        "identity string must end with NUL"
    );
    let mut out = [0u8; N];
    let mut i = 0;
    while i < N {
        assert!(
            i == N - 1 || bytes[i] != 0,
            "interior NUL in identity string"
        );
        out[i] = bytes[i];
        i += 1;
    }
    out
}

/// Converts an entry-point argument into what a hook receives: raw pointers become
/// `Option<EntryPtr<'call, T>>` (so hooks build safe views without `unsafe`), plain values pass
/// through.
pub trait HookArg<'call> {
    /// What the hook receives.
    type Out;
    /// Converts the argument.
    ///
    /// # Safety
    /// `self` is an argument Slurm passed to the entry point that is running now, valid for the
    /// whole call (`'call`).
    unsafe fn into_hook_arg(self) -> Self::Out;
}

impl<'call, T: 'call> HookArg<'call> for *mut T {
    type Out = Option<EntryPtr<'call, T>>;
    unsafe fn into_hook_arg(self) -> Self::Out {
        // SAFETY: forwarded from this function's contract.
        unsafe { EntryPtr::new(self) }
    }
}

macro_rules! plain_hook_args {
    ($($t:ty),*) => {$(
        impl HookArg<'_> for $t {
            type Out = $t;
            unsafe fn into_hook_arg(self) -> $t {
                self
            }
        }
    )*};
}
plain_hook_args!(
    bool,
    u8,
    u16,
    u32,
    u64,
    usize,
    i8,
    i16,
    i32,
    i64,
    isize,
    f32,
    f64,
    ()
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_array_copies_with_nul() {
        let b: [u8; 15] = c_array("select/example\0");
        assert_eq!(&b, b"select/example\0");
    }
}
