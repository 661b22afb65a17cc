//! Build script of `slurm-kit`: the one reader of the Slurm tree. A plugin built on the kit
//! gets everything below from `DEP_SLURMFULL_*` in its own build script (see [`pass_up`]).
//!
//! 1. Finds the Slurm source tree of the release the plugin will run in (`SLURM_SRC_DIR`,
//!    obtained with `slurm-headers/fetch-slurm.sh VERSION`). Slurm loads a plugin only if it
//!    was built for the exact major.minor.micro release, so there is no default tree.
//! 2. Runs bindgen over `slurm-headers/wrapper.h` (our wrapper headers, which include Slurm
//!    the way a stock plugin does) into `$OUT_DIR/slurm_bindings.rs`, with per-header
//!    allowlists and bindgen's layout tests on (they catch struct drift between releases).
//! 3. Parses `SLURM_VERSION_NUMBER` from the tree's `slurm/slurm_version.h` and maps its
//!    major.minor through the release table (`slurm-headers/releases.tsv`, [`series`]) to
//!    the entry-point tables, emitted as
//!    `cfg(select_abi = "...")` and `cfg(priority_abi = "...")`, plus the ordered
//!    [`MILESTONES`] (`cfg(slurm_25_05)`, ...) for struct and prototype changes that do not
//!    follow the tables. An unknown release fails the build instead of guessing.
//! 4. Links `libslurmfull` of the installed release (see [`link_slurmfull`] for why).
//! 5. Passes the release, its cfgs and the library directory up to the plugin's build script
//!    as `cargo::metadata` ([`pass_up`]): the cfgs must be set on the plugin crate too (its
//!    entry-point tables follow them), and only the plugin's cdylib can take `-z defs`.
//!
//! `slurm-headers/` (the wrapper headers, the release table, fetch-slurm.sh) stays at the
//! repository root, where the scripts and the e2e harness read the table too.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};

/// The release table (one for build.rs, the scripts and the e2e harness): which entry-point
/// tables each series exports, and where Debian's packages install a release.
///
/// The generations behind the table's `series` lines: `node_select_syms[]`
/// (src/interfaces/select.c; 22.05 src/common/select.c): 36 `select_p_*` in 22.05, 31 in 23.11
/// to 24.11 (24.11 adds the `will_run_data_t *` argument of `select_p_job_test`: 23.11.4
/// src/interfaces/select.h:58-66 and 24.05.8 select.c:57-65 end at `resv_exc_t *`), 12 in
/// 25.05 and 25.11, 13 in 26.05 (`select_p_job_mem_reduce`). Priority `syms[]`: 6 in 22.05, 7
/// in 23.11 (`recover`, no `thread_start`, the factor list still takes `req_msg`: 23.11.4
/// src/interfaces/priority.c:44-69), 8 in 24.05 to 25.05, 7 from 25.11 (`calc_fs_factor`
/// removed).
const RELEASE_TABLE: &str = include_str!("../../slurm-headers/releases.tsv");

/// One Slurm release series (major.minor) and the entry-point tables its plugin exports.
struct Series<'t> {
    release: (u32, u32),
    /// `cfg(select_abi)`: the `node_select_syms[]` generation (named after its first release).
    select: &'t str,
    /// `cfg(priority_abi)`: the priority `syms[]` generation.
    priority: &'t str,
}

/// The table's lines of kind `kind`, as fields.
fn table_lines(kind: &str) -> impl Iterator<Item = Vec<&'static str>> + '_ {
    RELEASE_TABLE
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(move |f| f.first() == Some(&kind))
}

/// Every supported series (the table's `series` lines).
fn series() -> Result<Vec<Series<'static>>, String> {
    table_lines("series")
        .map(|f| {
            let bad = || format!("slurm-headers/releases.tsv: bad series line {f:?}");
            let (major, minor) = f.get(1).and_then(|v| v.split_once('.')).ok_or_else(bad)?;
            Ok(Series {
                release: (
                    major.parse().map_err(|_| bad())?,
                    minor.parse().map_err(|_| bad())?,
                ),
                select: f.get(2).ok_or_else(bad)?,
                priority: f.get(3).ok_or_else(bad)?,
            })
        })
        .collect()
}

