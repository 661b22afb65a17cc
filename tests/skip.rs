//! How a test that does not apply says so. A test that returns early at run time (the release
//! lacks the feature, the run uses stock cons_tres, its inputs are not set) calls [`skip`]
//! before it returns. The test harness cannot mark a test skipped once it runs (libtest and
//! cargo-nextest only know ignored at build time and filtered at list time), so the line it
//! prints is the record: `contrib/nextest-summary.py` finds it in the output nextest stores in
//! its JUnit report and counts such tests as skipped, not passed.

/// The start of the line a skipped test prints (on stderr; nextest keeps it per test).
pub const MARKER: &str = "gputopo-test: skipped:";

/// Says why this test does not apply here; the caller returns right after.
pub fn skip(why: impl std::fmt::Display) {
    eprintln!("{MARKER} {why}");
}
