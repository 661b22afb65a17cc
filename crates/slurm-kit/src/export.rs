//! The macros that emit everything Slurm `dlsym`s from a plugin's `.so` (gputopo's
//! `select_gputopo_cons_tres.so`), and the ABI helpers they expand to.
//!
//! - [`plugin_identity!`](crate::plugin_identity): the identity data symbols (`plugin_name`,
//!   `plugin_type` as NUL-terminated byte *arrays*, `plugin_version` = `SLURM_VERSION_NUMBER`
//!   of the build tree, optional `plugin_id`) and `init`/`fini`, which start/stop the listed
//!   [`Role`](crate::lifecycle::Role)s through the reference-counted
//!   [`lifecycle`](crate::lifecycle).
//! - [`forwarding_table!`](crate::forwarding_table): from ONE list of entry points (one line per
//!   symbol of the release's `*_syms[]`), both the exported `extern "C"` functions and the
//!   struct of stock function pointers they forward to (resolved by `dlsym` on the stock
//!   plugin), so the two can never drift. Each line is `forward` (call the stock function
//!   unchanged) or `hook` (call a method of the role's hooks trait, which receives a `forward`
//!   closure plus the arguments it names, converted by [`HookArg`]). A line may carry
//!   attributes, e.g. `#[cfg(...)]` for an entry point only some releases of a table's range
//!   have.
//! - [`own_entry_points!`](crate::own_entry_points): exported functions implemented entirely by
//!   the plugin (no stock counterpart), e.g. gputopo's `priority_p_*`.
//!
//! Every generated body runs inside [`guard::entry`](crate::guard::entry) (a forwarding table's
//! inside [`guard::forwarding_entry`](crate::guard::forwarding_entry)), so no panic crosses the
//! ABI, and a hook is skipped once the guard is degraded.
//!
//! # Adding a second role (e.g. gputopo's `priority/gputopo`) to the same `.so`
//! 1. Write `src/plugin/priority.rs` with a `pub static ROLE: impl Role` whose `start`/`stop`
//!    set up and tear down the priority state, and the `priority_p_*` exports with
//!    [`own_entry_points!`](crate::own_entry_points) (or a [`forwarding_table!`](crate::forwarding_table) if it wraps a
//!    stock priority plugin).
//! 2. Append `&priority::ROLE` to the `roles:` list of the single `plugin_identity!` in
//!    `src/plugin/mod.rs`. One file has one `init`/`fini`: Slurm calls `init` once per role it
//!    loads the file as (dlopen returns the same handle), so `init` starts *all* roles on the
//!    first call and only counts later ones; `fini` stops them when the count returns to zero.
//!    Roles must therefore be cheap to start in processes that only use the other role.
//! 3. Install the same file also as `priority_gputopo.so` (a symlink in the gputopo plugin dir).
//!    Slurm's by-name load path does not check the `plugin_type` prefix. If a second artifact is
//!    preferred instead, a tiny cdylib crate invokes these same macros with its own identity.

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

