#!/usr/bin/env bash
# One package kind of one release installed, used, upgraded, downgraded, reinstalled and removed
# the way an administrator does it, on a running cluster. Run by contrib/test-package.sh inside
# a scratch host (contrib/pkg-sandbox.sh), as root:
#
#   contrib/test-package-install.sh deb|rpm RELEASE PKG PKG_REVISION_2 [--other-prefix PREFIX]
#
# 1. the site's Slurm runs: a one-node cluster (dgx1v, 8 fake GPUs) with stock select/cons_tres;
#    with --other-prefix, that Slurm lives only under PREFIX (the build's prefix is hidden)
# 2. install PKG: deb with dpkg -i and SLURM_CONF in the environment, so the package finds the
#    stock plugins on its own (Slurm's package directory, else slurm.conf's PluginDir); rpm with
#    rpm -i --nodeps after the administrator wrote /etc/sysconfig/gputopo (GPUTOPO_STOCK_DIR,
#    SLURM_CONF). Checks the files and the plugin directory postinst/%post built, then the
#    refresh a Slurm package change triggers
#    The agent's systemd unit: installed, accepted by systemd-analyze verify, enabled the way
#    each family does it (deb: on install, deb-systemd-helper; rpm: presets, here a RHEL host's
#    "disable *"); its command line with the package's settings file stands down without
#    slurm.conf and beside a gputopo HealthCheckProgram, and publishes the node's GPU health
#    (one check, fake NVML)
# 3. slurm.conf switched to the package's PluginDir and select/gputopo_cons_tres: a 2-GPU job
#    gets an NVLink-2 pair; slurmctld mapped the installed .so and the host's stock cons_tres
# 4. while slurmctld runs with a job: upgrade to PKG_REVISION_2 (the daemon keeps running and
#    scheduling, the job keeps running, the package says a restart loads it, a restart does),
#    downgrade to PKG, reinstall PKG; the service's state an administrator chose is kept
# 5. removal while slurm.conf still selects gputopo from that PluginDir: refused, nothing changed
# 6. deb: SelectType switched back but PluginDir not yet: removal keeps the directory as links to
#    the stock plugins, the restarted daemons run a GPU job from it; purge. rpm: slurm.conf
#    switched back entirely: rpm -e removes everything (and disables the service); purge
#    removes the service's links
# Prints one line per check and "KIND RELEASE: N passed, N failed"; exits non-zero on a failure.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
kind=${1:?usage: test-package-install.sh deb|rpm RELEASE PKG PKG2 [--other-prefix PREFIX]}
release=${2:?} pkg1=${3:?} pkg2=${4:?}
prefix=
[ "${5:-}" = --other-prefix ] && prefix=${6:?--other-prefix needs a prefix}
dir=${GPUTOPO_PKG_CLUSTER_DIR:-/tmp/gputopo-pkg}-$kind-$release
check_prefix="$kind $release: "
# shellcheck source=contrib/checks.sh
. "$here/checks.sh"
finish() {
  "$here/cluster.sh" down --dir "$dir" >/dev/null 2>&1 || true
  echo "$kind $release: $passed passed, $failed failed"
  [ "$failed" = 0 ]
  exit
}
# The stock cluster's gres.conf comes from the build's gputopo (the site has no gputopo yet:
# cluster.sh's default, target/release/gputopo); once installed, from /usr/bin/gputopo.
export QUIET=1
unset GPUTOPO_BIN
[ -z "$prefix" ] || export GPUTOPO_SLURM_PREFIX=$prefix
conf=$dir/etc/slurm.conf

