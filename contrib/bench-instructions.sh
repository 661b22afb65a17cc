#!/usr/bin/env bash
# Instructions per placement decision (valgrind's callgrind), this working tree against an
# older commit, in one run: on a shared, loaded machine criterion's wall-clock figures swing
# by 2x, instruction counts do not. Both trees are built with this tree's benches/placement.rs
# (its GPUTOPO_COUNT mode; an older tree without `Gputopo::pick_on` gets --cfg gputopo_old).
#   contrib/bench-instructions.sh [BASE_COMMIT]     # default BASE_COMMIT: HEAD
#   CASES="8 16-warm" contrib/bench-instructions.sh 3bbc545
# Prints, per case, the instructions of one repetition for the base and for this tree, and
# their ratio. Cases: see `count` in benches/placement.rs.
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${1:-HEAD}
CASES=${CASES:-8 8-detailed 8-near 16-warm 16-cold rank10k}
TARGET=${CARGO_TARGET_DIR:-target}
OLD_TARGET=${OLD_TARGET:-$TARGET-bench-base}
command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git archive "$BASE" | tar -x -C "$work"
cp benches/placement.rs "$work/benches/placement.rs"

build() { # source dir, target dir, rustflags: prints the bench executable's path
  (cd "$1" && CARGO_TARGET_DIR=$2 RUSTFLAGS=$3 cargo bench -q -p gputopo-core --bench placement \
    --no-run --message-format=json) | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -1
}
NEW=$(build . "$TARGET" "")
flags=""
grep -q 'pub fn pick_on' "$work/crates/core/src/placement/engine.rs" || flags="--cfg gputopo_old"
OLD=$(build "$work" "$OLD_TARGET" "$flags")

ir() { # executable, case, repetitions: callgrind's instruction total
  GPUTOPO_COUNT="$2:$3" valgrind --tool=callgrind --callgrind-out-file=/dev/null "$1" 2>&1 \
    | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
per() { # executable, case, repetitions: instructions of one repetition
  local a b
  a=$(ir "$1" "$2" 0)
  b=$(ir "$1" "$2" "$3")
  echo $(((b - a) / $3))
}
echo "instructions per repetition (callgrind), base $(git rev-parse --short "$BASE") vs working tree:"
printf '%-12s %12s %12s %8s\n' case base new new/base
for c in $CASES; do
  n=20000
  [ "$c" = rank10k ] && n=50
  o=$(per "$OLD" "$c" $n)
  w=$(per "$NEW" "$c" $n)
  printf '%-12s %12d %12d %8s\n' "$c" "$o" "$w" "$(awk -v a="$w" -v b="$o" 'BEGIN { printf "%.2f", a / b }')"
done
