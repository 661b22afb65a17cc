#!/usr/bin/env bash
# Scheduling overhead of select/gputopo next to stock select/cons_tres, on a real slurmctld.
#
#   contrib/bench-select.sh [--release 22.05.8|24.11.5] [--nodes N] [--jobs J] [--seed S]
#   BENCH_LIGHT=1 contrib/bench-select.sh        # CI form: 8 nodes, 200 jobs
#
# The same burst of J mixed GPU jobs (1, 2, 3, 4 or 8 GPUs on one node, or 2 GPUs on each of
# two nodes; 1-4 s each; same seed → same burst) runs three times on N emulated DGX-1V nodes:
#   1. stock     SelectType=select/cons_tres
#   2. forward   select/gputopo with every behaviour off (it only forwards and times
#                cons_tres: the stock time per select_p_job_test)
#   3. gputopo   select/gputopo with health, topology and node ranking on
# and prints side by side Slurm's own `sdiag` scheduling statistics (reset before the
# burst), the makespan, and the time per select_p_job_test (gputopo's counters, logged by
# the plugin at most every 5 s; one last job after the burst flushes them). Target: gputopo adds < 5% to the cycle time.
# Run as root (it starts clusters with contrib/cluster.sh). GPUTOPO_PLUGIN_SO and GPUTOPO_BIN
# are passed through to cluster.sh.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
release=22.05.8 nodes=64 jobs=2000 seed=1
if [ -n "${BENCH_LIGHT:-}" ]; then nodes=8 jobs=200; fi
while [ $# -gt 0 ]; do
  case $1 in
    --release) release=$2; shift 2 ;;
    --nodes) nodes=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    *) echo "bench-select.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
dir=${BENCH_DIR:-/tmp/gputopo-bench-select}
out=$dir/results
mkdir -p "$out"
trap '"$here/cluster.sh" down --dir "$dir" >/dev/null 2>&1 || true' EXIT

# The burst: one line of sbatch arguments per job, from a seeded generator.
burst() {
  awk -v n="$jobs" -v seed="$seed" 'BEGIN {
    srand(seed)
    for (i = 0; i < n; i++) {
      r = rand(); t = 1 + int(rand() * 4)
      if (r < 0.30) g = "-N1 --gres=gpu:1"
      else if (r < 0.60) g = "-N1 --gres=gpu:2"
      else if (r < 0.70) g = "-N1 --gres=gpu:3"
      else if (r < 0.88) g = "-N1 --gres=gpu:4"
      else if (r < 0.95) g = "-N1 --gres=gpu:8"
      else g = "-N2 --gpus-per-node=2"
      printf "%s -n1 -c1 --wrap=\"sleep %d\"\n", g, t
    }
  }'
}

run() { # name select conf
  local name=$1 select=$2 conf=$3 t0 t1
  "$here/cluster.sh" up --release "$release" --nodes "$nodes" --topology dgx1v \
    --select "$select" --gputopo-conf "$conf" --dir "$dir" --debug > /dev/null
  # shellcheck disable=SC1091
  source "$dir/cluster.env"
  export SLURM_CONF PATH="$GPUTOPO_SLURM_BIN:$GPUTOPO_SLURM_SBIN:$PATH"
  mkdir -p "$dir/jobs" && cd "$dir/jobs"
  sdiag -r > /dev/null
  t0=$(date +%s.%N)
  burst | while IFS= read -r args; do eval "sbatch -Q $args" > /dev/null; done
  while [ -n "$(squeue -h -o %A | head -1)" ]; do sleep 1; done
  t1=$(date +%s.%N)
  sdiag > "$out/$name.sdiag"
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f\n", b - a }' > "$out/$name.makespan"
  # The plugin logs its counters at most every 5 s, on a job_test call: make one more.
  sleep 6; sbatch -Q -n1 --wrap=true > /dev/null; sleep 2
  grep -o 'job_test calls=.*' "$dir/log/slurmctld.log" | tail -1 > "$out/$name.counters" || true
  cd - > /dev/null
  "$here/cluster.sh" down --dir "$dir" > /dev/null
}

printf 'HealthAware=no\nTopologyAware=no\nNodeRanking=no\n' > "$dir/off.conf"
printf 'HealthAware=yes\nTopologyAware=yes\nNodeRanking=yes\n' > "$dir/on.conf"
echo "bench-select: Slurm $release, $nodes DGX-1V nodes, $jobs jobs (seed $seed)" >&2
run stock cons_tres "$dir/off.conf"
run forward gputopo "$dir/off.conf"
run gputopo gputopo "$dir/on.conf"

# sdiag value after "Label:" in the section starting with "Section".
stat() { # file section label
  awk -v s="$2" -v l="$3" 'index($0, s) { on = 1 } on && index($0, l) { sub(/.*: */, ""); print $1; exit }' "$1"
}
counter() { # file key
  grep -o "$2=[0-9.]*" "$1" | head -1 | cut -d= -f2
}
row() { printf '%-44s %14s %14s %14s\n' "$@"; }
row "" stock forward gputopo
for label in "Last cycle" "Max cycle" "Mean cycle" "Total cycles" "Mean depth cycle"; do
  row "main: $label" "$(stat "$out/stock.sdiag" "Main schedule" "$label")" \
    "$(stat "$out/forward.sdiag" "Main schedule" "$label")" "$(stat "$out/gputopo.sdiag" "Main schedule" "$label")"
done
for label in "Total backfilled jobs (since last slurm start)" "Total cycles" "Mean cycle" "Max cycle"; do
  row "backfill: ${label%% (*}" "$(stat "$out/stock.sdiag" "Backfilling stats" "$label")" \
    "$(stat "$out/forward.sdiag" "Backfilling stats" "$label")" "$(stat "$out/gputopo.sdiag" "Backfilling stats" "$label")"
done
row "makespan (s)" "$(cat "$out/stock.makespan")" "$(cat "$out/forward.makespan")" "$(cat "$out/gputopo.makespan")"
for k in calls stock_us_per_call own_us_per_call extra_stock_calls replaced; do
  row "select_p_job_test $k" "-" "$(counter "$out/forward.counters" $k)" "$(counter "$out/gputopo.counters" $k)"
done
awk -v f="$(counter "$out/forward.counters" stock_us_per_call)" \
    -v s="$(counter "$out/gputopo.counters" stock_us_per_call)" \
    -v o="$(counter "$out/gputopo.counters" own_us_per_call)" 'BEGIN {
  if (f > 0) printf "time per select_p_job_test: stock %.1f us, gputopo %.1f us (cons_tres %.1f + own %.1f): %+.1f%%\n", f, s + o, s, o, 100 * (s + o - f) / f
}'
echo "raw sdiag output and counters: $out" >&2
