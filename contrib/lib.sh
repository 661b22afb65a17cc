# Shared by the contrib/ scripts (sourced: `. "$(dirname "$0")/lib.sh"`): the release table,
# the pid files of a cluster's daemons and the slurm.conf lines every harness cluster shares.

# The one table of Slurm releases (slurm-headers/releases.tsv; also read by crates/slurm-kit/build.rs and the
# e2e harness).
RELEASE_TABLE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/slurm-headers/releases.tsv
# releases ROLE: every release of that role (ci), in the table's order.
releases() { awk -v role="$1" '$1 == "release" && $3 == role { print $2 }' "$RELEASE_TABLE"; }
# default_release: the first ci release, every script's default.
default_release() { releases ci | head -n 1; }
# release_field VERSION N: field N of the release's line (3 ROLE, 4 PLUGIN_DIR, 5 DEBIAN_SOURCE,
# 6 UPSTREAM_SHA256), empty for `-` or a release the table does not list.
release_field() {
  awk -v v="$1" -v n="$2" '$1 == "release" && $2 == v { if ($n != "-") print $n; exit }' "$RELEASE_TABLE"
}
# release_prefix VERSION: where the release's bin/ and sbin/ are: /usr for Debian's packages
# (the table names their plugin directory), else contrib/slurm-install.sh's prefix in the cache
# (where a site installs any other release the same way by hand).
release_prefix() {
  if [ -n "$(release_field "$1" 4)" ]; then echo /usr; else echo "${GPUTOPO_CACHE:-/var/cache/gputopo}/slurm-$1"; fi
}
# release_plugin_dir VERSION: its libslurmfull.so and stock plugins.
release_plugin_dir() { local d; d=$(release_field "$1" 4); echo "${d:-$(release_prefix "$1")/lib/slurm}"; }
# release_is_debian VERSION: the release is Debian 12's own packages (the table names their
# plugin directory), not one built under the cache.
release_is_debian() { [ -n "$(release_field "$1" 4)" ]; }

# Running and not a zombie (PID 1 here may not reap orphans, so kill -0 is not enough).
alive() { [ -n "${1:-}" ] && [ -r "/proc/$1/stat" ] && ! awk '{ exit !($3 == "Z") }' "/proc/$1/stat" 2>/dev/null; }
# The first line's number only: 24.11's slurmctld rewrites its pid file after a reconfigure
# without truncating it (update_pidfile: rewind, fprintf), so a shorter new pid leaves the old
# one's tail on a second line ("678\n5\n" over "12345\n"), and all digits would read 6785.
pidfile_pid() { [ -s "$1" ] && head -n 1 "$1" | tr -dc 0-9 || true; }
# daemon_pid FILE MARK: the pid in FILE, only while that process is alive and its command line
# or environment holds MARK (the cluster's own directory). A pid file outlives its daemon after a
# SIGKILL, and with pid_max at 32768 its number soon belongs to another process: a job of
# another cluster, a client. Signals go only to a pid this prints.
daemon_pid() {
  local p; p=$(pidfile_pid "$1")
  alive "$p" || return 0
  if grep -qzF -- "$2" "/proc/$p/cmdline" "/proc/$p/environ" 2>/dev/null; then echo "$p"; fi
}

# slurm_conf_daemons DIR PLUGIN_DIR PID_DIR CTLD_DEBUG: the slurm.conf lines of every cluster the
# harness writes a configuration for (contrib/cluster.sh, and the parity gate's --auto-config
# base in contrib/slurm-testsuite/inner.sh): root daemons over munge, state, spools and logs in
# DIR, no accounting gathered, no task, MPI or job completion plugin, backfill.
slurm_conf_daemons() {
  cat <<EOC
AuthType=auth/munge
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
PluginDir=$2
StateSaveLocation=$1/state
SlurmdSpoolDir=$1/spool/%n
SlurmctldPidFile=$3/slurmctld.pid
SlurmdPidFile=$3/slurmd-%n.pid
SlurmctldLogFile=$1/log/slurmctld.log
SlurmdLogFile=$1/log/slurmd-%n.log
SlurmctldDebug=$4
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
EOC
}
