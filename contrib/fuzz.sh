#!/usr/bin/env bash
# Runs the fuzz targets of fuzz/ (issue 25 item 5), each for a bounded time, on the stable
# toolchain: libFuzzer through libfuzzer-sys, with the coverage instrumentation cargo-fuzz
# would add (sanitizer "none": the core is `forbid(unsafe_code)`; panics, hangs and
# allocations are what is looked for).
#
#   contrib/fuzz.sh                  # every target, FUZZ_SECS (default 15) seconds each
#   contrib/fuzz.sh 60 node_extra    # one target, a minute
#
# Cost (CI's 2 cores): libFuzzer comes prebuilt from libfuzzer-14-dev and the targets build at
# opt-level 1 (fuzz/Cargo.toml), so a cold build is mostly the instrumented core; targets run
# FUZZ_JOBS (default: one per core) at a time.
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
# libFuzzer itself: Debian's prebuilt archive (libfuzzer-14-dev, installed by install-deps.sh)
# when there is one, which spares libfuzzer-sys's build script compiling it from C++ (about
# 40 % of a cold build's CPU time); else libfuzzer-sys builds its own copy.
if [ -z "${CUSTOM_LIBFUZZER_PATH:-}" ]; then
  lib=$(ls -1 /usr/lib/llvm-*/lib/libFuzzer.a 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -n "$lib" ]; then
    export CUSTOM_LIBFUZZER_PATH=$lib
  else
    echo "fuzz: no prebuilt libFuzzer.a (libfuzzer-14-dev); libfuzzer-sys compiles its own" >&2
  fi
fi
# --target keeps the instrumentation off build scripts and proc macros (serde_derive).
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing"
nice -n 10 cargo build --release --manifest-path fuzz/Cargo.toml --target "$host" --bins \
  --target-dir fuzz/target
bin=fuzz/target/$host/release

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Targets run side by side, one per core (FUZZ_JOBS, default nproc): each still gets its own
# SECS of fuzzing, the phase waits about SECS per round instead of per target.
jobs=${FUZZ_JOBS:-$(nproc)}
run() { # run TARGET: fuzz it, exit status 0 = no finding
  local t=$1 corpus=fuzz/corpus/$1 out=$tmp/$1
  mkdir -p "$corpus" "fuzz/artifacts/$t" "$out"
  [ "${FUZZ_KEEP:-0}" = 1 ] && out=$corpus
  "$bin/$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
    -print_final_stats=0 -artifact_prefix="fuzz/artifacts/$t/" "$out" "$corpus" \
    > "$tmp/$t.log" 2>&1
}
declare -A pid_of=()
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  echo "fuzz: $t for ${secs}s ($(ls "fuzz/corpus/$t" 2>/dev/null | wc -l) seeds)"
  run "$t" &
  pid_of[$t]=$!
done
failed=()
for t in "${targets[@]}"; do
  if wait "${pid_of[$t]}"; then
    echo "fuzz: $t: $(grep -E '^(#[0-9]+ +DONE|Done)' "$tmp/$t.log" | tail -1)"
  else
    tail -40 "$tmp/$t.log"
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: findings in: ${failed[*]} (inputs under fuzz/artifacts/)" >&2
  exit 1
fi
echo "fuzz: ${#targets[@]} targets, ${secs}s each, ${jobs} at a time, no finding"
