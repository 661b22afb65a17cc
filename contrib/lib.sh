# Shared by the contrib/ scripts (sourced): pid files of a cluster's daemons.

# Running and not a zombie (PID 1 here may not reap orphans, so kill -0 is not enough).
alive() { [ -n "${1:-}" ] && [ -r "/proc/$1/stat" ] && ! awk '{ exit !($3 == "Z") }' "/proc/$1/stat" 2>/dev/null; }
pidfile_pid() { [ -s "$1" ] && tr -dc 0-9 < "$1" || true; }
# daemon_pid FILE MARK: the pid in FILE, only while that process is alive and its command line
# or environment holds MARK (the cluster's own directory). A pid file outlives its daemon after a
# SIGKILL, and with pid_max at 32768 its number soon belongs to another process: a job of
# another cluster, a client. Signals go only to a pid this prints.
daemon_pid() {
  local p; p=$(pidfile_pid "$1")
  alive "$p" || return 0
  if grep -qzF -- "$2" "/proc/$p/cmdline" "/proc/$p/environ" 2>/dev/null; then echo "$p"; fi
}
