#!/usr/bin/env bash
# cli/messages: what dlock says when it does not get the lock, and that --wait bounds the whole
# wait, connecting included, against servers that refuse or that accept and never answer.
# Usage: cli_messages_test.sh DLOCK
set -u
dlock=$1
work=$(mktemp -d)
trap 'kill "${holder:-}" "${silent:-}" 2>/dev/null; rm -rf "$work"' EXIT
# shellcheck source=adapters/tests/cli_expect.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_expect.sh"
never_says() {
  ! grep -qF -- "$1" "$work/err" || { fail "did not expect '$1' in:"; sed 's/^/  stderr: /' "$work/err"; }
}
uri="file://$work/locks"
name="msg-$$"

# A URI given, the NAME forgotten: the NAME is what is missing.
expect 64 "hold URI without NAME" -- env -u DLOCK_URI "$dlock" hold redis://127.0.0.1:6379
says "no NAME after the URI redis://127.0.0.1:6379"
never_says "no URI"
expect 64 "run URI without NAME" -- env -u DLOCK_URI "$dlock" run "redis://u:S3cret@127.0.0.1:6379" -- true
says "no NAME after the URI redis://u:***@127.0.0.1:6379"
never_says "S3cret"
expect 0 "with DLOCK_URI set, an operand that looks like a URI is the NAME" -- \
  env DLOCK_URI="$uri" "$dlock" run "http://a-name" -- true

# Not free: a sentence saying what is taken, and how long dlock tried.
coproc HOLD { "$dlock" hold "$uri" "$name" --permits 2 --of 2; }
holder=$HOLD_PID
read -r -t 10 line <&"${HOLD[0]}"
[[ ${line:-} == acquired* ]] || fail "dlock hold --permits 2 --of 2 printed '${line:-}'"
expect 75 "a semaphore miss with --wait 0" -- "$dlock" run "$uri" "$name" --permits 1 --of 2 --wait 0 -- true
says "no permit of semaphore '$name' (2 in all) is free; tried once (--wait 0)"
never_says "timed out"
expect 75 "a semaphore miss of 2 permits" -- "$dlock" run "$uri" "$name" --permits 2 --of 2 --wait 200ms -- true
says "fewer than 2 of the 2 permits of semaphore '$name' are free; gave up after waiting 200ms"
hold_in=${HOLD[1]}
exec {hold_in}>&-
wait "$holder"
coproc HOLD { "$dlock" hold "$uri" "$name"; }
holder=$HOLD_PID
read -r -t 10 line <&"${HOLD[0]}"
expect 75 "a mutex miss with --wait 0" -- "$dlock" run "$uri" "$name" --wait 0 -- true
says "lock '$name' is held by someone else"
says "tried once (--wait 0)"
never_says "timed out waiting"
hold_in=${HOLD[1]}
exec {hold_in}>&-
wait "$holder"

# --ttl where a grant's ttl is set by something else: refused, naming it, before connecting.
expect 64 "--ttl on zookeeper://" -- "$dlock" run zookeeper://127.0.0.1:1/dlock "$name" --ttl 5s -- true
says "--ttl is not used by zookeeper://"
says "session_timeout"

# --wait bounds the whole wait, connecting included: a port that refuses, and a listener that
# accepts and never answers (the kernel completes the handshake; nothing is ever read or written).
python3 - "$work/port" <<'EOF' &
import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(128)
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
time.sleep(600)
EOF
silent=$!
for _ in $(seq 50); do [[ -s $work/port ]] && break; sleep 0.1; done
port=$(cat "$work/port")
# --wait 1s, plus the documented 0.5 s, plus the time to start a process and to be scheduled on a
# machine running the suite under a sanitizer (2.6 s seen there); the connect timeouts this guards
# against took 5-10 s.
bound_ms=4000
for scheme_uri in "zookeeper://127.0.0.1:$port/dlock" "postgres+advisory://u:pw@127.0.0.1:$port/db" \
  "mysql+getlock://u:pw@127.0.0.1:$port/db" "redis://127.0.0.1:$port" "memcached://127.0.0.1:$port" \
  "postgres+index://u:pw@127.0.0.1:$port/db" "mysql+index://u:pw@127.0.0.1:$port/db"; do
  scheme=${scheme_uri%%://*}
  "$dlock" backends | grep -q "^$scheme " || { echo "ok: $scheme not built"; continue; }
  started=$(date +%s%N)
  expect 69 "$scheme: a server that never answers, --wait 1s" -- "$dlock" run "$scheme_uri" "$name" --wait 1s -- true
  took=$((($(date +%s%N) - started) / 1000000))
  ((took <= bound_ms)) || fail "$scheme: took ${took}ms for --wait 1s against a silent server (bound ${bound_ms}ms)"
  never_says "pw@"
done
refused=$((port + 1))
while (exec 3<>"/dev/tcp/127.0.0.1/$refused") 2>/dev/null; do refused=$((refused + 1)); done
started=$(date +%s%N)
expect 69 "zookeeper: a refused port, --wait 1s" -- "$dlock" run "zookeeper://127.0.0.1:$refused/dlock" "$name" --wait 1s -- true
took=$((($(date +%s%N) - started) / 1000000))
((took <= bound_ms)) || fail "zookeeper: took ${took}ms for --wait 1s against a refused port"

echo "$failures failure(s)"
exit $((failures > 0))
