#!/usr/bin/env bash
# Build the gputopo Slurm plugin for one Slurm release and print the absolute path of the .so.
#
#   contrib/build-plugin.sh VERSION [extra cargo args...]   # 22.05.8, 24.11.5, 25.11.7, ...
#
# Slurm loads a plugin only if it was built for the exact major.minor.micro release, so each
# release gets its own build: the source tree comes from slurm-headers/fetch-slurm.sh (or
# $SLURM_SRC_DIR if set), and the target dir is ${CARGO_TARGET_DIR:-target}/slurm-VERSION so
# the releases never clobber each other ($GPUTOPO_PLUGIN_TARGET overrides it; the smoke test
# shares one across releases, since only the gputopo crate differs). Release profile. Cargo's output goes to stderr;
# stdout is only the path (last line).
set -euo pipefail

ver=${1:?usage: build-plugin.sh <version> (22.05.8, 24.11.5, or a release whose tree is cached or in SLURM_SRC_DIR) [cargo args...]}
shift
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)

src=${SLURM_SRC_DIR:-$("$repo/slurm-headers/fetch-slurm.sh" "$ver")}
target=${GPUTOPO_PLUGIN_TARGET:-${CARGO_TARGET_DIR:-$repo/target}/slurm-$ver}
SLURM_SRC_DIR=$src CARGO_TARGET_DIR=$target \
  cargo build --manifest-path "$repo/Cargo.toml" -p gputopo --release --lib "$@" >&2
so=$target/release/libgputopo.so
[ -f "$so" ] || { echo "build-plugin.sh: $so was not produced" >&2; exit 1; }
echo "$so"
