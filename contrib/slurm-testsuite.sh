#!/usr/bin/env bash
# The parity gate: Slurm's own testsuite, stock against gputopo, on harness clusters. Run as root.
#
#   contrib/slurm-testsuite.sh RELEASE SELECT PRIORITY [--tag ci] [--only REGEX] [--profile REGEX]
#                              [--sides stock,gputopo] [--list FILE] [--work DIR] [--timeout S]
#                              [--expected FILE] [--write-expected FILE]
#
# RELEASE   22.05.8, 24.11.5 or another release with a cached tree and install
# SELECT    gputopo | cons_tres      the select plugin of the gputopo side
# PRIORITY  gputopo | multifactor    the priority plugin of the gputopo side
# The stock side always runs select/cons_tres with priority/multifactor.
#
# It runs every test of contrib/slurm-testsuite/list (--tag: only lines with that tag; --only:
# only tests whose name matches REGEX; --profile: only tests of the profiles matching REGEX)
# from the exact Slurm tree of RELEASE
# (slurm-headers/fetch-slurm.sh), once per side, and prints a table: test, stock result, gputopo
# result, seconds, note. It exits non-zero when a test passes with stock and does not pass with
# gputopo. The list file says why a test cannot run here or fails with stock too.
#
# Expected results: contrib/slurm-testsuite/expected-RELEASE (--expected) holds the stock side's
# result of every listed test on RELEASE, each skip and fail with its reason. With --sides
# gputopo (CI's gate phase: half the time) the stock column is that file's; with a stock side
# the run reports where stock differs from it, and --write-expected FILE writes this run's stock
# results over the file's (reasons kept). A test that passes with stock and fails gets one
# second try (a timing flake on a loaded machine is not a result); the table says so.
#
# Each side runs in its own PID, mount and network namespace (contrib/slurm-testsuite/inner.sh
# says why): the ATF's process scans and kills see only that side's daemons, its database
# teardown reaches only that side's MariaDB, and nothing it starts outlives the side. Before the
# first side the script checks that isolation (a process outside survives a kill inside).
#
# Patches: none to any test. The testsuite is copied to WORK (default /tmp/gputopo-ts-RELEASE)
# so the tests' scratch files stay out of the shared tree; the ATF gets the gate's pytest plugin
# (contrib/slurm-testsuite/gate_atf.py) and expect a globals.local naming an scontrol wrapper,
# both of which only show gputopo's plugins under the stock names the tests require.
#
# Needs: expect (contrib/install-deps.sh), python3 with venv; pytest, pexpect and requests are
# installed with pip (as configured on the machine) into a venv under ${GPUTOPO_CACHE:-/var/cache/gputopo}
# (one per pytest generation: atf-venv-pytest7.1 for 22.05, atf-venv-pytest8 for later releases).
# Environment: GPUTOPO_PLUGIN_SO (else contrib/build-plugin.sh RELEASE), GPUTOPO_BIN (else
# target/release/gputopo, built when missing).
set -euo pipefail
# The whole script is one compound command, read before it runs: a checkout edited (or merged)
# during a run of an hour does not change the run half-way (bash reads scripts as it goes).
{
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
repo=$(cd "$here/.." && pwd)
die() { echo "slurm-testsuite.sh: $*" >&2; exit 2; }

[ $# -ge 3 ] || die "usage: slurm-testsuite.sh RELEASE SELECT PRIORITY [options] (see the header)"
release=$1 select=$2 priority=$3; shift 3
tag= only= prof_re= sides=stock,gputopo list=$here/slurm-testsuite/list work= timeout=1200
expected= write_expected=
while [ $# -gt 0 ]; do
  case $1 in
    --tag) tag=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --profile) prof_re=$2; shift 2 ;;
    --sides) sides=$2; shift 2 ;;
    --list) list=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    --expected) expected=$2; shift 2 ;;
    --write-expected) write_expected=$2; shift 2 ;;
    *) die "unknown argument $1" ;;
  esac
