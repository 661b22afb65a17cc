#!/bin/sh
# What gputopo's packages do when installed, upgraded, triggered and removed: one script for both
# package kinds, installed as /usr/share/gputopo/maint.sh next to install-plugin.sh and the
# layout file the packager wrote (contrib/package.sh for Debian, contrib/rpm/gputopo.spec).
#
#   maint.sh configure [--upgrade [OLD_VERSION]]  postinst configure / RPM %post
#   maint.sh refresh                               a Slurm package changed its plugin directory
#                                                  (dpkg trigger / RPM file trigger)
#   maint.sh remove [--final]                      prerm remove / RPM %preun on erase (--final:
#                                                  RPM has no purge, so state goes too)
#   maint.sh stock-dir                             print the stock plugin directory it would use
#
# configure builds the gputopo plugin directory that slurm.conf's PluginDir names (the "farm",
# docs/deployment.md) with install-plugin.sh: the packaged .so copied and renamed into place
# (running daemons keep the copy they mapped) and a link to every stock plugin of the HOST's
# Slurm. That stock plugin directory is found on the host at install time, never taken from the
# build host; the first directory that holds a select_cons_tres.so of exactly this package's
# Slurm release (its plugin_version, read with readelf) wins, in this order:
#   1. GPUTOPO_STOCK_DIR, from the environment or the settings file (/etc/default/gputopo on
#      Debian, /etc/sysconfig/gputopo on RPM systems); when set it is the only candidate;
#   2. the one used last time (/var/lib/gputopo/stock-dir), else the one the plugin directory
#      links to now (an upgrade from a version that kept no state);
#   3. where the distribution's Slurm packages put their plugins (the layout's
#      GPUTOPO_STOCK_CANDIDATES: Debian's slurm-wlm, SchedMD's slurm-smd, the RPMs' %_libdir/slurm);
#   4. the PluginDir= entries of slurm.conf ($SLURM_CONF, /etc/slurm/slurm.conf, ...);
#   5. the plugin directory of a running slurmctld or slurmd (where its libslurmfull.so is);
#   6. the libslurmfull.so of the scontrol on PATH, and the PluginDir `scontrol show config` reports.
# remove never leaves a PluginDir that slurm.conf still names empty: while slurm.conf also
# selects a gputopo plugin (SelectType/PriorityType) it refuses, saying what to change first
# (GPUTOPO_FORCE_REMOVE=1 removes anyway); while only PluginDir still names the directory it
# keeps it as links to the stock plugins, select_cons_tres.so included, so Slurm keeps starting
# with its own plugins until the administrator points PluginDir back.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
layout=${GPUTOPO_LAYOUT:-$here/layout}
# shellcheck disable=SC1090
. "$layout"
# The settings file; a value in the environment wins over it (one run with another setting).
env_stock=${GPUTOPO_STOCK_DIR-} env_conf=${SLURM_CONF-} env_force=${GPUTOPO_FORCE_REMOVE-}
GPUTOPO_STOCK_DIR= GPUTOPO_FORCE_REMOVE=
if [ -r "$GPUTOPO_DEFAULTS" ]; then
  # shellcheck disable=SC1090
  . "$GPUTOPO_DEFAULTS"
fi
[ -z "$env_stock" ] || GPUTOPO_STOCK_DIR=$env_stock
[ -z "$env_conf" ] || SLURM_CONF=$env_conf
[ -z "$env_force" ] || GPUTOPO_FORCE_REMOVE=$env_force
SLURM_CONF=${SLURM_CONF-}
state=$GPUTOPO_STATE_DIR/stock-dir
pdir=$GPUTOPO_PLUGIN_DIR

say() { echo "gputopo: $*" >&2; }

# The directory D, resolved (symlinks followed), or nothing when it does not exist.
resolved() { (cd "$1" 2>/dev/null && pwd -P) || true; }

