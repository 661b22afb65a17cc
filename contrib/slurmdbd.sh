#!/usr/bin/env bash
# A private MariaDB + slurmdbd for one test cluster (priority parity tests with accounting).
#
#   contrib/slurmdbd.sh up   --release 22.05.8|24.11.5 --dir DIR --cluster NAME
#   contrib/slurmdbd.sh down --dir DIR
#
# `up` starts mariadbd (datadir DIR.dbd/db, 127.0.0.1, grant tables skipped) and the release's
# slurmdbd (22.05.8: Debian's /usr/sbin/slurmdbd; 24.11.5: the contrib/slurm-install.sh build,
# which has accounting_storage/mysql), registers cluster NAME, and prints the slurm.conf lines
# that point slurmctld at it (pass them with cluster.sh --extra-conf, ClusterName included).
# DIR.dbd/slurm.conf is a minimal client config for sacctmgr before slurmctld runs.
# Ports: cluster.sh's base port for DIR + 150 (slurmdbd) and + 151 (MariaDB), else the next
# free pair of that block (+152/+153, ...). Run as root.
set -euo pipefail
die() { echo "slurmdbd.sh: $*" >&2; exit 1; }

cmd=${1:-}; shift || true
release= dir= cluster=
while [ $# -gt 0 ]; do
  case $1 in
    --release) release=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --cluster) cluster=$2; shift 2 ;;
    *) die "unknown argument $1" ;;
  esac
done
[ -n "$dir" ] || die "--dir is required"
. "$(dirname "$0")/lib.sh"
d=$dir.dbd  # a sibling: cluster.sh up kills whatever holds files under DIR/
# The same port block cluster.sh derives from DIR (below the ephemeral range, where an outgoing
# connection could hold a listening port): slurmctld BASE, nodes BASE+1.., BASE+150.. free.
base=$("$(dirname "$0")/cluster.sh" port --dir "$dir")
dbd_port=$((base + 150)) my_port=$((base + 151))

# listening PORT: something on this host listens on TCP PORT.
listening() { [ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]; }
# pick_ports [FROM]: the first pair at BASE+FROM.. (even offsets up to +148 of the block's 50)
# that nothing listens on. Port blocks are derived from directory names, and two names can
# share a block: another cluster's slurmdbd (or one a killed test left) must not make this one
# fail. The pair goes into the configuration printed below, so clients follow it.
pick_ports() {
  local off
  for ((off = ${1:-150}; off < 198; off += 2)); do
    listening $((base + off)) || listening $((base + off + 1)) || {
      dbd_port=$((base + off)) my_port=$((base + off + 1)); return 0; }
  done
  die "no free port pair in $((base + 150))..$((base + 199)) (cluster.sh port --dir $dir)"
}
pick_ports

stop() {
  local f p pids=()
  # Only a live process of this directory: a pid file left by a killed daemon names another
  # process by now (contrib/lib.sh).
  for f in "$d/slurmdbd.pid" "$d/mariadb.pid"; do
    p=$(daemon_pid "$f" "$d/")
    [ -n "$p" ] && pids+=("$p") && kill "$p" 2>/dev/null || true
  done
  for _ in $(seq 50); do
    p=; for f in "${pids[@]}"; do alive "$f" && p=1; done
    [ -z "$p" ] && break; sleep 0.2
  done
  rm -f "$d/slurmdbd.pid" "$d/mariadb.pid"
}

case $cmd in
  down) stop; exit 0 ;;
  up) ;;
  *) die "usage: slurmdbd.sh up|down ..." ;;
esac
[ -n "$release" ] && [ -n "$cluster" ] || die "up needs --release and --cluster"
p=$(release_prefix "$release"); sbin=$p/sbin bin=$p/bin
[ -x "$sbin/slurmdbd" ] || die "Slurm $release is not installed under $p (contrib/slurm-install.sh $release)"
stop
rm -rf "$d"; mkdir -p "$d/db"
mariadb-install-db --user=root --datadir="$d/db" --skip-test-db >"$d/install.log" 2>&1 || die "mariadb-install-db failed (see $d/install.log)"
# (A port taken between the check and the bind: the next free pair, at most three times.)
for try in 1 2 3; do
  mariadbd --user=root --datadir="$d/db" --socket="$d/mysql.sock" --port=$my_port --bind-address=127.0.0.1 \
    --skip-grant-tables --pid-file="$d/mariadb.pid" --log-error="$d/mariadb.log" >/dev/null 2>&1 &
  my_pid=$!
  for _ in $(seq 100); do [ -S "$d/mysql.sock" ] && break; kill -0 "$my_pid" 2>/dev/null || break; sleep 0.2; done
  [ -S "$d/mysql.sock" ] && break
  grep -q 'Address already in use' "$d/mariadb.log" 2>/dev/null && [ "$try" != 3 ] || break
  echo "slurmdbd.sh: MariaDB port $my_port was taken meanwhile; trying the next pair" >&2
  pick_ports $((my_port - base + 1))
done
[ -S "$d/mysql.sock" ] || die "mariadbd did not start (see $d/mariadb.log)"

cat > "$d/slurmdbd.conf" <<EOC
AuthType=auth/munge
DbdHost=localhost
DbdPort=$dbd_port
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$my_port
StorageUser=root
StorageLoc=slurm_acct_db
LogFile=$d/slurmdbd.log
PidFile=$d/slurmdbd.pid
DebugLevel=info
EOC
chmod 600 "$d/slurmdbd.conf"
cat > "$d/slurm.conf" <<EOC
ClusterName=$cluster
SlurmctldHost=localhost
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$dbd_port
EOC
SLURM_CONF=$d/slurm.conf "$sbin/slurmdbd" >/dev/null 2>&1 || die "slurmdbd did not start (see $d/slurmdbd.log)"
# The first start creates the accounting tables, which takes a while on a busy machine: wait up
# to 3 minutes, but give up at once if slurmdbd died.
for _ in $(seq 900); do
  SLURM_CONF=$d/slurm.conf timeout 5 "$bin/sacctmgr" -n list cluster >/dev/null 2>&1 && break
  p=$(cat "$d/slurmdbd.pid" 2>/dev/null || true)
  [ -n "$p" ] && [ ! -d "/proc/$p" ] && die "slurmdbd exited (see $d/slurmdbd.log)"
  sleep 0.2
done
SLURM_CONF=$d/slurm.conf "$bin/sacctmgr" -i add cluster "$cluster" >/dev/null 2>&1 || true
SLURM_CONF=$d/slurm.conf "$bin/sacctmgr" -n list cluster format=cluster%40 | grep -qw "$cluster" \
  || die "cluster $cluster not registered (see $d/slurmdbd.log)"
cat <<EOC
ClusterName=$cluster
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$dbd_port
EOC