done
case $select in gputopo|cons_tres) ;; *) die "SELECT must be gputopo or cons_tres" ;; esac
case $priority in gputopo|multifactor) ;; *) die "PRIORITY must be gputopo or multifactor" ;; esac
[ "$(id -u)" = 0 ] || die "run as root (namespaces, Slurm daemons, device nodes)"
work=$(realpath -m "${work:-/tmp/gputopo-ts-$release}")
expected=${expected:-$here/slurm-testsuite/expected-$release}
if [[ $sides != *stock* ]] && [ ! -f "$expected" ]; then
  die "--sides without stock compares with $expected, which is missing (run both sides once with --write-expected)"
fi

# --- what it needs ---------------------------------------------------------------------------
command -v expect >/dev/null || die "expect is missing (contrib/install-deps.sh)"
command -v unshare >/dev/null || die "unshare is missing (util-linux)"
src=$("$repo/slurm-headers/fetch-slurm.sh" "$release")
# pytest as of the release: 22.05's conftest.py imports py.io and reads config.invocation_dir,
# both gone from later pytest.
case $release in
  22.05.*) venv_pkgs=("pytest>=7.1,<7.2" py pexpect requests) venv_name=atf-venv-pytest7.1 ;;
  *) venv_pkgs=("pytest>=8" pexpect requests) venv_name=atf-venv-pytest8 ;;
esac
venv=${GPUTOPO_CACHE:-/var/cache/gputopo}/$venv_name
if [ ! -f "$venv/.ready" ]; then
  mkdir -p "${venv%/*}"
  exec 8>"$venv.lock"; flock 8
  if [ ! -f "$venv/.ready" ]; then
    rm -rf "$venv"
    /usr/bin/python3 -m venv "$venv" || die "python3 -m venv failed (apt-get install python3-venv)"
    "$venv/bin/pip" install -q "${venv_pkgs[@]}" || die "pip install ${venv_pkgs[*]} failed"
    touch "$venv/.ready"
  fi
  exec 8>&-
fi
if [[ $sides == *gputopo* ]] && { [ "$select" = gputopo ] || [ "$priority" = gputopo ]; }; then
  if [ -z "${GPUTOPO_PLUGIN_SO:-}" ]; then
    GPUTOPO_PLUGIN_SO=$("$repo/contrib/build-plugin.sh" "$release" | tail -n 1) || die "contrib/build-plugin.sh $release failed"
  fi
  export GPUTOPO_PLUGIN_SO
fi
if [ -z "${GPUTOPO_BIN:-}" ]; then
  t=${CARGO_TARGET_DIR:-$repo/target}; case $t in /*) ;; *) t=$repo/$t ;; esac
  [ -x "$t/release/gputopo" ] || (cd "$repo" && cargo build -q --release -p gputopo-agent --bin gputopo) >&2
  GPUTOPO_BIN=$t/release/gputopo
fi
export GPUTOPO_BIN

# --- the tests of this run -------------------------------------------------------------------
mkdir -p "$work"
rm -rf "$work/testsuite" "$work/gate"
cp -a "$src/testsuite" "$work/testsuite"
# Both sides run the same copy of the gate's own scripts, whatever happens to the checkout.
cp -a "$here/slurm-testsuite" "$work/gate"
prefix=$(release_prefix "$release")
cat > "$work/testsuite/testsuite.conf" <<EOC
SlurmSourceDir=$src
SlurmBuildDir=$src
SlurmInstallDir=$prefix
SlurmConfigDir=$work/etc
EOC
# SUITE TEST PROFILE of the selected tests present in this release's tree, in list order.
tests=$work/tests all_tests=$work/all-tests
: > "$tests"; : > "$all_tests"
declare -A note
while read -r suite t prof tags rest; do
  case $suite in ''|'#'*) continue ;; esac
  case $suite in
    expect) [ -f "$work/testsuite/expect/$t" ] || continue ;;
    local|auto) [ -f "$work/testsuite/python/tests/$t.py" ] || continue ;;
    *) die "list: unknown suite '$suite'" ;;
  esac
  echo "$suite $t" >> "$all_tests"
  note["$suite $t"]=$(sed -n 's/^ *# *//p' <<<"$rest")
  [ -z "$tag" ] || [[ ",$tags," == *",$tag,"* ]] || continue
  [ -z "$only" ] || [[ $t =~ $only ]] || continue
  [ -z "$prof_re" ] || [[ $prof =~ $prof_re ]] || continue
  echo "$suite $t $prof" >> "$tests"
