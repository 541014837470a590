#!/usr/bin/env bash
# cli/elect: `dlock elect` with six candidate processes on the launcher's real ZooKeeper
# (DLOCK_ZOOKEEPER_URI; the test FAILS when it is unset). Each candidate's command writes its term,
# every 50 ms, to a fenced store that refuses a term lower than one it has seen, and records when it
# started and when it was told to stop. The leader is
#  - SIGKILLed: the next candidate leads, with a greater term, once the session is gone;
#  - SIGSTOPped (dlock and its command) past the session timeout: the next candidate leads; when the
#    old leader runs again, it is killed and dlock exits 70, and any write it made on waking was
#    refused by the store (the fencing a term is for);
#  - partitioned (its only route to the server, a forwarder, is SIGSTOPped): dlock demotes it, kills
#    its command and exits 70, and the command was told to stop before the next leader started;
#  - done: its command exits 7, dlock resigns and exits 7, and the next candidate leads at once.
# `dlock elect --observe` watches throughout: it prints each leader's term, in increasing order.
# Usage: cli_elect_test.sh DLOCK
set -u
dlock=$1
[[ -n ${DLOCK_ZOOKEEPER_URI:-} ]] || {
  echo "FAIL: DLOCK_ZOOKEEPER_URI is not set: eval \"\$(compose/native/dlock-servers up zookeeper)\" first"
  exit 1
}
uri="$DLOCK_ZOOKEEPER_URI?session_timeout=2s"
work=$(mktemp -d)
pids=()
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
  local p f
  for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null; kill -9 "$p" 2>/dev/null; done
  for f in "$work"/cmd.*.pid; do
    [[ -s $f ]] || continue
    p=$(cat "$f")
    kill -CONT -- "-$p" 2>/dev/null
    kill -9 -- "-$p" 2>/dev/null
  done
  [[ -n ${DLOCK_KEEP_WORK:-} ]] || rm -rf "$work"
}
trap cleanup EXIT
# shellcheck source=adapters/tests/cli_expect.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_expect.sh"
# shellcheck source=adapters/tests/cli_process_wait.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_process_wait.sh"
name="cli-elect-$$-$RANDOM"
echo 0 >"$work/store"

# The command of candidate $2: records its pid (its process group's id) and start, then writes its
# term to the fenced store every 50 ms until told to stop (SIGTERM: records when) or to quit (a file).
# A write goes through a file of its own and a rename: a writer killed in the middle of one (a demoted
# leader's process group gets SIGTERM, which only leader.sh traps) leaves the store's old term, never
# an empty store that refuses every term.
cat >"$work/leader.sh" <<'EOF'
dir=$1 me=$2
echo $$ > "$dir/cmd.$me.pid"
echo "$DLOCK_TERM $(date +%s%N)" > "$dir/started.$me"
trap 'date +%s%N > "$dir/stopped.$me"; exit 0' TERM
while :; do
  flock "$dir/store.lock" sh -c 'max=$(cat "$1/store"); if [ "$2" -ge "$max" ]; then echo "$2" > "$1/store.$3" && mv "$1/store.$3" "$1/store"; else echo "$2" >> "$1/refused"; fi' \
    store "$dir" "$DLOCK_TERM" "$me"
  [ -e "$dir/quit.$me" ] && exit 7
  sleep 0.05
done
EOF

# A TCP forwarder to the server: SIGSTOPping it cuts its candidate off, as a partition would.
cat >"$work/forward.py" <<'EOF'
import socket, sys, threading
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(16)
print(listener.getsockname()[1], flush=True)
def pipe(src, dst):
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
while True:
    client, _ = listener.accept()
    server = socket.create_connection((sys.argv[1], int(sys.argv[2])))
    for a, b in ((client, server), (server, client)):
        threading.Thread(target=pipe, args=(a, b), daemon=True).start()
EOF

declare -A dlock_pid
start_candidate() {  # start_candidate ID URI
  "$dlock" elect "$2" "$name" -- sh "$work/leader.sh" "$work" "$1" >"$work/out.$1" 2>"$work/err.$1" &
  dlock_pid[$1]=$!
  pids+=("$!")
}
# leads ID: true once candidate ID's command has started (within 20 s).
leads() {
  local i
  for ((i = 0; i < 400; i++)); do [[ -s $work/started.$1 ]] && return 0; sleep 0.05; done
  return 1
}
term_of() { cut -d' ' -f1 "$work/started.$1"; }
started_ns() { cut -d' ' -f2 "$work/started.$1"; }
# await_exit ID SECONDS: sets st to candidate ID's dlock exit status once it exits within SECONDS,
# else to "running" (not in a subshell: only this shell can wait for its children).
await_exit() {
  if exits "${dlock_pid[$1]}" "$2"; then
    wait "${dlock_pid[$1]}"
    st=$?
  else
    st=running
  fi
}
# only_leader ID: no candidate but ID has started its command.
only_leader() {
  local f others=""
  for f in "$work"/started.*; do [[ $f == "$work/started.$1" ]] || others+=" ${f##*.}"; done
  [[ -z $others ]] || fail "candidates$others lead besides $1"
}

"$dlock" elect "$uri" "$name" --observe --interval 100ms >"$work/observed" 2>"$work/observe.err" &
observer=$!
pids+=("$observer")

