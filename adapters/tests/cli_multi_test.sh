#!/usr/bin/env bash
# cli/multi: `dlock run URI NAME NAME... -- CMD` takes the names as one set (file://, a real lock
# file per name): the environment CMD gets, usage errors, all or nothing on a timeout, no deadlock
# between runs naming the same set in opposite orders, and the loss of a member ending CMD.
# Usage: cli_multi_test.sh DLOCK
set -u
dlock=$1
work=$(mktemp -d)
pids=()
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
# shellcheck source=adapters/tests/cli_expect.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_expect.sh"
uri="file://$work/locks?poll=1ms..20ms"
p="multi-$$"

# shellcheck disable=SC2016  # the variables are the command's, set by dlock run
expect 0 "CMD gets the names in byte order, one variable each" -- "$dlock" run "$uri" "$p-c" "$p-a" "$p-b" -- \
  sh -c 'test "$DLOCK_LOCK_COUNT" = 3 && test "$DLOCK_LOCK_NAME_1" = "$0-a" && test "$DLOCK_LOCK_NAME_2" = "$0-b" &&
         test "$DLOCK_LOCK_NAME_3" = "$0-c" && test -z "${DLOCK_LOCK_NAME:-}"' "$p"
# shellcheck disable=SC2016
expect 0 "with DLOCK_URI every operand is a NAME" -- env DLOCK_URI="$uri" "$dlock" run "$p-a" "$p-b" -- \
  sh -c 'test "$DLOCK_LOCK_COUNT" = 2'
expect 64 "a NAME given twice is a usage error" -- "$dlock" run "$uri" "$p-a" "$p-b" "$p-a" -- true
grep -q "given twice" "$work/err" || { fail "no 'given twice' message"; }
expect 64 "--shared takes one NAME" -- "$dlock" run "$uri" "$p-a" "$p-b" --shared -- true
expect 0 "run --help describes several NAMEs" -- "$dlock" run --help
grep -q "DLOCK_LOCK_NAME_<i>" "$work/out" || { fail "run --help lacks DLOCK_LOCK_NAME_<i>"; }

# Another process holds the last name: the set times out (75), and the names it took are free.
coproc HOLD { "$dlock" hold "$uri" "$p-c"; }
# Bash unsets HOLD_PID and HOLD once it has reaped the holder, which may come before our wait.
holder=$HOLD_PID hold_in=${HOLD[1]}
pids+=("$holder")
read -r -t 10 line <&"${HOLD[0]}"
if [[ ${line:-} != acquired* ]]; then fail "dlock hold printed '${line:-}'"; fi
expect 75 "a set with one name held elsewhere times out" -- "$dlock" run "$uri" "$p-a" "$p-b" "$p-c" --wait 300ms -- true
expect 0 "no partial hold: the names taken were given back" -- "$dlock" run "$uri" "$p-a" "$p-b" --wait 0 -- true
exec {hold_in}>&-  # closing stdin ends the holder
wait "$holder"

# Two loops naming the same set in opposite orders: each run is bounded by --wait (a deadlock would
# be exit 75), and a marker directory per name catches two holders inside at once (exit 3).
# shellcheck disable=SC2016  # expanded by the command's shell: $0 the directory, $@ the names
inside='for n in "$@"; do mkdir "$0/$n.inside" || exit 3; done; sleep 0.01; for n in "$@"; do rmdir "$0/$n.inside"; done'
loop() {
  local i
  for i in $(seq 15); do
    "$dlock" run "$uri" "$@" --wait 20s -- sh -c "$inside" "$work" "$@" || { echo "run $i exited $?"; return 1; }
  done
}
loop "$p-x" "$p-y" "$p-z" >"$work/loop1" 2>&1 &
first=$!
loop "$p-z" "$p-y" "$p-x" >"$work/loop2" 2>&1 &
second=$!
pids+=("$first" "$second")
for l in "$first" "$second"; do
  if wait "$l"; then echo "ok: opposite orders, loop $l"; else
    fail "a run naming the set in opposite order failed"; cat "$work/loop1" "$work/loop2"
  fi
done

# Members that expire (no watchdog): the set is lost, CMD is killed, exit 70.
expect 70 "a lost member ends CMD" -- \
  "$dlock" run "memory://?ttl=300ms&watchdog=false" "$p-a" "$p-b" --grace 500ms -- sleep 30
grep -q "of the set of locks" "$work/err" || { fail "no loss message naming the set"; }

[[ $failures -eq 0 ]] || { echo "$failures failure(s)"; exit 1; }
echo "all passed"
