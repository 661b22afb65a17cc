#!/usr/bin/env bash
# The README's main command: as root on a fresh Debian 12 machine (Rust installed), install
# what is missing, build Slurm and gputopo as needed, start a local cluster of DGX-1V nodes
# (8 emulated V100 GPUs each, NVLink hybrid cube-mesh) with select/gputopo, run sample GPU
# jobs, show what `scontrol show job -d` says about them, and tear everything down.
#
#   sudo contrib/demo.sh [--release 22.05.8|24.11.5] [--nodes N] [--topology NAME] [--keep]
#
# --keep leaves the cluster running (then: eval "$(contrib/cluster.sh env --dir DIR)", and
# contrib/cluster.sh down --dir DIR when done).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
repo=$(cd "$here/.." && pwd)
export PATH=$HOME/.cargo/bin:/root/.cargo/bin:$PATH
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$repo/target}
release=$(default_release) nodes=2 topology=dgx1v keep= dir=/tmp/gputopo-demo
while [ $# -gt 0 ]; do
  case $1 in
    --release) release=$2; shift 2 ;;
    --nodes) nodes=$2; shift 2 ;;
    --topology) topology=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "demo.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "demo.sh: run as root (sudo contrib/demo.sh)" >&2; exit 1; }
command -v cargo >/dev/null || { echo "demo.sh: cargo not found; install Rust (rustup.rs) first" >&2; exit 1; }

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "1/5 system packages (contrib/install-deps.sh)"
"$here/install-deps.sh"
step "2/5 Slurm $release (contrib/slurm-install.sh)"
"$here/slurm-install.sh" "$release"
step "3/5 building gputopo (the gres.conf tool and the select/gputopo_cons_tres plugin for Slurm $release)"
(cd "$repo" && cargo build --release -p gputopo-agent --bin gputopo)
export GPUTOPO_BIN=$CARGO_TARGET_DIR/release/gputopo
GPUTOPO_PLUGIN_SO=$("$here/build-plugin.sh" "$release" | tail -n 1)
export GPUTOPO_PLUGIN_SO

step "4/5 a local cluster: $nodes x $topology, select/gputopo_cons_tres (contrib/cluster.sh up)"
if [ -z "$keep" ]; then trap '"$here/cluster.sh" down --dir "$dir"' EXIT; fi
eval "$("$here/cluster.sh" up --release "$release" --nodes "$nodes" --topology "$topology" \
  --select gputopo --dir "$dir" --debug)"
sinfo -N -o '%N %T %C %G'
echo
echo "gres.conf of n1 (Links= = NVLinks to GPU 0..7; Cores= = the GPU's socket):"
grep '^NodeName=n1 ' "$dir/etc/gres.conf"

step "5/5 sample GPU jobs"
mkdir -p "$dir/jobs"
cd "$dir/jobs"
submit() { # description, sbatch args...
  local what=$1; shift
  local id
  id=$(sbatch --parsable "$@" --wrap 'srun -l bash -c "echo \$SLURMD_NODENAME CUDA_VISIBLE_DEVICES=\$CUDA_VISIBLE_DEVICES"; sleep 120')
  echo "submitted job $id: $what (sbatch $*)"
  jobs+=("$id")
}
jobs=()
submit "two nodes, 1 GPU each"              -N2 --gpus-per-node=1
submit "2 GPUs (should be an NVLink pair)"  --gres=gpu:2
submit "4 GPUs on one node"                 --gpus=4 -N1
submit "2 GPUs, 1 GPU per task"             -n2 --gpus-per-task=1
submit "an array of 2 x 1 GPU"              --array=1-2 --gres=gpu:1
for i in $(seq 300); do
  [ -z "$(squeue -h -t PENDING,CONFIGURING -o %i)" ] && break
  sleep 0.1
done
sleep 1
echo
squeue -o '%.10i %.8T %.12R %b'
for id in "${jobs[@]}"; do
  echo
  echo "--- scontrol show job -d $id"
  scontrol show job -d "$id" | grep -E 'JobId=|JobState=|NodeList=|TRES=|JOB_GRES=|Nodes=.*GRES=|TresPerJob|TresPerNode|TresPerTask'
  for out in "slurm-$id.out" "slurm-${id}"_*.out; do
    [ -s "$out" ] && sed "s/^/    step output ($out): /" "$out"
  done
done
echo
echo "--- select/gputopo in slurmctld.log (debug level):"
grep -E 'gputopo' "$dir/log/slurmctld.log" | tail -n 8 || echo "(no gputopo lines in $dir/log/slurmctld.log)"
if [ -n "$keep" ]; then
  echo
  echo "The cluster keeps running: eval \"\$(contrib/cluster.sh env --dir $dir)\"; stop it with contrib/cluster.sh down --dir $dir"
else
  step "tearing down"
fi
