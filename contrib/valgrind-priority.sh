#!/usr/bin/env bash
# slurmctld under valgrind (memcheck) with the load that overflowed priority arrays: job arrays
# over several partitions, split by slurmctld each time a task starts (priority_p_set and the
# recalculation then write the split copies), one pending array moved to other partitions,
# finished records purged (MinJobAge=2). Run once with
# priority/multifactor and once with priority/gputopo (select/gputopo in both), then print the
# error summaries side by side: all errors, and errors with a gputopo frame in their stack.
#
#   contrib/valgrind-priority.sh [--release 22.05.8|24.11.5] [--dir DIR] [--tasks N] [--slurmdbd]
#
# --slurmdbd adds slurmdbd (contrib/slurmdbd.sh: MariaDB + slurmdbd for DIR, QOS high and low,
# user root in account acct_a) and a fourth array over two QOS and two partitions
# (`--qos=high,low`, 24.11 only: one priority per partition x QOS, where slurmctld's split
# copies hold one per partition).
#
# The bar is 0 errors with a gputopo frame. The raw logs stay in DIR/valgrind-PRIORITY.*.log.
# Needs root and valgrind (Debian package valgrind); uses contrib/cluster.sh
# (GPUTOPO_PLUGIN_SO / GPUTOPO_BIN honoured). Takes a few minutes: slurmctld runs ~20x slower.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
release=$(default_release) dir=/tmp/gputopo-valgrind-priority tasks=20 dbd=
while [ $# -gt 0 ]; do
  case $1 in
    --release) release=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --tasks) tasks=$2; shift 2 ;;
    --slurmdbd) dbd=1; shift ;;
    *) echo "usage: $0 [--release R] [--dir DIR] [--tasks N] [--slurmdbd]" >&2; exit 2 ;;
  esac
done
command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 1; }
mkdir -p "$dir"
logs=$dir/vg-logs
# The same slurm.conf lines as tests/e2e/priority_memory.rs.
extra=$here/priority-array-load.conf
if [ -n "$dbd" ]; then
  conf=$(mktemp); trap 'rm -f "$conf"; "$here/slurmdbd.sh" down --dir "$dir" >/dev/null 2>&1 || true' EXIT
  cat "$extra" > "$conf"
  "$here/slurmdbd.sh" up --release "$release" --dir "$dir" --cluster vgprio >> "$conf"
  echo AccountingStorageEnforce=associations >> "$conf"
  sbin=$(release_prefix "$release")/bin
  mgr() { SLURM_CONF=$dir.dbd/slurm.conf "$sbin/sacctmgr" -i "$@" >/dev/null; }
  mgr add qos high priority=100; mgr add qos low priority=10
  mgr add account acct_a; mgr add user root account=acct_a qos=normal,high,low
  extra=$conf
fi

# errors LOG... -> "total in_gputopo": memcheck error reports (a "==PID== <kind>" line of one
# of memcheck's error kinds, then its stack up to the next blank "==PID== " line), and those
# with a gputopo frame. valgrind's own ERROR SUMMARY lines are summed as a cross-check.
count_errors() {
  awk '
    function close_blk() { if (inblk) { n++; if (g) gn++ } inblk = 0; g = 0 }
    /^==[0-9]+== (Invalid |Conditional jump|Use of uninitialised|Syscall param|Mismatched|Source and destination|Argument |Jump to)/ {
      close_blk(); inblk = 1; next
    }
    /^==[0-9]+== *$/ { close_blk(); next }
    inblk && /gputopo/ { g = 1 }
    /ERROR SUMMARY:/ { for (i = 1; i <= NF; i++) if ($i == "SUMMARY:") vs += $(i + 1) }
    END { close_blk(); printf "%d %d %d\n", n, gn, vs }
  ' "$@"
}

run() { # priority -> prints "total in_gputopo valgrind_summary_total"
  local pr=$1 i left
  rm -rf "$logs.$pr"; mkdir -p "$logs.$pr"
  GPUTOPO_SLURMCTLD_PREFIX="valgrind --tool=memcheck --error-limit=no --num-callers=40 --leak-check=no --trace-children=no --log-file=$logs.$pr/vg.%p.log" \
    "$here/cluster.sh" up --release "$release" --nodes 2 --topology dgx1v --select gputopo \
    --priority "$pr" --dir "$dir" --extra-conf "$extra" >/dev/null
  eval "$("$here/cluster.sh" env --dir "$dir")"
  local a1 a2 a3
  a1=$(sbatch --parsable -p p1,p2 --array=0-"$tasks"%3 -n1 --wrap 'sleep 1' -o /dev/null)
  a2=$(sbatch --parsable -p p3,p2,p1 --array=0-"$tasks"%3 -n1 --wrap 'sleep 1' -o /dev/null)
  a3=$(sbatch --parsable -p p2,p3 --array=0-"$tasks"%2 -n1 --wrap 'sleep 1' -o /dev/null)
  if [ -n "$dbd" ] && [ "${release%.*}" != 22.05 ]; then
    a3=$a3,$(sbatch --parsable -A acct_a --qos=high,low -p p1,p2 --array=0-"$tasks"%2 -n1 --wrap 'sleep 1' -o /dev/null)
  fi
  for i in $(seq 120); do
    [ -z "$dbd" ] || scontrol release "${a3#*,}" >/dev/null 2>&1 || true
    left=$(squeue -h -r -o %i -j "$a1" 2>/dev/null | wc -l)
    [ "$left" -le $((tasks - 3)) ] && break; sleep 1
  done
  scontrol update jobid="${a3%%,*}" partition=p1,p3 >/dev/null 2>&1 || true
  for i in $(seq 600); do
    # 24.11 holds the rest of a multi-QOS array whenever it splits one off (stock too).
    [ -z "$dbd" ] || scontrol release "${a3#*,}" >/dev/null 2>&1 || true
    left=$(squeue -h -r -o %i -j "$a1,$a2,$a3" 2>/dev/null | wc -l) || left=1
    [ "$left" -eq 0 ] && break; sleep 1
  done
  [ "$left" -eq 0 ] || echo "valgrind-priority.sh: $pr: $left tasks left after 600 s" >&2
  scontrol shutdown >/dev/null 2>&1 || true
  for i in $(seq 120); do pgrep -f "slurmctld -f $dir/etc/slurm.conf" >/dev/null || break; sleep 1; done
  "$here/cluster.sh" down --dir "$dir" >/dev/null 2>&1 || true
  grep -q "ERROR SUMMARY" "$logs.$pr"/vg.*.log ||
    echo "valgrind-priority.sh: $pr: no ERROR SUMMARY (slurmctld did not exit cleanly)" >&2
  count_errors "$logs.$pr"/vg.*.log
}

echo "Slurm $release, slurmctld under valgrind memcheck, 3 multi-partition arrays${dbd:+ and slurmdbd (24.11: 1 multi-QOS array)} of $((tasks + 1)) tasks" >&2
m=$(run multifactor)
g=$(run gputopo)
read -r mt mg ms <<< "$m"
read -r gt gg gs <<< "$g"
printf '%-12s %8s %20s %26s\n' plugin errors "with a gputopo frame" "valgrind ERROR SUMMARY sum"
printf '%-12s %8s %20s %26s\n' multifactor "$mt" "$mg" "$ms"
printf '%-12s %8s %20s %26s\n' gputopo "$gt" "$gg" "$gs"
echo "logs: $logs.multifactor/ $logs.gputopo/"
[ "$gg" -eq 0 ]
