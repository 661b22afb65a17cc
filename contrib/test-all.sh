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
#   unit        cargo test (the workspace's default members: no Slurm needed)
#   benches     the core's criterion benchmarks, quick form (numbers only, no assertions)
#   peer-compare  contrib/peer-compare.sh: go-gpuallocator's expected answers (fails on a case
#               where gputopo's set, or its leftover at an equal set, is worse)
#   per release R in 22.05.8 24.11.5:
#     plugin-R  contrib/build-plugin.sh R (the select/gputopo .so for R)
#     abi-R     the root package's tests (tests/main.rs) with GPUTOPO_PLUGIN_SO, SLURM_SRC_DIR
#     plugin-unit-R  the plugin library's unit tests (real libslurmfull and stock cons_tres)
#     e2e-R     the same binary with --ignored: every end-to-end test on a real local cluster
#               (contrib/cluster.sh), select/gputopo loaded, in GPUTOPO_E2E_SHARDS (default 2)
#               concurrent shards of one cluster each (contrib/e2e-shards.sh)
#     stock-R   the tests that compare with stock Slurm again with GPUTOPO_SELECT=cons_tres
#     gate-R    contrib/slurm-testsuite.sh R gputopo gputopo --tag ci: Slurm's own expect and
#               python tests tagged ci in contrib/slurm-testsuite/list, stock against gputopo
#               (select and priority); fails when a test passing with stock does not with gputopo
#     bench-select-R  contrib/bench-select.sh, light form (overhead next to stock cons_tres)
#     package-R contrib/test-package.sh R: the Debian package built, installed with dpkg -i, a
#               GPU job run through the installed files, then removed and purged
#   smoke       contrib/smoke-releases.sh: every other release whose tree and install are cached
#               (25.05.8, 25.11.7, 26.05.3, ... built by hand from a site's tree), newest first:
#               plugin build, ABI checks, plugin unit tests and 4 e2e tests, within
#               GPUTOPO_SMOKE_BUDGET seconds (default 480); the summary names each release and
#               what ran, or why it was skipped (no source tree, no install, time budget)
#
# Environment: GPUTOPO_RELEASES (default "22.05.8 24.11.5"), GPUTOPO_STOCK_TESTS (test name
# filters for the stock run, default "e2e::foundation e2e::select e2e::identity
# e2e::gres_configs e2e::engine e2e::shared e2e::preempt e2e::gang e2e::cons_tres_features e2e::resv_gres"),
# GPUTOPO_E2E_SHARDS (1 = one test at a time, as cargo test --test-threads=1), CARGO_TARGET_DIR.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
cd "$repo"
export PATH=$HOME/.cargo/bin:/root/.cargo/bin:$PATH
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$repo/target}
case $CARGO_TARGET_DIR in /*) ;; *) CARGO_TARGET_DIR=$repo/$CARGO_TARGET_DIR ;; esac
export CARGO_TERM_COLOR=never
releases=${GPUTOPO_RELEASES:-22.05.8 24.11.5}
stock_tests=${GPUTOPO_STOCK_TESTS:-e2e::foundation e2e::select e2e::identity e2e::gres_configs e2e::engine e2e::shared e2e::preempt e2e::gang e2e::cons_tres_features e2e::resv_gres}
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

phase deps "$here/install-deps.sh" || { print_summary; exit 1; }
for r in $releases; do
  phase "slurm-$r" "$here/slurm-install.sh" "$r" || { print_summary; exit 1; }
done

phase fmt cargo fmt --all -- --check
phase clippy cargo clippy --all-targets -- -D warnings
for r in $releases; do
  src=$("$repo/slurm-headers/fetch-slurm.sh" "$r") || { summary+=("fetch-slurm $r FAILED"); failed=1; continue; }
  SLURM_SRC_DIR=$src phase "clippy-$r" cargo clippy -p gputopo --all-targets -- -D warnings
done
phase unit cargo test
# Criterion benchmarks of the core in their quick form: they print numbers, they assert nothing.
phase benches cargo bench -p gputopo-core --bench placement --bench sim --bench priority \
  --bench steer --bench victims -- --quick --noplot

# The gputopo command (gres.conf for the harness; the agent's e2e tests also run it).
phase gputopo-bin cargo build --release -p gputopo-agent --bin gputopo
export GPUTOPO_BIN=$CARGO_TARGET_DIR/release/gputopo
phase peer-compare "$here/peer-compare.sh"

# Runs the root package's test binary for release $r with extra args.
root_tests() {
  cargo test -p gputopo --test main -- "$@"
}

for r in $releases; do
  src=$("$repo/slurm-headers/fetch-slurm.sh" "$r") || continue
  so_out=$logdir/plugin-$r.path
  if phase "plugin-$r" bash -c "set -o pipefail; '$here/build-plugin.sh' '$r' | tee '$so_out'"; then
    so=$(tail -n 1 "$so_out")
  else
    continue
  fi
  export SLURM_SRC_DIR=$src GPUTOPO_PLUGIN_SO=$so GPUTOPO_SLURM_RELEASE=$r
  phase "abi-$r" root_tests
  phase "plugin-unit-$r" cargo test -p gputopo --lib
  # The e2e suite in concurrent shards (two clusters at once; see contrib/e2e-shards.sh).
  GPUTOPO_E2E=1 GPUTOPO_SELECT=gputopo phase "e2e-$r" "$here/e2e-shards.sh" --shards "$shards" \
    --dir-prefix "/tmp/gputopo-e2e-$r" --times "$logdir/e2e-times-$r"
  # shellcheck disable=SC2086
  GPUTOPO_E2E=1 GPUTOPO_SELECT=cons_tres phase "stock-$r" "$here/e2e-shards.sh" --shards "$shards" \
    --dir-prefix "/tmp/gputopo-e2e-$r" --times "$logdir/stock-times-$r" $stock_tests
  # Slurm's own testsuite, the part tagged ci, stock against gputopo (docs/harness.md).
  phase "gate-$r" "$here/slurm-testsuite.sh" "$r" gputopo gputopo --tag ci --work "/tmp/gputopo-ts-ci-$r"
  # The select overhead benchmark in its light form (stock, forwarding-only and gputopo on the
  # same burst; prints sdiag and time per select_p_job_test side by side).
  BENCH_LIGHT=1 phase "bench-select-$r" "$here/bench-select.sh" --release "$r"
  phase "package-$r" "$here/test-package.sh" "$r"
  unset SLURM_SRC_DIR GPUTOPO_PLUGIN_SO GPUTOPO_SLURM_RELEASE
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
