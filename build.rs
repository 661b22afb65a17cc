//! Build script of the `gputopo` plugin library.
//!
//! 1. Finds the Slurm source tree of the release the plugin will run in (`SLURM_SRC_DIR`,
//!    obtained with `slurm-headers/fetch-slurm.sh VERSION`). Slurm loads a plugin only if it
//!    was built for the exact major.minor.micro release, so there is no default tree.
//! 2. Runs bindgen over `slurm-headers/wrapper.h` (our wrapper headers, which include Slurm
//!    the way a stock plugin does) into `$OUT_DIR/slurm_bindings.rs`, with per-header
//!    allowlists and bindgen's layout tests on (they catch struct drift between releases).
//! 3. Parses `SLURM_VERSION_NUMBER` from the tree's `slurm/slurm_version.h` and maps it to an
//!    ABI generation through [`ABI_GENERATIONS`], emitted as `cfg(select_abi = "...")`.
//!    An unknown release fails the build instead of guessing.
//! 4. Links `libslurmfull` of the installed release (see `slurm_lib_dir` for why).

use std::env;
use std::fs;
use std::path::{Path, PathBuf};

/// Slurm major.minor → select ABI generation (named after the first release that has it).
/// The select API (`node_select_syms[]`): 36 `select_p_*` in 22.05, 31 in 23.11 to 24.11.
const ABI_GENERATIONS: &[((u32, u32), &str)] = &[
    ((22, 5), "22.05"),
    ((23, 11), "23.11"),
    ((24, 5), "23.11"),
    ((24, 11), "23.11"),
];

/// Every value `select_abi` may take (for `rustc-check-cfg`).
const SELECT_ABI_VALUES: &[&str] = &["22.05", "23.11"];

/// Where each release's `libslurmfull.so` is installed when no `SLURM_LIB_DIR` is given:
/// Debian's packages for 22.05.8, contrib/slurm-install.sh's prefix for 24.11.5.
const DEFAULT_LIB_DIRS: &[(&str, &str)] = &[
    ("22.05.8", "/usr/lib/x86_64-linux-gnu/slurm-wlm"),
    ("24.11.5", "/var/cache/gputopo/slurm-24.11.5/lib/slurm"),
];

/// bindgen allowlists, grouped by the wrapper header that brings the items in.
/// (regexes; bindgen also pulls in whatever these items reference.)
struct Allow {
    header: &'static str,
    types: &'static [&'static str],
    functions: &'static [&'static str],
    vars: &'static [&'static str],
}

const ALLOWLISTS: &[Allow] = &[
    Allow {
        header: "common.h",
        types: &[
            "bitstr_t",
            "bitoff_t",
            "log_level_t",
            "slurm_conf_t",
            "xlist",
            "listIterator",
        ],
        functions: &[
            "slurm_bit_(alloc|free|size|test|set|clear|set_count|ffs|fls|ffs_from_bit)",
            "slurm_list_(iterator_create|iterator_destroy|next|count)",
            "slurm_log_var",
            "slurm_get_log_level",
            "slurm_xcalloc",
            "slurm_xfree",
            "slurm_running_in_slurmctld",
        ],
        vars: &[
            "SLURM_VERSION_NUMBER",
            "SLURM_SUCCESS",
            "SLURM_ERROR",
            "LOG_LEVEL_.*",
            "slurm_conf",
        ],
    },
    Allow {
        header: "select.h",
        types: &[
            "job_record_t",
            "node_record_t",
            "part_record_t",
            "step_record_t",
            "job_details_t",
            "job_resources_t",
            "gres_state_t",
            "gres_job_state_t",
            "gres_node_state_t",
            "select_nodeinfo_t",
            "select_jobinfo_t",
            "buf_t",
            "resv_desc_msg_t",
            "resv_exc_t",
            "will_run_data_t",
            "select_plugindata_info",
            "select_nodedata_type",
            "select_jobdata_type",
            "node_states",
        ],
        functions: &[],
        vars: &[
            "node_record_count",
            "node_record_table_ptr",
            "SELECT_MODE_.*",
            "SELECT_PLUGIN_CONS_TRES",
            "NO_VAL",
        ],
    },
    // Added by the priority helper: the priority/gputopo role (src/plugin/priority*).
    Allow {
        header: "priority.h",
        types: &[
            "priority_factors_object_t",
            "priority_factors_t",
            "priority_factors_request_msg_t",
            "priority_mult_t",
            "slurmdb_assoc_rec_t",
            "slurmdb_qos_rec_t",
            "slurmdb_used_limits_t",
            "assoc_mgr_lock_t",
            "slurmctld_lock_t",
        ],
        functions: &[
            "assoc_mgr_(lock|unlock)",
            "slurm_with_slurmdbd",
            "slurm_get_tres_weight_array",
            "slurm_destroy_priority_factors(_object)?",
            "slurm_copy_priority_factors(_object)?",
            "slurm_list_(create|append|sort|destroy)",
            "priority_sort_part_tier",
            "slurm_xstrdup",
        ],
        vars: &[
            "assoc_mgr_root_assoc",
            "assoc_mgr_assoc_list",
            "assoc_mgr_tres_name_array",
            "g_user_assoc_count",
            "g_tres_count",
            "active_node_record_count",
            "NICE_OFFSET",
            "JOB_STATE_BASE",
        ],
    },
];

