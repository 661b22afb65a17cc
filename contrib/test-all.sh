#!/usr/bin/env bash
# The whole test suite, as root on a Debian 12 machine (the README's test command; CI runs it).
#
#   contrib/test-all.sh         # as root
#
# Phases (each timed; the run goes on after a failure and exits non-zero at the end):
#   deps        contrib/install-deps.sh (Debian packages; skipped when all are present)
#   slurm       contrib/slurm-install.sh 22.05.8 / 24.11.5 (24.11.5 is built once and cached)
#   fmt         cargo fmt --all -- --check
#   clippy      cargo clippy --all-targets -- -D warnings (workspace), and for the plugin
#               package once per release (SLURM_SRC_DIR = that release's tree)
#   doc         cargo doc --no-deps with RUSTDOCFLAGS=-D warnings (default members; the plugin
#               package once per release, doc-R): broken or ambiguous intra-doc links fail
#   unit        cargo test (the workspace's default members: no Slurm needed)
#   fuzz        contrib/fuzz.sh: each fuzz target of fuzz/ for GPUTOPO_FUZZ_SECS (default 12)
#               seconds from its committed corpus (node Extra, gres.conf/fake_gpus.conf,
#               gputopo.conf, ledger/health/XID state files, generator labels)
#   benches     the core's criterion benchmarks, built (GPUTOPO_BENCHES=run: run in quick form;
#               numbers only, no assertions)
#   bench-metrics  benches/metrics.rs (a 1,000-node scrape next to gputopo nodes), the same way
#   per release R in 22.05.8 24.11.5:
#     plugin-panic-R  contrib/build-plugin.sh R --features test-panic, copied to
#               $CARGO_TARGET_DIR/test-all/libgputopo-test-panic-R.so (GPUTOPO_PANIC_SO: the e2e
#               test of a caught panic; built first, so the plugin build after it recompiles
#               only the gputopo crate)
#     plugin-R  contrib/build-plugin.sh R (the select/gputopo .so for R)
#     abi-R     the root package's tests (tests/main.rs) with GPUTOPO_PLUGIN_SO, SLURM_SRC_DIR
#     plugin-unit-R  the plugin library's unit tests (real libslurmfull and stock cons_tres)
#     e2e-R     the same binary's ignored tests under cargo-nextest (profile e2e,
#               .config/nextest.toml): every end-to-end test on a real local cluster
#               (contrib/cluster.sh), select/gputopo loaded, GPUTOPO_E2E_SHARDS (default 2)
#               clusters at once, each test in its slot's directory
#     stock-R   profile stock: the tests that compare with stock Slurm, with
#               GPUTOPO_SELECT=cons_tres (the tests of gputopo's own behaviour are skipped)
#               Both summary lines count passed, skipped and failed tests: a test that returns
#               early because it does not apply here counts as skipped (nextest-summary.py)
#     gate-R    contrib/slurm-testsuite.sh R gputopo gputopo --tag ci --sides gputopo: Slurm's
#               own expect and python tests tagged ci in contrib/slurm-testsuite/list with
#               select/gputopo and priority/gputopo; fails when a test that passes with stock
#               (contrib/slurm-testsuite/expected-R, from the full stock run) does not pass
#     perf-gate-R  contrib/bench-select.sh --callgrind --nodes 128 --gate 2: fails when
#               gputopo's own instructions per select_p_job_test exceed 2 % of stock
#               cons_tres's (callgrind counts, stock measured in the same invocation)
#     package-R contrib/test-package.sh R: the Debian package and the RPM built (rpmbuild) and
#               inspected, each installed in a scratch host (contrib/pkg-sandbox.sh), a GPU job
#               run through the installed files, upgrade/downgrade/reinstall while slurmctld
#               runs, removal while slurm.conf still names the plugin directory; the 24.11.5
#               .deb on a host whose Slurm lives under another prefix than the build's
#   smoke       contrib/smoke-releases.sh: every other release whose tree and install are cached
#               (25.05.8, 25.11.7, 26.05.3, ... built by hand from a site's tree), newest first:
#               plugin build, ABI checks, plugin unit tests and 4 e2e tests, within
#               GPUTOPO_SMOKE_BUDGET seconds (default 480); the summary names each release and
#               what ran, or why it was skipped (no source tree, no install, time budget)
#
# Environment: GPUTOPO_RELEASES (default: the ci releases of slurm-headers/releases.tsv), GPUTOPO_E2E_SHARDS (clusters at
# once; 1 = one test at a time), CARGO_TARGET_DIR. The stock run's tests are the nextest
# profile's (.config/nextest.toml).
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
cd "$repo"
export PATH=$HOME/.cargo/bin:/root/.cargo/bin:$PATH
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$repo/target}
case $CARGO_TARGET_DIR in /*) ;; *) CARGO_TARGET_DIR=$repo/$CARGO_TARGET_DIR ;; esac
export CARGO_TERM_COLOR=never
# shellcheck source=contrib/lib.sh
. "$here/lib.sh"
releases=${GPUTOPO_RELEASES:-$(releases ci | paste -sd' ')}
shards=${GPUTOPO_E2E_SHARDS:-2}
logdir=$CARGO_TARGET_DIR/test-all
mkdir -p "$logdir"

summary=()
failed=0
t_all=$(date +%s)

# phase NAME CMD...: runs CMD with its output shown and kept in $logdir/NAME.log.
phase() {
  local name=$1; shift
  local t0 rc
  t0=$(date +%s)
  echo "=== $name: $*"
  "$@" 2>&1 | tee "$logdir/$name.log"
  rc=${PIPESTATUS[0]}
  local dt=$(( $(date +%s) - t0 ))
  if [ "$rc" = 0 ]; then
    summary+=("$(printf '%-16s ok     %5ss' "$name" "$dt")")
  else
    summary+=("$(printf '%-16s FAILED %5ss  (rc %s, log %s)' "$name" "$dt" "$rc" "$logdir/$name.log")")
    failed=1
  fi
  return "$rc"
}

print_summary() {
  echo
  echo "=== summary (total $(( $(date +%s) - t_all ))s)"
  printf '%s\n' "${summary[@]}"
  if [ "$failed" = 0 ]; then echo "ALL PASSED"; else echo "FAILED"; fi
}

if [ "$(id -u)" != 0 ]; then
  echo "test-all.sh: run as root (installs packages, starts Slurm daemons, makes device nodes)" >&2
  exit 1
fi
command -v cargo >/dev/null || { echo "test-all.sh: cargo not found (install Rust first)" >&2; exit 1; }
cargo nextest --version >/dev/null 2>&1 ||
  { echo "test-all.sh: cargo-nextest not found (cargo install cargo-nextest --locked)" >&2; exit 1; }

phase deps "$here/install-deps.sh" || { print_summary; exit 1; }
for r in $releases; do
  phase "slurm-$r" "$here/slurm-install.sh" "$r" || { print_summary; exit 1; }
done

phase fmt cargo fmt --all -- --check
phase clippy cargo clippy --all-targets -- -D warnings
RUSTDOCFLAGS="-D warnings" phase doc cargo doc --no-deps
for r in $releases; do
  src=$("$repo/slurm-headers/fetch-slurm.sh" "$r") || { summary+=("fetch-slurm $r FAILED"); failed=1; continue; }
  SLURM_SRC_DIR=$src phase "clippy-$r" cargo clippy -p gputopo --all-targets -- -D warnings
  SLURM_SRC_DIR=$src RUSTDOCFLAGS="-D warnings" phase "doc-$r" cargo doc --no-deps -p gputopo
done
phase unit cargo test
# Every parser of input another party wrote, fuzzed for a bounded time (seconds per target).
FUZZ_SECS=${GPUTOPO_FUZZ_SECS:-12} phase fuzz "$here/fuzz.sh"
# Criterion benchmarks: they print numbers and assert nothing, so CI only builds them (the perf
# gate below is what CI judges speed by); GPUTOPO_BENCHES=run runs their quick form too (about
# 3.5 minutes on two idle cores): the core's, and one gputopo metrics scrape of a 1,000-node
# cluster against gputopo nodes on the same data.
bench_run=(--no-run)
[ "${GPUTOPO_BENCHES:-build}" = run ] && bench_run=(-- --quick --noplot)
phase benches cargo bench -p gputopo-core -p gputopo-eval --bench placement --bench sim --bench priority \
  --bench steer --bench victims "${bench_run[@]}"
phase bench-metrics cargo bench -p gputopo-agent --bench metrics "${bench_run[@]}"

# The gputopo command (gres.conf for the harness; the agent's e2e tests also run it).
phase gputopo-bin cargo build --release -p gputopo-agent --bin gputopo
# The fake NVML library and its driver-tree writer, side by side in target/debug (the NVML
# e2e tests find both there; building them inside a test would eat its time limit).
phase fake-nvml cargo build -p fake-nvml
export GPUTOPO_BIN=$CARGO_TARGET_DIR/release/gputopo

# e2e_phase NAME PROFILE: the e2e tests of a nextest profile on release $r's cluster. Its
# summary line counts them (contrib/nextest-summary.py): skipped are the tests that returned
# early because they do not apply here (tests/skip.rs) and those the profile leaves out of the
# full e2e run; nextest itself counts both kinds differently (the first as passed).
e2e_phase() {
  local name=$1 profile=$2 junit=$CARGO_TARGET_DIR/nextest/$2/junit.xml rc counts
  local list=(cargo nextest list -p gputopo --test main --run-ignored only --message-format oneline)
  comm -23 <("${list[@]}" -P e2e 2>/dev/null | sort) <("${list[@]}" -P "$profile" 2>/dev/null | sort) \
    > "$logdir/$name.left-out"
  rm -f "$junit"
  GPUTOPO_E2E=1 GPUTOPO_E2E_DIR_PREFIX=/tmp/gputopo-e2e-$r phase "$name" \
    cargo nextest run -p gputopo --test main -P "$profile" --run-ignored only --test-threads "$shards"
  rc=$?
  counts=$("$here/nextest-summary.py" "$junit" "$logdir/$name.left-out")
  printf '%s\n' "$counts" | tee -a "$logdir/$name.log"
  summary[${#summary[@]}-1]+="  ${counts##*$'\n'}"
  return "$rc"
}

# Runs the root package's test binary for release $r with extra args.
root_tests() {
  cargo test -p gputopo --test main -- "$@"
}

for r in $releases; do
  src=$("$repo/slurm-headers/fetch-slurm.sh" "$r") || continue
  panic_so=$logdir/libgputopo-test-panic-$r.so
  rm -f "$panic_so"
  phase "plugin-panic-$r" bash -c "set -o pipefail; cp \"\$('$here/build-plugin.sh' '$r' --features test-panic | tail -n 1)\" '$panic_so'"
  so_out=$logdir/plugin-$r.path
  if phase "plugin-$r" bash -c "set -o pipefail; '$here/build-plugin.sh' '$r' | tee '$so_out'"; then
    so=$(tail -n 1 "$so_out")
  else
    continue
  fi
  export SLURM_SRC_DIR=$src GPUTOPO_PLUGIN_SO=$so GPUTOPO_SLURM_RELEASE=$r GPUTOPO_PANIC_SO=$panic_so
  phase "abi-$r" root_tests
  phase "plugin-unit-$r" cargo test -p gputopo --lib
  # The e2e suite under cargo-nextest, $shards clusters at once (.config/nextest.toml).
  "$here/cluster.sh" munge
  GPUTOPO_SELECT=gputopo e2e_phase "e2e-$r" e2e
  GPUTOPO_SELECT=cons_tres e2e_phase "stock-$r" stock
  # The perf gate (callgrind counts are repeatable on a loaded machine; wall-clock is not).
  BENCH_DIR=/tmp/gputopo-perf-gate-$r phase "perf-gate-$r" "$here/bench-select.sh" \
    --release "$r" --callgrind --nodes 128 --gate 2
  # Slurm's own testsuite, the part tagged ci, with gputopo against the stock results of the
  # full gate run committed per release (docs/harness.md, "Slurm's own testsuite").
  phase "gate-$r" "$here/slurm-testsuite.sh" "$r" gputopo gputopo --tag ci --sides gputopo \
    --work "/tmp/gputopo-ts-ci-$r"
  phase "package-$r" "$here/test-package.sh" "$r"
  unset SLURM_SRC_DIR GPUTOPO_PLUGIN_SO GPUTOPO_SLURM_RELEASE GPUTOPO_PANIC_SO
done

# Every other cached release: a short smoke under a time budget; its lines join the summary.
# The budget is also cut to what is left of GPUTOPO_CI_LIMIT (default 3300 s: the whole run
# stays under 55 minutes, CI's 60 with a margin).
smoke_budget=${GPUTOPO_SMOKE_BUDGET:-480}
ci_left=$(( ${GPUTOPO_CI_LIMIT:-3300} - ($(date +%s) - t_all) ))
[ "$ci_left" -lt "$smoke_budget" ] && smoke_budget=$(( ci_left > 0 ? ci_left : 0 ))
phase smoke "$here/smoke-releases.sh" --skip "$releases" --budget "$smoke_budget" \
  --summary "$logdir/smoke.summary"
[ -f "$logdir/smoke.summary" ] && while IFS= read -r l; do summary+=("  $l"); done < "$logdir/smoke.summary"

print_summary
exit "$failed"
