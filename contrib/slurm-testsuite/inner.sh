#!/usr/bin/env bash
# One side (stock or gputopo) of the parity gate, run by contrib/slurm-testsuite.sh inside its
# own PID, mount and network namespace; not meant to be called by hand.
#
#   inner.sh SIDE_DIR TESTS RESULTS
#
# TESTS: lines "SUITE TEST PROFILE" in run order. For each profile in order of first appearance
# it brings up the profile's harness cluster (contrib/cluster.sh, contrib/slurmdbd.sh), runs that
# profile's tests one after the other and tears the cluster down; profile "auto" instead gives
# the ATF a base configuration and a private MariaDB and lets it start its own daemons. Each
# test's result goes to RESULTS as "SUITE TEST RESULT SECONDS DETAIL" (RESULT: pass, fail, skip).
#
# Environment (from slurm-testsuite.sh): GATE_RELEASE, GATE_SIDE_SELECT (gputopo|cons_tres),
# GATE_SIDE_PRIORITY (gputopo|multifactor), GATE_WORK (the copied testsuite's parent),
# GATE_VENV, GPUTOPO_PLUGIN_SO, GPUTOPO_BIN, GATE_TIMEOUT (seconds per test), GATE_RETRY (a
# file of "SUITE TEST" lines: tests that get a second try after a failure).
#
# Why a namespace: in --auto-config mode the ATF finds daemons by scanning /proc for the release's
# slurmctld/slurmd binaries (then stops, kills or gdb-attaches them) and its module teardown drops
# the accounting database its MySQL client reaches. Here it sees only this side's processes, reaches
# only this side's MariaDB (network namespace; /run/mysqld masked), and everything it started dies
# with the namespace.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# GATE_REPO: the checkout (slurm-testsuite.sh runs a copy of this directory from its work dir).
repo=${GATE_REPO:-$(cd "$here/../.." && pwd)}
side_dir=$1 tests=$2 results=$3
: > "$results"
ts=$GATE_WORK/testsuite
# shellcheck source=contrib/slurm-testsuite/profiles.sh
. "$here/profiles.sh"
# shellcheck source=contrib/lib.sh
. "$repo/contrib/lib.sh"

log() { echo "inner: $*" >&2; }

# --- the namespace ---------------------------------------------------------------------------
ip link set lo up
# glibc's getaddrinfo(AI_ADDRCONFIG), which Slurm listens and connects with, answers nothing for
# IPv4 while only loopback has an address: a veth pair with both ends in here gives it one.
ip link add gate0 type veth peer name gate1 && ip addr add 10.254.0.1/24 dev gate0 &&
  ip link set gate0 up && ip link set gate1 up || { echo "inner: no veth pair in the namespace" >&2; exit 1; }
# The host's MariaDB socket (a client given no host connects there) is out of reach.
for d in /run/mysqld /var/run/mysqld; do [ -d "$d" ] && mount -t tmpfs tmpfs "$d"; done
# A private temporary directory: MariaDB (here and in contrib/slurmdbd.sh) names its temporary
# files after its PID, which in this namespace is small and the same in a concurrent gate run.
export TMPDIR=$side_dir/tmp
mkdir -p "$TMPDIR"

# The release's binaries and stock plugins, from the release table (lib.sh).
prefix=$(release_prefix "$GATE_RELEASE") stock_plugins=$(release_plugin_dir "$GATE_RELEASE")
export PATH=$side_dir/bin:$prefix/bin:$prefix/sbin:$PATH
export SLURM_TESTSUITE_CONF=$ts/testsuite.conf
export GATE_SELECT= GATE_PRIORITY=
[ "$GATE_SIDE_SELECT" = gputopo ] && GATE_SELECT=select/gputopo_cons_tres
[ "$GATE_SIDE_PRIORITY" = gputopo ] && GATE_PRIORITY=priority/gputopo

# Expect's globals read `scontrol show config` for every configuration check (check_config_select,
# get_config_param): globals.local points it at a wrapper that reports gputopo's plugins under
# the stock names they replace (the expect counterpart of gate_atf.py; no test is edited).
mkdir -p "$side_dir/bin" "$side_dir/logs" "$side_dir/pytest"
cat > "$side_dir/bin/gate-scontrol" <<EOS
#!/usr/bin/env bash
# scontrol, with gputopo's plugins shown under the stock names in \`show config\` (parity gate).
case " \$* " in
  *" show config "*|*" show conf "*|*" show configuration "*)
    "$prefix/bin/scontrol" "\$@" | sed -e 's|^\(SelectType *= *select/\)gputopo_cons_tres\$|\1cons_tres|' \\
      -e 's|^\(PriorityType *= *priority/\)gputopo\$|\1multifactor|'
    exit "\${PIPESTATUS[0]}" ;;