fn main() {
    if let Err(msg) = run() {
        // One line, so the fix-it message is the first thing a user reads.
        eprintln!("error: {msg}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    println!("cargo::rerun-if-env-changed=SLURM_SRC_DIR");
    println!("cargo::rerun-if-env-changed=SLURM_LIB_DIR");
    let values: Vec<String> = SELECT_ABI_VALUES
        .iter()
        .map(|v| format!("\"{v}\""))
        .collect();
    println!(
        "cargo::rustc-check-cfg=cfg(select_abi, values({}))",
        values.join(", ")
    );

    let src = env::var_os("SLURM_SRC_DIR").map(PathBuf::from).ok_or(
        "SLURM_SRC_DIR is not set; run `export SLURM_SRC_DIR=$(slurm-headers/fetch-slurm.sh 22.05.8)` (or 24.11.5) first",
    )?;
    let version_h = src.join("slurm/slurm_version.h");
    let version = read_version(&version_h)?;
    let (major, minor, micro) = (version >> 16, (version >> 8) & 0xff, version & 0xff);
    let generation = ABI_GENERATIONS
        .iter()
        .find(|((ma, mi), _)| *ma == major && *mi == minor)
        .map(|(_, g)| *g)
        .ok_or_else(|| {
            format!(
                "Slurm {major}.{minor:02}.{micro} (from {}) is not a supported release; add its ABI generation to ABI_GENERATIONS in build.rs after checking node_select_syms[]",
                version_h.display()
            )
        })?;
    println!("cargo::rustc-cfg=select_abi=\"{generation}\"");
    println!("cargo::rustc-env=GPUTOPO_SLURM_RELEASE={major}.{minor:02}.{micro}");

    // priority/gputopo (added by the priority helper): 6 priority_p_* in 22.05, 8 in 23.11-24.11.
    println!("cargo::rustc-check-cfg=cfg(priority_abi, values(\"22.05\", \"23.11\"))");
    println!(
        "cargo::rustc-cfg=priority_abi=\"{}\"",
        if generation == "22.05" {
            "22.05"
        } else {
            "23.11"
        }
    );
    compile_priority_shim();
    generate_bindings(&src)?;
    link_slurmfull(&format!("{major}.{minor:02}.{micro}"));
    Ok(())
}

/// `SLURM_VERSION_NUMBER` as configure writes it: `#define SLURM_VERSION_NUMBER 0x160508`.
fn read_version(path: &Path) -> Result<u32, String> {
    let text = fs::read_to_string(path).map_err(|e| {
        format!(
            "cannot read {} ({e}); is SLURM_SRC_DIR a tree made by slurm-headers/fetch-slurm.sh?",
            path.display()
        )
    })?;
    println!("cargo::rerun-if-changed={}", path.display());
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("#define SLURM_VERSION_NUMBER"))
        .find_map(|v| u32::from_str_radix(v.trim().trim_start_matches("0x"), 16).ok())
        .ok_or_else(|| format!("no SLURM_VERSION_NUMBER in {}", path.display()))
}

fn generate_bindings(src: &Path) -> Result<(), String> {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").map_err(|e| e.to_string())?);
    let headers = manifest.join("slurm-headers");
    let mut builder = bindgen::Builder::default()
        .header(headers.join("wrapper.h").display().to_string())
        .clang_arg(format!("-I{}", headers.display()))
        .clang_arg(format!("-I{}", src.display()))
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()))
        // Unknown C enum values must never be UB: enums become integer aliases + consts.
        .default_enum_style(bindgen::EnumVariation::Consts)
        .layout_tests(true)
        .generate_comments(false)
        .derive_default(false)
        .allowlist_recursively(true);
    for allow in ALLOWLISTS {
        println!(
            "cargo::rerun-if-changed={}",
            headers.join(allow.header).display()
        );
        for t in allow.types {
            builder = builder.allowlist_type(t);
        }
        for f in allow.functions {
            builder = builder.allowlist_function(f);
        }
        for v in allow.vars {
            builder = builder.allowlist_var(v);
        }
    }
    let bindings = builder.generate().map_err(|e| {
        format!(
            "bindgen failed on {} with tree {}: {e}",
            headers.display(),
            src.display()
        )
    })?;
    let out =
        PathBuf::from(env::var("OUT_DIR").map_err(|e| e.to_string())?).join("slurm_bindings.rs");
    bindings
        .write_to_file(&out)
        .map_err(|e| format!("cannot write {}: {e}", out.display()))
}