/// Emits the identity data symbols and the reference-counted `init`/`fini` of this `.so`.
///
/// ```ignore
/// plugin_identity! {
///     name: "GPU topology-aware selection (wraps cons_tres)",
///     type: "select/gputopo_cons_tres",
///     id: 109,
///     log: LABELS,
///     error: PluginError,
///     roles: [&select::ROLE],
/// }
/// ```
/// `log` labels the plugin's records ([`log::Labels`](crate::log::Labels), installed by the
/// first `init`); `error` is the roles' [`Role::Error`](crate::lifecycle::Role::Error).
#[doc(alias = "plugin_name")]
#[doc(alias = "plugin_type")]
#[doc(alias = "plugin_version")]
#[macro_export]
macro_rules! plugin_identity {
    (name: $name:literal, type: $ty:literal, $(id: $id:expr,)? log: $labels:expr, error: $err:ty,
     roles: [$($role:expr),* $(,)?] $(,)?) => {
        /// Human-readable plugin name (C `const char plugin_name[]`).
        #[unsafe(no_mangle)]
        pub static plugin_name: [u8; concat!($name, "\0").len()] =
            $crate::export::c_array(concat!($name, "\0"));
        /// `<kind>/<name>`, matched against SelectType= (C `const char plugin_type[]`).
        #[unsafe(no_mangle)]
        pub static plugin_type: [u8; concat!($ty, "\0").len()] =
            $crate::export::c_array(concat!($ty, "\0"));
        /// Must equal the running Slurm's major.minor.micro exactly (`_verify_syms`).
        #[unsafe(no_mangle)]
        pub static plugin_version: u32 = $crate::sys::SLURM_VERSION_NUMBER;
        $(
            /// Select plugin id (`const uint32_t plugin_id`), see docs/deployment.md.
            #[unsafe(no_mangle)]
            pub static plugin_id: u32 = $id;
        )?

        static ROLES: &[&dyn $crate::lifecycle::Role<Error = $err>] = &[$($role),*];

        /// Called by Slurm after loading the file (once per role it is loaded as).
        #[unsafe(no_mangle)]
        pub extern "C" fn init() -> ::std::ffi::c_int {
            $crate::guard::entry("init", $crate::sys::SLURM_ERROR, || {
                $crate::lifecycle::init(ROLES, $labels).map(|()| 0)
            })
        }

        /// Called by Slurm before unloading (once per role).
        #[unsafe(no_mangle)]
        pub extern "C" fn fini() -> ::std::ffi::c_int {
            $crate::guard::entry("fini", $crate::sys::SLURM_ERROR, || {
                $crate::lifecycle::fini(ROLES);
                Ok::<_, $err>(0)
            })
        }
    };
}

