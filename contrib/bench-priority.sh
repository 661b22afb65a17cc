#!/usr/bin/env bash
# Priority recalculation cost inside slurmctld: N pending jobs (default 10000), scored by
# priority/multifactor and by priority/gputopo on the same local cluster configuration.
#
#   contrib/bench-priority.sh [--release 22.05.8|24.11.5] [--jobs N] [--periods P] [--slurmdbd]
#                             [--dir DIR]
#
# The metric is CPU time of the recalculation thread ("decay" for multifactor, "gputopo-prio"
# for gputopo) from /proc/<pid>/task/<tid>/schedstat (ns), over P PriorityCalcPeriods of one
# minute after all jobs are queued, divided by P. Both threads take the same slurmctld locks
# (job write, node/partition read) for their pass, so this is also the time the job write lock
# is held per period. Without slurmdbd (the harness default) multifactor's pass recomputes
# job factors only, while gputopo also charges/decays its ledger and re-ranks users.
# 22.05's multifactor starts no recalculation thread at all without slurmdbd (priorities are
# set at submit only), so compare 22.05 with --slurmdbd (contrib/slurmdbd.sh: MariaDB +
# slurmdbd; both plugins then decay usage, run Fair Tree and recompute every pending job).
# Needs root; uses contrib/cluster.sh (GPUTOPO_PLUGIN_SO / GPUTOPO_BIN honoured).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
release=22.05.8 jobs=10000 periods=2 dir=/tmp/gputopo-bench-priority dbd=
while [ $# -gt 0 ]; do
  case $1 in
    --release) release=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --periods) periods=$2; shift 2 ;;
    --slurmdbd) dbd=1; shift ;;
    --dir) dir=$2; shift 2 ;;
    *) echo "usage: $0 [--release R] [--jobs N] [--periods P] [--slurmdbd] [--dir DIR]" >&2; exit 2 ;;
  esac
done
extra=$(mktemp)
cat > "$extra" <<EOC
MaxJobCount=$((jobs + 1000))
PriorityWeightAge=1000
PriorityWeightJobSize=1000
PriorityWeightPartition=10000
PriorityWeightFairshare=10000
PriorityCalcPeriod=1
PriorityWeightTRES=CPU=1000,Mem=2000
SchedulerParameters=max_rpc_cnt=0,defer
SlurmctldDebug=debug
EOC

thread_ns() { # pid name -> summed on-CPU ns of threads with that comm
  local t s=0
  for t in /proc/"$1"/task/*; do
    [ "$(cat "$t/comm" 2>/dev/null)" = "$2" ] && s=$((s + $(cut -d' ' -f1 "$t/schedstat")))
  done
  echo $s
}

run() { # priority thread-name
  local pr=$1 name=$2 pid t0 t1 s0 s1
  if [ -n "$dbd" ]; then
    "$here/slurmdbd.sh" up --release "$release" --dir "$dir" --cluster benchprio >> "$extra"
  fi
  "$here/cluster.sh" up --release "$release" --nodes 2 --topology dgx1v --priority "$pr" \
    --dir "$dir" --extra-conf "$extra" >/dev/null
  eval "$("$here/cluster.sh" env --dir "$dir")"
  sbatch -N2 --exclusive --wrap 'sleep 3600' -o /dev/null >/dev/null
  local i; for i in $(seq "$jobs"); do
    sbatch -n$((1 + i % 8)) --nice=$((i % 5)) --wrap 'true' -o /dev/null >/dev/null
  done
  pid=$(pgrep -f "slurmctld -f $dir/etc/slurm.conf" | head -1)
  sleep 5
  s0=$(thread_ns "$pid" "$name"); t0=$(date +%s)
  sleep $((periods * 60 + 2))
  s1=$(thread_ns "$pid" "$name"); t1=$(date +%s)
  echo "$release $pr${dbd:+ (slurmdbd)}: $jobs pending jobs, $(( (s1 - s0) / periods / 1000 )) us CPU per recalculation ($periods periods, $((t1 - t0)) s)"
  "$here/cluster.sh" down --dir "$dir" >/dev/null
  if [ -n "$dbd" ]; then
    "$here/slurmdbd.sh" down --dir "$dir"
    sed -i '/^ClusterName=\|^AccountingStorage/d' "$extra"
  fi
}
run multifactor decay
run gputopo gputopo-prio
rm -f "$extra"