/// Link against the release's `libslurmfull.so` (the library every Slurm daemon and client is
/// linked with, so it is already loaded wherever Slurm dlopens us; its soname matches and no
/// search happens). Linking, rather than leaving the symbols undefined, makes the linker prove
/// that every libslurmfull function we call exists in this release, and rustc's `-z now` then
/// cannot surprise us at dlopen time. slurmctld-only symbols are never referenced directly
/// (src/slurm/ctld.rs resolves them with dlsym). Without an installed release the build warns
/// and leaves the symbols undefined (they still resolve at load time inside Slurm). With the
/// library, the cdylib is linked with `-z defs`, so the linker really checks every reference.
fn link_slurmfull(release: &str) {
    let dir = env::var_os("SLURM_LIB_DIR").map(PathBuf::from).or_else(|| {
        DEFAULT_LIB_DIRS
            .iter()
            .find(|(r, _)| *r == release)
            .map(|(_, d)| PathBuf::from(d))
    });
    match dir.filter(|d| d.join("libslurmfull.so").is_file()) {
        Some(dir) => {
            println!("cargo::rustc-link-search=native={}", dir.display());
            println!("cargo::rustc-link-lib=dylib=slurmfull");
            println!("cargo::rustc-link-arg=-Wl,-rpath,{}", dir.display());
            // Make the linker prove it: an undefined symbol that libslurmfull (or libc) does not
            // define, e.g. a slurmctld-only one, fails the build instead of the dlopen.
            println!("cargo::rustc-cdylib-link-arg=-Wl,-z,defs");
        }
        None => println!(
            "cargo::warning=libslurmfull.so of Slurm {release} not found (set SLURM_LIB_DIR); symbols stay undefined until load time"
        ),
    }
}

/// The C shim of the priority role (slurm-headers/priority_shim.c): `priority_p_calc_fs_factor`
/// takes `long double`s, which Rust cannot express. rustc exports only Rust symbols from a
/// cdylib (its version script hides the rest), so a second version script makes the shim's
/// entry point global; GNU ld merges the two.
fn compile_priority_shim() {
    let shim = "slurm-headers/priority_shim.c";
    println!("cargo::rerun-if-changed={shim}");
    cc::Build::new()
        .file(shim)
        .flag_if_supported("-Wall")
        .compile("gputopo_priority_shim");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap_or_default()).join("priority_shim.ver");
    if fs::write(&out, "{ global: priority_p_calc_fs_factor; };\n").is_ok() {
        println!(
            "cargo::rustc-cdylib-link-arg=-Wl,--version-script={}",
            out.display()
        );
    }
}
