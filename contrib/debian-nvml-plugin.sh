#!/usr/bin/env bash
# Debian 12's own gpu/nvml plugin for its Slurm 22.05.8, for AutoDetect=nvml on 22.05.8 in the
# e2e harness, and print the path of its gpu_nvml.so:
#
#   contrib/debian-nvml-plugin.sh          # fetch once (cached), print the path
#   contrib/debian-nvml-plugin.sh --path   # print the path only (it may not exist)
#
# Debian builds the plugin from the source package slurm-wlm-contrib into the package
# slurm-wlm-nvml-plugin, in the archive's `contrib` section (it needs NVIDIA's non-free NVML to
# build). It depends on slurm-wlm-basic-plugins (= 22.05.8-4+deb12u2), while the main section
# now carries 22.05.8-4+deb12u3, so apt cannot install it beside the installed packages; Slurm
# itself checks only the release (22.05.8) when it loads a plugin. So the package is downloaded
# with apt from the same archive the machine's apt sources name, with their component switched
# to contrib in a private apt configuration (the system's sources and lists are not touched),
# checked against its pinned SHA-256, and only gpu_nvml.so is unpacked under
# ${GPUTOPO_CACHE:-/var/cache/gputopo}, outside the checkout. contrib/cluster.sh links it into
# a cluster's plugin directory for nodes started with --nvml; Debian's 22.05.8 slurmd (patch
# force-nvml) then dlopens libnvidia-ml.so, the fake on that node's library path.
set -euo pipefail

ver=22.05.8-4+deb12u2
sha256=6538622e7585636e21d26c66c52e01fca1db8340ebe61af03df2e74d92406caf
cache=${GPUTOPO_CACHE:-/var/cache/gputopo}
dest=$cache/debian-nvml-plugin-$ver
so=$dest/gpu_nvml.so

die() { echo "debian-nvml-plugin.sh: $*" >&2; exit 1; }
[ "${1:-}" = --path ] && { echo "$so"; exit 0; }
[ -f "$so" ] && { echo "$so"; exit 0; }
[ "$(id -u)" = 0 ] || die "run as root (apt-get)"

mkdir -p "$cache"
exec 9>"$cache/.lock-debian-nvml-plugin"
flock 9
[ -f "$so" ] && { echo "$so"; exit 0; }

tmp=$(mktemp -d "$cache/.debian-nvml.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/parts" "$tmp/lists/partial" "$tmp/cache/archives/partial"
# The machine's own Debian sources, component contrib.
found=
for f in /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] || continue
  sed 's/^Components:.*/Components: contrib/' "$f" > "$tmp/parts/$(basename "$f")"
  found=1
done
if [ -f /etc/apt/sources.list ] && grep -q '^deb ' /etc/apt/sources.list; then
  grep '^deb ' /etc/apt/sources.list | awk '{ $NF = ""; print $0 " contrib" }' > "$tmp/parts/contrib.list"
  found=1
fi
[ -n "$found" ] || die "no apt sources found (/etc/apt/sources.list{,.d})"
opts=(-o "Dir::Etc::sourcelist=/dev/null" -o "Dir::Etc::sourceparts=$tmp/parts"
      -o "Dir::State::Lists=$tmp/lists" -o "Dir::Cache=$tmp/cache" -o "APT::Sandbox::User=root")
apt-get "${opts[@]}" -q update >&2 || die "apt-get update (contrib) failed"
(cd "$tmp" && apt-get "${opts[@]}" -q download "slurm-wlm-nvml-plugin=$ver") >&2 ||
  die "apt-get download slurm-wlm-nvml-plugin=$ver failed"
deb=$(ls "$tmp"/slurm-wlm-nvml-plugin_*.deb)
echo "$sha256  $deb" | sha256sum -c --quiet - >&2 || die "$(basename "$deb") does not match its pinned SHA-256"
dpkg-deb -x "$deb" "$tmp/x"
mkdir -p "$dest"
cp "$tmp/x/usr/lib/x86_64-linux-gnu/slurm-wlm/gpu_nvml.so" "$so.tmp"
mv "$so.tmp" "$so"
echo "$so"