# a leads; b, c, d, e (through the forwarder) and f queue behind it in that order.
start_candidate a "$uri"
leads a || { fail "candidate a was not elected"; cat "$work/err.a"; exit 1; }
ok "a leads with term $(term_of a)"
python3 "$work/forward.py" "${DLOCK_ZOOKEEPER_HOST:-127.0.0.1}" "${DLOCK_ZOOKEEPER_PORT:-2181}" >"$work/forward.port" &
forwarder=$!
pids+=("$forwarder")
appears "$work/forward.port" || fail "the forwarder did not start"
forwarded_uri=$(sed -E "s#^zookeeper://[^/]+#zookeeper://127.0.0.1:$(cat "$work/forward.port")#" <<<"$uri")
for c in b c d e f; do
  if [[ $c == e ]]; then start_candidate "$c" "$forwarded_uri"; else start_candidate "$c" "$uri"; fi
  sleep 0.5  # queued in this order
done
only_leader a

# ---- SIGKILL: b leads once a's session is gone, with a greater term; a's command is gone with it.
a_cmd=$(cat "$work/cmd.a.pid")
kill -9 "${dlock_pid[a]}"
if leads b; then
  ok "a SIGKILLed: b leads"
  (($(term_of b) > $(term_of a))) || fail "b's term $(term_of b) is not greater than a's $(term_of a)"
  running "$a_cmd" && fail "a's command $a_cmd still runs after a was killed"
  rm -f "$work/started.a"
  only_leader b
else
  fail "a SIGKILLed: b was not elected"; cat "$work/err.b"
fi

# ---- SIGSTOP of b (dlock and its command's group) past the session timeout: c leads; b, resumed,
# is demoted, its command killed, and dlock exits 70. The store refused what b wrote on waking.
b_cmd=$(cat "$work/cmd.b.pid")
kill -STOP "${dlock_pid[b]}"
kill -STOP -- "-$b_cmd"
if leads c; then
  ok "b SIGSTOPped: c leads"
  (($(term_of c) > $(term_of b))) || fail "c's term $(term_of c) is not greater than b's $(term_of b)"
else
  fail "b SIGSTOPped: c was not elected"; cat "$work/err.c"
fi
sleep 0.3  # c writes its term first
kill -CONT -- "-$b_cmd"
kill -CONT "${dlock_pid[b]}"
await_exit b 10
if [[ $st == 70 ]]; then ok "b resumed: demoted, exit 70"; else fail "b resumed: exit $st, expected 70"; cat "$work/err.b"; fi
grep -q "lost" "$work/err.b" || fail "b said nothing of its lost leadership"
running "$b_cmd" && fail "b's command $b_cmd still runs after b's demotion"
if [[ -s $work/refused ]]; then
  grep -qvx "$(term_of b)" "$work/refused" && fail "the store refused a term other than b's: $(sort -u "$work/refused")"
  ok "the store refused b's stale term $(term_of b) ($(wc -l <"$work/refused") writes)"
else
  ok "b was killed before it wrote again (nothing for the store to refuse)"
fi
rm -f "$work/started.a" "$work/started.b"
only_leader c

# ---- c is done: its command exits 7, dlock resigns and exits 7, d leads.
touch "$work/quit.c"
await_exit c 10
if [[ $st == 7 ]]; then ok "c's command exited 7: dlock exits 7"; else fail "c: exit $st, expected 7"; cat "$work/err.c"; fi
leads d || fail "c resigned: d was not elected"
rm -f "$work/started.c"
touch "$work/quit.d"
await_exit d 10
[[ $st == 7 ]] || fail "d: exit $st, expected 7"
leads e || { fail "d resigned: e was not elected"; cat "$work/err.e"; }
rm -f "$work/started.d"
only_leader e

# ---- partition of e: its forwarder stops. e is demoted by its own clock and its command told to
# stop before f, elected once the server has ended e's session, starts.
kill -STOP "$forwarder"
if leads f; then
  ok "e partitioned: f leads"
  (($(term_of f) > $(term_of e))) || fail "f's term $(term_of f) is not greater than e's $(term_of e)"
else
  fail "e partitioned: f was not elected"; cat "$work/err.f"
fi
await_exit e 10
if [[ $st == 70 ]]; then ok "e partitioned: demoted, exit 70"; else fail "e partitioned: exit $st, expected 70"; cat "$work/err.e"; fi
if [[ -s $work/stopped.e && -s $work/started.f ]]; then
  stopped=$(cat "$work/stopped.e") started=$(started_ns f)
  if ((stopped < started)); then
    ok "e's command was told to stop $(((started - stopped) / 1000000)) ms before f's started"
  else
    fail "f's command started $(((stopped - started) / 1000000)) ms before e's was told to stop: two leaders"
  fi
else
  fail "e's command recorded no stop"
fi
kill -CONT "$forwarder"
# f leads on until the observer, which asks every 100 ms, has printed it: a leadership shorter than
# that may fall between two of its looks on a loaded machine.
for ((i = 0; i < 200; i++)); do grep -q "^$(term_of f) " "$work/observed" && break; sleep 0.05; done
touch "$work/quit.f"
await_exit f 10
[[ $st == 7 ]] || fail "f: exit $st, expected 7"

# ---- the store ends with f's term; the observer saw the terms rise.
[[ $(cat "$work/store") == "$(term_of f)" ]] || fail "the store holds $(cat "$work/store"), expected f's term $(term_of f)"
kill -TERM "$observer"
wait "$observer"
observed_terms=$(awk '$1 != "-" {print $1}' "$work/observed")
if [[ -z $observed_terms ]]; then
  fail "--observe printed no leader"; cat "$work/observe.err"
elif [[ $observed_terms != "$(sort -n -u <<<"$observed_terms")" ]]; then
  fail "--observe printed terms out of order:"; cat "$work/observed"
else
  ok "--observe printed $(wc -l <<<"$observed_terms") leaders, terms rising"
fi
grep -q "^$(term_of f) " "$work/observed" || fail "--observe never showed f's term $(term_of f)"

[[ $failures -eq 0 ]] || { echo "$failures failure(s)"; exit 1; }
echo "all passed"
