#!/usr/bin/env bash
# Priority recalculation cost inside slurmctld: N pending jobs (default 10000), scored by
# priority/multifactor and by priority/gputopo side by side in ONE run, on ONE cluster with the
# same job records.
#
#   contrib/bench-priority.sh [--release 22.05.8|24.11.5] [--jobs N] [--running M]
#                             [--periods P] [--rounds R] [--slurmdbd] [--dir DIR]
#
# The cluster comes up once (select/gputopo, priority_gputopo.so installed next to the stock
# plugins), M one-CPU jobs (default 64: both nodes' cores) start and keep running, and the N
# jobs are submitted once (they stay pending behind the running ones). Then, R times, for multifactor and then gputopo:
# PriorityType is switched in slurm.conf and slurmctld restarted (`cluster.sh restart
# slurmctld`: the jobs survive in StateSaveLocation), and the plugin is measured on the same
# records. With one plugin per cluster the two would be measured on different job records and
# at different times of a shared machine.
#
# The metric is CPU time of the recalculation thread ("decay" for multifactor, "gputopo-prio"
# for gputopo) from /proc/<pid>/task/<tid>/schedstat (ns), over P PriorityCalcPeriods of one
# minute after slurmctld's start, divided by P. Both threads take the same slurmctld locks
# (job write, node/partition read) for their pass, so this is also the time the job write lock
# is held per period. Without slurmdbd (the harness default) multifactor's pass recomputes
# job factors only, while gputopo also charges/decays its ledger and re-ranks users.
# With --slurmdbd (AccountingStorageEnforce=associations,limits) both plugins also charge the
# M running jobs to their association and QOS every pass: usage_raw, usage_tres_raw[],
# grp_used_wall and the run-seconds GrpTRESRunMins reads.
# 22.05's multifactor starts no recalculation thread at all without slurmdbd (priorities are
# set at submit only), so compare 22.05 with --slurmdbd (contrib/slurmdbd.sh: MariaDB +
# slurmdbd; both plugins then decay usage, run Fair Tree and recompute every pending job).
# The load average is printed with each sample: the figures are only comparable within a run.
# Needs root; uses contrib/cluster.sh (GPUTOPO_PLUGIN_SO / GPUTOPO_BIN honoured).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
release=$(default_release) jobs=10000 running=64 periods=2 rounds=1 dir=/tmp/gputopo-bench-priority dbd=
while [ $# -gt 0 ]; do
  case $1 in
    --release) release=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --running) running=$2; shift 2 ;;
    --periods) periods=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --slurmdbd) dbd=1; shift ;;
    --dir) dir=$2; shift 2 ;;
    *) echo "usage: $0 [--release R] [--jobs N] [--running M] [--periods P] [--rounds R] [--slurmdbd] [--dir DIR]" >&2; exit 2 ;;
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

cleanup() {
  "$here/cluster.sh" down --dir "$dir" >/dev/null 2>&1 || true
  [ -z "$dbd" ] || "$here/slurmdbd.sh" down --dir "$dir" >/dev/null 2>&1 || true
  rm -f "$extra"
}
trap cleanup EXIT

if [ -n "$dbd" ]; then
  "$here/slurmdbd.sh" up --release "$release" --dir "$dir" --cluster benchprio >> "$extra"
  echo "AccountingStorageEnforce=associations,limits" >> "$extra"
fi
"$here/cluster.sh" up --release "$release" --nodes 2 --topology dgx1v --priority gputopo \
  --dir "$dir" --extra-conf "$extra" >/dev/null
eval "$("$here/cluster.sh" env --dir "$dir")"
conf=$dir/etc/slurm.conf
for _ in $(seq "$running"); do sbatch -n1 --wrap 'sleep 36000' -o /dev/null >/dev/null; done
[ "$running" -gt 0 ] || sbatch -N2 --exclusive --wrap 'sleep 36000' -o /dev/null >/dev/null
# Running before the queue comes: the queued jobs then stay pending behind them.
want=$(( running > 0 ? running : 1 ))
for _ in $(seq 120); do [ "$(squeue -h -t R -o %i | wc -l)" -ge "$want" ] && break; sleep 1; done
# 4 submitters at once: a 10k-job queue in minutes on a small machine.
seq "$jobs" | xargs -P 4 -I{} sh -c \
  'i={}; sbatch -n$((1 + i % 8)) --nice=$((i % 5)) --wrap true -o /dev/null >/dev/null'
queued=$(squeue -h -t PD -o %i | wc -l)

measure() { # priority thread-name -> one result line
  local pr=$1 name=$2 pid s0 s1 t0 t1 i
  sed -i "s|^PriorityType=.*|PriorityType=priority/$pr|" "$conf"
  QUIET=1 "$here/cluster.sh" restart --dir "$dir" slurmctld
  pid=$(pgrep -f "slurmctld -f $conf" | head -1)
  for i in $(seq 120); do [ "$(squeue -h -t PD -o %i 2>/dev/null | wc -l)" -ge "$queued" ] && break; sleep 1; done
  sleep 5
  s0=$(thread_ns "$pid" "$name"); t0=$(date +%s)
  sleep $((periods * 60 + 2))
  s1=$(thread_ns "$pid" "$name"); t1=$(date +%s)
  printf '%-12s %8d us CPU per recalculation  (%d periods, %d s, load %s)\n' "$pr" \
    $(( (s1 - s0) / periods / 1000 )) "$periods" $((t1 - t0)) "$(cut -d' ' -f1-3 /proc/loadavg)"
}

echo "Slurm $release${dbd:+ with slurmdbd}: $queued pending and $(squeue -h -t R -o %i | wc -l) running jobs on one cluster, both plugins in turn"
for r in $(seq "$rounds"); do
  measure multifactor decay
  measure gputopo gputopo-prio
done
