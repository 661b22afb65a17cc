#!/usr/bin/env bash
# A real Slurm cluster on this one machine: munged, slurmctld and N slurmd (multiple-slurmd,
# one port per emulated node), each node with 8 fake GPUs (char devices made with mknod) and a
# gres.conf with Type=, Cores= and Links= from a topology file. Tests, benchmarks and the demo
# all use it. Run as root.
#
#   contrib/cluster.sh up --release 22.05.8|24.11.5 --nodes N --topology NAME|FILE
#                         [--select gputopo|cons_tres] [--priority basic|multifactor|gputopo]
#                         [--dir DIR] [--extra-conf FILE] [--gputopo-conf FILE]
#                         [--health-program PATH --health-interval SECONDS] [--debug]
#                         [--plugin-dir DIR]   # an installed gputopo PluginDir (package test)
#                         [--fake-gpus FILE] [--plain-gres]
#                         [--gres-conf FILE --node-gres GRES]
#                         [--node-topology nX=NAME|FILE,...] [--node-weight nX=W,...]
#                         [--node-gres-of nX=GRES,...]
#                         [--backup]          # a second slurmctld (SlurmctldHost) in standby
#                         [--nvml nX=FIXTURE,...] # these nodes' slurmd see a fake NVML's GPUs
#   contrib/cluster.sh down [--dir DIR]
#   contrib/cluster.sh env  [--dir DIR]     # prints: export SLURM_CONF=... PATH=...
#   contrib/cluster.sh restart [--dir DIR] slurmctld|backup|nX   # restart one daemon, jobs keep running
#   contrib/cluster.sh port [--dir DIR]     # BASE port: slurmctld BASE, nX BASE+X, BASE+150.. free
#   contrib/cluster.sh munge                # start munged if it does not answer (clusters share it)
#   contrib/cluster.sh pid --dir DIR FILE.pid  # the pid in it, only while it is DIR's daemon
#
# DIR (default /tmp/gputopo-cluster) holds everything of one cluster: etc/ (slurm.conf,
# gres.conf, gputopo.conf), dev/, state/, spool/, log/, plugins/ and cluster.env. Ports are
# derived from DIR, so clusters in different DIRs can run at the same time; `up` on a DIR whose
# cluster still runs tears that one down first. `up` waits until every node is idle (bounded)
# and on failure prints the log tails, tears down and exits non-zero. `down` kills every job,
# stops the daemons and kills whatever is left of this cluster (slurmstepd and job processes
# are found by SLURM_CONF in their environment or open files under DIR), leaving nothing behind.
#
# --fake-gpus FILE installs FILE as etc/fake_gpus.conf (slurmd then merges gres.conf with it
# instead of NVML and numbers GPUs in its Links= order; one file for every node), with @DIR@
# replaced by DIR and @DEV@ by n1's device directory; the fake devices are DIR/dev/nX/nvidiaM.
# --plain-gres writes gres.conf without Cores= and Links=.
# --extra-conf lines replace generated slurm.conf lines with the same key (NodeName= and
# PartitionName= lines are added; a line "Key=" with no value only removes the generated one).
# --select gputopo writes SelectType=select/gputopo_cons_tres (docs/deployment.md). --gres-conf replaces the generated gres.conf by FILE, written
# once per node with "NodeName=nX " in front of each line that has none (a "NodeName=nX" line
# only in nX's turn) and @DEV@ replaced by
# that node's fake device directory (e.g. "Name=gpu File=@DEV@/nvidia[0-7]", the plain form);
# --node-gres is then the nodes' Gres= in slurm.conf (e.g. gpu:8 or gpu:a100:4,gpu:v100:4) and
# its total gpu count of fake devices nvidia0.. is made per node (shard/mps entries make none).
# --node-gres-of gives listed nodes another Gres= (without commas, e.g. n2=gpu:8 beside
# --node-gres gpu:8,shard:32); slurm.conf then gets one NodeName= line per node.
# The gputopo binary (gres.conf) is $GPUTOPO_BIN, or target/release/gputopo
# ($CARGO_TARGET_DIR honoured), built with cargo if missing.
# --node-topology gives listed nodes another topology than --topology (a mixed fleet), and
# --node-weight sets Slurm's Weight= of listed nodes; with either, slurm.conf gets one
# NodeName= line per node.
# --node-keys "K=V ..." adds those keys to every NodeName= line (e.g. RestrictedCoresPerGPU=2).
# --backup adds a backup controller in its own network, UTS and mount namespaces (see
# contrib/cluster-backup.sh); the nodes and the primary then use the host side of its veth
# pair instead of 127.0.0.1.
# --nvml starts each listed node's slurmd through contrib/nvml-node.sh: the fake libnvidia-ml
# ($FAKE_NVML_LIB, else built with cargo) answering from FIXTURE is on its library path, and a
# private mount namespace gives it the fixture's /dev/nvidia*, /proc/driver/nvidia* and
# /sys/bus/pci/drivers/nvidia, so gres.conf AutoDetect=nvml (or nvidia, on 24.11+) detects the
# fixture's GPUs with Slurm's own code (pair it with --gres-conf and --node-gres).
# GPUTOPO_SLURMCTLD_PREFIX (optional, split on spaces) is put in front of every slurmctld start
# of `up` and `restart`, e.g. `env GLIBC_TUNABLES=glibc.malloc.check=3` or `valgrind ...`.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)

