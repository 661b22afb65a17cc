//! The macros that emit everything Slurm `dlsym`s from `select_gputopo_cons_tres.so`.
//!
//! - [`plugin_identity!`](crate::plugin_identity): the identity data symbols (`plugin_name`,
//!   `plugin_type` as NUL-terminated byte *arrays*, `plugin_version` = `SLURM_VERSION_NUMBER`
//!   of the build tree, optional `plugin_id`) and `init`/`fini`, which start/stop the listed
//!   [`Role`](crate::plugin::lifecycle::Role)s through the reference-counted
//!   [`lifecycle`](crate::plugin::lifecycle).
//! - [`forwarding_table!`](crate::forwarding_table): from ONE list of entry points (one line per
//!   symbol of the release's `*_syms[]`), both the exported `extern "C"` functions and the
//!   struct of stock function pointers they forward to (resolved by `dlsym` on the stock
//!   plugin), so the two can never drift. Each line is `forward` (call the stock function
//!   unchanged) or `hook` (call a method of the role's hooks trait, which receives a `forward`
//!   closure plus the arguments it names, converted by [`HookArg`]). A line may carry
//!   attributes, e.g. `#[cfg(...)]` for an entry point only some releases of a table's range
//!   have.
//! - [`own_entry_points!`](crate::own_entry_points): exported functions implemented entirely by
//!   gputopo (no stock counterpart), e.g. `priority_p_*`.
//!
//! Every generated body runs inside [`guard::entry`](crate::plugin::guard::entry), so no panic
//! crosses the ABI, and a hook is skipped once the guard is degraded.
//!
//! # Adding a second role (e.g. `priority/gputopo`) to the same `.so`
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

// The ABI helpers the macros below expand to are the kit's (nothing of gputopo in them).
pub use slurm_kit::export::{HookArg, c_array};

/// Emits the identity data symbols and the reference-counted `init`/`fini` of this `.so`.
///
/// ```ignore
/// plugin_identity! {
///     name: "GPU topology-aware selection (wraps cons_tres)",
///     type: "select/gputopo_cons_tres",
///     id: 109,
///     roles: [&select::ROLE],
/// }
/// ```
#[macro_export]
macro_rules! plugin_identity {
    (name: $name:literal, type: $ty:literal, $(id: $id:expr,)? roles: [$($role:expr),* $(,)?] $(,)?) => {
        /// Human-readable plugin name (C `const char plugin_name[]`).
        #[unsafe(no_mangle)]
        pub static plugin_name: [u8; concat!($name, "\0").len()] =
            $crate::plugin::export::c_array(concat!($name, "\0"));
        /// `<kind>/<name>`, matched against SelectType= (C `const char plugin_type[]`).
        #[unsafe(no_mangle)]
        pub static plugin_type: [u8; concat!($ty, "\0").len()] =
            $crate::plugin::export::c_array(concat!($ty, "\0"));
        /// Must equal the running Slurm's major.minor.micro exactly (`_verify_syms`).
        #[unsafe(no_mangle)]
        pub static plugin_version: u32 = $crate::ffi::SLURM_VERSION_NUMBER;
        $(
            /// Select plugin id (`const uint32_t plugin_id`), see docs/deployment.md.
            #[unsafe(no_mangle)]
            pub static plugin_id: u32 = $id;
        )?

        static ROLES: &[&dyn $crate::plugin::lifecycle::Role] = &[$($role),*];

        /// Called by Slurm after loading the file (once per role it is loaded as).
        #[unsafe(no_mangle)]
        pub extern "C" fn init() -> ::std::ffi::c_int {
            $crate::plugin::guard::entry("init", $crate::ffi::SLURM_ERROR, || {
                $crate::plugin::lifecycle::init(ROLES).map(|()| 0)
            })
        }

        /// Called by Slurm before unloading (once per role).
        #[unsafe(no_mangle)]
        pub extern "C" fn fini() -> ::std::ffi::c_int {
            $crate::plugin::guard::entry("fini", $crate::ffi::SLURM_ERROR, || {
                $crate::plugin::lifecycle::fini(ROLES);
                Ok(0)
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
///     forward fn select_p_state_save(dir_name: *mut c_char) -> c_int, fail = SLURM_ERROR;
///     hook fn select_p_reconfigure() -> c_int, fail = SLURM_ERROR => reconfigure();
/// }
/// ```
/// `stock` names the generated table type: `Stock::load(&StockLibrary)` resolves it by `dlsym`
/// once per process, `Stock::get()` hands it to the entry points. `hooks` names the trait (in
/// scope at the call site) and the value implementing it; a `hook` or `guarded` line calls the
/// trait method it names with `forward` first, then the arguments it lists, each converted by
/// [`HookArg`].
#[macro_export]
macro_rules! forwarding_table {
    (
        stock $stock:ident;
        hooks $hooks_trait:ident = $hooks:expr;
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
            /// [`PluginError::Stock`](crate::plugin::PluginError) for a missing symbol.
            pub fn load(
                lib: &$crate::plugin::select::stock::StockLibrary,
            ) -> Result<&'static Self, $crate::plugin::PluginError> {
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
                            unsafe { $crate::slurm::ctld::fn_from_symbol(sym) }
                        },
                    )*
                };
                Ok(STOCK_TABLE.get_or_init(|| table))
            }

            /// The table [`load`](#method.load) resolved.
            ///
            /// # Errors
            /// [`PluginError::NotStarted`](crate::plugin::PluginError) before the first
            /// successful `init`.
            pub fn get() -> Result<&'static Self, $crate::plugin::PluginError> {
                STOCK_TABLE.get().ok_or($crate::plugin::PluginError::NotStarted)
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
                $crate::plugin::guard::entry(stringify!($name), $fail, || {
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
                unsafe { $crate::plugin::export::HookArg::into_hook_arg($harg) }
            ),*
        ))
    }};
    (hook $f:ident ($($arg:ident),*) => $tr:ident, $hooks:expr, $method:ident ($($harg:ident),*)) => {{
        if $crate::plugin::guard::is_degraded() {
            // SAFETY: as for `forward` lines: unchanged arguments to the identical prototype.
            Ok(unsafe { $f($($arg),*) })
        } else {
            $crate::__entry_body!(guarded $f ($($arg),*) => $tr, $hooks, $method ($($harg),*))
        }
    }};
}

/// Exported entry points implemented by gputopo alone (no stock counterpart).
///
/// ```ignore
/// own_entry_points! {
///     fn priority_p_set(last_prio: u32, job_ptr: *mut job_record_t) -> u32, fail = 0
///         => crate::plugin::priority::set;
/// }
/// ```
/// The implementation receives every argument and returns `Result<ret, PluginError>`; raw
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
        #[doc = concat!("Slurm entry point `", stringify!($name), "` (gputopo's own).")]
        ///
        /// # Safety
        /// Called by Slurm only, with the arguments its plugin API documents.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            $crate::plugin::guard::entry(stringify!($name), $fail, || {
                $($hp)::+($(
                    // SAFETY: an argument of the entry-point call that is running now.
                    unsafe { $crate::plugin::export::HookArg::into_hook_arg($arg) }
                ),*)
            })
        }
    )*};
}
