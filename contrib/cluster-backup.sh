# shellcheck shell=bash
# A backup slurmctld for contrib/cluster.sh (`up --backup`), sourced by it.
#
# Slurm tells its controllers apart by host name (SlurmctldHost= lines, matched against
# gethostname()) and every slurmctld listens on SlurmctldPort on all addresses, so two
# controllers on one machine need two hosts. The backup gets them from Linux namespaces:
#   - a network namespace gtbk<K> joined to this host by a veth pair, the host side
#     10.251.<K>.1 (the primary, every slurmd and every client) and the namespace side
#     10.251.<K>.2 (the backup); K is the cluster's port slot, so clusters in different DIRs
#     never share a subnet;
#   - a UTS namespace whose host name is gtbk<K> (SlurmctldHost=gtbk<K>(10.251.<K>.2));
#   - a mount namespace that binds DIR/slurmctld-backup.pid over DIR/slurmctld.pid: both
#     controllers read one slurm.conf, and a slurmctld that finds a live pid in its
#     SlurmctldPidFile kills that process first (controller.c, _kill_old_slurmctld).
# The backup logs to DIR/log/slurmctld-backup.log (slurmctld -L). Everything else (munge's
# socket, StateSaveLocation) is shared through the file system, as on two hosts with a shared
# state directory.

backup_slot() { echo $((($1 - 10000) / 200)); } # PORT_BASE -> K
backup_ns() { echo "gtbk$(backup_slot "$1")"; }
backup_host_addr() { echo "10.251.$(backup_slot "$1").1"; }
backup_ns_addr() { echo "10.251.$(backup_slot "$1").2"; }

# Creates the namespace and the veth pair for the cluster on PORT_BASE (idempotent).
backup_net_up() {
  local ns k
  ns=$(backup_ns "$1") k=$(backup_slot "$1")
  backup_net_down "$1"
  ip netns add "$ns" || die "--backup: cannot create network namespace $ns (needs root and CAP_SYS_ADMIN)"
  ip link add "gtbh$k" type veth peer name "gtbn$k" netns "$ns" || die "--backup: cannot create veth gtbh$k"
  ip addr add "$(backup_host_addr "$1")/30" dev "gtbh$k"
  ip link set "gtbh$k" up
  ip -n "$ns" addr add "$(backup_ns_addr "$1")/30" dev "gtbn$k"
  ip -n "$ns" link set "gtbn$k" up
  ip -n "$ns" link set lo up
}

# Removes them (the veth pair goes with the namespace).
backup_net_down() {
  local ns k
  ns=$(backup_ns "$1") k=$(backup_slot "$1")
  ip link del "gtbh$k" 2>/dev/null || true
  ip netns del "$ns" 2>/dev/null || true
}

# Starts the backup slurmctld of the cluster in $dir (cluster.env loaded, SLURM_CONF exported).
backup_start() {
  local base=$GPUTOPO_CLUSTER_PORT ns
  ns=$(backup_ns "$base")
  : > "$dir/slurmctld-backup.pid"
  [ -e "$dir/slurmctld.pid" ] || : > "$dir/slurmctld.pid"
  # (7>&-: the daemon must not inherit cluster.sh's bring-up lock)
  ip netns exec "$ns" unshare --uts --mount --propagation private sh -c '
    hostname "$1" && mount --bind "$2/slurmctld-backup.pid" "$2/slurmctld.pid" &&
    shift 2 && exec "$@"' sh "$ns" "$dir" \
    "${ctld_prefix[@]}" "$GPUTOPO_SLURM_SBIN/slurmctld" -f "$SLURM_CONF" -L "$dir/log/slurmctld-backup.log" 7>&- ||
    die "the backup slurmctld did not start; see $dir/log/slurmctld-backup.log"
  local i
  for i in $(seq 300); do
    ctld_up backup && return 0
    sleep 0.1
  done
  die "the backup slurmctld does not answer after 30 s; see $dir/log/slurmctld-backup.log"
}

# Stops the backup slurmctld (SIGTERM, bounded wait, SIGKILL).
backup_stop() {
  local pid i
  pid=$(daemon_pid "$dir/slurmctld-backup.pid" "$dir/")
  [ -n "$pid" ] || return 0
  kill -TERM "$pid"
  for i in $(seq 300); do alive "$pid" || return 0; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
}