die() { echo "cluster.sh: $*" >&2; exit 1; }
log() { [ -n "${QUIET:-}" ] || echo "cluster.sh: $*" >&2; }
now_ms() { date +%s%3N; }
read -ra ctld_prefix <<< "${GPUTOPO_SLURMCTLD_PREFIX:-}"

# --- release layout ------------------------------------------------------------------------
release_paths() { # sets BIN SBIN PLUGINS for $release
  if [ -n "${GPUTOPO_SLURM_PREFIX:-}" ]; then
    # A site's own installation (contrib/site-check.sh): bin/ and sbin/ under the prefix, the
    # plugins where Slurm put libslurmfull.so (its plugin directory).
    local p=$GPUTOPO_SLURM_PREFIX lib
    BIN=$p/bin SBIN=$p/sbin
    lib=$(ldd "$SBIN/slurmctld" 2>/dev/null | awk '$1 == "libslurmfull.so" { print $3 }')
    [ -n "$lib" ] || die "GPUTOPO_SLURM_PREFIX=$p: $SBIN/slurmctld does not link libslurmfull.so"
    PLUGINS=${lib%/*}
    "$SBIN/slurmctld" -V | grep -q " $release\$" || die "GPUTOPO_SLURM_PREFIX=$p is not Slurm $release: $("$SBIN/slurmctld" -V)"
    return
  fi
  # Debian's packages or contrib/slurm-install.sh's prefix (slurm-headers/releases.tsv).
  local p; p=$(release_prefix "$release")
  BIN=$p/bin SBIN=$p/sbin PLUGINS=$(release_plugin_dir "$release")
}

# --- processes -----------------------------------------------------------------------------
. "$here/lib.sh"
# True when `scontrol ping` reports controller ROLE (primary, backup) UP. scontrol's exit
# status says whether every controller answers, so only its output is read.
ctld_up() {
  local out
  out=$(timeout 5 scontrol ping 2>/dev/null) || true
  grep -q "($1) .* is UP" <<<"$out"
}
# shellcheck source=contrib/cluster-backup.sh
. "$here/cluster-backup.sh"

# Processes belonging to cluster $dir: its daemons and slurmstepd (SLURM_CONF=$dir/etc/slurm.conf
# in their environment, or an open file under $dir such as their log), job processes (that
# SLURM_CONF together with SLURM_JOB_ID), and all their descendants. Never this script or its
# ancestors (a test runner may carry SLURM_CONF in its environment).
cluster_pids() {
  local d=$1 conf="SLURM_CONF=$1/etc/slurm.conf" p f roots=()
  for p in $(ps -eo pid=,comm= | awk '$2 ~ /^slurm/ { print $1 }'); do
    if grep -qzxF "$conf" "/proc/$p/environ" 2>/dev/null ||
       ls -l "/proc/$p/fd" 2>/dev/null | grep -qF -- "-> $d/"; then roots+=("$p"); fi
  done
  for f in $(grep -lzxF "$conf" /proc/[0-9]*/environ 2>/dev/null || true); do
    p=${f#/proc/}; p=${p%/environ}
    grep -qz '^SLURM_JOB_ID=' "$f" 2>/dev/null && roots+=("$p")
  done
  [ ${#roots[@]} -gt 0 ] || return 0
  ps -eo pid=,ppid= | awk -v roots="${roots[*]}" -v self=$$ '
    { parent[$1] = $2; pids[NR] = $1 }
    END {
      n = split(roots, r, " "); for (i = 1; i <= n; i++) mark[r[i]] = 1
      for (p = self; p > 1; p = parent[p]) { skip[p] = 1; if (!(p in parent)) break }
      changed = 1
      while (changed) { changed = 0
        for (i in pids) { q = pids[i]; if (!(q in mark) && (parent[q] in mark)) { mark[q] = 1; changed = 1 } } }
      for (q in mark) if (!(q in skip) && (q in parent)) print q
    }'
}

start_munged() {
  if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then return; fi
  # Two clusters may come up at once (nextest runs two e2e tests): one starts munged, the
  # other waits for the lock and then finds it answering (closing fd 8 releases the lock).
  exec 8>>/tmp/gputopo-munged.lock
  flock 8
  if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then exec 8>&-; return; fi
  [ -s /etc/munge/munge.key ] || { mungekey --create --keyfile=/etc/munge/munge.key; chown munge:munge /etc/munge/munge.key; chmod 600 /etc/munge/munge.key; }
  install -d -o munge -g munge -m 755 /run/munge
  runuser -u munge -- env -u SLURM_CONF /usr/sbin/munged 7>&- 8>&- || die "munged did not start"
  local i
  for i in $(seq 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && { exec 8>&-; return; }; sleep 0.1; done
  die "munged runs but munge -n | unmunge fails"
}

# Ports of the cluster in DIR: BASE (slurmctld), BASE+1..BASE+N (slurmd of n1..nN, N <= 149);
# BASE+150..BASE+199 are free for helpers of the same cluster (slurmdbd, a database). BASE is
# derived from DIR, in steps of 200 within 10000..31999: below Linux's ephemeral port range
# (32768-60999), where an outgoing connection could hold a node's port.
port_base_of() { echo $((10000 + ($(printf %s "$1" | cksum | cut -d' ' -f1) % 110) * 200)); }

# --- down ----------------------------------------------------------------------------------
cmd_down() {
  [ -f "$dir/cluster.env" ] || { log "no cluster in $dir"; return 0; }
  # shellcheck disable=SC1091
  . "$dir/cluster.env"
  export SLURM_CONF PATH="$GPUTOPO_SLURM_BIN:$GPUTOPO_SLURM_SBIN:$PATH"
  local ctld i ids
  ctld=$(daemon_pid "$dir/slurmctld.pid" "$dir/")
  if [ -n "$ctld" ]; then
    ids=$(timeout 10 squeue -h -o %A 2>/dev/null | sort -u | tr '\n' ' ' || true)
    if [ -n "${ids// }" ]; then
      # shellcheck disable=SC2086
      timeout 10 scancel --full --signal=KILL $ids 2>/dev/null || true
      # shellcheck disable=SC2086
      timeout 10 scancel $ids 2>/dev/null || true
      for i in $(seq 300); do
        [ -z "$(timeout 5 squeue -h -o %A 2>/dev/null)" ] && break
        sleep 0.1
      done
    fi
    timeout 10 scontrol shutdown >/dev/null 2>&1 || true
  fi
  # Wait for the daemons (bounded), then make sure: SIGTERM, SIGKILL.
  local pids p
  for i in $(seq 100); do
    pids=$(cluster_pids "$dir")
    [ -z "$pids" ] && break
    sleep 0.1
  done
  for sig in TERM KILL; do
    pids=$(cluster_pids "$dir")
    [ -z "$pids" ] && break
    for p in $pids; do kill -s "$sig" "$p" 2>/dev/null || true; done
    for i in $(seq 50); do [ -z "$(cluster_pids "$dir")" ] && break; sleep 0.1; done
  done
  pids=$(cluster_pids "$dir")
  [ -z "$pids" ] || die "processes of $dir survived SIGKILL: $pids"
  [ -z "${GPUTOPO_CLUSTER_BACKUP:-}" ] || backup_net_down "$GPUTOPO_CLUSTER_PORT"
  rm -f "$dir/cluster.env"
  log "cluster in $dir is down"
}

# --- restart -------------------------------------------------------------------------------
# Stops one daemon of a running cluster (SIGTERM, bounded wait, then SIGKILL) and starts it
# again with the same configuration; running jobs keep running (their slurmstepd stay).
cmd_restart() {
  [ -f "$dir/cluster.env" ] || die "no cluster in $dir"
  # shellcheck disable=SC1091
  . "$dir/cluster.env"
  export SLURM_CONF PATH="$GPUTOPO_SLURM_BIN:$GPUTOPO_SLURM_SBIN:$PATH"
  local what=${restart_what:-} pidf pid i
  case $what in
    slurmctld) pidf=$dir/slurmctld.pid ;;
    backup)
      [ -n "${GPUTOPO_CLUSTER_BACKUP:-}" ] || die "restart backup: the cluster in $dir has no backup controller"
      backup_stop
      backup_start
      log "restarted the backup slurmctld"
      return ;;
    n[0-9]*) pidf=$dir/slurmd-$what.pid ;;
    *) die "restart needs slurmctld, backup or a node name (n1..n$GPUTOPO_CLUSTER_NODES)" ;;
  esac
  pid=$(daemon_pid "$pidf" "$dir/")
  if [ -n "$pid" ]; then
    kill -TERM "$pid"
    for i in $(seq 300); do alive "$pid" || break; sleep 0.1; done
    if alive "$pid"; then log "$what did not stop within 30 s; SIGKILL"; kill -KILL "$pid" 2>/dev/null || true; sleep 0.2; fi
  fi
  if [ "$what" = slurmctld ]; then
    "${ctld_prefix[@]}" "$GPUTOPO_SLURM_SBIN/slurmctld" -f "$SLURM_CONF" || die "slurmctld did not start; see $dir/log/slurmctld.log"
    # 60 s: a backup in control holds the primary's start until it has relinquished control
    # (24.11 waits its whole CONTROL_TIMEOUT, ~29 s, with stock plugins too).
    for i in $(seq 600); do ctld_up primary && break; sleep 0.1; done
    ctld_up primary || die "slurmctld does not answer 60 s after restart"
  else
    SBIN=$GPUTOPO_SLURM_SBIN nvml=${GPUTOPO_CLUSTER_NVML:-}
    [ -z "${FAKE_NVML_LIB:-}" ] || export FAKE_NVML_LIB
    [ -z "${FAKE_NVML_TREE:-}" ] || export FAKE_NVML_TREE
    start_slurmd "$what" || die "slurmd -N $what did not start"
  fi
  log "restarted $what"
}