/// Where Debian's packages install a release's `libslurmfull.so` (the table's PLUGIN_DIR).
fn debian_lib_dir(release: &str) -> Option<&'static str> {
    table_lines("release")
        .find(|f| f.get(1) == Some(&release))
        .and_then(|f| f.get(3).copied())
        .filter(|d| *d != "-")
}

/// Ordered milestones that do not line up with the entry-point tables: `cfg(NAME)` is set for a
/// tree at or after the release. `slurm_24_05`: the job record moved to
/// src/common/job_record.h and its flat `priority_array` into `part_prio`, a
/// `priority_parts_t` (24.05.8 job_record.h:231-235, :384; 23.11.4 still has
/// src/slurmctld/slurmctld.h:884 `uint32_t *priority_array`). `slurm_24_11`: `job_record_t.qos_list`
/// (multi-QOS jobs, 24.11.5 job_record.h:411) and `part_prio` became a `priority_mult_t` with
/// `priority_array_names` (24.11.5 job_record.h:233-237; 24.05.8 names it
/// `priority_array_parts`). `slurm_25_05`: `running_in_slurmctld` became a macro over
/// `slurm_run_in_daemon`, `job_record_t.part_prio` became `prio_mult`. `slurm_25_11`: the stock
/// `fini` returns `void`, `usage->fs_factor` is the only fair-share value sshare reads.
/// `slurm_26_05`: `slurmctld_lock_t.select_node`, `priority_factors_object_t.step_id`.
const MILESTONES: &[(u32, &str)] = &[
    (0x18_05_00, "slurm_24_05"),
    (0x18_0b_00, "slurm_24_11"),
    (0x19_05_00, "slurm_25_05"),
    (0x19_0b_00, "slurm_25_11"),
    (0x1a_05_00, "slurm_26_05"),
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
            "slurm_bit_(alloc|free|size|test|set|clear|clear_all|set_count|ffs|fls|ffs_from_bit)",
            "slurm_list_(iterator_create|iterator_destroy|next|count|find_first_ro|remove)",
            "slurm_log_var",
            "slurm_get_log_level",
            "slurm_xcalloc",
            "slurm_xfree",
            "slurm_running_in_slurmctld",
            "slurm_run_in_daemon",
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
            "NO_VAL16",
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
            "slurmdb_destroy_assoc_usage",
        ],
        vars: &[
            "assoc_mgr_root_assoc",
            "assoc_mgr_assoc_list",
            "assoc_mgr_qos_list",
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
    // Every value select_abi / priority_abi may take: the table's generations.
    let all = series()?;
    let mut declared = vec![
        check_cfg("select_abi", all.iter().map(|s| s.select)),
        check_cfg("priority_abi", all.iter().map(|s| s.priority)),
    ];
    for (_, name) in MILESTONES {
        println!("cargo::rustc-check-cfg=cfg({name})");
        declared.push(format!("cfg({name})"));
    }

    let src = env::var_os("SLURM_SRC_DIR").map(PathBuf::from).ok_or(
        "SLURM_SRC_DIR is not set; run `export SLURM_SRC_DIR=$(slurm-headers/fetch-slurm.sh 22.05.8)` (or 24.11.5, or point it at your own tree of a supported release) first",
    )?;
    let version_h = src.join("slurm/slurm_version.h");
    let version = read_version(&version_h)?;
    let (major, minor, micro) = (version >> 16, (version >> 8) & 0xff, version & 0xff);
    let series = all
        .iter()
        .find(|s| s.release == (major, minor))
        .ok_or_else(|| {
            let known: Vec<String> = all
                .iter()
                .map(|s| format!("{}.{:02}", s.release.0, s.release.1))
                .collect();
            format!(
                "Slurm {major}.{minor:02}.{micro} (from {}) is not a supported release (supported series: {}); add a series line to slurm-headers/releases.tsv after checking node_select_syms[] and the priority syms[]",
                version_h.display(),
                known.join(", ")
            )
        })?;
    let mut cfgs = vec![
        format!("select_abi=\"{}\"", series.select),
        format!("priority_abi=\"{}\"", series.priority),
    ];
    for (since, name) in MILESTONES {
        if version & 0x00ff_ffff >= *since {
            cfgs.push((*name).to_string());
        }
    }
    for cfg in &cfgs {
        println!("cargo::rustc-cfg={cfg}");
    }

    generate_bindings(&src)?;
    let release = format!("{major}.{minor:02}.{micro}");
    let lib_dir = link_slurmfull(&release);
    pass_up(&release, &cfgs, &declared, lib_dir.as_deref());
    Ok(())
}

