#!/usr/bin/env bash
# Builds the previous engine (the commit before issue 12's objective, 3bbc545) for
# contrib/results.sh's OLD_BIN, outside the checkout, under the CURRENT simulator model: that
# commit's simulator valued an NVLink hop with a PCIe term (its engine's pair value), the
# current one does not (an NVLink pair's PCIe path carries no peer traffic). Its
# sim/comm.rs hop value is replaced by the current one, so "gputopo-previous" and "gputopo"
# rows differ only by the engine; the engine itself is untouched.
#   OLD_BIN=$(contrib/build-previous.sh) contrib/results.sh
#   contrib/build-previous.sh [COMMIT] [DIR]   # defaults: 3bbc545, /tmp/gputopo-previous
# Prints the binary's path.
set -euo pipefail
cd "$(dirname "$0")/.."
COMMIT=${1:-3bbc545}
DIR=${2:-/tmp/gputopo-previous}
mkdir -p "$DIR/src"
git archive "$COMMIT" | tar -x -C "$DIR/src"
comm="$DIR/src/crates/core/src/sim/comm.rs"
grep -q '^use crate::placement::objective::pair_gbps;$' "$comm" || {
  echo "build-previous: $COMMIT's sim/comm.rs has no engine pair_gbps import to replace" >&2
  exit 1
}
sed -i 's|^use crate::placement::objective::pair_gbps;$|// contrib/build-previous.sh: the current simulator'"'"'s hop value.\
fn pair_gbps(link: crate::topology::Link) -> u32 {\
    use crate::placement::objective::{NVLINK_CAP, NVLINK_GBPS, pcie_gbps};\
    match link.nvlinks.min(NVLINK_CAP) {\
        0 => pcie_gbps(link.pcie),\
        nv => u32::from(nv) * NVLINK_GBPS,\
    }\
}|' "$comm"
(cd "$DIR/src" && CARGO_TARGET_DIR="$DIR/target" cargo build --release -q -p gputopo-agent --bin gputopo >&2)
echo "$DIR/target/release/gputopo"
