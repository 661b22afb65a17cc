#!/usr/bin/env bash
# The packages' maintainer logic (contrib/pkg-maint.sh) case by case, without a package and
# without a cluster: a layout, settings file, state and plugin directory in a temporary
# directory, slurm.conf files written per case, the stock plugins of Debian's own Slurm release
# (and of the other ci release where it is installed, for a release that does not fit). As root or not;
# contrib/test-package.sh runs it first. Prints one line per check; exits non-zero on a failure.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
maint=$here/pkg-maint.sh
# shellcheck source=contrib/lib.sh
. "$here/lib.sh"
# Debian's own release (the first ci release with a plugin directory), and another ci release.
release=$(for r in $(releases ci); do release_is_debian "$r" && echo "$r"; done | head -n 1)
stock=$(release_plugin_dir "$release")
other_release=$(releases ci | grep -vxF "$release" | head -n 1)
other=$(release_plugin_dir "$other_release")
check_prefix="maint: "
# shellcheck source=contrib/checks.sh
. "$here/checks.sh"
if [ ! -f "$stock/select_cons_tres.so" ]; then
  echo "skipped: maint.sh cases (no Slurm $release in $stock)"
  exit 0
fi
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
so=$(find "${CARGO_TARGET_DIR:-$here/../target}/slurm-$release" -maxdepth 2 -name libgputopo.so 2>/dev/null | head -n 1)
[ -n "$so" ] || { so=$t/fake.so; cp "$stock/select_cons_tres.so" "$so"; }
cat > "$t/layout" <<EOF
GPUTOPO_VERSION=0.0.0+test
GPUTOPO_RELEASE=$release
GPUTOPO_SO=$so
GPUTOPO_PLUGIN_DIR=$t/farm
GPUTOPO_STOCK_CANDIDATES="$t/no-such-dir"
GPUTOPO_DEFAULTS=$t/defaults
GPUTOPO_STATE_DIR=$t/state
EOF
# maint CMD...: maint.sh on the test layout, with only the settings given here (an administrator's
# own SLURM_CONF or GPUTOPO_* must not leak in).
maint() { env -u GPUTOPO_STOCK_DIR -u GPUTOPO_FORCE_REMOVE SLURM_CONF="$t/slurm.conf" GPUTOPO_LAYOUT="$t/layout" "$@"; }
run() { out=$(maint "$@" 2>"$t/err"); rc=$?; err=$(cat "$t/err"); }

# Discovery: slurm.conf's PluginDir, spelled as Slurm allows it (case, several keys on a line,
# a colon list, an Include), wins over nothing else here.
mkdir -p "$t/conf.d"
printf 'ClusterName=c\nselecttype=select/cons_tres plugindir=/nonexistent:%s\n' "$stock" > "$t/conf.d/plugins.conf"
printf '# PluginDir=/commented/out\nInclude %s/conf.d/*.conf\n' "$t" > "$t/slurm.conf"
run "$maint" stock-dir
check "finds the stock directory through an Include'd, lowercase, colon-listed PluginDir" test "$rc" = 0 -a "$out" = "$stock"
check "  (found as the PluginDir of that slurm.conf)" grep -q "found as PluginDir of $t/slurm.conf" <<<"$err"
printf 'GPUTOPO_STOCK_DIR=%s\n' "$t/no-such-dir" > "$t/defaults"
run "$maint" stock-dir
check "an explicit GPUTOPO_STOCK_DIR is the only candidate" test "$rc" != 0
check "  and the failure says where it looked and why" grep -q "$t/no-such-dir (GPUTOPO_STOCK_DIR): no such directory" <<<"$err"
run env GPUTOPO_STOCK_DIR="$stock" "$maint" stock-dir
check "the environment wins over the settings file" test "$rc" = 0 -a "$out" = "$stock"
if [ -f "$other/select_cons_tres.so" ]; then
  run env GPUTOPO_STOCK_DIR="$other" "$maint" stock-dir
  check "a stock directory of another release is refused (plugin_version)" grep -q "Slurm $other_release, not $release" <<<"$err"
else
  echo "skipped: maint: another release's stock directory (no $other)"
fi
: > "$t/defaults"

# configure, refresh, state.
run "$maint" configure
check "configure builds the plugin directory" test "$rc" = 0 -a -f "$t/farm/select_gputopo_cons_tres.so" -a -L "$t/farm/sched_backfill.so"
check "  and remembers the stock directory" test "$(cat "$t/state/stock-dir")" = "$stock"
: > "$t/slurm.conf"
run "$maint" stock-dir
check "the remembered directory comes first" test "$rc" = 0 -a "$out" = "$stock"
check "  (found as last used)" grep -q "found as last used" <<<"$err"
rm "$t/state/stock-dir"
run "$maint" stock-dir
check "without state, the directory the plugin directory links to comes first" grep -q "found as linked from $t/farm" <<<"$err"
printf 'GPUTOPO_STOCK_DIR=%s\n' "$t/no-such-dir" > "$t/defaults"
run "$maint" refresh
check "refresh without a stock directory warns and succeeds (a trigger must not fail)" test "$rc" = 0
check "  saying so" grep -q "not refreshed" <<<"$err"
: > "$t/defaults"

# Removal and slurm.conf.
printf 'PluginDir=%s\nSelectType=select/cons_tres\nPriorityType=priority/gputopo\n' "$t/farm" > "$t/slurm.conf"
run "$maint" remove
check "removal is refused while slurm.conf names the directory and PriorityType=priority/gputopo" test "$rc" != 0
check "  naming the plugin type" grep -q "selects priority/gputopo" <<<"$err"
check "  and leaving the directory as it was" test -f "$t/farm/select_gputopo_cons_tres.so"
run env GPUTOPO_FORCE_REMOVE=1 "$maint" remove
check "GPUTOPO_FORCE_REMOVE=1 removes anyway" test "$rc" = 0 -a ! -e "$t/farm/select_gputopo_cons_tres.so"
check "  keeping the stock links, select_cons_tres.so included" test "$(readlink "$t/farm/select_cons_tres.so")" = "$stock/select_cons_tres.so" -a -L "$t/farm/sched_backfill.so"
run "$maint" configure
check "a new install takes the directory back (no select_cons_tres.so link)" test "$rc" = 0 -a -f "$t/farm/select_gputopo_cons_tres.so" -a ! -e "$t/farm/select_cons_tres.so"
printf 'PluginDir=%s\nSelectType=select/cons_tres\n' "$stock" > "$t/slurm.conf"
run "$maint" remove --final
check "removal with no slurm.conf naming the directory empties it" test "$rc" = 0 -a -z "$(ls -A "$t/farm")"
check "  and --final drops the state" test ! -e "$t/state/stock-dir"

echo "maint: $passed passed, $failed failed"
[ "$failed" = 0 ]
