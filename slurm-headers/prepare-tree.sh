#!/usr/bin/env bash
# Make a Slurm source tree usable by the plugin build (crates/slurm-kit/build.rs runs bindgen over its headers)
# and print its path.
#
#   slurm-headers/prepare-tree.sh SOURCE DEST       # SOURCE: a tree or a tarball (.tar.bz2/gz/xz)
#   slurm-headers/prepare-tree.sh SOURCE --in-place # SOURCE: a tree this caller may write to
#   slurm-headers/prepare-tree.sh --release SOURCE  # only print SOURCE's release (from META)
#
# bindgen needs two headers only `configure` writes: config.h and slurm/slurm_version.h. Their
# content does not depend on configure's options for the parts gputopo reads, so an
# unconfigured tree (the tarball a site builds its Slurm RPMs or packages from) gets an empty
# config.h and a slurm_version.h made from META. A tree that has both is used as it is (SOURCE
# is printed); otherwise DEST receives a copy (or the tarball's content) with the two files
# added, and DEST is printed. SOURCE is never written to, except with --in-place.
set -euo pipefail

die() { echo "prepare-tree.sh: $*" >&2; exit 1; }

# meta_release TREE|TARBALL: MAJOR.MINOR.MICRO from META, as SLURM_VERSION_STRING spells it.
meta_release() {
  local meta
  if [ -d "$1" ]; then
    meta=$(cat "$1/META" 2>/dev/null) || die "$1 is not a Slurm source tree (no META)"
  else
    meta=$(tar -xOf "$1" --wildcards --no-wildcards-match-slash '*/META' 2>/dev/null) ||
      die "$1 is not a Slurm source tarball (no */META)"
  fi
  awk '$1 == "Major:" { M = $2 } $1 == "Minor:" { m = $2 } $1 == "Micro:" { u = $2 }
       END { if (M == "" || m == "" || u == "") exit 1; printf "%d.%02d.%d\n", M, m, u }' <<<"$meta" ||
    die "$1: META has no Major/Minor/Micro"
}

if [ "${1:-}" = --release ]; then
  meta_release "${2:?usage: prepare-tree.sh --release SOURCE}"
  exit 0
fi
src=${1:?usage: prepare-tree.sh SOURCE DEST|--in-place}
dest=${2:?usage: prepare-tree.sh SOURCE DEST|--in-place}
[ -e "$src" ] || die "no such Slurm source: $src"
release=$(meta_release "$src")

if [ -d "$src" ] && [ -f "$src/config.h" ] && [ -f "$src/slurm/slurm_version.h" ]; then
  cd "$src" && pwd -P
  exit 0
fi
if [ "$dest" = --in-place ]; then
  [ -d "$src" ] || die "--in-place needs a tree, not $src"
  tree=$src
else
  rm -rf "$dest"
  mkdir -p "$dest"
  if [ -d "$src" ]; then
    cp -a "$src/." "$dest/"
  else
    tar -xf "$src" -C "$dest" --strip-components=1
  fi
  tree=$dest
fi
[ -f "$tree/config.h" ] || : > "$tree/config.h"
if [ ! -f "$tree/slurm/slurm_version.h" ]; then
  IFS=. read -r major minor micro <<<"$release"
  printf '#ifndef _SLURM_VERSION_H_\n#define _SLURM_VERSION_H_\n#define SLURM_VERSION_NUMBER 0x%02x%02x%02x\n#define SLURM_VERSION_NUM(a,b,c) (((a) << 16) + ((b) << 8) + (c))\n#define SLURM_VERSION_MAJOR(a) (((a) >> 16) & 0xff)\n#define SLURM_VERSION_MINOR(a) (((a) >> 8) & 0xff)\n#define SLURM_VERSION_MICRO(a) ((a) & 0xff)\n#define SLURM_VERSION_STRING "%s"\n#endif\n' \
    "$((10#$major))" "$((10#$minor))" "$((10#$micro))" "$release" > "$tree/slurm/slurm_version.h"
fi
cd "$tree" && pwd -P
