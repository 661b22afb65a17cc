#!/usr/bin/env bash
# Install a built gputopo plugin into a gputopo plugin directory (the PluginDir= of slurm.conf).
#
#   contrib/install-plugin.sh SO DIR [--release VERSION | --stock-dir D] [--with-priority]
#   contrib/install-plugin.sh --remove DIR [--keep-stock [--stock-dir D]]
#
# --remove takes gputopo out of DIR: its .so, priority_gputopo.so, a select_gputopo.so of
# gputopo < 0.2 and temporary files of an interrupted install. A plugin farm's stock links go
# too, unless --keep-stock: then DIR stays a complete plugin directory of Slurm's own plugins
# (the links refreshed from D when given, and a link to select_cons_tres.so added, which is no
# longer a duplicate plugin_id 109), for a slurm.conf whose PluginDir still names DIR (the
# packages' prerm, contrib/pkg-maint.sh). In Slurm's own plugin directory (a 25.05+ install)
# only gputopo's files are removed.
#
# Two layouts, chosen by the release the .so was built for (docs/deployment.md):
# - Slurm 22.05 to 24.11 (22.05, 23.11, 24.05, 24.11) load every select_*.so of PluginDir in every
#   process and fatal on a duplicate plugin_id, so DIR must be a gputopo plugin directory (the
#   "farm" below).
# - From 25.05 only slurmctld loads a select plugin, and only the one SelectType names: DIR may be
#   Slurm's own PluginDir (the stock dir D), and the .so is simply renamed into place there.
#   Such a .so is recognised by its select table (no select_p_select_nodeinfo_alloc, which 25.05
#   removed together with the other client-side entry points). A farm still works on 25.05+.
#
# Deployment (docs/deployment.md): select/gputopo_cons_tres exports plugin_id 109, the id of
# select/cons_tres, so the two cannot share a PluginDir (Slurm fatals on a duplicate id). DIR
# therefore becomes a "plugin farm": DIR/select_gputopo_cons_tres.so plus a symlink to every stock
# plugin of D except select_cons_tres.so; slurm.conf sets PluginDir=DIR and
# SelectType=select/gputopo_cons_tres (the name contains "cons_tres": Slurm gates some cons_tres
# features on that text). A select_gputopo.so left by a gputopo before 0.2 (plugin type
# select/gputopo) is removed: it would be a second plugin with id 109 in DIR.
# gputopo dlopens the real select_cons_tres.so from D by absolute path (it finds D as the
# directory of libslurmfull.so, see src/plugin/select/stock.rs).
#
# D defaults to the stock plugin dir of --release, else to the RUNPATH the .so was linked with
# (the libslurmfull directory of its release). The .so is copied to a temporary name in DIR
# and renamed over select_gputopo_cons_tres.so (a new inode: a running daemon keeps its mapped
# copy; overwriting a loaded .so in place crashes it). --with-priority also links
# priority_gputopo.so -> select_gputopo_cons_tres.so (one file, two roles).
set -euo pipefail

die() { echo "install-plugin.sh: $*" >&2; exit 1; }

[ $# -ge 2 ] || die "usage: install-plugin.sh SO DIR [--release V | --stock-dir D] [--with-priority] | --remove DIR [--keep-stock [--stock-dir D]]"
so=$1 dir=$2
shift 2
stock= priority= keep_stock=
while [ $# -gt 0 ]; do
  case $1 in
    --stock-dir) stock=${2:?--stock-dir needs a directory}; shift 2 ;;
    --release)
      # The checkout's release table (a package installs this script alone: it uses --stock-dir).
      [ -r "$(dirname "$0")/lib.sh" ] || die "--release needs the checkout's contrib/lib.sh; use --stock-dir"
      . "$(dirname "$0")/lib.sh"
      stock=$(release_plugin_dir "${2:?--release needs a version}")
      shift 2 ;;
    --with-priority) priority=1; shift ;;
    --keep-stock) keep_stock=1; shift ;;
    *) die "unknown argument $1" ;;
  esac
done