done < "$list"
[ -s "$tests" ] || die "no test of $list selected for $release"
# The stock results of the full run on this release: "SUITE TEST RESULT [# reason]".
declare -A want want_why
if [ -f "$expected" ]; then
  while read -r suite t r rest; do
    case $suite in ''|'#'*) continue ;; esac
    want["$suite $t"]=$r want_why["$suite $t"]=$(sed -n 's/^ *# *//p' <<<"$rest")
  done < "$expected"
fi
echo "slurm-testsuite.sh: $(wc -l < "$tests") tests of Slurm $release, sides $sides, work $work" >&2

# --- isolation check -------------------------------------------------------------------------
# A process outside the namespace must survive what the ATF does inside: a kill of everything
# it can see by name, and a /proc scan for it by executable.
"$repo/contrib/cluster.sh" munge # started outside: a munged started inside would die with it
marker=gate-isolation-$$
bash -c "exec -a $marker sleep 120" &
outside=$!
M=$marker unshare --pid --fork --mount-proc --mount --net bash -c '
  pkill -f "$M"; for p in /proc/[0-9]*; do grep -qaF "$M" "$p/cmdline" 2>/dev/null && exit 1; done
  ip link set lo up; ss -Hltn | grep -q . && exit 2; exit 0' ||
  { kill "$outside"; die "isolation check failed: the namespace sees processes or ports of the host"; }
sleep 0.2
kill -0 "$outside" 2>/dev/null || die "isolation check failed: a pkill inside the namespace killed a process outside"
kill "$outside"; wait "$outside" 2>/dev/null || true

# --- the sides -------------------------------------------------------------------------------
declare -A res secs detail
for s in ${sides//,/ }; do
  case $s in
    stock) ssel=cons_tres sprio=multifactor ;;
    gputopo) ssel=$select sprio=$priority ;;
    *) die "--sides: stock and/or gputopo" ;;
  esac
  sdir=$work/$s
  rm -rf "$sdir"; mkdir -p "$sdir"
  t0=$(date +%s)
  # A second try after a failure for the tests that pass with stock: expected so, or passed by
  # the stock side of this run.
  retry=$work/$s.retry
  while read -r suite t _; do
    k="$suite $t"
    if [ "${want[$k]:-}" = pass ] || [ "${res["stock $k"]:-}" = pass ]; then echo "$k"; fi
  done < "$tests" > "$retry"
  GATE_RELEASE=$release GATE_SIDE_SELECT=$ssel GATE_SIDE_PRIORITY=$sprio GATE_WORK=$work \
    GATE_VENV=$venv GATE_TIMEOUT=$timeout GATE_REPO=$repo GATE_RETRY=$retry \
    unshare --pid --fork --mount-proc --mount --net \
    "$work/gate/inner.sh" "$sdir" "$tests" "$sdir/results" || true
  echo "slurm-testsuite.sh: side $s ($ssel, $sprio) took $(($(date +%s) - t0)) s" >&2
  # The MariaDB data directories (~190 MB a side) go; the logs stay (GATE_KEEP_DB=1 keeps all).
  [ "${GATE_KEEP_DB:-0}" = 1 ] || find "$sdir" -maxdepth 3 -type d -name db -prune -exec rm -rf {} +
  while read -r suite t r sec d; do
    res["$s $suite $t"]=$r secs["$s $suite $t"]=$sec detail["$s $suite $t"]=$d
  done < "$sdir/results"
done

# --- the table -------------------------------------------------------------------------------
# Without a stock side, the stock column is the expected result (marked *).
stock_col=stock
if [[ $sides != *stock* ]]; then
  stock_col='stock*'
  for k in "${!want[@]}"; do res["stock $k"]=${want[$k]}; done