# plugin_release FILE: the Slurm release a plugin was built for, from its plugin_version
# symbol (the number Slurm compares with its own SLURM_VERSION_NUMBER before loading it).
plugin_release() {
  # shellcheck disable=SC2046
  set -- "$1" $(readelf -W --dyn-syms "$1" 2>/dev/null |
    awk '{ sub(/@.*/, "", $8) } $8 == "plugin_version" && $4 == "OBJECT" { print $2, $7; exit }')
  [ $# -eq 3 ] || return 1
  _f=$1 _value=$2
  # shellcheck disable=SC2046
  set -- $(readelf -W -S "$_f" 2>/dev/null | sed -n 's/^ *\[ *\([0-9][0-9]*\)\]/\1/p' |
    awk -v n="$3" '$1 == n { print $4, $5; exit }')
  [ $# -eq 2 ] || return 1
  _v=$(od -An -tu4 -j "$((0x$_value - 0x$1 + 0x$2))" -N4 "$_f" | tr -d ' ')
  [ -n "$_v" ] || return 1
  printf '%d.%02d.%d\n' "$((_v >> 16 & 255))" "$((_v >> 8 & 255))" "$((_v & 255))"
}

# stock_ok DIR: DIR is a stock plugin directory of this package's Slurm release. Says why not
# in $why.
stock_ok() {
  why=
  _d=$(resolved "$1")
  if [ -z "$_d" ]; then why="no such directory"; return 1; fi
  if [ "$_d" = "$(resolved "$pdir")" ]; then why="gputopo's own plugin directory"; return 1; fi
  if [ ! -f "$_d/select_cons_tres.so" ] || [ -L "$_d/select_cons_tres.so" ]; then
    why="no select_cons_tres.so"; return 1
  fi
  _r=$(plugin_release "$_d/select_cons_tres.so") || { why="cannot read plugin_version of its select_cons_tres.so (readelf)"; return 1; }
  if [ "$_r" != "$GPUTOPO_RELEASE" ]; then why="Slurm $_r, not $GPUTOPO_RELEASE"; return 1; fi
}

# conf_values KEY FILE: every value of KEY (case-insensitive, several KEY=VALUE per line allowed)
# in a slurm.conf and in the files its Include lines name (one level).
conf_values() {
  [ -r "$2" ] || return 0
  _awk='{ sub(/#.*/, "") } { for (i = 1; i <= NF; i++) if (tolower(substr($i, 1, length(k) + 1)) == k "=") print substr($i, length(k) + 2) }'
  awk -v k="$(echo "$1" | tr 'A-Z' 'a-z')" "$_awk" "$2"
  _incs=$(awk '{ sub(/#.*/, "") } tolower($1) == "include" && NF > 1 { print $2 }' "$2")
  [ -n "$_incs" ] || return 0
  _base=$(dirname "$2")
  for _inc in $_incs; do
    case $_inc in /*) ;; *) _inc=$_base/$_inc ;; esac
    for _f in $_inc; do
      [ -r "$_f" ] && awk -v k="$(echo "$1" | tr 'A-Z' 'a-z')" "$_awk" "$_f"
    done
  done
  return 0
}

# Every slurm.conf this host may run with: $SLURM_CONF, the packages' place, a configless
# node's cache, and <prefix>/etc/slurm.conf of a source build whose plugins are in <prefix>/lib*/slurm.
slurm_confs() {
  for _c in "$SLURM_CONF" /etc/slurm/slurm.conf /etc/slurm-llnl/slurm.conf /run/slurm/conf/slurm.conf; do
    [ -n "$_c" ] && [ -f "$_c" ] && echo "$_c"
  done
  if [ -f "$state" ]; then
    _p=$(dirname "$(dirname "$(cat "$state")")")
    [ -f "$_p/etc/slurm.conf" ] && echo "$_p/etc/slurm.conf"
  fi
  return 0
}

# try WHERE DIR: when DIR is the stock plugin directory, found=DIR (resolved); otherwise notes
# in $tried why not. A directory is tried once.
try() {
  case $seen in *" $2 "*) return 1 ;; esac
  seen="$seen$2 "
  if stock_ok "$2"; then found=$(resolved "$2") found_where=$1; return 0; fi
  tried="$tried
  $2 ($1): $why"
  return 1
}

# search: the candidates in order (see the top of this file), stopping at the first that fits;
# the later ones cost more (scontrol may wait for a controller that does not answer).
search() {
  if [ -n "$GPUTOPO_STOCK_DIR" ]; then
    try GPUTOPO_STOCK_DIR "$GPUTOPO_STOCK_DIR"
    return
  fi
  if [ -f "$state" ] && try "last used, $state" "$(cat "$state")"; then return 0; fi
  # What the plugin directory links to now (an upgrade from a gputopo that kept no state).
  for _l in "$pdir"/*.so; do
    [ -L "$_l" ] && [ "${_l##*/}" != priority_gputopo.so ] || continue
    _t=$(readlink "$_l")
    case $_t in /*) try "linked from $pdir" "$(dirname "$_t")" && return 0; break ;; esac
  done
  for _d in $GPUTOPO_STOCK_CANDIDATES; do try "Slurm's packages" "$_d" && return 0; done
  for _c in $(slurm_confs); do
    for _d in $(conf_values PluginDir "$_c" | tr ':' ' '); do try "PluginDir of $_c" "$_d" && return 0; done
  done
  for _comm in /proc/[0-9]*/comm; do
    case $(cat "$_comm" 2>/dev/null) in slurmctld|slurmd) ;; *) continue ;; esac
    _lib=$(awk '$6 ~ /\/libslurmfull\.so$/ { print $6; exit }' "${_comm%/comm}/maps" 2>/dev/null || true)
    [ -n "$_lib" ] && try "running $(cat "$_comm") ${_comm%/comm}" "$(dirname "$_lib")" && return 0
  done
  command -v scontrol >/dev/null 2>&1 || return 1
  _sc=$(command -v scontrol)
  _lib=$(ldd "$_sc" 2>/dev/null | awk '$1 == "libslurmfull.so" { print $3 }')
  [ -n "$_lib" ] && try "scontrol on PATH, $_sc" "$(dirname "$_lib")" && return 0
  for _d in $(timeout 10 scontrol show config 2>/dev/null | awk '$1 == "PluginDir" { print $3 }' | tr ':' ' '); do
    try "scontrol show config" "$_d" && return 0
  done
  return 1
}

