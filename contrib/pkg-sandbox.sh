#!/usr/bin/env bash
# A scratch host for the package tests (contrib/test-package.sh): runs a command, as root, in a
# private mount namespace where /usr, /etc, /var, /opt and /root are copy-on-write layers
# (overlayfs) over this host's. dpkg -i, rpm -i, their maintainer scripts and whatever they
# install or change land in a private scratch directory: other users of this host (other test
# runs, other clusters) never see the package, and nothing of it stays afterwards.
#
#   contrib/pkg-sandbox.sh [--relocate OLD NEW] CMD [ARGS...]
#
# --relocate OLD NEW emulates a host whose Slurm lives under another prefix: the Slurm installed
# under prefix OLD (bin, sbin, lib) is copied to NEW, a path of the same length, with every
# compiled-in path (RUNPATH, the default plugin and sbin directories, ...) rewritten from OLD to
# NEW, and OLD is hidden under an empty directory; inside, that Slurm exists only under NEW.
#
# Processes the command leaves running (a daemon of a cluster it did not take down) are found
# by their mount namespace, which is this run's own, and killed; the scratch directory is then
# removed. The command's exit status is this script's.
set -euo pipefail

die() { echo "pkg-sandbox.sh: $*" >&2; exit 1; }

if [ "${1:-}" = --inside ]; then
  # In the new namespace: the layers, then the relocation, then the command.
  shift
  scratch=$1 old=$2 new=$3
  shift 3
  readlink /proc/self/ns/mnt > "$scratch/ns"
  for d in usr etc var opt root; do
    [ -d "/$d" ] || continue
    # Mounts below /$d (a bind-mounted /etc/hosts in a container) are put back on top.
    mapfile -t subs < <(findmnt -rn -o TARGET -R "/$d" | tail -n +2)
    i=0
    for m in "${subs[@]}"; do
      mkdir -p "$scratch/keep"
      if [ -d "$m" ]; then mkdir "$scratch/keep/$d.$i"; mount --rbind "$m" "$scratch/keep/$d.$i"
      else touch "$scratch/keep/$d.$i.f"; mount --bind "$m" "$scratch/keep/$d.$i.f"; fi
      i=$((i + 1))
    done
    mkdir -p "$scratch/$d.up" "$scratch/$d.work"
    mount -t overlay "gputopo-sandbox-$d" -o "lowerdir=/$d,upperdir=$scratch/$d.up,workdir=$scratch/$d.work" "/$d"
    i=0
    for m in "${subs[@]}"; do
      if [ -e "$scratch/keep/$d.$i.f" ]; then mount --bind "$scratch/keep/$d.$i.f" "$m"
      else mount --rbind "$scratch/keep/$d.$i" "$m"; fi
      i=$((i + 1))
    done
  done
  # The scratch host is one the agent never ran on: state a gputopo agent left on this host
  # (sticky XIDs in /var/lib/gputopo) is no package's file, and the removal checks would find
  # it. Gone in the copy-on-write layer only.
  rm -rf /var/lib/gputopo
  if [ -n "$old" ]; then
    mkdir -p "$new"
    tar -C "$old" --exclude='*.a' --exclude='*.la' --exclude=lib/slurm/src -cf - bin sbin lib | tar -C "$new" -xf -
    # Same-length replacement keeps every offset in the ELF files valid.
    grep -rlF --null "$old" "$new" | xargs -0 -r env LC_ALL=C perl -0777 -pi -e "s{\\Q$old\\E}{$new}g"
    mount -t tmpfs -o mode=0755,size=1m gputopo-sandbox-hidden "$old"
  fi
  exec "$@"
fi

[ "$(id -u)" = 0 ] || die "run as root (mount namespaces, overlayfs)"
old= new=
if [ "${1:-}" = --relocate ]; then
  old=$(realpath "${2:?--relocate needs OLD NEW}") new=${3:?--relocate needs OLD NEW}
  shift 3
  [ -x "$old/sbin/slurmctld" ] || die "$old has no sbin/slurmctld"
  [ "${#old}" = "${#new}" ] || die "--relocate: $new must be as long as $old (${#old} characters)"
  case $new in /opt/*) ;; *) die "--relocate: NEW must be under /opt (a copy-on-write layer here)" ;; esac
fi
[ $# -gt 0 ] || die "usage: pkg-sandbox.sh [--relocate OLD NEW] CMD [ARGS...]"
grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null || die "no overlayfs in this kernel"

scratch=$(mktemp -d "${TMPDIR:-/tmp}/gputopo-pkg-sandbox.XXXXXXXX")
cleanup() {
  local ns p left=
  ns=$(cat "$scratch/ns" 2>/dev/null || true)
  if [ -n "$ns" ]; then
    for p in /proc/[0-9]*; do
      [ "$(readlink "$p/ns/mnt" 2>/dev/null)" = "$ns" ] || continue
      kill -KILL "${p#/proc/}" 2>/dev/null && left="$left ${p#/proc/}($(cat "$p/comm" 2>/dev/null))"
    done
    [ -z "$left" ] || echo "pkg-sandbox.sh: killed processes left in the sandbox:$left" >&2
    sleep 0.2
  fi
  rm -rf "$scratch"
}
trap cleanup EXIT
rc=0
unshare --mount --propagation private -- "$0" --inside "$scratch" "$old" "$new" "$@" || rc=$?
exit "$rc"
