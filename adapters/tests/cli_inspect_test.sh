#!/usr/bin/env bash
# cli/inspect: dlock inspect, list and break on file:// with another process holding the lock
# (dlock hold), and break's refusal without --force.
# Usage: cli_inspect_test.sh DLOCK
set -u
dlock=$1
work=$(mktemp -d)
trap 'kill "${holder:-}" 2>/dev/null; rm -rf "$work"' EXIT
# shellcheck source=adapters/tests/cli_expect.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_expect.sh"
check() {  # check DESCRIPTION -- CMD...: a test on the last output
  local what=$1; shift 2
  if "$@"; then ok "$what"; else
    fail "$what"; sed 's/^/  stdout: /' "$work/out"; sed 's/^/  stderr: /' "$work/err"
  fi
}
uri="file://$work/locks"
name="inspect-$$"

expect 0 "inspect a free name" -- "$dlock" inspect "$uri" "$name"
check "it says not held" -- grep -qx "$name: not held" "$work/out"
expect 64 "inspect without a name is a usage error" -- "$dlock" inspect "$uri"
expect 0 "inspect --help" -- "$dlock" inspect --help

coproc HOLD { exec "$dlock" hold "$uri" "$name"; }  # exec: its pid is the holder's
holder=$HOLD_PID
read -r -t 10 line <&"${HOLD[0]}"
if [[ ${line:-} != acquired* ]]; then fail "dlock hold printed '${line:-}'"; fi

expect 0 "inspect a held name" -- "$dlock" inspect "$uri" "$name"
check "it says held, by the holding process" -- grep -q "^holder owner=$(hostname):$holder " "$work/out"
expect 0 "inspect --json" -- "$dlock" inspect "$uri" "$name" --json
check "the JSON says held" -- grep -q '^{"name":"'"$name"'","held":true,"holders":\[{"owner":"' "$work/out"
expect 0 "inspect with the URI in DLOCK_URI" -- env DLOCK_URI="$uri" "$dlock" inspect "$name"
check "it says held" -- grep -q "^$name: held" "$work/out"
expect 0 "list" -- "$dlock" list "$uri"
check "it lists the held name" -- grep -qx "$name" "$work/out"
expect 0 "list --prefix of another name" -- "$dlock" list "$uri" --prefix zzz
check "it lists nothing" -- test ! -s "$work/out"
expect 0 "list --json" -- "$dlock" list "$uri" --prefix inspect- --json
check "the JSON lists the name" -- grep -qx "\[\"$name\"\]" "$work/out"

expect 64 "break without --force is refused" -- "$dlock" break "$uri" "$name"
check "it says why" -- grep -q "without --force" "$work/err"
expect 64 "break on file:// is not supported" -- "$dlock" break "$uri" "$name" --force
check "it names the scheme" -- grep -q "file" "$work/err"

hold_in=${HOLD[1]}
exec {hold_in}>&-   # closing stdin ends the holder
wait "$holder"
expect 0 "inspect after the holder left" -- "$dlock" inspect "$uri" "$name"
check "it says not held" -- grep -qx "$name: not held" "$work/out"

expect 0 "break --force of a name nobody holds" -- "$dlock" break memory:// "$name" --force
check "it says nothing to break" -- grep -q "nothing to break" "$work/out"

if [[ $failures -ne 0 ]]; then echo "$failures failure(s)"; exit 1; fi
echo "all passed"