# find_stock: prints the stock plugin directory (and sets found_where); on failure says where
# it looked.
find_stock() {
  tried= seen=' ' found= found_where=
  if search; then
    echo "$found"
    return 0
  fi
  say "no stock plugin directory of Slurm $GPUTOPO_RELEASE found.${tried:+ Looked at:$tried}"
  say "set GPUTOPO_STOCK_DIR=<the directory with Slurm $GPUTOPO_RELEASE's select_cons_tres.so> in $GPUTOPO_DEFAULTS and run this again"
  return 1
}

# in_use: sets use_conf to a slurm.conf whose PluginDir names the gputopo plugin directory and
# use_types to the gputopo plugin types that file selects (empty when none does).
in_use() {
  use_conf= use_types=
  _pd=$(resolved "$pdir")
  [ -n "$_pd" ] || return 0
  for _c in $(slurm_confs); do
    for _d in $(conf_values PluginDir "$_c" | tr ':' ' '); do
      [ "$(resolved "$_d")" = "$_pd" ] || continue
      use_conf=$_c
      use_types=$( (conf_values SelectType "$_c"; conf_values PriorityType "$_c") | grep gputopo | sort -u | tr '\n' ' ')
      [ -z "$use_types" ] || return 0
    done
  done
  return 0
}

