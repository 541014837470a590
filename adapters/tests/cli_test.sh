#!/usr/bin/env bash
# cli/exit_codes: the dlock tool's documented exit statuses and subcommands, where the URI may come
# from, that no message shows a password, and that bad arguments are found before connecting.
# Usage: cli_test.sh DLOCK
set -u
dlock=$1
work=$(mktemp -d)
trap 'kill "${holder:-}" 2>/dev/null; rm -rf "$work"' EXIT
# shellcheck source=adapters/tests/cli_expect.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_expect.sh"
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
if [[ ${line:-} != acquired* ]]; then fail "dlock hold printed '${line:-}'"; fi
expect 75 "timeout while another dlock hold holds the lock" -- "$dlock" run "$uri" "$name" --wait 200ms -- true
expect 75 "--wait 0 is one try" -- "$dlock" run "$uri" "$name" --wait 0 -- true
hold_in=${HOLD[1]}
exec {hold_in}>&-   # closing stdin ends the holder
wait "$holder"; st=$?
[[ $st -eq 0 ]] || { fail "dlock hold exited $st after stdin closed"; }
expect 0 "free again after hold released" -- "$dlock" run "$uri" "$name" --wait 2s -- true

# A lease that expires (no watchdog) inside the same process: run must kill the command, exit 70.
expect 70 "lease lost while running kills the command" -- \
  "$dlock" run "memory://?ttl=300ms&watchdog=false" "$name" --grace 500ms -- sleep 30
grep -q "lost" "$work/err" || { fail "no 'lost' message"; }

expect 0 "backends" -- "$dlock" backends
if ! { grep -q '^memory' "$work/out" && grep -q '^file' "$work/out"; }; then
  fail "backends lacks memory/file"; cat "$work/out"
fi
expect 0 "backends --markdown" -- "$dlock" backends --markdown

expect 0 "demo sells exactly the stock with the lock" -- "$dlock" demo "file://$work/demo?poll=1ms..20ms" --workers 4 --stock 50
grep -q "oversold 0," "$work/out" || { fail "demo locked run oversold"; cat "$work/out"; }

# sweep: usage errors, and a backend that keeps no expiring records has nothing to sweep.
expect 64 "sweep without a URI is a usage error" -- "$dlock" sweep
expect 64 "sweep with two URIs is a usage error" -- "$dlock" sweep "$uri" "$uri"
expect 64 "sweep of an unknown scheme is a usage error" -- "$dlock" sweep "nosuch://x"
expect 0 "sweep --help" -- "$dlock" sweep --help
expect 0 "sweep of memory:// has nothing to sweep" -- "$dlock" sweep "memory://"
grep -q "^nothing to sweep: memory://" "$work/out" || { fail "sweep memory:// printed:"; cat "$work/out"; }

# The URI off the command line, where `ps` would show its password: --uri-file and DLOCK_URI,
# for every verb that takes a URI; the command line wins over the environment.
printf '%s\n' "$uri" >"$work/uri"
expect 0 "run: URI from DLOCK_URI" -- env DLOCK_URI="$uri" "$dlock" run "$name" -- true
expect 0 "run: URI from --uri-file" -- env -u DLOCK_URI "$dlock" run --uri-file "$work/uri" "$name" -- true
expect 0 "hold: URI from DLOCK_URI" -- env DLOCK_URI="$uri" "$dlock" hold "$name" --wait 0
expect 0 "hold: URI from --uri-file" -- "$dlock" hold --uri-file "$work/uri" "$name" --wait 0
expect 0 "sweep: URI from DLOCK_URI" -- env DLOCK_URI=memory:// "$dlock" sweep
expect 0 "sweep: URI from --uri-file" -- "$dlock" sweep --uri-file "$work/uri"
expect 0 "bench: URI from DLOCK_URI" -- env DLOCK_URI=memory:// "$dlock" bench --duration 100ms
expect 0 "demo: URI from DLOCK_URI (its workers get it the same way)" -- \
  env DLOCK_URI="file://$work/demo2?poll=1ms..20ms" "$dlock" demo --workers 2 --stock 10