# slurmd of node $1: through contrib/nvml-node.sh when --nvml names the node.
start_slurmd() {
  local fx
  fx=$(list_value "$nvml" "$1")
  if [ -n "$fx" ]; then
    "$here/nvml-node.sh" "$dir/nvml/$1" "$fx" -- "$SBIN/slurmd" -f "$SLURM_CONF" -N "$1"
  else
    "$SBIN/slurmd" -f "$SLURM_CONF" -N "$1"
  fi
}

# --nvml: the fixtures made absolute, and FAKE_NVML_LIB (built when not given) exported.
prepare_nvml() {
  [ -n "$nvml" ] || return 0
  local kv out=
  for kv in ${nvml//,/ }; do
    [ -f "${kv#*=}" ] || die "--nvml $kv: no such fixture"
    out+=${out:+,}${kv%%=*}=$(realpath "${kv#*=}")
  done
  nvml=$out
  if [ -z "${FAKE_NVML_LIB:-}" ]; then
    local t=${CARGO_TARGET_DIR:-$repo/target}
    case $t in /*) ;; *) t=$repo/$t ;; esac
    (cd "$repo" && cargo build -q -p fake-nvml) >&2 || die "cannot build the fake NVML"
    FAKE_NVML_LIB=$t/debug/libfake_nvml.so
  fi
  export FAKE_NVML_LIB
}

# Debian's 22.05.8 has no gpu/nvml plugin installed (contrib/debian-nvml-plugin.sh): with
# --nvml, the cluster's plugin directory gets Debian's own, a farm of the stock plugins made if
# there is none yet.
nvml_plugin_dir() {
  [ -n "$nvml" ] && [ ! -e "$plugindir/gpu_nvml.so" ] || return 0
  [ "$release" = 22.05.8 ] || return 0
  local so f
  so=$("$here/debian-nvml-plugin.sh") || die "contrib/debian-nvml-plugin.sh failed"
  if [ "$plugindir" = "$PLUGINS" ]; then
    plugindir=$dir/plugins
    mkdir -p "$plugindir"
    for f in "$PLUGINS"/*.so; do ln -s "$f" "$plugindir/"; done
  fi
  ln -s "$so" "$plugindir/gpu_nvml.so"
}

# --- env -----------------------------------------------------------------------------------
cmd_env() {
  [ -f "$dir/cluster.env" ] || die "no cluster in $dir (run: contrib/cluster.sh up ...)"
  # shellcheck disable=SC1091
  . "$dir/cluster.env"
  echo "export SLURM_CONF=$SLURM_CONF PATH=$GPUTOPO_SLURM_BIN:$GPUTOPO_SLURM_SBIN:\$PATH"
}

# --- up ------------------------------------------------------------------------------------
# shellcheck source=contrib/cluster-gres.sh
. "$here/cluster-gres.sh"

# slurm.conf: generated lines, then --extra-conf (replacing lines with the same key).
write_slurm_conf() {
  local conf=$dir/etc/slurm.conf gres=gpu:$GPU_COUNT lastport=$((port_base + nodes))
  [ -n "$GPU_TYPE" ] && gres=gpu:$GPU_TYPE:$GPU_COUNT
  [ -n "$node_gres" ] && gres=$node_gres
  {
    cat <<EOC
# Written by contrib/cluster.sh up --release $release --nodes $nodes --topology $topo_arg --select $select --priority $priority
ClusterName=gputopo$port_base
SlurmctldHost=$(hostname -s)($ctld_addr)
SlurmctldPort=$port_base
SlurmdPort=$((port_base + 1))
$(slurm_conf_daemons "$dir" "$plugindir" "$dir" "$ctld_debug")
SchedulerParameters=bf_interval=1
SelectType=select/${select/#gputopo/gputopo_cons_tres}
SelectTypeParameters=CR_Core
PriorityType=priority/$priority
GresTypes=gpu
ReturnToService=2
SlurmdParameters=config_overrides
KillWait=2
EOC
    if [ -n "$backup" ]; then
      echo "SlurmctldHost=$(backup_ns "$port_base")($(backup_ns_addr "$port_base"))"
      echo "SlurmctldTimeout=10"
    fi
    if [ -n "$health_program" ]; then
      echo "HealthCheckProgram=$health_program"
      echo "HealthCheckInterval=$health_interval"
    fi
    if [ -z "$node_topology$node_weight$node_gres_of" ]; then
      echo "NodeName=n[1-$nodes] NodeHostname=$(hostname -s) NodeAddr=$ctld_addr Port=[$((port_base + 1))-$lastport] Sockets=2 CoresPerSocket=16 ThreadsPerCore=1 RealMemory=16000 Gres=$gres${node_keys:+ $node_keys} State=UNKNOWN"
    else
      local i w
      for i in $(seq "$nodes"); do
        w=$(list_value "$node_weight" "n$i")
        echo "NodeName=n$i NodeHostname=$(hostname -s) NodeAddr=$ctld_addr Port=$((port_base + i)) Sockets=2 CoresPerSocket=16 ThreadsPerCore=1 RealMemory=16000 Gres=${NODE_GRES[n$i]}${w:+ Weight=$w}${node_keys:+ $node_keys} State=UNKNOWN"
      done
    fi
    echo "PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
  } > "$conf"
  if [ -n "$extra_conf" ]; then
    local key line
    echo "# --extra-conf $extra_conf" >> "$conf"
    while IFS= read -r line || [ -n "$line" ]; do
      case $line in ''|'#'*) continue ;; esac
      key=${line%%=*}
      case ${key,,} in
        nodename|partitionname|nodeset|downnodes|frontendname) ;;
        *) sed -i "/^${key}=/Id" "$conf" ;;
      esac
      [ -n "${line#*=}" ] || continue # "Key=" alone: only removes the generated line
      echo "$line" >> "$conf"
    done < "$extra_conf"
  fi
}

# etc/gputopo.conf: --gputopo-conf's file, plus StateDir in the cluster directory unless the
# file sets one: an agent run against this cluster (gputopo publish, the health check) keeps its
# sticky-XID state there, never in the host's /var/lib/gputopo.
write_gputopo_conf() {
  local f=$dir/etc/gputopo.conf
  : > "$f"
  [ -z "$gputopo_conf" ] || cat "$gputopo_conf" > "$f"
  [ ! -s "$f" ] || [ -z "$(tail -c1 "$f")" ] || echo >> "$f"
  grep -qiE '^[[:space:]]*StateDir[[:space:]]*=' "$f" ||
    printf '# cluster.sh: the agent state of this cluster\nStateDir=%s\n' "$dir/agent-state" >> "$f"
}

fail_up() {
  echo "cluster.sh: $*" >&2
  local f
  for f in "$dir/log/slurmctld.log" "$dir/log/slurmctld-backup.log" "$dir"/log/slurmd-n1.log; do
    [ -f "$f" ] && { echo "--- last lines of $f" >&2; tail -n 25 "$f" >&2; }
  done
  [ -f "$dir/cluster.env" ] && { echo "--- sinfo" >&2; timeout 5 sinfo -N -o '%N %T %E' >&2 2>/dev/null || true; }
  [ -n "${KEEP_ON_FAILURE:-}" ] || (QUIET=1 cmd_down) || true
  exit 1
}

cmd_up() {
  [ "$(id -u)" = 0 ] || die "run as root (mknod, daemons as root)"
  [ -n "$release" ] || die "up needs --release VERSION (e.g. $(releases ci | paste -sd'|'))"
  [[ $nodes =~ ^[1-9][0-9]*$ ]] && [ "$nodes" -le 149 ] || die "--nodes must be 1 to 149"
  [ -n "$topo_arg" ] || die "up needs --topology NAME|FILE (names: $(cd "$here/topologies" && ls ./*.topo | sed 's|./||;s|\.topo||' | tr '\n' ' '))"
  case $select in gputopo|cons_tres) ;; *) die "--select must be gputopo or cons_tres" ;; esac
  case $priority in basic|multifactor|gputopo) ;; *) die "--priority must be basic, multifactor or gputopo" ;; esac
  if [ -f "$topo_arg" ]; then topo=$(realpath "$topo_arg")
  elif [ -f "$here/topologies/$topo_arg.topo" ]; then topo=$here/topologies/$topo_arg.topo
  else die "no topology '$topo_arg' (a file, or a name in contrib/topologies/)"; fi
  for f in "$extra_conf" "$gputopo_conf" "$fake_gpus"; do [ -z "$f" ] || [ -f "$f" ] || die "no such file: $f"; done
  [ -z "$extra_conf" ] || extra_conf=$(realpath "$extra_conf")
  [ -z "$fake_gpus" ] || fake_gpus=$(realpath "$fake_gpus")
  if [ -n "$health_program" ]; then
    [ -x "$health_program" ] || die "--health-program $health_program is not executable"
    [[ $health_interval =~ ^[1-9][0-9]*$ ]] || die "--health-interval must be a positive number of seconds"
  fi
  release_paths
  [ -x "$SBIN/slurmctld" ] || die "Slurm $release is not installed (run: contrib/slurm-install.sh $release)"

  local t0; t0=$(now_ms)
  mkdir -p "$dir"
  dir=$(realpath "$dir")
  # One bring-up at a time per DIR.
  exec 7>"$dir.lock"
  flock -w 120 7 || die "another cluster.sh holds $dir.lock"
  (cmd_down) >/dev/null 2>&1 || true
  # A cluster killed without `down` leaves processes but no cluster.env.
  local p; for p in $(cluster_pids "$dir"); do kill -KILL "$p" 2>/dev/null || true; done

  port_base=$(port_base_of "$dir")
  if command -v ss >/dev/null; then
    local busy
    busy=$(ss -Htan exclude time-wait | awk -v lo="$port_base" -v hi="$((port_base + nodes))" \
      '{ n = split($4, a, ":"); p = a[n] + 0; if (p >= lo && p <= hi) print p }' | sort -u | tr '\n' ' ')
    [ -z "$busy" ] || die "ports $busy (derived from $dir: $port_base-$((port_base + nodes))) are in use; use another --dir"
  fi

  ctld_addr=127.0.0.1
  if [ -n "$backup" ]; then
    backup_net_up "$port_base"
    ctld_addr=$(backup_host_addr "$port_base")
  fi
  rm -rf "$dir/etc" "$dir/state" "$dir/spool" "$dir/log" "$dir/plugins" "$dir"/*.pid
  mkdir -p "$dir/etc" "$dir/state" "$dir/log"
  local i
  for i in $(seq "$nodes"); do mkdir -p "$dir/spool/n$i"; done

  plugindir=$PLUGINS
  if [ -n "$plugin_dir" ]; then
    # An installed gputopo plugin directory (the Debian package's): used as it is.
    [ -f "$plugin_dir/select_gputopo_cons_tres.so" ] || die "--plugin-dir $plugin_dir has no select_gputopo_cons_tres.so"
    plugindir=$plugin_dir
  elif [ "$select" = gputopo ] || [ "$priority" = gputopo ]; then
    local so
    so=${GPUTOPO_PLUGIN_SO:-}
    if [ -z "$so" ]; then so=$("$here/build-plugin.sh" "$release" | tail -n 1) || die "contrib/build-plugin.sh $release failed"; fi
    [ -f "$so" ] || die "plugin .so not found: $so"
    plugindir=$dir/plugins
    local with_priority=()
    [ "$priority" = gputopo ] && with_priority=(--with-priority)
    "$here/install-plugin.sh" "$so" "$plugindir" --stock-dir "$PLUGINS" "${with_priority[@]}" >&2 ||
      die "contrib/install-plugin.sh failed"
    if [ "$select" = cons_tres ]; then
      # priority/gputopo with the stock select plugin: the farm gets the stock cons_tres back
      # and gputopo's file only under its priority name (two select plugins with id 109 in
      # one PluginDir are fatal).
      rm -f "$plugindir/priority_gputopo.so"
      mv "$plugindir/select_gputopo_cons_tres.so" "$plugindir/priority_gputopo.so"
      ln -s "$PLUGINS/select_cons_tres.so" "$plugindir/select_cons_tres.so"
    fi
  fi

  prepare_nvml
  nvml_plugin_dir
  write_gres
  write_slurm_conf
  write_gputopo_conf

  cat > "$dir/cluster.env" <<EOE
SLURM_CONF=$dir/etc/slurm.conf
GPUTOPO_SLURM_RELEASE=$release
GPUTOPO_SLURM_BIN=$BIN
GPUTOPO_SLURM_SBIN=$SBIN
GPUTOPO_CLUSTER_NODES=$nodes
GPUTOPO_CLUSTER_PORT=$port_base
GPUTOPO_CLUSTER_BACKUP=$backup
GPUTOPO_CLUSTER_NVML=$nvml
FAKE_NVML_LIB=${FAKE_NVML_LIB:-}
FAKE_NVML_TREE=${FAKE_NVML_TREE:-}
EOE
  start_munged
  export SLURM_CONF=$dir/etc/slurm.conf PATH="$BIN:$SBIN:$PATH"
  # (7>&-: the daemons must not inherit the bring-up lock)
  "${ctld_prefix[@]}" "$SBIN/slurmctld" -f "$SLURM_CONF" 7>&- || fail_up "slurmctld did not start"
  for i in $(seq 300); do
    ctld_up primary && break
    sleep 0.1
  done
  ctld_up primary || fail_up "slurmctld does not answer after 30 s"
  if [ -n "$backup" ]; then
    GPUTOPO_CLUSTER_PORT=$port_base GPUTOPO_SLURM_SBIN=$SBIN
    (backup_start) || fail_up "the backup slurmctld did not start"
  fi
  for i in $(seq "$nodes"); do
    start_slurmd "n$i" 7>&- || fail_up "slurmd -N n$i did not start"
  done
  local idle=0
  for i in $(seq 600); do
    idle=$(timeout 5 sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l || echo 0)
    [ "$idle" -ge "$nodes" ] && break
    sleep 0.1
  done
  [ "$idle" -ge "$nodes" ] || fail_up "only $idle of $nodes nodes idle after 60 s"
  log "up: $nodes nodes of $(basename "$topo" .topo) idle, Slurm $release, select/$select, priority/$priority, $((($(now_ms) - t0))) ms, dir $dir"
  echo "export SLURM_CONF=$SLURM_CONF PATH=$BIN:$SBIN:\$PATH"
}

# --- arguments -----------------------------------------------------------------------------
cmd=${1:-}
[ $# -gt 0 ] && shift
dir=${GPUTOPO_CLUSTER_DIR:-/tmp/gputopo-cluster}
restart_what= pid_file= release= nodes=1 topo_arg= select=gputopo priority=basic extra_conf= gputopo_conf=
health_program= health_interval=60 ctld_debug=info plugin_dir= fake_gpus= plain_gres= gres_conf= node_gres= node_topology= node_weight= node_gres_of= node_keys=
backup= ctld_addr=127.0.0.1 nvml=
while [ $# -gt 0 ]; do
  case $1 in
    --release) release=$2; shift 2 ;;
    --nodes) nodes=$2; shift 2 ;;
    --topology) topo_arg=$2; shift 2 ;;
    --select) select=$2; shift 2 ;;
    --priority) priority=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --extra-conf) extra_conf=$2; shift 2 ;;
    --gputopo-conf) gputopo_conf=$2; shift 2 ;;
    --health-program) health_program=$2; shift 2 ;;
    --health-interval) health_interval=$2; shift 2 ;;
    --debug) ctld_debug=debug; shift ;;
    --plugin-dir) plugin_dir=$2; shift 2 ;;
    --fake-gpus) fake_gpus=$2; shift 2 ;;
    --plain-gres) plain_gres=1; shift ;;
    --backup) backup=1; shift ;;
    slurmctld|backup|n[0-9]*) restart_what=$1; shift ;;
    *.pid) pid_file=$1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    --gres-conf) gres_conf=$(realpath "$2"); shift 2 ;;
    --node-gres) node_gres=$2; shift 2 ;;
    --node-gres-of) node_gres_of=$2; shift 2 ;;
    --node-topology) node_topology=$2; shift 2 ;;
    --node-weight) node_weight=$2; shift 2 ;;
    --node-keys) node_keys=$2; shift 2 ;;
    --nvml) nvml=$2; shift 2 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
dir=$(realpath -m "$dir")

case $cmd in
  up) cmd_up ;;
  down) cmd_down ;;
  env) cmd_env ;;
  restart) cmd_restart ;;
  port) port_base_of "$dir" ;;
  munge) start_munged ;;
  # The pid in DIR/FILE while it is this cluster's daemon (lib.sh's daemon_pid): the harness
  # asks here, so the rule exists once.
  pid) daemon_pid "$dir/${pid_file:?pid needs a FILE.pid}" "$dir/" ;;
  *) die "usage: cluster.sh up|down|env|restart|port|munge|pid [options] (see --help)" ;;
esac
