//! ABI checks of a built plugin against the Slurm tree it was built for.
//!
//! This is the test that catches a new Slurm release: the exported `select_p_*` set must equal
//! the names in that release's `node_select_syms[]` (parsed from `SLURM_SRC_DIR`), the identity
//! symbols must be data objects (Slurm reads them in place), and `plugin_version` must equal the
//! tree's `SLURM_VERSION_NUMBER` (Slurm compares major.minor.micro exactly).
//!
//! Needs `GPUTOPO_PLUGIN_SO` (e.g. `$(contrib/build-plugin.sh 22.05.8)`) and `SLURM_SRC_DIR`
//! (`$(slurm-headers/fetch-slurm.sh 22.05.8)`); skips with a notice when either is unset.
//! Uses binutils (`nm`, `readelf`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::skip::skip;

struct Inputs {
    so: PathBuf,
    tree: PathBuf,
}

fn inputs(test: &str) -> Option<Inputs> {
    let so = std::env::var_os("GPUTOPO_PLUGIN_SO");
    let tree = std::env::var_os("SLURM_SRC_DIR");
    match (so, tree) {
        (Some(so), Some(tree)) => Some(Inputs {
            so: so.into(),
            tree: tree.into(),
        }),
        _ => {
            skip(format_args!(
                "abi::{test}: set GPUTOPO_PLUGIN_SO and SLURM_SRC_DIR"
            ));
            None
        }
    }
}

fn run(cmd: &str, args: &[&str], file: &Path) -> String {
    let out = Command::new(cmd)
        .args(args)
        .arg(file)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd}: {e}"));
    assert!(
        out.status.success(),
        "{cmd} {args:?} {} failed: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The `node_select_syms[]` entries of the tree (22.05: src/common/select.c, 23.02+:
/// src/interfaces/select.c), without `plugin_id`.
fn required_select_syms(tree: &Path) -> BTreeSet<String> {
    let file = ["src/interfaces/select.c", "src/common/select.c"]
        .iter()
        .map(|p| tree.join(p))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("no select.c under {}", tree.display()));
    let text = std::fs::read_to_string(&file).expect("select.c readable");
    let start = text
        .find("node_select_syms[] = {")
        .expect("node_select_syms[] in select.c");
    let body = &text[start..];
    let body = &body[..body.find("};").expect("end of node_select_syms[]")];
    body.split('"')
        .skip(1)
        .step_by(2)
        .filter(|s| *s != "plugin_id")
        .map(str::to_owned)
        .collect()
}

fn version_number(tree: &Path) -> u32 {
    let text = std::fs::read_to_string(tree.join("slurm/slurm_version.h"))
        .expect("slurm_version.h readable");
    let hex = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("#define SLURM_VERSION_NUMBER"))
        .expect("SLURM_VERSION_NUMBER");
    u32::from_str_radix(hex.trim().trim_start_matches("0x"), 16).expect("hex SLURM_VERSION_NUMBER")
}

/// A defined dynamic symbol: (type, value, size) from `readelf --dyn-syms`.
fn dyn_symbol(so: &Path, name: &str) -> Option<(String, u64, u64)> {
    run("readelf", &["-W", "--dyn-syms"], so)
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 8 && f[7] == name && f[6] != "UND").then(|| {
                let value = u64::from_str_radix(f[1], 16).expect("readelf symbol value");
                let size = f[2].parse().expect("readelf symbol size");
                (f[3].to_owned(), value, size)
            })
        })
}

/// Bytes of a data symbol, read from the file through the LOAD segment that maps it.
fn symbol_bytes(so: &Path, name: &str) -> Vec<u8> {
    let (_, vaddr, size) = dyn_symbol(so, name).unwrap_or_else(|| panic!("{name} not exported"));
    let offset = run("readelf", &["-W", "-l"], so)
        .lines()
        .filter(|l| l.trim_start().starts_with("LOAD"))
        .find_map(|l| {
            let f: Vec<u64> = l
                .split_whitespace()
                .skip(1)
                .take(5)
                .map(|x| {
                    u64::from_str_radix(x.trim_start_matches("0x"), 16).expect("readelf LOAD field")
                })
                .collect();
            let (off, va, filesz) = (f[0], f[1], f[3]);
            (vaddr >= va && vaddr + size <= va + filesz).then(|| vaddr - va + off)
        })
        .expect("symbol inside a LOAD segment");
    let data = std::fs::read(so).expect(".so readable");
    data[offset as usize..(offset + size) as usize].to_vec()
}

#[test]
fn exports_exactly_the_release_select_api() {
    let Some(i) = inputs("exports_exactly_the_release_select_api") else {
        return;
    };
    let exported: BTreeSet<String> = run("nm", &["-D", "--defined-only"], &i.so)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .filter(|s| s.starts_with("select_p_"))
        .map(str::to_owned)
        .collect();
    let required = required_select_syms(&i.tree);
    let missing: Vec<_> = required.difference(&exported).collect();
    let extra: Vec<_> = exported.difference(&required).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "missing {missing:?}, extra {extra:?}"
    );
    for f in ["init", "fini"] {
        let (ty, ..) = dyn_symbol(&i.so, f).unwrap_or_else(|| panic!("{f} not exported"));
        assert_eq!(ty, "FUNC", "{f}");
    }
}

#[test]
fn identity_symbols_are_data_with_the_release_version() {
    let Some(i) = inputs("identity_symbols_are_data_with_the_release_version") else {
        return;
    };
    for name in ["plugin_name", "plugin_type", "plugin_id", "plugin_version"] {
        let (ty, ..) = dyn_symbol(&i.so, name).unwrap_or_else(|| panic!("{name} not exported"));
        assert_eq!(
            ty, "OBJECT",
            "{name} must be a data symbol (Slurm reads it in place)"
        );
    }
    assert_eq!(
        symbol_bytes(&i.so, "plugin_type"),
        b"select/gputopo_cons_tres\0"
    );
    let name = symbol_bytes(&i.so, "plugin_name");
    assert_eq!(name.last(), Some(&0), "plugin_name is NUL-terminated");
    let u32_of = |n| u32::from_le_bytes(symbol_bytes(&i.so, n).try_into().expect("4-byte symbol"));
    assert_eq!(
        u32_of("plugin_version"),
        version_number(&i.tree),
        "plugin_version = SLURM_VERSION_NUMBER"
    );
    assert_eq!(
        u32_of("plugin_id"),
        109,
        "plugin_id = SELECT_PLUGIN_CONS_TRES (docs/deployment.md)"
    );
}

#[test]
fn references_no_slurmctld_only_symbol() {
    let Some(i) = inputs("references_no_slurmctld_only_symbol") else {
        return;
    };
    // Defined by the slurmctld executable only; a direct reference breaks loading in slurmd
    // and clients (rustc links with -z now). crates/slurm-kit/src/ctld.rs resolves them with dlsym.
    let ctld_only = [
        "job_list",
        "part_list",
        "lock_slurmctld",
        "unlock_slurmctld",
        "find_job_record",
        "slurmctld_config",
    ];
    let undefined = run("nm", &["-D", "--undefined-only"], &i.so);
    for sym in ctld_only {
        assert!(
            !undefined
                .lines()
                .any(|l| l.split_whitespace().last() == Some(sym)),
            "{sym} referenced directly"
        );
    }
}