# Running Slurm daemons that still map a gputopo .so replaced by this install.
stale_daemons() {
  for _maps in /proc/[0-9]*/maps; do
    grep -qF "$pdir/select_gputopo_cons_tres.so (deleted)" "$_maps" 2>/dev/null || continue
    _p=${_maps%/maps}
    printf ' %s (pid %s)' "$(cat "$_p/comm" 2>/dev/null)" "${_p#/proc/}"
  done
  return 0
}

build_farm() {
  "$here/install-plugin.sh" "$GPUTOPO_SO" "$pdir" --stock-dir "$1" --with-priority
  mkdir -p "$GPUTOPO_STATE_DIR"
  echo "$1" > "$state.new" && mv -f "$state.new" "$state"
}

cmd_configure() {
  upgrade= old=
  if [ "${1:-}" = --upgrade ]; then upgrade=1 old=${2:-}; fi
  find_stock > /dev/null || exit 1
  stock=$found
  build_farm "$stock"
  if [ -z "$upgrade" ]; then
    say "Slurm $GPUTOPO_RELEASE plugin directory $pdir is ready (stock plugins from $stock, found as $found_where)." \
        "To use it set PluginDir=$pdir and SelectType=select/gputopo_cons_tres in slurm.conf on" \
        "every host (see /usr/share/doc/gputopo/deployment.md), then restart the Slurm daemons"
  else
    stale=$(stale_daemons)
    say "gputopo $GPUTOPO_VERSION installed in $pdir${old:+ (was $old)}. Running Slurm daemons keep" \
        "the plugin they loaded${stale:+ (now:$stale)}; restart slurmctld, and before Slurm 25.05" \
        "slurmd on every node, to load this one"
    case $old in
      0.0.*|0.1.*)
        say "the plugin is now select/gputopo_cons_tres (was select/gputopo): change SelectType= in" \
            "slurm.conf on every host, then restart the Slurm daemons (deployment.md, Upgrading)" ;;
    esac
  fi
}

cmd_refresh() {
  if stock=$(find_stock); then
    build_farm "$stock"
  else
    say "$pdir not refreshed: its links may point at plugins that changed; see above"
  fi
}

cmd_remove() {
  final=${1:-}
  in_use
  if [ -n "$use_types" ] && [ -z "$GPUTOPO_FORCE_REMOVE" ]; then
    say "not removed: $use_conf still has PluginDir=$pdir and selects ${use_types% }, so the next" \
        "start of a Slurm daemon would fail without gputopo. First set SelectType=select/cons_tres" \
        "(and PriorityType=priority/multifactor) and PluginDir back to Slurm's own in slurm.conf on" \
        "every host and restart the daemons; or remove with GPUTOPO_FORCE_REMOVE=1 (the directory" \
        "then keeps links to the stock plugins)"
    exit 1
  fi
  if [ -n "$use_conf" ]; then
    if stock=$(find_stock 2>/dev/null); then
      "$here/install-plugin.sh" --remove "$pdir" --keep-stock --stock-dir "$stock"
    else
      "$here/install-plugin.sh" --remove "$pdir" --keep-stock
    fi
    say "$use_conf still has PluginDir=$pdir: kept it as links to Slurm's stock plugins" \
        "(select_cons_tres.so included), so the daemons keep starting. Point PluginDir back to" \
        "Slurm's own directory${stock:+ ($stock)}, then delete $pdir"
  else
    "$here/install-plugin.sh" --remove "$pdir"
  fi
  if [ -n "$final" ]; then rm -f "$state"; fi
}

case ${1:-} in
  configure) shift; cmd_configure "$@" ;;
  refresh) cmd_refresh ;;
  remove) shift; cmd_remove "$@" ;;
  stock-dir) find_stock && say "found as $found_where" ;;
  *) echo "usage: maint.sh configure [--upgrade [OLD]] | refresh | remove [--final] | stock-dir" >&2; exit 2 ;;
esac