esac
exec "$prefix/bin/scontrol" "\$@"
EOS
chmod 755 "$side_dir/bin/gate-scontrol"
cat > "$side_dir/globals.local" <<EOG
set scontrol "$side_dir/bin/gate-scontrol"
EOG
export SLURM_LOCAL_GLOBALS_FILE=$side_dir/globals.local

# --- running one test ------------------------------------------------------------------------
record() { printf '%s %s %s %s %s\n' "$1" "$2" "$3" "$4" "${5:--}" >> "$results"; }

run_expect() { # TEST
  local t=$1 t0 rc res detail out=$side_dir/logs/$1.log
  t0=$(date +%s)
  (cd "$ts/expect" && timeout -k 10 "$GATE_TIMEOUT" expect "./$t") < /dev/null > "$out" 2>&1
  rc=$?
  case $rc in
    0) res=pass ;;
    255) res=skip ;;
    124|137) res=fail detail=timeout ;;
    *) res=fail ;;
  esac
  if [ -z "${detail:-}" ]; then
    # The first reason logged: "[time] Level  message ((sub)skip|fail@globals:N,...)".
    detail=$(grep -m1 -E '\((sub)?(skip|fail)@globals' "$out" | sed -E 's/^\[[^]]*\] *[A-Za-z]+ +//; s/ \((sub)?(skip|fail)@globals.*$//' | cut -c1-150)
  fi
  record expect "$t" "$res" $(($(date +%s) - t0)) "${detail// /_}"
  # GATE_SETTLE_LOG (a measurement, not part of the gate): how long the nodes took to be idle
  # after the test: "TEST first=STATES planned_ms=MS idle_ms=MS".
  if [ -n "${GATE_SETTLE_LOG:-}" ]; then
    settle 30
    echo "$t first=$SETTLE_FIRST planned_ms=${SETTLE_PLANNED_MS:-timeout} idle_ms=${SETTLE_IDLE_MS:-timeout}" >> "$GATE_SETTLE_LOG"
  fi
}

# Waits (sampling every 0.1 s, at most MAX_S seconds) until every node is idle: no job, no
# completing job, no PLANNED flag. Sets SETTLE_FIRST (the states at the first sample),
# SETTLE_PLANNED_MS (until no node showed PLANNED) and SETTLE_IDLE_MS (until all were idle; empty
# when they were not by MAX_S).
settle() { # MAX_S
  local t0 now states i
  SETTLE_FIRST= SETTLE_PLANNED_MS= SETTLE_IDLE_MS=
  t0=$(date +%s%3N)
  for i in $(seq $(($1 * 10))); do
    states=$(sinfo -h -N -o '%N:%t' 2>/dev/null | sort -u | tr '\n' ,)
    now=$(( $(date +%s%3N) - t0 ))
    [ -n "$SETTLE_FIRST" ] || SETTLE_FIRST=$states
    [ -n "$SETTLE_PLANNED_MS" ] || [[ $states == *plnd* ]] || SETTLE_PLANNED_MS=$now
    if ! tr , '\n' <<<"${states%,}" | grep -qvE '^[^:]*:idle$'; then SETTLE_IDLE_MS=$now; return 0; fi
    sleep 0.1
  done
  return 1
}

