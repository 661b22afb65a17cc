#!/usr/bin/env bash
# A short smoke test of every Slurm release that is cached on this machine but not in the full
# suite: CI runs the whole suite on the releases a package registry serves (22.05.8, 24.11.5)
# and this on the rest (23.11.4, 24.05.8, 25.05.8, 25.11.7, 26.05.3, ... built by a site from its
# own tree).
#
#   contrib/smoke-releases.sh [--skip "22.05.8 24.11.5"] [--budget SECONDS] [--summary FILE]
#
# A release is smoked when both its tree (${GPUTOPO_CACHE:-/var/cache/gputopo}/src/slurm-R with
# .gputopo-ready, see slurm-headers/fetch-slurm.sh) and its install (slurm-R with the stamp of
# contrib/slurm-install.sh) are present; newest first. Per release: the plugin build, the ABI
# checks (tests/main.rs without --ignored), the plugin's unit tests and a few end-to-end tests
# ($GPUTOPO_SMOKE_TESTS). The budget (default 480 s) bounds the whole smoke: a release is started
# only while the time left is at least what the previous release took (the first: at least
# GPUTOPO_SMOKE_RELEASE_SECS, default 360); the rest are reported as
# "skipped (time budget)". Releases with only a tree or only an install are reported as skipped
# with the missing half. One line per release and step goes to stdout and to --summary FILE.
# Exit status: 0 when nothing that ran failed.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
cd "$repo"
cache=${GPUTOPO_CACHE:-/var/cache/gputopo}
. "$here/lib.sh"
skip=$(releases ci | paste -sd' ') budget=480 summary_file=
while [ $# -gt 0 ]; do
  case $1 in
    --skip) skip=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --summary) summary_file=$2; shift 2 ;;
    *) echo "smoke-releases.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
tests=${GPUTOPO_SMOKE_TESTS:-e2e::foundation::gpu_request_forms_get_the_gpus_they_ask_for e2e::select::faulty_gpu_is_never_allocated_and_returns_when_cleared e2e::priority::gputopo_scores_pending_jobs_like_multifactor e2e::cons_tres_features}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$repo/target}
logdir=$CARGO_TARGET_DIR/smoke
mkdir -p "$logdir"
: > "$logdir/summary"

line() { printf '%s\n' "$1" | tee -a "$logdir/summary"; }
failed=0
step() { # step RELEASE NAME CMD...: runs CMD, logs to $logdir/R-NAME.log, prints one line
  local r=$1 name=$2; shift 2
  local t0 rc
  t0=$(date +%s)
  "$@" >"$logdir/$r-$name.log" 2>&1
  rc=$?
  # Test counts of cargo's "test result:" lines, summed (empty for the build).
  local counts
  counts=$(awk '/^test result:/ { p += $4; f += $6; i += $8 } END { if (NR && (p + f + i)) printf "%d passed, %d failed, %d ignored", p, f, i }' "$logdir/$r-$name.log")
  if [ "$rc" = 0 ]; then
    line "$(printf 'smoke-%-9s %-12s ok     %5ss  %s' "$r" "$name" "$(( $(date +%s) - t0 ))" "$counts")"
  else
    line "$(printf 'smoke-%-9s %-12s FAILED %5ss  (log %s)' "$r" "$name" "$(( $(date +%s) - t0 ))" "$logdir/$r-$name.log")"
    failed=1
  fi
  return "$rc"
}

# Every release with a tree or an install in the cache, newest first.
candidates=$( { ls -d "$cache"/src/slurm-[0-9]* "$cache"/slurm-[0-9]* 2>/dev/null || true; } |
  sed 's|.*/slurm-||' | grep -E '^[0-9]+\.[0-9]+\.[0-9]+$' | sort -urV)
# A release is started only while the budget left covers the last one's time; the first is
# measured against GPUTOPO_SMOKE_RELEASE_SECS (default 360 s: one release's smoke here took 330 s
# with 3 e2e tests in the session-3 rehearsal; cons_tres_features adds ~10 s).
t_start=$(date +%s) last=${GPUTOPO_SMOKE_RELEASE_SECS:-360}
for r in $candidates; do
  case " $skip " in *" $r "*) continue ;; esac
  has_tree= has_install=
  [ -f "$cache/src/slurm-$r/.gputopo-ready" ] && has_tree=1
  [ -f "$cache/slurm-$r/.gputopo-installed" ] && has_install=1
  if [ -z "$has_tree" ] || [ -z "$has_install" ]; then
    line "$(printf 'smoke-%-9s skipped (no %s in %s)' "$r" "$([ -z "$has_tree" ] && echo "source tree" || echo "install")" "$cache")"
    continue
  fi
  left=$(( budget - ($(date +%s) - t_start) ))
  if [ "$left" -le 0 ] || [ "$left" -lt "$last" ]; then
    line "$(printf 'smoke-%-9s skipped (time budget: %ss left, a release takes about %ss)' "$r" "$left" "$last")"
    continue
  fi
  t0=$(date +%s)
  src=$cache/src/slurm-$r
  # One shared target dir for the smoke builds: only the gputopo crate differs per release.
  if step "$r" plugin env GPUTOPO_PLUGIN_TARGET="$CARGO_TARGET_DIR/smoke-build" SLURM_SRC_DIR="$src" \
      bash -c "'$here/build-plugin.sh' '$r' > '$logdir/$r.path'"; then
    so=$logdir/$r-libgputopo.so
    cp "$(tail -n 1 "$logdir/$r.path")" "$so"
    export SLURM_SRC_DIR=$src GPUTOPO_PLUGIN_SO=$so GPUTOPO_SLURM_RELEASE=$r
    step "$r" abi cargo test -p gputopo --test main
    step "$r" plugin-unit cargo test -p gputopo -p slurm-kit --lib
    # shellcheck disable=SC2086
    GPUTOPO_E2E=1 GPUTOPO_SELECT=gputopo step "$r" e2e cargo test -p gputopo --test main -- \
      --ignored --test-threads=1 $tests
    unset SLURM_SRC_DIR GPUTOPO_PLUGIN_SO GPUTOPO_SLURM_RELEASE
  fi
  last=$(( $(date +%s) - t0 ))
done
[ -s "$logdir/summary" ] || line "smoke: no other release cached (trees under $cache/src, installs under $cache)"
[ -z "$summary_file" ] || cp "$logdir/summary" "$summary_file"
exit "$failed"
