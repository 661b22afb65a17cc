#!/usr/bin/env bash
# Prepare what Slurm's `configure --with-nvml=PREFIX` needs to build its gpu/nvml plugin on a
# machine without NVIDIA's driver or CUDA, and print PREFIX:
#
#   PREFIX/include/nvml.h                NVIDIA's header, from the PyPI package nvidia-nvml-dev-cu12
#                                        (headers only; pip downloads it, the wheel is unzipped)
#   PREFIX/lib/stubs/libnvidia-ml.so     this project's fake NVML (crates/fake-nvml), a copy
#
# configure only compiles against the header and links a probe (`nvmlInit`) against the
# library: Slurm's gpu/nvml plugin does not link libnvidia-ml itself; slurmd dlopens
# `libnvidia-ml.so` / `libnvidia-ml.so.1` at run time, from its library path (the e2e harness
# points it at the fake there). PREFIX is ${GPUTOPO_CACHE:-/var/cache/gputopo}/nvml-dev-VERSION,
# outside the checkout; nothing from it is committed. The wheel is pinned by its SHA-256.
# FAKE_NVML_LIB names an already built fake library; otherwise it is built with cargo (the
# debug profile, which the tests build anyway).
#   contrib/nvml-dev.sh            # prepares PREFIX, prints it
#   contrib/nvml-dev.sh --prefix   # prints PREFIX only (for a build's option string)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
ver=12.9.79
sha256=8bb367913c62cb65be9ae386c58dbf573f1f9e2f01cae54abb87bf5f63c6069e
cache=${GPUTOPO_CACHE:-/var/cache/gputopo}
prefix=$cache/nvml-dev-$ver

die() { echo "nvml-dev.sh: $*" >&2; exit 1; }
[ "${1:-}" = --prefix ] && { echo "$prefix"; exit 0; }

mkdir -p "$cache"
exec 9>"$cache/.lock-nvml-dev"
flock 9

if [ ! -f "$prefix/include/nvml.h" ]; then
  pip=$(command -v pip3 || command -v pip) || die "pip is missing (apt-get install python3-pip)"
  tmp=$(mktemp -d "$cache/.nvml-dev.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  "$pip" download --quiet --no-deps --only-binary=:all: --dest "$tmp" "nvidia-nvml-dev-cu12==$ver" >&2 ||
    die "pip download nvidia-nvml-dev-cu12==$ver failed"
  whl=$(ls "$tmp"/nvidia_nvml_dev_cu12-"$ver"-*.whl 2>/dev/null | head -n 1)
  [ -n "$whl" ] || die "pip brought no nvidia_nvml_dev_cu12-$ver wheel"
  echo "$sha256  $whl" | sha256sum -c --quiet - >&2 || die "$(basename "$whl") does not match its pinned SHA-256"
  python3 - "$whl" "$tmp/x" <<'EOF' || die "cannot unpack $whl"
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    z.extract("nvidia/nvml_dev/include/nvml.h", sys.argv[2])
EOF
  mkdir -p "$prefix/include"
  mv "$tmp/x/nvidia/nvml_dev/include/nvml.h" "$prefix/include/nvml.h.tmp"
  mv "$prefix/include/nvml.h.tmp" "$prefix/include/nvml.h"
fi

lib=${FAKE_NVML_LIB:-}
if [ -z "$lib" ]; then
  t=${CARGO_TARGET_DIR:-$repo/target}
  case $t in /*) ;; *) t=$repo/$t ;; esac
  (cd "$repo" && cargo build -q -p fake-nvml) >&2 || die "cargo build -p fake-nvml failed"
  lib=$t/debug/libfake_nvml.so
fi
[ -f "$lib" ] || die "no fake NVML library at $lib"
mkdir -p "$prefix/lib/stubs"
cp "$lib" "$prefix/lib/stubs/.libnvidia-ml.so.tmp"
mv "$prefix/lib/stubs/.libnvidia-ml.so.tmp" "$prefix/lib/stubs/libnvidia-ml.so"
echo "$prefix"