grep -q "on file://$work/demo2" "$work/out" || { fail "demo did not use DLOCK_URI"; cat "$work/out"; }
expect 0 "a URI operand overrides DLOCK_URI" -- env DLOCK_URI=nosuch://x "$dlock" run "$uri" "$name" -- true
expect 0 "--uri-file overrides DLOCK_URI" -- env DLOCK_URI=nosuch://x "$dlock" run --uri-file "$work/uri" "$name" -- true
expect 64 "a URI operand and --uri-file is a usage error" -- "$dlock" run --uri-file "$work/uri" "$uri" "$name" -- true
expect 64 "an unreadable --uri-file is a usage error" -- "$dlock" run --uri-file "$work/nosuch" "$name" -- true
printf '%s\n%s\n' "$uri" "$uri" >"$work/two-uris"
expect 64 "a --uri-file of two lines is a usage error" -- "$dlock" run --uri-file "$work/two-uris" "$name" -- true
expect 64 "no URI anywhere is a usage error" -- env -u DLOCK_URI "$dlock" run "$name" -- true

# No message shows a password: not of a URI that does not parse, nor one typed as the command.
secret=S3cretPw
no_secret() {  # no_secret DESCRIPTION -- CMD...
  local what=$1; shift 2
  "$@" </dev/null >"$work/out" 2>"$work/err"; local got=$?
  if [[ $got -eq 0 ]] || grep -q "$secret" "$work/out" "$work/err"; then
    fail "$what: exit $got, or the password was printed:"; cat "$work/out" "$work/err"
  else
    echo "ok: $what (exit $got, no password)"
  fi
}
for bad in "redis:/admin:$secret@127.0.0.1:1" "redis//u:$secret@127.0.0.1:1" "redis://u:$secret@127.0.0.1:1"; do
  no_secret "run $bad" -- "$dlock" run "$bad" "$name" --wait 0 -- true
  no_secret "DLOCK_URI=$bad" -- env DLOCK_URI="$bad" "$dlock" run "$name" --wait 0 -- true
  no_secret "sweep $bad" -- "$dlock" sweep "$bad"
  no_secret "dlock $bad (as the command)" -- "$dlock" "$bad" "$name"
done

# ... and hiding a one-letter password does not mangle the rest of the message.
expect 64 "a bad parameter in a URI with a one-letter password" -- "$dlock" run "redis://u:p@127.0.0.1:1?ttl=2x" "$name" -- true
# (the password hidden as a token of its own: no "***" glued to a letter, as in "***arameter")
if ! grep -q "2x" "$work/err" || grep -qE '[A-Za-z]\*\*\*|\*\*\*[A-Za-z]' "$work/err"; then
  fail "mangled message:"; cat "$work/err"
fi

# Every local check comes before connecting: with no server on port 1, a bad argument is still 64.
down=redis://127.0.0.1:1
expect 64 "--wait 2x with the server down is a usage error" -- "$dlock" run "$down" "$name" --wait 2x -- true
expect 64 "--grace 2x with the server down is a usage error" -- "$dlock" run "$down" "$name" --grace 2x -- true
expect 64 "--ttl 0 with the server down is a usage error" -- "$dlock" run "$down" "$name" --ttl 0 -- true
expect 64 "an empty name with the server down is a usage error" -- "$dlock" run "$down" "" -- true
expect 64 "renew= not below --ttl with the server down is a usage error" -- "$dlock" run "$down?renew=5s" "$name" --ttl 2s -- true
expect 64 "hold --wait 2x with the server down is a usage error" -- "$dlock" hold "$down" "$name" --wait 2x
expect 64 "bench --duration 2x with the server down is a usage error" -- "$dlock" bench "$down" --duration 2x
# Good arguments and the server still down when the wait ends: 69, not 75 (that is "held by
# someone else"), and only once the wait is over: connecting is part of the wait.
started=$(date +%s%N)
expect 69 "server down until the end of --wait is 69" -- "$dlock" run "$down" "$name" --wait 1s -- true
waited_ms=$((($(date +%s%N) - started) / 1000000))
((waited_ms >= 950)) || { fail "gave up after ${waited_ms}ms, before --wait 1s ended"; }
expect 69 "server down and --wait 0 is one try: 69" -- "$dlock" run "$down" "$name" --wait 0 -- true

echo "$failures failure(s)"
exit $((failures > 0))