/// Emits exported entry points plus the table of stock functions they forward to, from one list.
///
/// ```ignore
/// forwarding_table! {
///     stock StockSelect;
///     hooks SelectHooks = Steer;
///     degraded "select/gputopo forwards to select/cons_tres from now on";
///     forward fn select_p_state_save(dir_name: *mut c_char) -> c_int, fail = SLURM_ERROR;
///     hook fn select_p_reconfigure() -> c_int, fail = SLURM_ERROR => reconfigure();
/// }
/// ```
/// `stock` names the generated table type: `Stock::load(&StockLibrary)` resolves it by `dlsym`
/// once per process, `Stock::get()` hands it to the entry points. `hooks` names the trait (in
/// scope at the call site) and the value implementing it; a `hook` or `guarded` line calls the
/// trait method it names with `forward` first, then the arguments it lists, each converted by
/// [`HookArg`]. `degraded` is what a caught panic in any of the entry points leaves, logged
/// with it ([`guard::forwarding_entry`](crate::guard::forwarding_entry)).
#[doc(alias = "node_select_syms")]
#[macro_export]
macro_rules! forwarding_table {
    (
        stock $stock:ident;
        hooks $hooks_trait:ident = $hooks:expr;
        degraded $degraded:expr;
        $(
            $(#[$attr:meta])*
            $kind:ident fn $name:ident ( $($arg:ident : $ty:ty),* $(,)? ) -> $ret:ty, fail = $fail:expr
                $( => $method:ident ( $($harg:ident),* ) )? ;
        )*
    ) => {
        /// The stock plugin's entry points, resolved by `dlsym` (same prototypes as ours).
        #[derive(Debug, Clone, Copy)]
        pub struct $stock {
            $(
                #[doc = concat!("Stock `", stringify!($name), "`.")]
                $(#[$attr])*
                pub $name: unsafe extern "C" fn($($ty),*) -> $ret,
            )*
        }

        /// The table, resolved by the first successful [`load`](#method.load).
        static STOCK_TABLE: ::std::sync::OnceLock<$stock> = ::std::sync::OnceLock::new();

        impl $stock {
            /// Resolves every entry point in the stock plugin (once per process).
            ///
            /// # Errors
            /// `slurm_kit::stock::StockError::Symbol` for a missing symbol.
            pub fn load(
                lib: &$crate::stock::StockLibrary,
            ) -> Result<&'static Self, $crate::stock::StockError> {
                if let Some(table) = STOCK_TABLE.get() {
                    return Ok(table);
                }
                let table = Self {
                    $(
                        $(#[$attr])*
                        $name: {
                            let sym = lib.symbol(stringify!($name))?;
                            // SAFETY: the stock plugin of the same release defines this symbol
                            // with exactly this prototype (same `*_syms[]` entry, same ops type).
                            unsafe { $crate::ctld::fn_from_symbol(sym) }
                        },
                    )*
                };
                Ok(STOCK_TABLE.get_or_init(|| table))
            }

            /// The table [`load`](#method.load) resolved.
            ///
            /// # Errors
            /// `slurm_kit::stock::StockError::NotLoaded` before the first
            /// successful `init`.
            pub fn get() -> Result<&'static Self, $crate::stock::StockError> {
                STOCK_TABLE.get().ok_or($crate::stock::StockError::NotLoaded)
            }
        }

        $(
            #[doc = concat!("Slurm entry point `", stringify!($name), "` (", stringify!($kind), ").")]
            ///
            /// # Safety
            /// Called by Slurm only, with the arguments its plugin API documents.
            $(#[$attr])*
            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
                $crate::guard::forwarding_entry(stringify!($name), $fail, $degraded, || -> ::std::result::Result<$ret, $crate::stock::StockError> {
                    let stock_fn = $stock::get()?.$name;
                    $crate::__entry_body!(
                        $kind stock_fn ($($arg),*)
                        $(=> $hooks_trait, $hooks, $method ($($harg),*))?
                    )
                })
            }
        )*
    };
}

/// Body of one generated entry point (internal to [`forwarding_table!`]).
#[doc(hidden)]
#[macro_export]
macro_rules! __entry_body {
    (forward $f:ident ($($arg:ident),*)) => {
        // SAFETY: Slurm called us with arguments valid for this API; the stock function has the
        // identical prototype and receives them unchanged.
        Ok(unsafe { $f($($arg),*) })
    };
    // `guarded`: like `hook`, but the hook runs after a panic too; it decides itself what is
    // safe then (`select_p_job_test` keeps withholding GPUs it knows are faulty).
    (guarded $f:ident ($($arg:ident),*) => $tr:ident, $hooks:expr, $method:ident ($($harg:ident),*)) => {{
        let forward = move || {
            // SAFETY: as for `forward` lines: unchanged arguments to the identical prototype.
            unsafe { $f($($arg),*) }
        };
        Ok($tr::$method(
            &$hooks,
            forward,
            $(
                // SAFETY: an argument of the entry-point call that is running now.
                unsafe { $crate::export::HookArg::into_hook_arg($harg) }
            ),*
        ))
    }};
    (hook $f:ident ($($arg:ident),*) => $tr:ident, $hooks:expr, $method:ident ($($harg:ident),*)) => {{
        if $crate::guard::is_degraded() {
            // SAFETY: as for `forward` lines: unchanged arguments to the identical prototype.
            Ok(unsafe { $f($($arg),*) })
        } else {
            $crate::__entry_body!(guarded $f ($($arg),*) => $tr, $hooks, $method ($($harg),*))
        }
    }};
}

/// Exported entry points implemented by the plugin alone (no stock counterpart).
///
/// ```ignore
/// own_entry_points! {
///     fn priority_p_set(last_prio: u32, job_ptr: *mut job_record_t) -> u32, fail = 0
///         => crate::plugin::priority::set;
/// }
/// ```
/// The implementation receives every argument and returns `Result<ret, E>` for any error type
/// `E` (gputopo: `PluginError`); raw
/// pointer arguments arrive as
/// `Option<EntryPtr<'call, T>>`. A line may carry `#[cfg(...)]` for the releases whose table
/// has that entry point (or that prototype).
#[macro_export]
macro_rules! own_entry_points {
    ($(
        $(#[$meta:meta])*
        fn $name:ident ( $($arg:ident : $ty:ty),* $(,)? ) -> $ret:ty, fail = $fail:expr
            => $($hp:ident)::+ ;
    )*) => {$(
        $(#[$meta])*
        #[doc = concat!("Slurm entry point `", stringify!($name), "` (the plugin's own).")]
        ///
        /// # Safety
        /// Called by Slurm only, with the arguments its plugin API documents.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            $crate::guard::entry(stringify!($name), $fail, || {
                $($hp)::+($(
                    // SAFETY: an argument of the entry-point call that is running now.
                    unsafe { $crate::export::HookArg::into_hook_arg($arg) }
                ),*)
            })
        }
    )*};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_array_copies_with_nul() {
        let b: [u8; 15] = c_array("select/example\0");
        assert_eq!(&b, b"select/example\0");
    }
}