case $kind in
  deb)
    multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
    pdir=/usr/lib/$multiarch/gputopo/plugins
    # man-db's trigger rebuilds its index on every dpkg run (10 s here); the scratch host needs none.
    rm -f /var/lib/man-db/auto-update
    # A scratch host starts no service: deb-systemd-invoke asks policy-rc.d (as in a chroot).
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod 0755 /usr/sbin/policy-rc.d
    # An administrator's shell with the cluster's SLURM_CONF (dpkg passes it to the scripts).
    pkg() { SLURM_CONF=$conf "$@"; }
    pkg_install() { pkg dpkg -i "$1"; }
    pkg_upgrade() { pkg dpkg -i "$1"; }
    pkg_downgrade() { pkg dpkg -i "$1"; }
    pkg_reinstall() { pkg dpkg -i "$1"; }
    pkg_remove() { pkg dpkg -r gputopo; }
    pkg_version() { dpkg-query -W -f '${Version}' gputopo 2>/dev/null; }
    file_version() { dpkg-deb -f "$1" Version; }
    # (a refused dpkg -r leaves the selection "deinstall" and the package installed)
    installed() { [ "$(dpkg-query -W -f '${db:Status-Status}' gputopo 2>/dev/null)" = installed ]; }
    unit=/lib/systemd/system/gputopo-agent.service settings=/etc/default/gputopo ;;
  rpm)
    pdir=$(rpm -qp --qf '[%{FILENAMES}\n]' "$pkg1" | grep '/gputopo/plugins$')
    # rpm's own database in the scratch host; no dependency check (no Slurm RPM here).
    # (Debian's rpm asks for --force-debian before it writes its own database.)
    force=(); rpm --help 2>/dev/null | grep -q -- --force-debian && force=(--force-debian)
    r() { env -u SLURM_CONF rpm --dbpath /var/lib/rpm "${force[@]}" "$@"; }
    rpm --dbpath /var/lib/rpm --initdb
    pkg_install() { r -i --nodeps "$1"; }
    pkg_upgrade() { r -U --nodeps "$1"; }
    pkg_downgrade() { r -U --nodeps --oldpackage "$1"; }
    pkg_reinstall() { r --reinstall --nodeps "$1"; }
    pkg_remove() { r -e --nodeps gputopo; }
    pkg_version() { r -q --qf '%{VERSION}-%{RELEASE}' gputopo 2>/dev/null; }
    file_version() { rpm -qp --qf '%{VERSION}-%{RELEASE}' "$1"; }
    installed() { r -q gputopo; }
    unit=/usr/lib/systemd/system/gputopo-agent.service settings=/etc/sysconfig/gputopo ;;
  *) echo "test-package-install.sh: kind must be deb or rpm" >&2; exit 2 ;;
esac
so=$pdir/select_gputopo_cons_tres.so
v1=$(file_version "$pkg1") v2=$(file_version "$pkg2")

