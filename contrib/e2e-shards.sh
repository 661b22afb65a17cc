#!/usr/bin/env bash
# Runs the `--ignored` tests of tests/main.rs (the end-to-end suite) in N concurrent shards, each
# shard on its own cluster directory (its own ports, devices and daemons: see cluster.sh), so two
# clusters run at once. Most of an e2e test's time is waiting for Slurm (polls, job runtimes,
# daemon start-up), so two shards on two cores take little more than half the serial time.
#
#   contrib/e2e-shards.sh [--shards N] [--dir-prefix P] [--times FILE] [FILTER...]
#
# Work is handed out one test at a time from a shared queue, so the shards end close together
# (each test starts its own cluster in its shard's directory; none depends on another's). Tests
# are taken longest first when --times FILE (written by an earlier run: "SECONDS TEST" lines)
# knows them, then the rest in the binary's list order. FILTERs are cargo test's (substring of
# the test name, any of them); none = every ignored test. Each test's output is printed whole when
# it ends (never interleaved), then a table per module with counts and summed test times, and the
# failed tests by name. Exit status: 0 when every test passed (and no slurm-*.out appeared in
# the checkout), 1 otherwise.
#
# Environment: the test binary's (GPUTOPO_E2E, GPUTOPO_SELECT, GPUTOPO_SLURM_RELEASE,
# GPUTOPO_PLUGIN_SO, SLURM_SRC_DIR, ...); GPUTOPO_E2E_DIR is set per shard (P-sK, default prefix
# /tmp/gputopo-e2e-shard). Run as root, like the tests.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
shards=2 prefix=/tmp/gputopo-e2e-shard times= filters=()
while [ $# -gt 0 ]; do
  case $1 in
    --shards) shards=$2; shift 2 ;;
    --dir-prefix) prefix=$2; shift 2 ;;
    --times) times=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) filters+=("$1"); shift ;;
  esac
done
case $shards in '' | *[!0-9]* | 0) echo "e2e-shards.sh: --shards wants a positive number" >&2; exit 2 ;; esac
cd "$repo"

# The test binary, built once here: the shards run it directly, so no cargo lock is held while
# tests run. The fake NVML library the agent tests load is built now too (not by two shards at once).
cargo build -p fake-nvml
exe=$(cargo test -p gputopo --test main --no-run --message-format=json |
  sed -n 's/.*"target":{[^}]*"name":"main"[^}]*}.*"executable":"\([^"]*\)".*/\1/p' | tail -n 1)
[ -x "$exe" ] || { echo "e2e-shards.sh: no test binary for tests/main.rs found" >&2; exit 1; }
export CARGO=${CARGO:-$(command -v cargo)}

work=$(mktemp -d /tmp/e2e-shards.XXXXXX)
trap 'rm -rf "$work"' EXIT

"$exe" --list --ignored "${filters[@]}" 2>/dev/null | sed -n 's/: test$//p' >"$work/tests"
[ -s "$work/tests" ] || { echo "e2e-shards.sh: no test matches ${filters[*]:-(none)}"; exit 0; }
# Order: tests with known seconds first (longest first), then the others in list order.
n=0
while read -r t; do
  n=$((n + 1)) s=
  [ -n "$times" ] && [ -f "$times" ] && s=$(awk -v t="$t" '$2 == t { print $1 }' "$times" | tail -n 1)
  if [ -n "$s" ]; then echo "1 $s $t"; else echo "0 $((-n)) $t"; fi
done <"$work/tests" | sort -k1,1nr -k2,2nr | awk '{ print $3 }' >"$work/queue"

# One port block per shard: cluster.sh derives ports from the directory; pick shard directories
# whose blocks differ.
dirs=() bases=" " k=0
for i in $(seq 0 $((shards - 1))); do
  while :; do
    d=$prefix-s$i; [ "$k" = 0 ] || d=$d-$k
    b=$("$here/cluster.sh" port --dir "$d")
    case $bases in *" $b "*) k=$((k + 1)) ;; *) break ;; esac
  done
  dirs+=("$d") bases="$bases$b "
done

# munged is shared by every cluster: start it once, before two shards race to.
"$here/cluster.sh" munge

# next_test: pops the queue's first line under a lock; empty when the queue is empty.
next_test() {
  (
    flock 9
    head -n 1 "$work/queue"
    sed -i 1d "$work/queue"
  ) 9>"$work/queue.lock"
}

worker() {
  local i=$1 t t0 rc log dt
  while t=$(next_test) && [ -n "$t" ]; do
    log=$work/$(printf %s "$t" | tr -c 'A-Za-z0-9_\n' '_').log
    t0=$(date +%s)
    rc=0
    GPUTOPO_E2E_DIR=${dirs[$i]} "$exe" --ignored --test-threads=1 --exact "$t" >"$log" 2>&1 || rc=$?
    dt=$(( $(date +%s) - t0 ))
    (
      flock 9
      echo "=== $t (shard $i, ${dt}s, rc $rc)"
      cat "$log"
      echo "$t $rc $dt" >>"$work/done"
    ) 9>"$work/print.lock"
  done
}

# Batch output belongs under each cluster's directory (the harness submits from DIR/jobs): any
# slurm-*.out that appears in the checkout during the run is a test that submitted elsewhere.
ls "$repo"/slurm-*.out 2>/dev/null | sort >"$work/out-before" || true
t_all=$(date +%s)
pids=()
for i in $(seq 0 $((shards - 1))); do worker "$i" & pids+=($!); done
for p in "${pids[@]}"; do wait "$p" || true; done

echo
echo "=== e2e shards: $shards, $(( $(date +%s) - t_all ))s in all (test times below are summed)"
touch "$work/done"
awk '{ n = split($1, p, "::"); m = (n > 2) ? p[1] "::" p[2] : p[1]
       if ($2 == 0) ok[m]++; else bad[m]++; secs[m] += $3 }
     END { for (m in secs) printf "%-28s %-6s %3d passed %3d failed %5ds\n", m,
             (bad[m] ? "FAILED" : "ok"), ok[m], bad[m], secs[m] }' "$work/done" | sort
failed=0
while read -r t rc _; do
  [ "$rc" = 0 ] || { echo "FAILED: $t"; failed=1; }
done <"$work/done"
ran=$(wc -l <"$work/done") want=$(wc -l <"$work/tests")
echo "total: $(awk '$2 == 0' "$work/done" | wc -l) passed, $(awk '$2 != 0' "$work/done" | wc -l) failed, of $want"
# A test that never reported (a worker that died) counts as failed.
if [ "$ran" != "$want" ]; then echo "FAILED: $((want - ran)) test(s) did not run"; failed=1; fi
ls "$repo"/slurm-*.out 2>/dev/null | sort | comm -13 "$work/out-before" - >"$work/out-new" || true
if [ -s "$work/out-new" ]; then
  echo "FAILED: batch output written in the checkout, not under a cluster directory:"
  sed 's/^/  /' "$work/out-new"; failed=1
fi
if [ -n "$times" ]; then
  { awk '{ print $3, $1 }' "$work/done"; [ -f "$times" ] && cat "$times"; } |
    awk '!seen[$2]++' >"$times.new" && mv "$times.new" "$times"
fi
exit "$failed"
