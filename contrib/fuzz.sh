#!/usr/bin/env bash
# Runs the fuzz targets of fuzz/ (issue 25 item 5), each for a bounded time, on the stable
# toolchain: libFuzzer through libfuzzer-sys, with the coverage instrumentation cargo-fuzz
# would add (sanitizer "none": the core is `forbid(unsafe_code)`; panics, hangs and
# allocations are what is looked for).
#
#   contrib/fuzz.sh                  # every target, FUZZ_SECS (default 15) seconds each
#   contrib/fuzz.sh 60 node_extra    # one target, a minute
#
# The corpus in fuzz/corpus/<target> (committed seeds) is read, never written: new inputs go
# to a temporary directory (FUZZ_KEEP=1 adds them to the repo's corpus instead, for a
# developer who wants to commit them). A finding is left under fuzz/artifacts/<target> and
# the script exits 1 naming it. No test here asserts a speed; the time is a budget.
set -euo pipefail
cd "$(dirname "$0")/.."

secs=${1:-${FUZZ_SECS:-15}}
shift || true
mapfile -t all < <(sed -n 's/^name = "\(.*\)"$/\1/p' fuzz/Cargo.toml | grep -v '^gputopo-fuzz$')
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")

host=$(rustc -vV | sed -n 's/^host: //p')
# --target keeps the instrumentation off build scripts and proc macros (serde_derive).
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing"
nice -n 10 cargo build --release --manifest-path fuzz/Cargo.toml --target "$host" --bins \
  --target-dir fuzz/target
bin=fuzz/target/$host/release

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=()
for t in "${targets[@]}"; do
  corpus=fuzz/corpus/$t
  mkdir -p "$corpus" "fuzz/artifacts/$t" "$tmp/$t"
  out=$tmp/$t
  [ "${FUZZ_KEEP:-0}" = 1 ] && out=$corpus
  echo "fuzz: $t for ${secs}s ($(ls "$corpus" | wc -l) seeds)"
  if ! "$bin/$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
      -print_final_stats=0 -artifact_prefix="fuzz/artifacts/$t/" "$out" "$corpus" \
      > "$tmp/$t.log" 2>&1; then
    tail -40 "$tmp/$t.log"
    failed+=("$t")
  else
    grep -E '^(#[0-9]+ +DONE|Done)' "$tmp/$t.log" | tail -1 || true
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: findings in: ${failed[*]} (inputs under fuzz/artifacts/)" >&2
  exit 1
fi
echo "fuzz: ${#targets[@]} targets, ${secs}s each, no finding"
