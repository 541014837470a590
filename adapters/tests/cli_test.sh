#!/usr/bin/env bash
# cli/exit_codes: the dlock tool's documented exit statuses and subcommands. Usage: cli_test.sh DLOCK
set -u
dlock=$1
work=$(mktemp -d)
trap 'kill "${holder:-}" 2>/dev/null; rm -rf "$work"' EXIT
failures=0
expect() {  # expect STATUS DESCRIPTION -- CMD...
  local want=$1 what=$2; shift 3
  "$@" >"$work/out" 2>"$work/err"; local got=$?
  if [[ $got -ne $want ]]; then
    echo "FAIL: $what: exit $got, expected $want"; sed 's/^/  stdout: /' "$work/out"; sed 's/^/  stderr: /' "$work/err"
    failures=$((failures + 1))
  else
    echo "ok: $what (exit $got)"
  fi
}
uri="file://$work/locks"
name="cli-$$"

expect 64 "no command is a usage error" -- "$dlock"
expect 64 "unknown option is a usage error" -- "$dlock" run "$uri" "$name" --bogus -- true
expect 64 "run without a command is a usage error" -- "$dlock" run "$uri" "$name"
expect 0 "--help" -- "$dlock" --help
expect 0 "run --help" -- "$dlock" run --help
expect 0 "command status 0 passes through" -- "$dlock" run "$uri" "$name" -- true
expect 3 "command status 3 passes through" -- "$dlock" run "$uri" "$name" -- sh -c 'exit 3'
expect 0 "the command sees DLOCK_LOCK_NAME" -- "$dlock" run "$uri" "$name" -- sh -c "test \"\$DLOCK_LOCK_NAME\" = $name"

# Another process holds the lock: run must give up with 75.
coproc HOLD { "$dlock" hold "$uri" "$name"; }
holder=$HOLD_PID
read -r -t 10 line <&"${HOLD[0]}"
if [[ ${line:-} != acquired* ]]; then echo "FAIL: dlock hold printed '${line:-}'"; failures=$((failures + 1)); fi
expect 75 "timeout while another dlock hold holds the lock" -- "$dlock" run "$uri" "$name" --wait 200ms -- true
expect 75 "--wait 0 is one try" -- "$dlock" run "$uri" "$name" --wait 0 -- true
exec {HOLD[1]}>&-   # closing stdin ends the holder
wait "$holder"; st=$?
[[ $st -eq 0 ]] || { echo "FAIL: dlock hold exited $st after stdin closed"; failures=$((failures + 1)); }
expect 0 "free again after hold released" -- "$dlock" run "$uri" "$name" --wait 2s -- true

# A lease that expires (no watchdog) inside the same process: run must kill the command, exit 70.
expect 70 "lease lost while running kills the command" -- \
  "$dlock" run "memory://?ttl=300ms&watchdog=false" "$name" --grace 500ms -- sleep 30
grep -q "lost" "$work/err" || { echo "FAIL: no 'lost' message"; failures=$((failures + 1)); }

expect 0 "backends" -- "$dlock" backends
grep -q '^memory' "$work/out" && grep -q '^file' "$work/out" || { echo "FAIL: backends lacks memory/file"; cat "$work/out"; failures=$((failures + 1)); }
expect 0 "backends --markdown" -- "$dlock" backends --markdown

expect 0 "demo sells exactly the stock with the lock" -- "$dlock" demo "file://$work/demo?poll=1ms..20ms" --workers 4 --stock 50
grep -q "oversold 0," "$work/out" || { echo "FAIL: demo locked run oversold"; cat "$work/out"; failures=$((failures + 1)); }

# sweep: usage errors, and a backend that keeps no expiring records has nothing to sweep.
expect 64 "sweep without a URI is a usage error" -- "$dlock" sweep
expect 64 "sweep with two URIs is a usage error" -- "$dlock" sweep "$uri" "$uri"
expect 64 "sweep of an unknown scheme is a usage error" -- "$dlock" sweep "nosuch://x"
expect 0 "sweep --help" -- "$dlock" sweep --help
expect 0 "sweep of memory:// has nothing to sweep" -- "$dlock" sweep "memory://"
grep -q "^nothing to sweep: memory://" "$work/out" || { echo "FAIL: sweep memory:// printed:"; cat "$work/out"; failures=$((failures + 1)); }

echo "$failures failure(s)"
exit $((failures > 0))
