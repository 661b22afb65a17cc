#!/usr/bin/env bash
# The Debian package of one release, end to end, as an administrator would use it (as root):
#
#   contrib/test-package.sh 22.05.8|24.11.5
#
# builds the package (contrib/package.sh), installs it with dpkg -i, checks what dpkg installed
# (the files, the generated plugin directory), starts a one-node local cluster whose slurm.conf
# points PluginDir at the installed directory and whose gres.conf is written by the installed
# /usr/bin/gputopo, runs a 2-GPU job and checks it got the best-connected pair, checks slurmctld
# mapped the installed .so (not the build tree's), then removes and purges the package and checks
# that nothing of it is left. Prints "N passed, N failed" and exits non-zero on any failure.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
release=${1:?usage: test-package.sh RELEASE}
dir=${GPUTOPO_PKG_CLUSTER_DIR:-/tmp/gputopo-pkg-$release}
passed=0 failed=0
check() { # check WHAT CMD...: one assertion
  local what=$1; shift
  if "$@" >/dev/null 2>&1; then passed=$((passed + 1)); echo "ok     $what"
  else failed=$((failed + 1)); echo "FAILED $what"; fi
}
finish() {
  QUIET=1 "$here/cluster.sh" down --dir "$dir" >/dev/null 2>&1 || true
  dpkg -s gputopo >/dev/null 2>&1 && dpkg --purge gputopo >/dev/null 2>&1
  echo "package $release: $passed passed, $failed failed"
  [ "$failed" = 0 ]
  exit
}
[ "$(id -u)" = 0 ] || { echo "test-package.sh: run as root (dpkg -i)" >&2; exit 1; }

deb=$("$here/package.sh" "$release" | tail -n 1) || { echo "test-package.sh: package.sh failed" >&2; failed=1; finish; }
echo "package: $deb"
check "dpkg-deb reads the control file" dpkg-deb --field "$deb" Package Version Depends
dpkg --purge gputopo >/dev/null 2>&1 || true
check "dpkg -i installs it" dpkg -i "$deb"
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
pdir=/usr/lib/$multiarch/gputopo/plugins
check "the agent is installed" test -x /usr/bin/gputopo
check "the health check is installed" test -x /usr/libexec/gputopo/healthcheck
check "postinst built the plugin directory" test -f "$pdir/select_gputopo_cons_tres.so"
check "priority role is a link to the same file" test "$(readlink "$pdir/priority_gputopo.so")" = select_gputopo_cons_tres.so
check "no stock select_cons_tres.so in the plugin directory" test ! -e "$pdir/select_cons_tres.so"
check "stock plugins are linked" test -L "$pdir/sched_backfill.so"
check "the example gputopo.conf is installed" test -f /usr/share/doc/gputopo/examples/gputopo.conf
check "the upgrade notes are installed" test -f /usr/share/doc/gputopo/NEWS.Debian.gz
check "dpkg verifies the installed files" dpkg --verify gputopo
# A Slurm update that changes the stock plugin directory fires the trigger; the postinst then
# relinks what is missing (here: a link removed by hand).
rm -f "$pdir/sched_backfill.so"
# A plugin directory of gputopo < 0.2 held select_gputopo.so (a second id 109 next to the new file).
touch "$pdir/select_gputopo.so"
stock=$(. /usr/share/gputopo/layout && echo "$GPUTOPO_STOCK_DIR")
dpkg-trigger --no-await "$stock" && dpkg --triggers-only gputopo >/dev/null 2>&1
check "the stock-dir trigger relinks the plugin directory" test -L "$pdir/sched_backfill.so"
check "the refresh removes the old select_gputopo.so" test ! -e "$pdir/select_gputopo.so"

if GPUTOPO_BIN=/usr/bin/gputopo QUIET=1 "$here/cluster.sh" up --release "$release" --nodes 1 \
     --topology dgx1v --plugin-dir "$pdir" --dir "$dir" >/dev/null; then
  eval "$("$here/cluster.sh" env --dir "$dir")"
  job=$(cd "$dir" && sbatch --parsable --gres=gpu:2 -o "$dir/pkg-%j.out" --wrap 'echo "CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"; sleep 30')
  for _ in $(seq 300); do
    state=$(squeue -h -j "$job" -o %T 2>/dev/null)
    [ "$state" = RUNNING ] && break
    sleep 0.1
  done
  check "a 2-GPU job runs through the installed plugin" test "$state" = RUNNING
  idx=$(scontrol show job -d "$job" | sed -n 's/.*GRES=gpu[^(]*(IDX:\([^)]*\)).*/\1/p' | head -n 1)
  echo "job $job got GPUs $idx"
  # Idle DGX-1V, 2 GPUs: an NV2 pair; the stock lowest-index answer 0,1 is only NV1.
  check "it got an NVLink-2 pair, not stock's 0-1 (got $idx)" test -n "$idx" -a "$idx" != 0-1 -a "$idx" != 0,1
  ctld=$(cat "$dir/slurmctld.pid" 2>/dev/null || pgrep -f "slurmctld.*$dir" | head -n 1)
  check "slurmctld mapped the installed select_gputopo_cons_tres.so" grep -q "$pdir/select_gputopo_cons_tres.so" "/proc/$ctld/maps"
  scancel "$job"
  QUIET=1 "$here/cluster.sh" down --dir "$dir" >/dev/null 2>&1
else
  check "a cluster starts with PluginDir=$pdir" false
fi

check "dpkg -r removes it" dpkg -r gputopo
check "the plugin directory is gone" test ! -e "$pdir/select_gputopo_cons_tres.so" -a ! -L "$pdir/sched_backfill.so"
check "the agent is gone" test ! -e /usr/bin/gputopo
check "dpkg --purge leaves nothing" dpkg --purge gputopo
check "no file of gputopo is left" test ! -e "/usr/lib/$multiarch/gputopo" -a ! -e /usr/share/doc/gputopo -a ! -e /usr/share/gputopo
finish