# link_stock: a symlink in $dir to every stock plugin of $stock except the ones named in "$@"
# (replaced in place, never removed first, so a daemon that loads a plugin meanwhile still finds
# it), then links that match no stock plugin of $stock removed (another stock dir, a plugin gone
# in an upgrade, and the excluded names).
link_stock() {
  local f base l
  for f in "$stock"/*.so; do
    base=${f##*/}
    case " $* " in *" $base "*) continue ;; esac
    case $base in lib*.so) continue ;; esac
    [ "$(readlink "$dir/$base" 2>/dev/null)" = "$f" ] || ln -sfn "$f" "$dir/$base"
  done
  for l in "$dir"/*.so; do
    [ -L "$l" ] || continue
    base=${l##*/}
    [ "$base" != priority_gputopo.so ] || continue
    case " $* " in *" $base "*) rm -f "$l"; continue ;; esac
    [ "$(readlink "$l")" = "$stock/$base" ] || rm -f "$l"
  done
}

if [ "$so" = --remove ]; then
  [ -d "$dir" ] || exit 0
  dir=$(cd "$dir" && pwd -P)
  rm -f "$dir/select_gputopo_cons_tres.so" "$dir/select_gputopo.so" "$dir"/.select_gputopo_cons_tres.so.* \
    "$dir/.priority_gputopo.so.new"
  [ ! -L "$dir/priority_gputopo.so" ] || rm -f "$dir/priority_gputopo.so"
  if [ -f "$dir/select_cons_tres.so" ] && [ ! -L "$dir/select_cons_tres.so" ]; then
    echo "install-plugin.sh: removed gputopo from Slurm's plugin directory $dir" >&2
  elif [ -n "$keep_stock" ]; then
    if [ -n "$stock" ]; then
      [ -f "$stock/select_cons_tres.so" ] || die "$stock has no select_cons_tres.so (wrong --stock-dir?)"
      stock=$(cd "$stock" && pwd -P)
      link_stock
    fi
    echo "install-plugin.sh: removed gputopo from $dir; it keeps links to Slurm's stock plugins" >&2
  else
    find "$dir" -mindepth 1 -maxdepth 1 -type l -name '*.so' -delete
    echo "install-plugin.sh: removed gputopo and the stock plugin links from $dir" >&2
  fi
  exit 0
fi

[ -f "$so" ] || die "no such plugin: $so"
if [ -z "$stock" ]; then
  stock=$(readelf -d "$so" 2>/dev/null | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p' | cut -d: -f1)
  [ -n "$stock" ] || die "cannot tell the stock plugin dir of $so; pass --stock-dir or --release"
fi
[ -f "$stock/select_cons_tres.so" ] || die "$stock has no select_cons_tres.so (wrong --stock-dir?)"
stock=$(cd "$stock" && pwd -P)
mkdir -p "$dir"
dir=$(cd "$dir" && pwd -P)
only_ctld_loads=
nm -D --defined-only "$so" | grep -q ' select_p_select_nodeinfo_alloc$' || only_ctld_loads=1
[ "$dir" != "$stock" ] || [ -n "$only_ctld_loads" ] ||
  die "DIR must not be the stock plugin dir before Slurm 25.05 (duplicate plugin_id 109); use a gputopo plugin dir"

# The farm: a symlink to every stock plugin except select_cons_tres.so. Links are replaced in
# place (never removed first), so a daemon that loads a plugin while this runs still finds it;
# links that no longer match a stock plugin (another stock dir, a plugin gone in an upgrade,
# a select_cons_tres.so link) are removed afterwards.
if [ "$dir" != "$stock" ]; then
  link_stock select_cons_tres.so select_gputopo_cons_tres.so select_gputopo.so priority_gputopo.so
fi

# The file name before 0.2. Removed first: next to the new file it would be a second select
# plugin with id 109, fatal for every Slurm process before 25.05.
if [ -e "$dir/select_gputopo.so" ]; then
  rm -f "$dir/select_gputopo.so"
  echo "install-plugin.sh: removed $dir/select_gputopo.so (the plugin is now select/gputopo_cons_tres: set SelectType=select/gputopo_cons_tres in slurm.conf)" >&2
fi
tmp=$(mktemp "$dir/.select_gputopo_cons_tres.so.XXXXXX")
trap 'rm -f "$tmp"' EXIT
cp "$so" "$tmp"
chmod 0755 "$tmp"
mv -f "$tmp" "$dir/select_gputopo_cons_tres.so"
trap - EXIT
if [ -n "$priority" ]; then
  # A new link renamed over the old one: never a moment without priority_gputopo.so.
  ln -sfn select_gputopo_cons_tres.so "$dir/.priority_gputopo.so.new"
  mv -Tf "$dir/.priority_gputopo.so.new" "$dir/priority_gputopo.so"
fi
echo "install-plugin.sh: $dir/select_gputopo_cons_tres.so (stock plugins from $stock)" >&2
