#!/usr/bin/env bash
# A site's own check: build gputopo for the exact Slurm release of this site's source tree,
# check the plugin against that tree and installation, run a short end-to-end smoke test on a
# throw-away local cluster made of the site's own Slurm binaries, and print a verdict. As root.
#
#   contrib/site-check.sh --src TREE --prefix PREFIX
#     TREE    the Slurm source tree the site's Slurm was built from (configured or not), or
#             its tarball (slurm-VERSION.tar.bz2, the one `rpmbuild -ta` builds Slurm's RPMs from)
#     PREFIX  where that Slurm is installed (PREFIX/sbin/slurmctld; /usr for Debian's packages)
#
# Steps (each reported; the verdict is PASS only if all pass):
#   build   the plugin for TREE's release (contrib/build-plugin.sh with SLURM_SRC_DIR=TREE,
#           linked against the installation's libslurmfull.so); fails with build.rs's message
#           for a release gputopo does not support
#   abi     tests/abi.rs: exported select_p_*/priority_p_* symbols against TREE's tables,
#           identity symbols, plugin_version == the tree's SLURM_VERSION_NUMBER
#   unit    the plugin library's unit tests (they dlopen the installation's stock cons_tres)
#   e2e     the foundation end-to-end tests (request forms, multi-node, arrays, steps, backfill,
#           reservations, reconfigure, restart, clients) on a local cluster with emulated GPUs
#           run by PREFIX's own munge-authenticated slurmctld/slurmd (needs munged and
#           --enable-multiple-slurmd in that build)
# Safe on a shared host: the root-owned daemons run out of a private directory (mktemp -d, mode
# 0700, under $TMPDIR or /tmp) that no other user can create, enter or replace first; the tests'
# temporary files go there too (TMPDIR). On exit, also on failure or Ctrl-C, the cluster is torn
# down (contrib/cluster.sh down: every daemon, slurmstepd and job of it, checked gone) and the
# directory removed. Nothing is installed into PREFIX or the site's PluginDir. Afterwards:
# contrib/package.sh or contrib/install-plugin.sh (docs/deployment.md).
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
die() { echo "site-check.sh: $*" >&2; exit 2; }
src= prefix=
while [ $# -gt 0 ]; do
  case $1 in
    --src) src=${2:?}; shift 2 ;;
    --prefix) prefix=${2:?}; shift 2 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d'; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
[ -n "$src" ] && [ -n "$prefix" ] || die "usage: site-check.sh --src TREE --prefix PREFIX"
[ "$(id -u)" = 0 ] || die "run as root (the smoke test starts Slurm daemons and makes device nodes)"
src=$(realpath "$src") prefix=$(realpath "$prefix")
[ -x "$prefix/sbin/slurmctld" ] || die "$prefix/sbin/slurmctld not found"
release=$("$repo/slurm-headers/prepare-tree.sh" --release "$src") || exit 2
installed=$("$prefix/sbin/slurmctld" -V | awk '{ print $NF }')
[ "$installed" = "$release" ] || die "the tree is Slurm $release but $prefix has $installed: the plugin must match the installed release exactly"
# bindgen needs slurm/slurm_version.h and config.h, which only configure writes: an
# unconfigured tree is used through a copy that has them.
work=$(realpath -m "${CARGO_TARGET_DIR:-$repo/target}/site-src-$release")
src=$("$repo/slurm-headers/prepare-tree.sh" "$src" "$work") || die "cannot prepare $src for the build"
[ "$src" = "$work" ] && echo "site-check: the tree is not configured; using a copy with the two generated headers ($work)"
lib=$(ldd "$prefix/sbin/slurmctld" | awk '$1 == "libslurmfull.so" { print $3 }')
[ -n "$lib" ] || die "$prefix/sbin/slurmctld does not link libslurmfull.so"
export PATH=$HOME/.cargo/bin:$PATH SLURM_SRC_DIR=$src SLURM_LIB_DIR=${lib%/*}
export GPUTOPO_SLURM_RELEASE=$release GPUTOPO_SLURM_PREFIX=$prefix
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$repo/target}
# The private directory: the cluster (GPUTOPO_E2E_DIR) and every temporary file of the steps.
priv=$(mktemp -d "${TMPDIR:-/tmp}/gputopo-site-check.XXXXXXXX") || die "cannot create a private directory"
chmod 0700 "$priv"
cleanup() {
  trap - EXIT INT TERM HUP
  QUIET=1 "$here/cluster.sh" down --dir "$priv/cluster" >/dev/null 2>&1 ||
    echo "site-check: cluster.sh down --dir $priv/cluster failed" >&2
  # Whatever still runs with this directory in its environment (a daemon of a cluster whose
  # bring-up died before writing cluster.env) is this run's own: killed, and said so.
  local f p left=
  for f in $(grep -lzF "SLURM_CONF=$priv/" /proc/[0-9]*/environ 2>/dev/null); do
    p=${f#/proc/}; p=${p%/environ}
    [ "$p" = $$ ] || { kill -KILL "$p" 2>/dev/null && left="$left $p"; }
  done
  [ -z "$left" ] || echo "site-check: killed processes left in $priv:$left" >&2
  rm -rf "$priv"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP
mkdir -m 0700 "$priv/tmp"
export GPUTOPO_E2E_DIR=$priv/cluster TMPDIR=$priv/tmp
log=$CARGO_TARGET_DIR/site-check-$release; mkdir -p "$log"
results=() ok=1
step() { # step NAME CMD...: run, keep the log, record the outcome and the test counts
  local name=$1; shift
  echo "=== $name: $*"
  "$@" > "$log/$name.log" 2>&1
  local rc=$? counts
  counts=$(grep -E '^test result:' "$log/$name.log" | awk '{ p += $4; f += $6 } END { if (NR) printf "%d passed, %d failed", p, f }')
  if [ "$rc" = 0 ]; then results+=("$name ok ${counts:+($counts)}")
  else results+=("$name FAILED ${counts:+($counts)} (log $log/$name.log)"); ok=0; tail -n 20 "$log/$name.log"; fi
  return "$rc"
}
if step build "$here/build-plugin.sh" "$release"; then
  export GPUTOPO_PLUGIN_SO=$CARGO_TARGET_DIR/slurm-$release/release/libgputopo.so
  step gputopo-bin cargo build --release -p gputopo-agent --bin gputopo
  export GPUTOPO_BIN=$CARGO_TARGET_DIR/release/gputopo
  step abi cargo test -p gputopo --test main
  step unit cargo test -p gputopo -p slurm-kit --lib
  GPUTOPO_E2E=1 step e2e cargo test -p gputopo --test main -- --ignored --test-threads=1 e2e::foundation
fi
echo
echo "=== site-check: Slurm $release, tree $SLURM_SRC_DIR, installation $prefix"
printf '  %s\n' "${results[@]}"
if [ "$ok" = 1 ]; then echo "VERDICT: PASS: gputopo works with this Slurm; plugin $GPUTOPO_PLUGIN_SO"; exit 0; fi
echo "VERDICT: FAIL: do not deploy gputopo on this Slurm until the failures above are understood"
exit 1
