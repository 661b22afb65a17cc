# shellcheck shell=bash
# One-line assertions for the shell tests (contrib/test-package*.sh, test-pkg-maint.sh); sourced.
#
#   check "what is checked" CMD ARGS...   # prints "ok     <prefix>what" or "FAILED <prefix>what"
#
# CMD's output is dropped; $passed and $failed count the outcomes; $check_prefix is put in front
# of each line (e.g. "deb 24.11.5: ").
passed=0 failed=0 check_prefix=${check_prefix:-}
check() {
  local what=$1
  shift
  if "$@" >/dev/null 2>&1; then
    passed=$((passed + 1)); echo "ok     $check_prefix$what"
  else
    failed=$((failed + 1)); echo "FAILED $check_prefix$what"
  fi
}
