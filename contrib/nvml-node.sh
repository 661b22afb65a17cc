#!/usr/bin/env bash
# Run a command (an emulated node's slurmd) as if its host had the GPUs of a fake-NVML fixture:
#
#   contrib/nvml-node.sh SCRATCH FIXTURE -- COMMAND [ARGS...]
#
# - NVML: the project's fake libnvidia-ml ($FAKE_NVML_LIB) is on the library path as
#   libnvidia-ml.so and libnvidia-ml.so.1 (SCRATCH/lib), the names slurmd dlopens for
#   gres.conf AutoDetect=nvml, answering from FIXTURE (FAKE_NVML_FIXTURE);
# - the driver's files: in a private mount namespace (unshare -m), /proc/driver gets the
#   fixture's nvidia/gpus/<bus>/information and nvidia-caps/mig-minors, /sys/bus/pci/drivers
#   its nvidia/<bus>/local_cpulist (what AutoDetect=nvidia reads), and /dev an overlay with
#   /dev/nvidia<minor>, /dev/nvidiactl and the MIG instances' /dev/nvidia-caps/nvidia-cap<N>
#   (/dev/pts, /dev/shm and /dev/mqueue stay the host's). The host's own /dev, /proc and /sys
#   are untouched, so nodes with different fixtures run side by side on one host; every child
#   (slurmstepd, the health check) sees the same files.
#
# The tree comes from fake-nvml-tree (built with the library: same target directory). A
# daemon that forks keeps the namespace alive; it goes away with its last process.
set -euo pipefail

die() { echo "nvml-node.sh: $*" >&2; exit 1; }
[ $# -ge 4 ] && [ "$3" = -- ] || die "usage: nvml-node.sh SCRATCH FIXTURE -- COMMAND [ARGS...]"
scratch=$1 fixture=$(realpath "$2")
shift 3
[ "$(id -u)" = 0 ] || die "run as root (mount namespace, mknod)"
lib=${FAKE_NVML_LIB:?nvml-node.sh: FAKE_NVML_LIB must name the fake libnvidia-ml (libfake_nvml.so)}
lib=$(realpath "$lib")
tree_bin=${FAKE_NVML_TREE:-$(dirname "$lib")/fake-nvml-tree}
[ -x "$tree_bin" ] || die "no fake-nvml-tree next to $lib (cargo build -p fake-nvml)"

rm -rf "$scratch/tree" "$scratch/lib"
mkdir -p "$scratch/lib" "$scratch/ovl"
scratch=$(realpath "$scratch")
ln -s "$lib" "$scratch/lib/libnvidia-ml.so"
ln -s "$lib" "$scratch/lib/libnvidia-ml.so.1"
# Slurm maps NVML's CPU affinity (and gpu/nvidia's local_cpulist) onto the CPUs the host has;
# an emulated node's fixture names CPUs this host may not have (Slurm then gives the GPU no
# cores, and GPU jobs no longer fit), so every GPU is near all of the host's CPUs
# (FAKE_NVML_CPUS, for the fake and the tree; Cores= are not emulated).
export FAKE_NVML_CPUS=${FAKE_NVML_CPUS:-$(nproc --all)}
"$tree_bin" "$fixture" "$scratch/tree" || die "fake-nvml-tree $fixture failed"
export FAKE_NVML_FIXTURE=$fixture LD_LIBRARY_PATH=$scratch/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
exec unshare -m --propagation private -- bash -euc '
  s=$1; shift
  mount -t tmpfs -o mode=755 gputopo-nvml "$s/ovl"
  mkdir -p "$s/ovl/upper" "$s/ovl/work" "$s/ovl/dev"
  mount -t overlay gputopo-nvml-dev -o "lowerdir=/dev,upperdir=$s/ovl/upper,workdir=$s/ovl/work" "$s/ovl/dev"
  while read -r path major minor; do
    mkdir -p "$(dirname "$s/ovl/dev/$path")"
    rm -f "$s/ovl/dev/$path"
    mknod -m 666 "$s/ovl/dev/$path" c "$major" "$minor"
  done < "$s/tree/dev.list"
  for sub in pts shm mqueue; do
    if mountpoint -q "/dev/$sub"; then mount --rbind "/dev/$sub" "$s/ovl/dev/$sub"; fi
  done
  mount --move "$s/ovl/dev" /dev
  mount -t tmpfs -o mode=755 gputopo-nvml-proc /proc/driver
  cp -a "$s/tree/proc/." /proc/driver/
  mount -t tmpfs -o mode=755 gputopo-nvml-sys /sys/bus/pci/drivers
  cp -a "$s/tree/sys/." /sys/bus/pci/drivers/
  exec "$@"
' nvml-node "$scratch" "$@"