run_python() { # MODE(local|auto) TEST
  local mode=$1 t=$2 t0 rc res xml safe out
  safe=${t//\//_}
  out=$side_dir/logs/$mode-$safe.log xml=$side_dir/logs/$mode-$safe.xml
  t0=$(date +%s)
  rm -rf "$side_dir/pytest/$safe"
  (cd "$ts/python" && PYTHONPATH=$here:$ts/python/lib timeout -k 10 "$GATE_TIMEOUT" \
    "$GATE_VENV/bin/python" -m pytest -s -v -rA -p no:cacheprovider --disable-warnings \
    -p gate_atf --basetemp "$side_dir/pytest/$safe" --junitxml "$xml" "--$mode-config" \
    "tests/$t.py") < /dev/null > "$out" 2>&1
  rc=$?
  # RESULT DETAIL from the junit report: pass when a case passed and none failed.
  read -r res detail < <("$GATE_VENV/bin/python" - "$xml" "$rc" <<'EOP'
import sys, xml.etree.ElementTree as ET
path, rc = sys.argv[1], int(sys.argv[2])
try:
    cases = list(ET.parse(path).getroot().iter("testcase"))
except Exception:
    print("fail", f"no_report_rc={rc}" if rc not in (124, 137) else "timeout"); sys.exit()
p = f = s = 0
why = ""
for c in cases:
    if c.find("failure") is not None or c.find("error") is not None:
        f += 1
        why = why or (c.get("name") or "")
    elif c.find("skipped") is not None:
        s += 1
        why = why or (c.find("skipped").get("message") or "")[:150]
    else:
        p += 1
res = "fail" if f or rc in (124, 137) or not cases else ("pass" if p else "skip")
print(res, f"{p}p/{f}f/{s}s:{why}".replace(" ", "_"))
EOP
)
  record "$mode" "$t" "$res" $(($(date +%s) - t0)) "$detail"
}

# Each test starts on idle nodes: a test that counts idle nodes (test38.19, test1.114) would
# otherwise skip when the previous test's last job left backfill's PLANNED flag on nodes
# (cleared by backfill's next cycle, up to bf_interval later) or a job still completing. Jobs a
# previous test left behind are cancelled (22.05's ATF does not cancel the jobs of a
# --local-config test; the sprio tests leave every node allocated). Profile auto: the ATF
# restarts its daemons per test.
fresh_nodes() { # PROFILE
  local left
  [ "$1" != auto ] && [ "${GATE_SETTLE_BEFORE:-1}" != 0 ] || return 0
  left=$(squeue -h -o %A 2>/dev/null | sort -u | tr '\n' ' ')
  [ -z "${left// }" ] || { log "$1: cancelling jobs left by the previous test: $left"; scancel $left; }
  settle 30 || log "$1: nodes not idle 30 s after the previous test: $SETTLE_FIRST"
}

run_one() { # SUITE TEST
  case $1 in
    expect) run_expect "$2" ;;
    local|auto) run_python "$1" "$2" ;;
  esac
}

# --- clusters --------------------------------------------------------------------------------
cluster_up() { # PROFILE DIR
  local p=$1 dir=$2 extra=$2.extra gres=$2.gres lines
  profile "$p" || return 1
  printf '%s\n' "$P_GRES" > "$gres"
  printf '%s\n' "$P_EXTRA" > "$extra"
  # GATE_EXTRA_CONF: more slurm.conf lines for every profile (diagnostics, e.g. DebugFlags=Backfill).
  [ -z "${GATE_EXTRA_CONF:-}" ] || printf '%s\n' "$GATE_EXTRA_CONF" >> "$extra"
  if [ "$P_DBD" = 1 ]; then
    lines=$("$repo/contrib/slurmdbd.sh" up --release "$GATE_RELEASE" --dir "$dir" --cluster gate) || return 1
    printf '%s\n' "$lines" >> "$extra"
  fi
  "$repo/contrib/cluster.sh" up --release "$GATE_RELEASE" --nodes "$P_NODES" --topology dgx1v \
    --select "$GATE_SIDE_SELECT" --priority "$GATE_SIDE_PRIORITY" --dir "$dir" \
    --gres-conf "$gres" --node-gres "$P_NODE_GRES" --extra-conf "$extra" > /dev/null
}

cluster_down() { # DIR
  "$repo/contrib/cluster.sh" down --dir "$1" > /dev/null 2>&1
  "$repo/contrib/slurmdbd.sh" down --dir "$1" > /dev/null 2>&1
}