ctld_pid() { cat "$dir/slurmctld.pid" 2>/dev/null; }
ctld_alive() { local p; p=$(ctld_pid) && [ -n "$p" ] && kill -0 "$p" && timeout 10 scontrol ping | grep -q 'is UP'; }
maps() { grep -qF -- "$2" "/proc/$1/maps"; }
maps_live() { maps "$1" "$2" && ! maps "$1" "$2 (deleted)"; }
# submit_gpu_job: a 2-GPU job; prints its id once it runs (bounded wait), nothing otherwise.
submit_gpu_job() {
  local job state
  job=$(cd "$dir" && sbatch --parsable --gres=gpu:2 -o /dev/null --wrap 'sleep 300') || return 1
  for _ in $(seq 300); do
    state=$(squeue -h -j "$job" -o %T 2>/dev/null)
    [ "$state" = RUNNING ] && { echo "$job"; return 0; }
    sleep 0.1
  done
  echo "job $job is $state, not RUNNING, after 30 s" >&2
  return 1
}
running() { [ "$(squeue -h -j "$1" -o %T 2>/dev/null)" = RUNNING ]; }
set_conf() { sed -i "s|^$1=.*|$1=$2|" "$conf"; }
unit_state() { systemctl is-enabled gputopo-agent.service 2>/dev/null; }
enabled() { [ "$(unit_state)" = "${1:-enabled}" ]; }
# settings KEY=VALUE...: the administrator's lines in the package's settings file (replaced).
settings() {
  local kv
  for kv in "$@"; do
    sed -i "/^${kv%%=*}=/d" "$settings"
    echo "$kv" >> "$settings"
  done
}
# service_check: what systemd runs for the agent's unit (its ExecStart with its Environment= and
# EnvironmentFile=), one check with a 1-second interval, the node's GPUs from the fake NVML.
service_check() {
  local cmd envfile
  cmd=$(sed -n 's/^ExecStart=//p' "$unit" | sed 's/--interval [0-9]*/--interval 1/')
  envfile=$(sed -n 's/^EnvironmentFile=-//p' "$unit")
  (
    set -a
    eval "$(sed -n 's/^Environment=//p' "$unit")"
    # shellcheck disable=SC1090
    [ ! -r "$envfile" ] || . "$envfile"
    set +a
    # shellcheck disable=SC2086
    GPUTOPO_NVML_LIB=$FAKE_NVML_LIB FAKE_NVML_FIXTURE=$here/../tests/fixtures/nvml/dgx1v-healthy.fx \
      timeout 60 $cmd --checks 1
  )
}
ok_gpus() { /usr/bin/gputopo nodes n1 2>/dev/null | grep -Ec '^n1 +[0-7] +ok '; }
# none_left PATH...: true when none exists; names the ones left on fd 9 (check drops the
# command's own output, so a failure would not say which).
exec 9>&2
none_left() {
  local p left=()
  for p in "$@"; do [ ! -e "$p" ] || left+=("$p"); done
  [ ${#left[@]} = 0 ] || { echo "  left behind: ${left[*]}" >&9; ls -laR "${left[@]}" 2>&1 | head -20 >&9; return 1; }
}

# --- 1. the site's Slurm, stock cons_tres ---------------------------------------------------
if [ -n "$prefix" ]; then
  check "Slurm runs from the other prefix $prefix" "$prefix/sbin/slurmctld" -V
  check "the build's Slurm prefix is not on this host" test -z "$(ls -A "${GPUTOPO_CACHE:-/var/cache/gputopo}/slurm-$release" 2>/dev/null)"
fi
# (Ports are derived from the directory: on a busy host another one may hold them; then the
# next directory name.)
for try in 2 3 ''; do
  err=$("$here/cluster.sh" up --release "$release" --nodes 1 --topology dgx1v --select cons_tres --dir "$dir" 2>&1 >/dev/null) && break
  if [ -n "$try" ] && grep -q 'are in use' <<<"$err"; then
    echo "$kind $release: $err"
    dir=${dir%-[0-9]}-$try conf=$dir/etc/slurm.conf
    continue
  fi
  echo "$err"
  check "a stock cluster starts" false
  finish
done
eval "$("$here/cluster.sh" env --dir "$dir")"
stock=$(sed -n 's/^PluginDir=//p' "$conf")
echo "$kind $release: the site's stock plugin directory is $stock"

# --- 2. install ------------------------------------------------------------------------------
if [ "$kind" = rpm ]; then
  # Configuration management writes the settings before the package arrives; %config(noreplace)
  # keeps them and puts the package's file next to them.
  mkdir -p /etc/sysconfig
  printf 'GPUTOPO_STOCK_DIR=%s\nSLURM_CONF=%s\n' "$stock" "$conf" > /etc/sysconfig/gputopo
  # A RHEL host's presets (its systemd ships 99-default-disable.preset): units not listed stay
  # disabled. (Debian's presets enable every unit; the deb must not rely on them.)
  mkdir -p /usr/lib/systemd/system-preset
  echo 'disable *' > /usr/lib/systemd/system-preset/99-default-disable.preset
fi
out=$(pkg_install "$pkg1" 2>&1); rc=$?
echo "$out" | grep 'gputopo:' | sed "s/^/  [install] /"
check "installs ($v1)" test "$rc" = 0
check "it says what to set in slurm.conf" grep -q "PluginDir=$pdir" <<<"$out"
check "the agent runs" /usr/bin/gputopo --help
check "the health check is installed" test -x /usr/libexec/gputopo/healthcheck
check "gputopo.conf is installed as configuration" test -f /etc/slurm/gputopo.conf
check "the plugin directory holds the installed .so" test -f "$so"
check "priority_gputopo.so is a link to it" test "$(readlink "$pdir/priority_gputopo.so")" = select_gputopo_cons_tres.so
check "no stock select_cons_tres.so in the plugin directory" test ! -e "$pdir/select_cons_tres.so"
check "the stock plugins are linked from this host's Slurm ($stock)" test "$(readlink "$pdir/sched_backfill.so")" = "$stock/sched_backfill.so"
check "no link points elsewhere" test -z "$(find "$pdir" -type l ! -lname "$stock/*" ! -name priority_gputopo.so)"
if [ -n "$prefix" ]; then
  check "nothing installed names the build's Slurm prefix" test -z "$(grep -rlIF "${GPUTOPO_CACHE:-/var/cache/gputopo}/slurm-" /usr/share/gputopo "$pdir" 2>/dev/null)"
fi
if [ "$kind" = rpm ]; then
  check "%config(noreplace) kept the administrator's /etc/sysconfig/gputopo" grep -q "^GPUTOPO_STOCK_DIR=$stock" /etc/sysconfig/gputopo
  check "and put the package's next to it" test -f /etc/sysconfig/gputopo.rpmnew
  check "rpm verifies the installed files (its configuration aside)" r -V --nodeps --noconfig gputopo
else
  check "dpkg verifies the installed files" dpkg --verify gputopo
fi
check "the agent's service is installed ($unit)" test -f "$unit"
check "systemd accepts it (systemd-analyze verify)" systemd-analyze verify "$unit"
if [ "$kind" = deb ]; then
  check "the package enabled the service (Debian's convention)" enabled
else
  check "the package enabled no service (the host's presets)" enabled disabled
fi
# Not configured for it: the service says why, exits 0 (systemd leaves it stopped), publishes
# nothing.
settings SLURMD_NODENAME=n1 "SLURM_CONF=$dir/none/slurm.conf"
out=$(service_check 2>&1); rc=$?
echo "$out" | grep 'serve' | sed "s/^/  [service] /"
check "the service stands down on a host without slurm.conf" test "$rc" = 0 -a "$(ok_gpus)" = 0
check "and says where it looked" grep -q "not running: no slurm.conf at $dir/none/slurm.conf" <<<"$out"
mkdir -p "$dir/hc"
{ cat "$conf"; echo "HealthCheckProgram=/usr/libexec/gputopo/healthcheck"; } > "$dir/hc/slurm.conf"
settings "SLURM_CONF=$dir/hc/slurm.conf"
out=$(service_check 2>&1); rc=$?
echo "$out" | grep 'serve' | sed "s/^/  [service] /"
check "and beside a HealthCheckProgram that runs gputopo" test "$rc" = 0 -a "$(ok_gpus)" = 0 -a -n "$(grep 'not running: .*HealthCheckProgram=' <<<"$out")"
# The administrator names the node and slurm.conf in the package's settings file.
settings "SLURM_CONF=$conf"
out=$(service_check 2>&1); rc=$?
echo "$out" | grep 'serve' | sed "s/^/  [service] /"
check "the service's command publishes the node's GPU health (one check)" test "$rc" = 0 -a "$(ok_gpus)" = 8
# (The unit's StateDirectory= is the agent's default StateDir; this cluster's gputopo.conf
# names one of its own, cluster.sh.)
check "it keeps its state where gputopo.conf's StateDir says" test -f "$dir/agent-state/xid-n1.json"
# What a Slurm package update triggers (deb: dpkg trigger; rpm: %transfiletriggerin runs the
# same maint.sh refresh): a missing link comes back, a select_gputopo.so of gputopo < 0.2 goes.
rm -f "$pdir/sched_backfill.so"
touch "$pdir/select_gputopo.so"
if [ "$kind" = deb ]; then
  dpkg-trigger --no-await "/usr/lib/$multiarch/slurm-wlm" && pkg dpkg --triggers-only gputopo >/dev/null 2>&1
else
  /usr/share/gputopo/maint.sh refresh >/dev/null 2>&1
fi
check "a refresh relinks the plugin directory" test -L "$pdir/sched_backfill.so"
check "a refresh removes the old select_gputopo.so" test ! -e "$pdir/select_gputopo.so"

# --- 3. slurm.conf switched to gputopo; a GPU job ------------------------------------------
# What the administrator does: gres.conf from the installed agent, slurm.conf's PluginDir and
# SelectType, a restart of the daemons.
gres=$(/usr/bin/gputopo gres-conf --topology "$here/topologies/dgx1v.topo" --node n1 --file-prefix "$dir/dev/n1/nvidia" 2>/dev/null)
check "the installed agent writes the cluster's gres.conf" test -n "$gres" -a "$gres" = "$(cat "$dir/etc/gres.conf")"
switch_to() { # switch_to PLUGINDIR SELECTTYPE: slurm.conf changed, slurmctld and slurmd restarted
  set_conf PluginDir "$1"
  set_conf SelectType "$2"
  "$here/cluster.sh" restart --dir "$dir" slurmctld >/dev/null 2>&1 &&
    "$here/cluster.sh" restart --dir "$dir" n1 >/dev/null 2>&1 || return 1
  local st
  for _ in $(seq 300); do
    st=$(sinfo -h -n n1 -o %t 2>/dev/null)
    case $st in idle|mix|alloc) return 0 ;; esac
    sleep 0.1
  done
  return 1
}
check "slurmctld and slurmd restart with PluginDir=$pdir" switch_to "$pdir" select/gputopo_cons_tres
job1=$(submit_gpu_job)
check "a 2-GPU job runs through the installed plugin" test -n "$job1"
idx=$(scontrol show job -d "$job1" 2>/dev/null | sed -n 's/.*GRES=gpu[^(]*(IDX:\([^)]*\)).*/\1/p' | head -n 1)
echo "$kind $release: job $job1 got GPUs $idx"
# Idle DGX-1V, 2 GPUs: an NV2 pair; the stock lowest-index answer 0,1 is only NV1.
check "it got an NVLink-2 pair, not stock's 0-1 (got $idx)" test -n "$idx" -a "$idx" != 0-1 -a "$idx" != 0,1
ctld=$(ctld_pid)
check "slurmctld mapped the installed select_gputopo_cons_tres.so" maps "$ctld" "$so"
check "and the host's stock select_cons_tres.so" maps "$ctld" "$stock/select_cons_tres.so"

# --- 4. upgrade, downgrade, reinstall while slurmctld runs ---------------------------------
# The administrator turns the package's choice around (deb: disable, rpm: enable).
if [ "$kind" = deb ]; then want=disabled; else want=enabled; fi
check "the administrator ${want%d}s the agent's service" systemctl "${want%d}" gputopo-agent.service
ino=$(stat -c %i "$so")
out=$(pkg_upgrade "$pkg2" 2>&1); rc=$?
echo "$out" | grep 'gputopo:' | sed "s/^/  [upgrade] /"
check "upgrades to $v2 while slurmctld runs" test "$rc" = 0 -a "$(pkg_version)" = "$v2"
check "it says a restart loads the new plugin" grep -q 'restart slurmctld' <<<"$out"
check "it names the daemon still running the old one" grep -q 'slurmctld (pid' <<<"$out"
check "slurmctld kept running (pid $ctld)" test "$(ctld_pid)" = "$ctld"
check "and answers" ctld_alive
check "the running job is still running" running "$job1"
check "the .so was replaced by a new file (rename, not overwrite)" test "$(stat -c %i "$so")" != "$ino"
check "slurmctld still maps the file it loaded" maps "$ctld" "$so (deleted)"
job2=$(submit_gpu_job)
check "slurmctld still schedules a GPU job" test -n "$job2"
"$here/cluster.sh" restart --dir "$dir" slurmctld >/dev/null 2>&1
ctld=$(ctld_pid)
check "after a restart slurmctld runs the upgraded .so" maps_live "$ctld" "$so"
check "the job survived the restart" running "$job1"
out=$(pkg_downgrade "$pkg1" 2>&1); rc=$?
check "downgrades to $v1 while slurmctld runs" test "$rc" = 0 -a "$(pkg_version)" = "$v1"
check "slurmctld kept running" ctld_alive
out=$(pkg_reinstall "$pkg1" 2>&1); rc=$?
check "reinstalls $v1 while slurmctld runs" test "$rc" = 0 -a "$(pkg_version)" = "$v1"
check "slurmctld kept running" ctld_alive
check "the plugin directory is complete" test -f "$so" -a -L "$pdir/sched_backfill.so" -a -L "$pdir/priority_gputopo.so"
"$here/cluster.sh" restart --dir "$dir" slurmctld >/dev/null 2>&1
check "slurmctld restarts on the reinstalled plugin" ctld_alive
check "the service stayed $want through upgrade, downgrade and reinstall" enabled "$want"

# --- 5. removal while slurm.conf uses it ----------------------------------------------------
out=$(pkg_remove 2>&1); rc=$?
echo "$out" | grep 'gputopo:' | sed "s/^/  [remove] /"
check "removal is refused while slurm.conf selects gputopo from $pdir" test "$rc" != 0
check "it says why and what to change" grep -q "not removed: $conf still has PluginDir=$pdir" <<<"$out"
check "the package is still installed" installed
check "the plugin directory is untouched" test -f "$so" -a -L "$pdir/sched_backfill.so"
check "the agent's service is still $want" enabled "$want"
check "slurmctld runs on" ctld_alive

# --- 6. switching back, removal ------------------------------------------------------------
if [ "$kind" = deb ]; then
  # SelectType back to the stock plugin, PluginDir not yet (the daemons restart later): the
  # directory must stay usable.
  set_conf SelectType select/cons_tres
  out=$(pkg_remove 2>&1); rc=$?
  echo "$out" | grep 'gputopo:' | sed "s/^/  [remove] /"
  check "removal succeeds once slurm.conf selects stock cons_tres" test "$rc" = 0
  check "it says the directory was kept for PluginDir" grep -q "kept it as links to Slurm's stock plugins" <<<"$out"
  check "gputopo's .so left the directory" test ! -e "$so" -a ! -e "$pdir/priority_gputopo.so"
  check "the stock plugins stay linked" test "$(readlink "$pdir/sched_backfill.so")" = "$stock/sched_backfill.so"
  check "select_cons_tres.so is linked in now" test "$(readlink "$pdir/select_cons_tres.so")" = "$stock/select_cons_tres.so"
  check "the daemons restart with PluginDir=$pdir still set" switch_to "$pdir" select/cons_tres
  check "slurmctld now runs the stock cons_tres" maps "$(ctld_pid)" "$stock/select_cons_tres.so"
  job3=$(submit_gpu_job)
  check "a GPU job runs" test -n "$job3"
  out=$(pkg dpkg --purge gputopo 2>&1); rc=$?
  check "purge succeeds" test "$rc" = 0
  check "purge reminds that the directory was kept" grep -q "was kept for a slurm.conf" <<<"$out"
  check "no file of the package is left" none_left /usr/bin/gputopo /usr/share/gputopo /usr/share/doc/gputopo /etc/slurm/gputopo.conf /etc/default/gputopo /var/lib/gputopo "$unit"
  check "purge removed the service's links and mask" test ! -e /etc/systemd/system/multi-user.target.wants/gputopo-agent.service -a ! -e /etc/systemd/system/gputopo-agent.service
else
  # slurm.conf back to the stock plugin and PluginDir, daemons restarted, then rpm -e.
  check "the daemons restart with Slurm's own PluginDir and cons_tres" switch_to "$stock" select/cons_tres
  out=$(pkg_remove 2>&1); rc=$?
  echo "$out" | grep 'gputopo:' | sed "s/^/  [remove] /"
  check "rpm -e succeeds once slurm.conf no longer uses gputopo" test "$rc" = 0
  check "the plugin directory is gone" test ! -e "$pdir"
  check "no file of the package is left" none_left /usr/bin/gputopo /usr/share/gputopo "$(dirname "$pdir")" /var/lib/gputopo/stock-dir /usr/libexec/gputopo "$unit"
  # rpm has no purge: the agent's own state (remembered XIDs, history) stays, as a database's
  # data does; nothing else of the package's is in /var/lib/gputopo.
  check "only the agent's state stays in /var/lib/gputopo" test -z "$(find /var/lib/gputopo -mindepth 1 ! -name 'xid-*.json' 2>/dev/null)"
  check "rpm -e disabled the service" test ! -e /etc/systemd/system/multi-user.target.wants/gputopo-agent.service
  job3=$(submit_gpu_job)
  check "the stock cluster runs a GPU job" test -n "$job3"
fi
finish
