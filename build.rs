//! Build script of the `gputopo` plugin library.
//!
//! The Slurm tree is read once, by slurm-kit's build script (crates/slurm-kit/build.rs: the
//! release table, bindgen, linking `libslurmfull`). It passes the release up through
//! `DEP_SLURMFULL_*` (`links = "slurmfull"`), and this script
//! 1. re-emits the release's cfgs (`select_abi`, `priority_abi`, `slurm_24_05`, ...) on the
//!    plugin crate, whose entry-point tables and record views follow them;
//! 2. links the cdylib with `-z defs` and an rpath to the release's `libslurmfull.so`, when the
//!    kit found one: an undefined symbol that libslurmfull (or libc) does not define, e.g. a
//!    slurmctld-only one, then fails the build instead of the dlopen;
//! 3. compiles the priority role's C shim (`slurm-headers/priority_shim.c`).

use std::env;
use std::fs;
use std::path::PathBuf;

fn main() {
    // cargo sets these from slurm-kit's `cargo::metadata` lines; the kit's build already
    // failed with a fix-it message if the tree is missing or unsupported.
    let dep = |key: &str| env::var(format!("DEP_SLURMFULL_{key}")).unwrap_or_default();
    for declared in dep("CHECK_CFGS").split(';').filter(|c| !c.is_empty()) {
        println!("cargo::rustc-check-cfg={declared}");
    }
    let cfgs = dep("CFGS");
    for cfg in cfgs.split(';').filter(|c| !c.is_empty()) {
        println!("cargo::rustc-cfg={cfg}");
    }
    println!("cargo::rustc-env=GPUTOPO_SLURM_RELEASE={}", dep("RELEASE"));
    let lib_dir = dep("LIB_DIR");
    if !lib_dir.is_empty() {
        println!("cargo::rustc-link-arg=-Wl,-rpath,{lib_dir}");
        println!("cargo::rustc-cdylib-link-arg=-Wl,-z,defs");
    }
    compile_priority_shim(!cfgs.split(';').any(|c| c == "priority_abi=\"25.11\""));
}

/// The C shim of the priority role (slurm-headers/priority_shim.c): `priority_p_calc_fs_factor`
/// takes `long double`s, which Rust cannot express. rustc exports only Rust symbols from a
/// cdylib (its version script hides the rest), so a second version script makes the shim's
/// entry point global; GNU ld merges the two. From 25.11 the priority API has no
/// `calc_fs_factor` (`with_calc_fs_factor` false): the shim then only converts `long double`s.
fn compile_priority_shim(with_calc_fs_factor: bool) {
    let shim = "slurm-headers/priority_shim.c";
    println!("cargo::rerun-if-changed={shim}");
    let mut build = cc::Build::new();
    build.file(shim).flag_if_supported("-Wall");
    if with_calc_fs_factor {
        build.define("GPUTOPO_CALC_FS_FACTOR", None);
    }
    build.compile("gputopo_priority_shim");
    if !with_calc_fs_factor {
        return;
    }
    let out = PathBuf::from(env::var("OUT_DIR").unwrap_or_default()).join("priority_shim.ver");
    if fs::write(&out, "{ global: priority_p_calc_fs_factor; };\n").is_ok() {
        println!(
            "cargo::rustc-cdylib-link-arg=-Wl,--version-script={}",
            out.display()
        );
    }
}