# The base configuration --auto-config starts from (the ATF adds nodes node1.. after node0,
# gres.conf, accounting, ... as each test declares): the harness's daemons, paths and plugin
# directory, fixed ports (this namespace has its own network). ReturnToService=1, not the
# harness's 2: with 2 a node an admin set DOWN comes back at its next registration, and the
# reservation tests (test_123_3) down nodes and wait for them to stay down. node0 declares no
# CPUs=: the ATF then adds the CPU count a test requires to the nodes it creates, and
# test_144_4's requirement ("CPUs", "2"), a string, is never compared with a number (a TypeError
# in require_nodes).
auto_up() { # DIR
  local d=$1 plugindir=$stock_plugins db_port=3306
  rm -rf "$d"; mkdir -p "$d/etc" "$d/state" "$d/spool" "$d/log" "$d/run" "$d/db"
  if [ "$GATE_SIDE_SELECT" = gputopo ] || [ "$GATE_SIDE_PRIORITY" = gputopo ]; then
    plugindir=$d/plugins
    local with=(); [ "$GATE_SIDE_PRIORITY" = gputopo ] && with=(--with-priority)
    "$repo/contrib/install-plugin.sh" "$GPUTOPO_PLUGIN_SO" "$plugindir" --release "$GATE_RELEASE" "${with[@]}" >&2 || return 1
    if [ "$GATE_SIDE_SELECT" = cons_tres ]; then
      # priority/gputopo beside the stock select plugin, as contrib/cluster.sh does it.
      rm -f "$plugindir/priority_gputopo.so"
      mv "$plugindir/select_gputopo_cons_tres.so" "$plugindir/priority_gputopo.so"
      ln -s "$stock_plugins/select_cons_tres.so" "$plugindir/select_cons_tres.so"
    fi
  fi
  local sel=cons_tres; [ "$GATE_SIDE_SELECT" = gputopo ] && sel=gputopo_cons_tres
  cat > "$d/etc/slurm.conf" <<EOC
ClusterName=gate
SlurmctldHost=$(hostname -s)(127.0.0.1)
SlurmctldPort=6817
SlurmdPort=6818
$(slurm_conf_daemons "$d" "$plugindir" "$d/run" info)
AccountingStorageHost=localhost
AccountingStoragePort=6819
SelectType=select/$sel
SelectTypeParameters=CR_Core
PriorityType=priority/$GATE_SIDE_PRIORITY
ReturnToService=1
SlurmdParameters=config_overrides
KillWait=2
NodeName=node0 NodeHostname=$(hostname -s) NodeAddr=127.0.0.1 Port=6820 RealMemory=4000 State=UNKNOWN
PartitionName=primary Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOC
  cat > "$d/etc/slurmdbd.conf" <<EOC
AuthType=auth/munge
DbdHost=localhost
DbdPort=6819
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$db_port
StorageUser=root
StorageLoc=slurm_acct_db
LogFile=$d/log/slurmdbd.log
PidFile=$d/run/slurmdbd.pid
DebugLevel=info
EOC
  chmod 600 "$d/etc/slurmdbd.conf"
  mariadb-install-db --user=root --datadir="$d/db" --skip-test-db > "$d/log/mariadb-install.log" 2>&1 || return 1
  mariadbd --user=root --datadir="$d/db" --socket="$d/run/mysql.sock" --port=$db_port \
    --bind-address=127.0.0.1 --skip-grant-tables --pid-file="$d/run/mariadb.pid" \
    --log-error="$d/log/mariadb.log" > /dev/null 2>&1 &
  local i; for i in $(seq 100); do [ -S "$d/run/mysql.sock" ] && break; sleep 0.2; done
  [ -S "$d/run/mysql.sock" ]
}

# --- main ------------------------------------------------------------------------------------
mapfile -t profiles < <(awk '!seen[$3]++ { print $3 }' "$tests")
for p in "${profiles[@]}"; do
  dir=$side_dir/$p
  if [ "$p" = auto ]; then
    if ! auto_up "$dir"; then
      log "profile auto: base configuration or MariaDB failed (see $dir/log)"
      awk -v p="$p" '$3 == p { print $1, $2, "fail", 0, "profile_setup_failed" }' "$tests" >> "$results"
      continue
    fi
    export SLURM_CONF=$dir/etc/slurm.conf
  else
    if ! cluster_up "$p" "$dir" 2> "$dir.up.log"; then
      log "profile $p: cluster did not come up (see $dir.up.log)"
      awk -v p="$p" '$3 == p { print $1, $2, "fail", 0, "profile_setup_failed" }' "$tests" >> "$results"
      cluster_down "$dir"
      continue
    fi
    export SLURM_CONF=$dir/etc/slurm.conf
  fi
  while read -r -u 9 suite t prof; do
    [ "$prof" = "$p" ] || continue
    log "$p: $suite $t"
    fresh_nodes "$p"
    run_one "$suite" "$t"
    # GATE_RETRY: "SUITE TEST" lines of tests that pass with stock; one of them that fails here
    # runs once more (a timing flake on a loaded machine is not a result) and the second result
    # counts, its detail saying so.
    if [ -n "${GATE_RETRY:-}" ] && [ "$(tail -n 1 "$results" | cut -d' ' -f3)" = fail ] &&
      grep -qxF "$suite $t" "$GATE_RETRY"; then
      first=$(tail -n 1 "$results" | cut -d' ' -f5)
      log "$p: $suite $t failed (${first}), once more"
      sed -i '$d' "$results"
      for f in "$side_dir/logs/$t.log" "$side_dir/logs/$suite-${t//\//_}".{log,xml}; do
        [ ! -f "$f" ] || mv "$f" "$f.try1"
      done
      fresh_nodes "$p"
      run_one "$suite" "$t"
      last=$(tail -n 1 "$results") && sed -i '$d' "$results" &&
        printf '%s second_try;_first:%s\n' "${last% *}" "$first" >> "$results"
    fi
    tail -n 1 "$results" >&2
  done 9< "$tests"
  [ "$p" = auto ] || cluster_down "$dir"
done