/// Hands the release to the build script of every package that depends on the kit (cargo sets
/// `DEP_SLURMFULL_<KEY>` there, from `links = "slurmfull"`): `RELEASE` (`22.05.8`), `CFGS` and
/// `CHECK_CFGS` (`;`-separated `cargo::rustc-cfg`/`rustc-check-cfg` values, to re-emit as they
/// are) and `LIB_DIR` (the directory of the linked `libslurmfull.so`, empty when none was
/// found). The `-l slurmfull` itself reaches the plugin's link through the kit's rlib.
fn pass_up(release: &str, cfgs: &[String], declared: &[String], lib_dir: Option<&Path>) {
    println!("cargo::metadata=release={release}");
    println!("cargo::metadata=cfgs={}", cfgs.join(";"));
    println!("cargo::metadata=check_cfgs={}", declared.join(";"));
    println!(
        "cargo::metadata=lib_dir={}",
        lib_dir.map(|d| d.display().to_string()).unwrap_or_default()
    );
}

/// Declares a cfg and its values to rustc's `check-cfg`; returns the declaration, for
/// [`pass_up`].
fn check_cfg<'a>(name: &str, values: impl Iterator<Item = &'a str>) -> String {
    let values: std::collections::BTreeSet<String> = values.map(|v| format!("\"{v}\"")).collect();
    let values: Vec<String> = values.into_iter().collect();
    let line = format!("cfg({name}, values({}))", values.join(", "));
    println!("cargo::rustc-check-cfg={line}");
    line
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
    let headers = manifest.join("../../slurm-headers");
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
/// (src/ctld.rs resolves them with dlsym). Without an installed release the build warns
/// and leaves the symbols undefined (they still resolve at load time inside Slurm). With the
/// library, the plugin's build script links its cdylib with `-z defs` (a cdylib link argument
/// only the plugin's own build script can give), so the linker really checks every reference.
/// Returns the library's directory, if found.
fn link_slurmfull(release: &str) -> Option<PathBuf> {
    println!("cargo::rerun-if-env-changed=GPUTOPO_CACHE");
    let dir = env::var_os("SLURM_LIB_DIR").map(PathBuf::from).or_else(|| {
        // Debian's packages (the table's PLUGIN_DIR), else contrib/slurm-install.sh's prefix.
        Some(match debian_lib_dir(release) {
            Some(d) => PathBuf::from(d),
            None => PathBuf::from(
                env::var("GPUTOPO_CACHE").unwrap_or_else(|_| "/var/cache/gputopo".into()),
            )
            .join(format!("slurm-{release}/lib/slurm")),
        })
    });
    if let Some(d) = &dir {
        // A release installed after a first build must be linked on the next one.
        println!(
            "cargo::rerun-if-changed={}",
            d.join("libslurmfull.so").display()
        );
    }
    match dir.filter(|d| d.join("libslurmfull.so").is_file()) {
        Some(dir) => {
            println!("cargo::rustc-link-search=native={}", dir.display());
            println!("cargo::rustc-link-lib=dylib=slurmfull");
            // The kit's own test binaries run outside Slurm: they find the library by rpath.
            println!("cargo::rustc-link-arg=-Wl,-rpath,{}", dir.display());
            Some(dir)
        }
        None => {
            println!(
                "cargo::warning=libslurmfull.so of Slurm {release} not found (set SLURM_LIB_DIR); symbols stay undefined until load time"
            );
            None
        }
    }
}
