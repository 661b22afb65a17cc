#!/usr/bin/env bash
# A ready check for a real GPU node: does gputopo read this machine's GPUs the way nvidia-smi
# does? On a machine with an NVIDIA GPU and driver (run from a checkout, as root for the
# kernel log):
#
#   contrib/gpu-check.sh            # builds the agent, checks, prints one verdict line last
#
# It builds `gputopo` (cargo build --release -p gputopo-agent; GPUTOPO_BIN skips that), runs
# `gputopo health --json`, `topology --format matrix` and `gres-conf` against the real NVML with
# an empty configuration (NVML order, the state in a temporary directory), and compares with
# nvidia-smi:
#   - count, names, PCI bus ids and UUIDs (nvidia-smi --query-gpu), GPU by GPU;
#   - NVLink: every NV# cell of `nvidia-smi topo -m` against gputopo's matrix;
#   - MIG: the MIG devices `nvidia-smi -L` lists (reported; the agent judges whole GPUs);
#   - health: any GPU gputopo does not call ok is named, with its reasons.
# The last line is the verdict: `gpu-check: PASS ...` or `gpu-check: FAIL ...` (exit 0 / 1;
# 2 when there is no GPU or driver to check). Nothing in CI depends on it.
#
# For a dry run without a GPU, NVIDIA_SMI names a stand-in for nvidia-smi and GPUTOPO_NVML_LIB
# (+ FAKE_NVML_FIXTURE) the fake NVML (crates/agent/tests/gpu_check.rs does that).
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
smi=${NVIDIA_SMI:-nvidia-smi}
fails=()
notes=()
verdict() { # STATUS TEXT
  echo "gpu-check: $1 $2"
  [ "$1" = PASS ] && exit 0
  [ "$1" = SKIP ] && exit 2
  exit 1
}

command -v "$smi" >/dev/null 2>&1 || verdict SKIP "(no nvidia-smi: no NVIDIA driver on this machine)"
smi_gpus=$("$smi" --query-gpu=index,name,pci.bus_id,uuid --format=csv,noheader 2>&1) ||
  verdict SKIP "(nvidia-smi failed: $(head -n 1 <<<"$smi_gpus"))"
[ -n "$smi_gpus" ] || verdict SKIP "(nvidia-smi lists no GPU)"

bin=${GPUTOPO_BIN:-}
if [ -z "$bin" ]; then
  echo "gpu-check: building gputopo (cargo build --release -p gputopo-agent)" >&2
  (cd "$repo" && cargo build -q --release -p gputopo-agent --bin gputopo) >&2 ||
    verdict FAIL "(cargo build failed)"
  bin=${CARGO_TARGET_DIR:-$repo/target}/release/gputopo
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'GresConf=%s/no-gres.conf\nStateDir=%s/state\n' "$tmp" "$tmp" > "$tmp/gputopo.conf"
export GPUTOPO_CONF=$tmp/gputopo.conf
node=$(hostname -s)

"$bin" health --json --node "$node" > "$tmp/health.json" 2> "$tmp/health.err"
rc=$?
case $rc in
  0|3|4) ;;
  2) verdict FAIL "(gputopo: NVML unavailable: $(tail -n 1 "$tmp/health.err"))" ;;
  *) verdict FAIL "(gputopo health exited $rc: $(tail -n 1 "$tmp/health.err"))" ;;
esac
"$bin" topology --format matrix --node "$node" > "$tmp/topo.txt" 2>/dev/null
"$bin" gres-conf --node "$node" > "$tmp/gres.conf" 2> "$tmp/gres.err" ||
  fails+=("gres-conf failed: $(tail -n 1 "$tmp/gres.err")")

# One line per GPU from each side: index|name|bus id (lowercase, 8-digit domain)|uuid.
python3 - "$tmp/health.json" > "$tmp/agent.txt" <<'EOF' || verdict FAIL "(cannot read gputopo health --json)"
import json, sys
for g in json.load(open(sys.argv[1])):
    print("|".join([str(g.get("index")), g.get("name") or "", (g.get("bus_id") or "").lower(),
                    g.get("uuid") or "", g.get("status") or "", ",".join(g.get("reasons") or [])]))
EOF
awk -F', *' '{ b = tolower($3); print $1 "|" $2 "|" b "|" $4 }' <<<"$smi_gpus" > "$tmp/smi.txt"

n_smi=$(wc -l < "$tmp/smi.txt")
n_agent=$(wc -l < "$tmp/agent.txt")
[ "$n_smi" = "$n_agent" ] || fails+=("count: nvidia-smi $n_smi, gputopo $n_agent")
while IFS='|' read -r i name bus uuid; do
  line=$(awk -F'|' -v b="$bus" '$3 == b' "$tmp/agent.txt")
  if [ -z "$line" ]; then fails+=("GPU $i ($bus): not in gputopo's list"); continue; fi
  IFS='|' read -r ai aname _ auuid astatus areasons <<<"$line"
  [ "$ai" = "$i" ] || notes+=("GPU $bus is nvidia-smi $i, gputopo $ai")
  [ "$aname" = "$name" ] || fails+=("GPU $i name: nvidia-smi '$name', gputopo '$aname'")
  [ "$auuid" = "$uuid" ] || fails+=("GPU $i uuid: nvidia-smi $uuid, gputopo $auuid")
  [ "$astatus" = ok ] || notes+=("GPU $i is $astatus (${areasons:-no reason})")
done < "$tmp/smi.txt"

# NVLink: the NV# cells of both matrices (rows GPU<i>, GPU columns only).
nv_cells() { # FILE -> "i j NVk" per NVLink cell
  awk '$1 ~ /^GPU[0-9]+$/ { i = substr($1, 4); for (c = 2; c <= NF; c++) if ($c ~ /^NV[0-9]+$/) print i, c - 2, $c }' "$1" | sort
}
if "$smi" topo -m > "$tmp/smi-topo.txt" 2>/dev/null; then
  if ! diff <(nv_cells "$tmp/smi-topo.txt") <(nv_cells "$tmp/topo.txt") > "$tmp/nv.diff"; then
    fails+=("NVLink matrix differs (< nvidia-smi, > gputopo): $(grep '^[<>]' "$tmp/nv.diff" | head -n 4 | tr '\n' ';')")
  fi
  nv=$(nv_cells "$tmp/smi-topo.txt" | wc -l)
else
  notes+=("nvidia-smi topo -m failed: NVLink not compared")
  nv=0
fi

mig=$("$smi" -L 2>/dev/null | grep -c '^ *MIG ' || true)
[ "$mig" = 0 ] || notes+=("$mig MIG device(s) (nvidia-smi -L); gputopo judges their GPUs")

for n in "${notes[@]}"; do echo "gpu-check: note: $n"; done
for f in "${fails[@]}"; do echo "gpu-check: mismatch: $f"; done
summary="($n_smi GPUs: $(cut -d'|' -f2 "$tmp/smi.txt" | sort | uniq -c | awk '{ $1 = $1 "x"; print }' | paste -sd, -); $nv NVLink cells; $mig MIG devices; driver $("$smi" --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1))"
if [ ${#fails[@]} -eq 0 ]; then verdict PASS "$summary"; else verdict FAIL "${#fails[@]} mismatch(es) $summary"; fi
