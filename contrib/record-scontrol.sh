#!/usr/bin/env bash
# Record the `scontrol` output that `gputopo nodes` and `gputopo metrics` read, from a real
# cluster: tests/fixtures/scontrol/RELEASE/{nodes,jobs}.txt (the unit tests' data and the seed
# of the metrics benchmark's 1,000-node data set, benches/metrics.rs).
#
#   contrib/record-scontrol.sh 22.05.8|24.11.5 [DIR]     # as root; DIR default /tmp/gputopo-record
#
# Four DGX-1V nodes under select/gputopo, each published by `gputopo publish` against a fake-NVML
# fixture (n1 dgx1v-faults: GPU 5 ECC-faulty, GPU 6 lost; n2 dgx1v-telemetry: warm GPUs and two
# NVLinks down; n3 dgx1v-healthy; n4 xid-storm: XID 79 on GPU 1, no NVML device for 2-7), then
# six running jobs (1, 2, 3 and 4 GPUs, a 2-node job, --gpus=3) and three waiting for 8 GPUs per
# node. Needs the plugin (GPUTOPO_PLUGIN_SO or contrib/build-plugin.sh), target/release/gputopo
# and target/debug/libfake_nvml.so (cargo build --release -p gputopo-agent; cargo build -p fake-nvml).
set -euo pipefail
rel=${1:?usage: record-scontrol.sh RELEASE [DIR]}
dir=${2:-/tmp/gputopo-record}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
bin=$repo/target/release/gputopo
lib=$repo/target/debug/libfake_nvml.so
for f in "$bin" "$lib"; do
  [ -e "$f" ] || { echo "record-scontrol.sh: $f missing (see the header)" >&2; exit 1; }
done
work=$dir.work
rm -rf "$work"
mkdir -p "$work"
printf 'NvmlLibrary=%s\nXidWaitMs=50\nStateDir=%s/state\n' "$lib" "$work" > "$work/gputopo.conf"
trap '"$here/cluster.sh" down --dir "$dir" >/dev/null 2>&1 || true' EXIT
GPUTOPO_BIN=$bin "$here/cluster.sh" up --release "$rel" --nodes 4 --topology dgx1v --dir "$dir" \
  --gputopo-conf "$work/gputopo.conf" >&2
eval "$("$here/cluster.sh" env --dir "$dir")"
i=1
for fx in dgx1v-faults dgx1v-telemetry dgx1v-healthy xid-storm; do
  FAKE_NVML_FIXTURE=$repo/tests/fixtures/nvml/$fx.fx "$bin" publish --node "n$i" >&2
  i=$((i + 1))
done
cd "$work"
for a in "--gres=gpu:2" "--gres=gpu:4" "--gres=gpu:1" "-N2 --gres=gpu:2" "--gpus=3" \
  "--gres=gpu:1 -w n1" "--gres=gpu:8 -w n1" "--gres=gpu:8" "--gpus-per-node=8 -N2"; do
  # shellcheck disable=SC2086 # the options are words
  sbatch --parsable $a --wrap "sleep 3000" >/dev/null
done
for _ in $(seq 1 100); do
  [ "$(squeue -h -t R | wc -l)" -ge 6 ] && break
  sleep 0.2
done
sleep 3 # one more scheduling pass writes the waiting jobs' notes
out=$repo/tests/fixtures/scontrol/$rel
mkdir -p "$out"
scontrol show node -o -d > "$out/nodes.txt"
scontrol show job -d -o > "$out/jobs.txt"
echo "record-scontrol.sh: $(grep -c '^NodeName=' "$out/nodes.txt") nodes, $(grep -c '^JobId=' "$out/jobs.txt") jobs in $out" >&2
