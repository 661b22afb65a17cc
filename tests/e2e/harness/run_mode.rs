//! What this run tests: whether e2e tests run at all (`GPUTOPO_E2E`), against which Slurm
//! release (`GPUTOPO_SLURM_RELEASE`) and with which select plugin (`GPUTOPO_SELECT`). A test
//! that does not apply says so through [`skip`] (crate::skip), which these functions call too.

pub use crate::skip::skip;

/// Whether end-to-end tests should run (`GPUTOPO_E2E=1`); prints why not otherwise.
pub fn e2e_enabled() -> bool {
    let on = std::env::var("GPUTOPO_E2E").is_ok_and(|v| v == "1");
    if !on {
        skip("set GPUTOPO_E2E=1 (as root, with Slurm installed) to run end-to-end tests");
    }
    on
}

/// The Slurm release tests run against: `GPUTOPO_SLURM_RELEASE`, else the release table's
/// first CI release (`slurm-headers/releases.tsv`, the scripts' default too).
pub fn release() -> String {
    std::env::var("GPUTOPO_SLURM_RELEASE").unwrap_or_else(|_| default_release().into())
}

/// The first `release VERSION ci ...` line of the release table.
fn default_release() -> &'static str {
    include_str!("../../../slurm-headers/releases.tsv")
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.first() == Some(&"release") && f.get(2) == Some(&"ci"))
        .and_then(|f| f.get(1).copied())
        .expect("slurm-headers/releases.tsv lists a ci release")
}

/// Whether the release under test is at least major.minor (features that came with a series).
pub fn release_at_least(major: u32, minor: u32) -> bool {
    let r = release();
    let mut it = r.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    (it.next().unwrap_or(0), it.next().unwrap_or(0)) >= (major, minor)
}

/// Whether the release under test is of the series `from` up to, not including, `before`
/// (major, minor): where a release-specific behaviour of Slurm starts and where it ends.
pub fn release_in(from: (u32, u32), before: (u32, u32)) -> bool {
    release_at_least(from.0, from.1) && !release_at_least(before.0, before.1)
}

/// The select plugin tests run with (`GPUTOPO_SELECT`: `gputopo` (default) or `cons_tres`).
pub fn select() -> String {
    std::env::var("GPUTOPO_SELECT").unwrap_or_else(|_| "gputopo".into())
}

/// For a test of gputopo's own behaviour: true with select/gputopo; with stock cons_tres it
/// prints why the test does not apply and returns false (the stock run's nextest profile
/// leaves such tests out and reports them as skipped; this covers a run by hand).
pub fn gputopo_only() -> bool {
    let ours = select() == "gputopo";
    if !ours {
        skip(format_args!(
            "tests select/gputopo's own behaviour (GPUTOPO_SELECT={})",
            select()
        ));
    }
    ours
}

/// For a long test (minutes) that CI leaves out: true with `GPUTOPO_E2E_LONG` set; otherwise
/// it reports the test skipped and returns false.
pub fn long_enabled() -> bool {
    let on = std::env::var_os("GPUTOPO_E2E_LONG").is_some();
    if !on {
        skip("a long test: set GPUTOPO_E2E_LONG=1 to run it");
    }
    on
}
