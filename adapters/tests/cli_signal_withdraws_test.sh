#!/usr/bin/env bash
# cli/signal_withdraws: a signal while `dlock run` waits for a lock ends the wait through the
# cancellation path, which takes the waiter off the server before dlock exits: when the holder
# then releases, the next waiter is granted at once, not when the dead waiter's entry expires.
# On the launcher's servers, where a waiter leaves an entry that outlives it unless withdrawn:
#  - zookeeper (session_timeout=30s): a sequential node, kept until the session times out;
#  - redis+fair (ttl=30s): a place in Redisson's fair queue, kept until its timeout;
#  - postgres+advisory: a session waiting in pg_advisory_lock, which gets a cancel request.
# Usage: cli_signal_withdraws_test.sh DLOCK (DLOCK_ZOOKEEPER_URI, DLOCK_REDIS_URI and
# DLOCK_POSTGRES_URI name the servers; an unset one fails its check).
set -u
dlock=$1
work=$(mktemp -d)
pids=()
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
  local p
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
# shellcheck source=adapters/tests/cli_expect.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_expect.sh"
# shellcheck source=adapters/tests/cli_process_wait.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_process_wait.sh"

# with_scheme URI SCHEME QUERY: URI with its scheme replaced and QUERY added.
with_scheme() {
  local rest=${1#*://}
  if [[ $rest == *\?* ]]; then echo "$2://$rest&$3"; else echo "$2://$rest?$3"; fi
}

# withdrawn WHAT URI: a waiter SIGTERMed in its wait exits 143, and after the holder's release the
# next waiter is granted within 5 s (an entry left behind would keep it out for 30 s).
withdrawn() {
  local what=$1 uri=$2 name="cli-withdraw-$$-$1"
  # The holder waits through a server younger than a ttl (a fresh Redis grants nothing for one).
  coproc HOLD { "$dlock" hold "$uri" "$name" --wait 45s 2>"$work/hold.err"; }
  local holder=$HOLD_PID holder_out=${HOLD[0]} hold_in=${HOLD[1]} line=""
  pids+=("$holder")
  read -r -t 50 line <&"$holder_out"
  if [[ $line != acquired* ]]; then
    fail "$what: the holder printed '$line'"; cat "$work/hold.err"; kill -9 "$holder"; return
  fi
  "$dlock" run "$uri" "$name" --wait 60s -- true >"$work/out" 2>"$work/err" </dev/null &
  local waiter=$!
  pids+=("$waiter")
  catching "$waiter" || { fail "$what: the waiter never installed its signal handlers"; return; }
  sleep 1  # into its wait on the server (connecting takes milliseconds here)
  kill -TERM "$waiter"
  if ! exits "$waiter" 5; then
    fail "$what: the waiter still waits 5 s after SIGTERM"; kill -9 "$waiter"
  fi
  wait "$waiter"; local st=$?
  if [[ $st -eq 143 ]]; then ok "$what: SIGTERM while waiting: exit 143"; else fail "$what: exit $st, expected 143"; cat "$work/err"; fi
  exec {hold_in}>&-  # closing stdin ends the holder, which releases
  wait "$holder"
  if "$dlock" run "$uri" "$name" --wait 5s -- true 2>"$work/err"; then
    ok "$what: the next waiter was granted at once: nothing of the stopped waiter was left"
  else
    fail "$what: the next waiter was not granted within 5 s: the stopped waiter left its entry"; cat "$work/err"
  fi
}

for variable in DLOCK_ZOOKEEPER_URI DLOCK_REDIS_URI DLOCK_POSTGRES_URI; do
  [[ -n ${!variable:-} ]] || fail "$variable is not set: start the servers with compose/native/dlock-servers"
done
[[ -n ${DLOCK_ZOOKEEPER_URI:-} ]] && withdrawn zookeeper "$(with_scheme "$DLOCK_ZOOKEEPER_URI" zookeeper session_timeout=30s)"
[[ -n ${DLOCK_REDIS_URI:-} ]] && withdrawn redis_fair "$(with_scheme "$DLOCK_REDIS_URI" redis+fair ttl=30s)"
[[ -n ${DLOCK_POSTGRES_URI:-} ]] && withdrawn postgres_advisory "$(with_scheme "$DLOCK_POSTGRES_URI" postgres+advisory ttl=30s)"

echo "$failures failure(s)"
exit $((failures > 0))
