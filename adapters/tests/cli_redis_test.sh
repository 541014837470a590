#!/usr/bin/env bash
# cli/redis: the lost-lease scenarios of `dlock run` against the launcher's real Redis (DLOCK_REDIS_URI,
# DLOCK_REDIS_PORT, and DLOCK_SERVERS to stop and start it; the test FAILS when they are unset).
# The command is a shell whose child shell (the "grandchild") records its pid and would write 30 s
# later:
#  - the lock's key is deleted on the server: the watchdog's renewal finds it gone, the lease is
#    lost, dlock exits 70 and the grandchild is gone too;
#  - dlock is SIGKILLed: when the next `dlock run` gets the lock (after the ttl), its command
#    finds no process of the first command still running;
#  - the command inherits no descriptor of dlock's own (its Redis connection);
#  - the server is down when `dlock run --wait 30s` starts and comes back: the command runs.
# Usage: cli_redis_test.sh DLOCK
set -u
dlock=$1
for v in DLOCK_REDIS_URI DLOCK_REDIS_PORT DLOCK_SERVERS; do
  [[ -n ${!v:-} ]] || { echo "FAIL: $v is not set: eval \"\$(compose/native/dlock-servers up redis)\" first"; exit 1; }
done
# These steps are not about restarts: they opt out of the restart delay (a Redis younger than a
# ttl grants nothing, and the launcher's Redis may have just been started or restarted by another
# test). The restart step at the end keeps it, with a short ttl.
uri="$DLOCK_REDIS_URI?wait_after_restart=false"
command -v redis-cli >/dev/null || { echo "FAIL: redis-cli (the server's client) is not installed"; exit 1; }
work=$(mktemp -d)
pids=()
redis_stopped=""
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
  local p
  [[ -z $redis_stopped ]] || "$DLOCK_SERVERS" start redis >/dev/null  # never leave the server down
  for p in "${pids[@]}" $(cat "$work"/*.pid 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
# shellcheck source=adapters/tests/cli_expect.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_expect.sh"
# shellcheck source=adapters/tests/cli_process_wait.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_process_wait.sh"
name="cli-redis-$$-$RANDOM"

cat >"$work/grandchild.sh" <<'EOF'
sh -c 'echo $$ > "$1.pid"; sleep 30; echo late > "$1.late"' grandchild "$1"
EOF

# ---- the key is deleted on the server while the command runs.
"$dlock" run "$uri" "$name" --ttl 1500ms --grace 500ms -- sh "$work/grandchild.sh" "$work/deleted" \
  >"$work/out" 2>"$work/err" &
runner=$!
pids+=("$runner")
if appears "$work/deleted.pid"; then
  gc=$(cat "$work/deleted.pid")
  deleted=$(redis-cli -p "$DLOCK_REDIS_PORT" DEL "$name")
  [[ $deleted == 1 ]] || fail "key deleted: redis-cli DEL $name answered '$deleted', expected 1 (is the key name still the lock name?)"
  if exits "$runner" 10; then
    wait "$runner"; st=$?
    if [[ $st -eq 70 ]]; then ok "key deleted: exit 70"; else fail "key deleted: exit $st, expected 70"; cat "$work/err"; fi
    if running "$gc"; then fail "key deleted: the grandchild $gc still runs"; else ok "key deleted: the grandchild is gone"; fi
  else
    fail "key deleted: dlock still runs 10 s later"
  fi
else
  fail "key deleted: the command never started"; cat "$work/err"
fi

# ---- dlock is SIGKILLed; the next run checks that nothing of the first one runs on.
"$dlock" run "$uri" "$name" --ttl 1500ms -- sh "$work/grandchild.sh" "$work/killed" \
  >"$work/out" 2>"$work/err" &
runner=$!
pids+=("$runner")
if appears "$work/killed.pid"; then
  gc=$(cat "$work/killed.pid")
  kill -9 "$runner"
  wait "$runner" 2>/dev/null
  # The next holder's command looks for the grandchild the moment it starts.
  # shellcheck disable=SC2016  # $1 is the inner sh's: the pid passed after "check"
  "$dlock" run "$uri" "$name" --wait 15s -- \
    sh -c '[ -r /proc/$1/status ] && ! grep -q "^State:[[:space:]]*Z" /proc/$1/status && exit 42; exit 0' check "$gc" \
    >"$work/out" 2>"$work/err"
  case $? in
    0) ok "dlock SIGKILLed: the next holder found nothing of the first command running" ;;
    42) fail "dlock SIGKILLed: the first command's grandchild $gc still ran when the next holder got the lock" ;;
    *) fail "dlock SIGKILLed: the next run failed"; cat "$work/err" ;;
  esac
  [[ ! -e $work/killed.late ]] || fail "dlock SIGKILLed: the grandchild wrote"
else
  fail "dlock SIGKILLed: the command never started"; cat "$work/err"
fi

# ---- the command inherits the descriptors dlock was given, none of its own (the client
# library's connection to Redis has no FD_CLOEXEC): a process holding a copy of a connection
# keeps a connection-bound lock alive after dlock is gone.
# Compared: the sockets the command holds, and those this script holds (and so passes on).
# shellcheck disable=SC2016  # expanded where it runs: $$ is this shell here, the command's shell in dlock run
list_sockets='for f in /proc/$$/fd/*; do readlink "$f"; done | grep "^socket:" | sort'
eval "$list_sockets" >"$work/sockets-given"
"$dlock" run "$uri" "$name" -- sh -c "$list_sockets" >"$work/sockets-run" 2>"$work/err" ||
  fail "sockets: dlock run failed"
extra=$(comm -23 "$work/sockets-run" "$work/sockets-given" | tr '\n' ' ')
if [[ -z $extra ]]; then ok "the command holds no socket of dlock's"; else fail "the command holds dlock's sockets: $extra"; fi

# ---- the server is down when dlock starts and back within --wait: connecting is part of the
# wait, so dlock gets the lock instead of exiting 69 at once. The restarted server grants nothing
# for one ttl (wait_after_restart, so holders from before the restart are told first): with a 2s
# ttl that is part of the wait too.
"$DLOCK_SERVERS" stop redis >/dev/null || fail "could not stop redis"
redis_stopped=1
"$dlock" run "$DLOCK_REDIS_URI" "$name" --wait 30s --ttl 2s -- touch "$work/after-restart" >"$work/out" 2>"$work/err" &
runner=$!
pids+=("$runner")
sleep 1  # dlock tries to connect meanwhile (were it slower to start, the check would only be weaker)
"$DLOCK_SERVERS" start redis >/dev/null || fail "could not start redis again"
redis_stopped=""
if exits "$runner" 30; then
  wait "$runner"; st=$?
  if [[ $st -eq 0 && -e $work/after-restart ]]; then
    ok "server back within --wait: the command ran"
  else
    fail "server back within --wait: exit $st, expected 0 and the command run"; cat "$work/err"
  fi
else
  fail "server back within --wait: dlock still waits 30 s later"
fi

echo "$failures failure(s)"
exit $((failures > 0))
