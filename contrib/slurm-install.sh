#!/usr/bin/env bash
# Make one supported Slurm release runnable on this machine and print its install prefix.
#
#   contrib/slurm-install.sh 22.05.8   # Debian 12's packages (prefix /usr)
#   contrib/slurm-install.sh 24.11.5   # built from source once, cached under /var/cache/gputopo
#   contrib/slurm-install.sh 25.11.7   # any other release: the site's own install, if stamped
#
# A release whose source no package registry serves (25.05.8, 25.11.7, 26.05.3, ...) is never
# fetched or built here: if the site installed it under the cache path below with the same
# configure options and stamp, its prefix is printed; otherwise the script says how to do that.
#
# 24.11.5 is configured with --enable-multiple-slurmd (the local harness runs several slurmd
# on one host) and installed under ${GPUTOPO_CACHE:-/var/cache/gputopo}/slurm-24.11.5, outside
# the checkout. The build runs on a copy of the tree from slurm-headers/fetch-slurm.sh, so that
# tree stays pristine for bindgen. A stamp file marks a finished install; later calls return at
# once. configure finds mariadb_config (libmariadb-dev) by itself and then also builds the
# accounting_storage/mysql plugin slurmdbd needs; --with-json (libjson-c-dev) builds serializer/json,
# which SchedulerParameters=extra_constraints and `sbatch --extra` need. --with-nvml builds the
# gpu/nvml plugin (gres.conf AutoDetect=nvml) against NVIDIA's header and the project's fake
# libnvidia-ml (contrib/nvml-dev.sh, cached outside the checkout); slurmd loads NVML only on a
# node whose gres.conf says AutoDetect=nvml, every other node keeps gpu/generic. The build log
# is kept next to the install (build.log) for failures.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
ver=${1:?usage: slurm-install.sh <version> (a release of slurm-headers/releases.tsv)}
cache=${GPUTOPO_CACHE:-/var/cache/gputopo}
. "$here/lib.sh"

case $ver in
  [0-9]*.[0-9]*.[0-9]*) ;;
  *) echo "slurm-install.sh: '$ver' is not a Slurm release (MAJOR.MINOR.MICRO)" >&2; exit 2 ;;
esac
# A release the table installs from Debian 12's packages (it names their plugin directory).
if [ -n "$(release_field "$ver" 4)" ]; then
  if [ "$(dpkg-query -W -f='${Version}' slurmctld 2>/dev/null)" != "$(release_field "$ver" 5)" ] ||
     [ "$(dpkg-query -W -f='${Status}' slurmd 2>/dev/null)" != "install ok installed" ]; then
    "$here/install-deps.sh" >&2
  fi
  /usr/sbin/slurmctld -V | grep -q "slurm-wlm $ver\|slurm $ver" ||
    { echo "slurm-install.sh: /usr/sbin/slurmctld is not $ver: $(/usr/sbin/slurmctld -V)" >&2; exit 1; }
  # Debian's gpu/nvml plugin (contrib section) for AutoDetect=nvml in the harness; without it
  # those tests report "skipped".
  "$here/debian-nvml-plugin.sh" >/dev/null ||
    echo "slurm-install.sh: warning: Debian's gpu/nvml plugin is not available; AutoDetect=nvml tests on $ver will be skipped" >&2
  echo /usr
  exit 0
fi

prefix=$cache/slurm-$ver
stamp=$prefix/.gputopo-installed
# The stamp holds the build's options: a cached build made with other options is rebuilt.
options="--disable-debug --enable-multiple-slurmd --with-munge --with-json=/usr --with-nvml=$("$here/nvml-dev.sh" --prefix)"
built() { [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$options" ]; }
if built; then echo "$prefix"; exit 0; fi
# Only a CI release of the table is built from a registry's source here.
if [ "$(release_field "$ver" 3)" != ci ]; then
  cat >&2 <<EOM
slurm-install.sh: Slurm $ver is not installed at $prefix, and no package registry serves its
source. Build it from your own tree (as this script builds 24.11.5): run contrib/nvml-dev.sh
(NVML's header and the fake library for --with-nvml), then in a copy of the tree,
  ./configure --prefix=$prefix --sysconfdir=$prefix/etc $options
  make && make install
  echo "$options" > $stamp
and unpack the pristine tree at ${cache}/src/slurm-$ver for bindgen (slurm-headers/fetch-slurm.sh $ver).
EOM
  exit 2
fi

mkdir -p "$cache"
exec 8>"$cache/.lock-install-$ver"
flock 8
if built; then echo "$prefix"; exit 0; fi

src=$("$here/../slurm-headers/fetch-slurm.sh" "$ver")
"$here/nvml-dev.sh" >/dev/null || { echo "slurm-install.sh: contrib/nvml-dev.sh failed" >&2; exit 1; }
build=$cache/build/slurm-$ver
rm -rf "$build" "$prefix"
mkdir -p "$cache/build" "$prefix"
log=$prefix/build.log
start=$(date +%s)
echo "slurm-install.sh: building Slurm $ver into $prefix (log: $log); this takes ~5-10 min" >&2
cp -a "$src" "$build"
# fetch-slurm.sh adds an empty config.h and a slurm_version.h for bindgen; configure writes its own.
rm -f "$build/config.h" "$build/slurm/slurm_version.h" "$build/.gputopo-ready"

fail() { echo "slurm-install.sh: $1 failed; last lines of $log:" >&2; tail -n 30 "$log" >&2; exit 1; }
# shellcheck disable=SC2086
(cd "$build" && ./configure --prefix="$prefix" --sysconfdir="$prefix/etc" $options) >"$log" 2>&1 ||
  fail configure
grep -q '^#define MULTIPLE_SLURMD 1' "$build/config.h" || fail "configure --enable-multiple-slurmd"
grep -q '^#define HAVE_JSON_C 1\|^#define HAVE_JSON 1' "$build/config.h" || fail "configure --with-json (libjson-c-dev missing?)"
grep -q '^#define HAVE_NVML 1' "$build/config.h" || fail "configure --with-nvml"
grep -q '^#define HAVE_MIG_SUPPORT 1' "$build/config.h" || fail "configure --with-nvml (no MIG support)"
make -C "$build" -j"$(nproc)" >>"$log" 2>&1 || fail make
make -C "$build" install >>"$log" 2>&1 || fail "make install"
"$prefix/sbin/slurmctld" -V | grep -q "slurm $ver" || fail "version check"
# serializer/json: needed by SchedulerParameters=extra_constraints and --extra.
[ -f "$prefix/lib/slurm/serializer_json.so" ] || fail "serializer/json plugin"
[ -f "$prefix/lib/slurm/gpu_nvml.so" ] || fail "gpu/nvml plugin"
rm -rf "$build"
echo "built in $(( $(date +%s) - start )) s" >> "$log"
echo "$options" > "$stamp"
echo "$prefix"