fi
bad=0 drift=()
printf '%-7s %-58s %-6s %-6s %5s %5s  %s\n' suite test "$stock_col" gputopo s-sec g-sec note
while read -r suite t prof; do
  k="$suite $t"
  st=${res["stock $k"]:--} gt=${res["gputopo $k"]:--}
  flag=
  if [ "$st" = pass ] && [[ $sides == *gputopo* ]] && [ "$gt" != pass ]; then flag='  <-- REGRESSION'; bad=1; fi
  # Without a stock side every test needs its expected result (a test newly tagged ci, say).
  if [ "$st" = - ] && [[ $sides != *stock* ]]; then flag="  <-- NOT IN ${expected##*/}"; bad=1; fi
  if [[ $sides == *stock* ]] && [ -n "${want[$k]:-}" ] && [ "${want[$k]}" != "$st" ]; then
    drift+=("$k: expected ${want[$k]}, stock ${st} (${detail["stock $k"]:-})")
  fi
  n=${note[$k]:-}
  # A note about another release ("22.05.8: ...") says nothing here.
  if [[ $n =~ ^([0-9]+\.[0-9]+\.[0-9]+): ]] && [ "${BASH_REMATCH[1]}" != "$release" ]; then n=; fi
  [ -n "$n" ] || [ "$st" = pass ] || [ "$st" != "${want[$k]:-}" ] || n=${want_why[$k]:-}
  # The results' details have "_" for spaces.
  sd=${detail["stock $k"]:--} gd=${detail["gputopo $k"]:--}
  [ -n "$n" ] || [ "$st" = pass ] || [ "$sd" = - ] || n=${sd//_/ }
  [ -n "$n" ] || [ "$gt" = pass ] || [ "$gd" = - ] || n=${gd//_/ }
  [[ $gd != second_try* ]] || n="gputopo: ${gd//_/ }${n:+; $n}"
  printf '%-7s %-58s %-6s %-6s %5s %5s  %s%s\n' "$suite" "$t" "$st" "$gt" \
    "${secs["stock $k"]:--}" "${secs["gputopo $k"]:--}" "$n" "$flag"
done < "$tests"
for s in ${sides//,/ }; do
  echo "$s: $(awk '{ n[$3]++ } END { printf "%d pass, %d fail, %d skip", n["pass"], n["fail"], n["skip"] }' "$work/$s/results") (logs: $work/$s/logs)"
done
[[ $sides == *stock* ]] || echo "stock*: the stock results of $expected"
# The expected file follows the stock side; a difference is worth a look (a flake, or a change
# of the harness), not a failure of the gate.
for d in "${drift[@]}"; do echo "slurm-testsuite.sh: stock differs from ${expected##*/}: $d" >&2; done
if [ -n "$write_expected" ] && [[ $sides == *stock* ]]; then
  {
    echo "# Stock results (select/cons_tres, priority/multifactor) of Slurm's own tests on $release"
    echo "# with contrib/slurm-testsuite.sh; every skip and fail with its reason. Written by"
    echo "# --write-expected (this run's stock results over the file's earlier ones), reasons"
    echo "# reviewed by hand: the file's reason, else the list's note, else the test's own message."
    while read -r suite t; do
      k="$suite $t" r=${res["stock $k"]:-${want[$k]:-}}
      [ -n "$r" ] || continue
      # The file's reason holds while the result does; a changed result takes the list's
      # note, else the test's own message.
      d=${detail["stock $k"]:-} why=
      [ "$r" != "${want[$k]:-}" ] || why=${want_why[$k]:-}
      why=${why:-${note[$k]:-}}
      [ -n "$why" ] || [ "$d" = - ] || why=${d//_/ }
      if [ "$r" = pass ] || [ -z "$why" ]; then echo "$suite $t $r"; else echo "$suite $t $r  # $why"; fi
    done < "$all_tests"
  } > "$write_expected.tmp" && mv "$write_expected.tmp" "$write_expected"
  echo "slurm-testsuite.sh: wrote $write_expected" >&2
fi
[ "$bad" = 0 ] || echo "slurm-testsuite.sh: a test that passes with stock does not pass with gputopo, or has no expected result" >&2
exit "$bad"
}
