# Sourced by the CLI test scripts: fail, ok, expect, completed and says, over the caller's $work folder and its
# $failures count.
# shellcheck shell=bash disable=SC2154  # $work is the sourcing script's
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok() { echo "ok: $*"; }
expect() {  # expect STATUS DESCRIPTION -- CMD...: CMD's exit status must be STATUS
  local want=$1 what=$2; shift 3
  "$@" </dev/null >"$work/out" 2>"$work/err"; local got=$?
  if [[ $got -ne $want ]]; then
    fail "$what: exit $got, expected $want"; sed 's/^/  stdout: /' "$work/out"; sed 's/^/  stderr: /' "$work/err"
  else
    echo "ok: $what (exit $got)"
  fi
}
completed() {  # completed WHAT STATUS: WHAT (a run) exited STATUS, which must be 0; else its stderr is shown
  if [[ $2 == 0 ]]; then ok "$1 completed"; else fail "$1 exited $2"; cat "$work/err"; fi
}
says() {  # says TEXT: the last command's stderr holds TEXT
  grep -qF -- "$1" "$work/err" || { fail "expected '$1' in:"; sed 's/^/  stderr: /' "$work/err"; }
}
