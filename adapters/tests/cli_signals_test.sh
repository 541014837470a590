#!/usr/bin/env bash
# cli/signals: no part of `dlock run`'s command outlives its lock, and a signal while waiting
# for the lock ends the wait. The command is a shell whose child shell (the "grandchild")
# records its pid and would write a file 30 s later:
#  - lease lost: the grandchild is killed, not only the command;
#  - dlock SIGKILLed: the grandchild is killed (nothing of the command runs on as an orphan);
#  - dlock SIGTERMed while the command runs: the signal reaches the grandchild too;
#  - SIGINT/SIGTERM while run/hold wait for a lock another process holds: exit 130/143 at
#    once, the command never started, nothing acquired.
# Cross-process locks use file:// (no server needed). Usage: cli_signals_test.sh DLOCK
set -u
dlock=$1
work=$(mktemp -d)
pids=()  # every process a check started, killed on exit even when a check failed
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
  local p
  for p in "${pids[@]}" $(cat "$work"/*.pid 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
# shellcheck source=adapters/tests/cli_expect.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_expect.sh"
# shellcheck source=adapters/tests/cli_process_wait.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_process_wait.sh"
uri="file://$work/locks"
name="cli-signals-$$"

cat >"$work/grandchild.sh" <<'EOF'
# grandchild.sh TAG: a child shell records its pid in TAG.pid and would write TAG.late in 30 s.
sh -c 'echo $$ > "$1.pid"; sleep 30; echo late > "$1.late"' grandchild "$1"
echo done > "$1.outer"
EOF

# gone PID SECONDS: true once PID no longer runs, within SECONDS (bounded polling).
gone() {
  local i
  for ((i = 0; i < $2 * 20; i++)); do running "$1" || return 0; sleep 0.05; done
  return 1
}
# grandchild_check TAG WHAT: the grandchild of TAG was started and is gone, and never wrote.
grandchild_check() {
  if [[ ! -s $work/$1.pid ]]; then fail "$2: the grandchild never started (cannot tell)"; return; fi
  local gc; gc=$(cat "$work/$1.pid")
  if gone "$gc" 5; then ok "$2: the grandchild $gc is gone"; else fail "$2: the grandchild $gc still runs"; fi
  [[ ! -e $work/$1.late ]] || fail "$2: the grandchild wrote after the lock was gone"
}

# ---- the lease is lost (memory://, no watchdog: it runs out after 2 s, ample time for
# the grandchild to start even on a loaded machine).
"$dlock" run "memory://?ttl=2s&watchdog=false" "$name" --grace 500ms -- sh "$work/grandchild.sh" "$work/lost" \
  >"$work/out" 2>"$work/err"
st=$?
if [[ $st -eq 70 ]]; then ok "lost lease: exit 70"; else fail "lost lease: exit $st, expected 70"; cat "$work/err"; fi
grandchild_check lost "lost lease"

# ---- dlock is SIGKILLed while its command runs.
"$dlock" run "$uri" "$name" -- sh "$work/grandchild.sh" "$work/killed" >"$work/out" 2>"$work/err" &
runner=$!
pids+=("$runner")
if appears "$work/killed.pid"; then
  kill -9 "$runner"
  wait "$runner" 2>/dev/null
  grandchild_check killed "dlock SIGKILLed"
  "$dlock" run "$uri" "$name" --wait 10s -- true || fail "dlock SIGKILLed: the lock did not come free"
else
  fail "dlock SIGKILLed: the command never started"; cat "$work/err"
fi

# ---- dlock gets SIGTERM while its command runs: forwarded to the whole group.
"$dlock" run "$uri" "$name" -- sh "$work/grandchild.sh" "$work/term" >"$work/out" 2>"$work/err" &
runner=$!
pids+=("$runner")
if appears "$work/term.pid"; then
  kill -TERM "$runner"
  if exits "$runner" 10; then
    wait "$runner"; st=$?
    if [[ $st -eq 143 ]]; then ok "SIGTERM while running: exit 143"; else fail "SIGTERM while running: exit $st, expected 143"; fi
  else
    fail "SIGTERM while running: dlock still runs after 10 s"
  fi
  grandchild_check term "SIGTERM while running"
else
  fail "SIGTERM while running: the command never started"; cat "$work/err"
fi

# ---- signals while waiting for a lock another process holds.
coproc HOLD { "$dlock" hold "$uri" "$name"; }
# Bash unsets HOLD_PID and HOLD once it has reaped the holder, which may come before our wait.
holder=$HOLD_PID holder_out=${HOLD[0]} hold_in=${HOLD[1]}
pids+=("$holder")
read -r -t 10 line <&"$holder_out"
[[ ${line:-} == acquired* ]] || fail "the holder printed '${line:-}'"

# waiting VERB SIGNAL STATUS: VERB waits for the held lock; SIGNAL must end it with STATUS.
waiting() {
  local verb=$1 sig=$2 want=$3 what="$1: SIG$2 while waiting"
  rm -f "$work/started"
  if [[ $verb == run ]]; then
    "$dlock" run "$uri" "$name" -- touch "$work/started" >"$work/out" 2>"$work/err" &
  else
    "$dlock" hold "$uri" "$name" >"$work/out" 2>"$work/err" </dev/null &
  fi
  local waiter=$!
  pids+=("$waiter")
  catching "$waiter" || { fail "$what: dlock never installed its signal handlers"; return; }
  kill "-$sig" "$waiter"
  if ! exits "$waiter" 10; then
    fail "$what: dlock still waits 10 s after the signal"; why_still_running "$waiter"; cat "$work/err"
    kill -9 "$waiter"; wait "$waiter" 2>/dev/null; return
  fi
  wait "$waiter"; local st=$?
  if [[ $st -eq $want ]]; then ok "$what: exit $st"; else fail "$what: exit $st, expected $want"; fi
  [[ ! -e $work/started ]] || fail "$what: the command was started"
  ! grep -q acquired "$work/out" || fail "$what: it acquired the lock"
  grep -q "while waiting for lock '$name'" "$work/err" || { fail "$what: no message saying so"; cat "$work/err"; }
}
waiting run INT 130
waiting run TERM 143
waiting hold INT 130
waiting hold TERM 143
exec {hold_in}>&-  # closing stdin ends the holder
wait "$holder"
"$dlock" run "$uri" "$name" --wait 10s -- true || fail "the lock did not come free after the waiters gave up"

echo "$failures failure(s)"
exit $((failures > 0))
