#!/usr/bin/env bash
# cli/compare and cli/compare_redis: `dlock compare` end to end, asserting only what cannot flake.
#   local  usage errors exit 64 before anything runs; a backend whose server variable is unset is
#          a "not run" row, not a dropped one; an unreachable server exits 69; every fault and
#          every built scheme (their servers unset: not run, at once) print a table within 160
#          columns, one short verdict per cell; and memory,file x healthy,holder-pause (2 s, 3
#          clients): every cell in the JSON with its verdict, memory:// (process scope) run as
#          threads of one process in healthy (no overlap: safe) and `not run: process scope`
#          elsewhere, file:// never overlaps and is unavailable while its holder is paused, the
#          fence refuses every stale write.
#   redis  redis,redis+unsafe-del x holder-pause on the launcher's Redis (DLOCK_REDIS_URI; the
#          test FAILS when it is unset): the run completes, both rows are reported, the holder
#          was paused inside its write, the fence refuses every stale write;
#          redis,redis+unsafe-del x pause-before-write: the resumed holder's write is stale, and
#          refused: redis is safe with fencing, redis+unsafe-del (no token) unsafe; its lease-lost
#          line is in the --log file the report names, never on stderr; redis x
#          server-restart (DLOCK_SERVERS): restarted, granted again, the server up afterwards.
# Every run here passes --no-speed (the local one asserts the JSON then has none): the speed phase
# and --html are cli_compare_html_test.sh's.
# Usage: cli_compare_test.sh DLOCK local|redis [REDIS_BUILT (ON/OFF, local: the unset and
#        unreachable steps name the redis scheme)]
set -u
dlock=$1
mode=$2
redis_built=${3:-ON}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=adapters/tests/cli_expect.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_expect.sh"

# expect_exit CODE WHAT ARGS...: runs `dlock compare ARGS...`, its status must be CODE, and a
# failure must be compare's own message ("dlock compare: ..."), not an unknown command's.
expect_exit() {
  local want=$1 what=$2
  shift 2
  "$dlock" compare "$@" >"$work/out" 2>"$work/err"
  local got=$?
  if [[ $got == "$want" ]]; then ok "$what: exit $got"; else fail "$what: exit $got, expected $want"; cat "$work/err"; fi
  [[ $want == 0 ]] || grep -q "^dlock compare: " "$work/err" || fail "$what: not compare's message: $(head -1 "$work/err")"
}

# check_json FILE PYTHON...: each PYTHON asserts (expect) on `cells`, a dict (backend, scenario) -> cell;
# a failed expectation (or a Python error) is a failure of the test, not only a printed line.
check_json() {
  if ! run_json_checks "$@"; then
    fail "the JSON checks of $(basename "$1") (above)"
    return 1
  fi
}
run_json_checks() {
  python3 - "$@" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
cells = {(c["backend"], c["scenario"]): c for c in report["cells"]}
problems = []
def expect(condition, message):
    if not condition:
        problems.append(message)
for code in sys.argv[2:]:
    exec(code)
for p in problems:
    print("FAIL:", p)
sys.exit(1 if problems else 0)
PY
}

# The fence refuses exactly the stale writes, in every cell that ran (it judges in the order the
# checker does): the property `dlock compare` reports in its "stale writes" column.
fence_python='
for key, c in cells.items():
    if c["ran"]:
        r = c["check"]
        refused, stale = r["stale_writes_refused_by_fenced"], r["stale_writes_accepted_by_naive"]
        expect(refused == stale, f"{key}: the fence refused {refused} of {stale} stale writes")
'

if [[ $mode == local ]]; then
  expect_exit 64 "unknown backend" --backends memory,nosuch
  grep -q "unknown scheme 'nosuch'" "$work/err" || fail "the unknown backend is not named: $(cat "$work/err")"
  expect_exit 64 "unknown fault" --faults healthy,meteor
  grep -q "unknown fault 'meteor'" "$work/err" || fail "the unknown fault is not named: $(cat "$work/err")"
  expect_exit 64 "one client" --clients 1
  expect_exit 64 "zero duration" --duration 0
  expect_exit 64 "an operand" memory://
  expect_exit 64 "unwritable --json" --backends memory --json "$work/no/such/dir/report.json"
  expect_exit 64 "unwritable --log" --backends memory --log "$work/no/such/dir/workers.log"
  [[ ! -s $work/out ]] || fail "a usage error printed a table: it ran something"

  if [[ $redis_built != ON ]]; then
    echo "not checked here: the unset and unreachable server steps (the redis backend is not built)"
  else
  # Unset: reported in its row (and nothing to run, so this is quick).
  if ! env -u DLOCK_REDIS_URI "$dlock" compare --backends redis --faults healthy,holder-kill --json "$work/unset.json" \
    >"$work/out" 2>"$work/err"; then
    fail "a run with only unset variables did not exit 0: $(cat "$work/err")"
  fi
  check_json "$work/unset.json" '
for s in ("healthy", "holder-kill"):
    c = cells.get(("redis", s))
    expect(c is not None and not c["ran"] and c["observation"] == "not run: DLOCK_REDIS_URI unset", f"redis/{s}: {c}")
' && ok "an unset variable is a 'not run' row"
  grep -q "not run: DLOCK_REDIS_URI unset" "$work/out" || fail "the table does not show the unset variable"

  # Unreachable (nothing listens on port 1): 69, before any cell runs; the password never shown.
  DLOCK_REDIS_URI=redis://dlock:pw-sekrit@127.0.0.1:1 "$dlock" compare --backends memory,redis --faults healthy \
    >"$work/out" 2>"$work/err"
  rc=$?
  if [[ $rc == 69 ]]; then ok "unreachable server: exit 69"; else fail "unreachable server: exit $rc, expected 69: $(cat "$work/err")"; fi
  grep -q "healthy on memory" "$work/err" && fail "a cell ran before the unreachable server was found"
  grep -q "redis is unreachable" "$work/err" || fail "the unreachable backend is not named: $(cat "$work/err")"
  grep -q "pw-sekrit" "$work/out" "$work/err" && fail "the password was printed"
  fi

  # Every fault, every built scheme but file: the terminal's table fits 160 columns. The server
  # variables unset, every server's cell is "not run" at once; memory:// runs healthy only (1 s).
  schemes=$("$dlock" compare --backends nosuch 2>&1 | sed -n 's/.*expected schemes from: //p' | tr -d ' ' |
    tr ',' '\n' | grep -vx file | paste -sd,)  # file:// would run its faults: minutes
  unset_all=()
  for v in $(compgen -e | grep '^DLOCK_'); do unset_all+=(-u "$v"); done
  env "${unset_all[@]}" "$dlock" compare --backends "$schemes" --duration 1s --no-speed --json "$work/wide.json" \
    >"$work/out" 2>"$work/err"
  rc=$?
  [[ $rc == 0 ]] || { fail "every scheme x every fault, servers unset: exit $rc"; cat "$work/err"; }
  widest=$(awk '{ if (length($0) > w) w = length($0) } END { print w + 0 }' "$work/out")
  if [[ $widest -le 160 ]]; then
    ok "every fault x ${schemes//,/ }: the output is $widest columns wide"
  else
    fail "the output is $widest columns wide, over 160"; cat "$work/out"
  fi
  if python3 - "$work/out" "$schemes" <<'PY'; then
import sys
lines = open(sys.argv[1]).read().splitlines()
schemes = sys.argv[2].split(",")
header = lines[0].split()
problems = []
if header[0] != "backend" or header[-1] != "worst" or len(header) != 18:
    problems.append(f"the header is not backend, 16 faults, worst: {header}")
rows = {line.split()[0]: line.split() for line in lines[1:len(schemes) + 1]}
for s in schemes:
    row = rows.get(s)
    if row is None or len(row) != len(header):
        problems.append(f"{s}: not one short word per cell: {row}")
    elif s != "memory" and any(cell != "-" for cell in row[1:]):
        problems.append(f"{s}: a cell ran or is not '-' with its server unset: {row}")
if rows.get("memory", [None, None])[1] != "safe":
    problems.append(f"memory healthy (threads of one process) is not safe: {rows.get('memory')}")
for p in problems:
    print("FAIL:", p)
sys.exit(1 if problems else 0)
PY
    ok "one short verdict per cell, '-' where not run"
  else
    failures=$((failures + 1))
  fi

  start=$(date +%s)
  "$dlock" compare --backends memory,file --faults healthy,holder-pause --duration 2s --clients 3 --no-speed \
    --log "$work/workers.log" --json "$work/report.json" --markdown "$work/report.md" >"$work/out" 2>"$work/err"
  rc=$?
  echo "memory,file x healthy,holder-pause: $(($(date +%s) - start)) s"
  cat "$work/out"
  completed "the run" "$rc"
  grep -q "holder-pause on file" "$work/err" || fail "no progress line on stderr"
  check_json "$work/report.json" '
expect(report["ttl_ms"] == 1000 and report["clients"] == 3, f"run settings: {report}")
expect(report.get("speed", "absent") is None, "--no-speed: the JSON has speed figures")
for key in (("memory", "healthy"), ("file", "healthy"), ("file", "holder-pause")):
    c = cells.get(key)
    expect(c is not None and c["ran"] and c["check"]["counts"]["clients"] == 3, f"{key} missing or not run: {c}")
c = cells.get(("memory", "holder-pause"))
expect(c is not None and not c["ran"] and c["observation"].startswith("not run: process scope")
       and c["verdict_kind"] == "not_run", f"memory holder-pause is not \"not run: process scope\": {c}")
if not problems:
    m = cells[("memory", "healthy")]
    expect(m["check"]["overlaps"] == 0 and m["check"]["counts"]["grants"] > 10,
           "memory:// with its clients threads of one process: {}".format(m["check"]))
    expect(m["verdict"] == "safe" and m["verdict_kind"] == "safe", "memory healthy: {}".format(m["verdict"]))
    for s in ("healthy", "holder-pause"):
        expect(cells[("file", s)]["check"]["overlaps"] == 0, f"file:// overlapped in {s}")
    seen = cells[("file", "healthy")]
    expect(seen["observation"] == "ok" and seen["verdict"] == "safe", "file healthy: {}, {}".format(seen["observation"], seen["verdict"]))
    paused = cells[("file", "holder-pause")]
    expect(paused["victim"] is not None, "no file:// holder was paused")
    # file:// keeps the lock with its paused holder: nobody is granted for the 2.5-ttl pause.
    expect(paused["verdict_kind"] == "unavailable" and paused["unavailable_for_ms"] >= 2400,
           "file holder-pause: {}".format(paused["verdict"]))
rows = {r["backend"]: r for r in report["backends"]}
expect(rows["memory"]["worst"] == "safe" and rows["memory"]["counts"]["not_run"] == 1, "memory row: {}".format(rows["memory"]))
expect(rows["file"]["worst"] == "unavailable", "file row: {}".format(rows["file"]))
' "$fence_python" && ok "the JSON has every cell and verdict; memory runs in one process, safe; file unavailable while paused"
  for row in "| memory | safe (1 safe, 1 not run) | **safe** |" "| file | unavailable (1 safe, 1 unavailable) | **safe** |"; do
    grep -qF "$row" "$work/report.md" || fail "the Markdown table has no row '$row'"
  done
  grep -q "^memory  *safe  *-  *safe$" "$work/out" || fail "the terminal's memory row: $(grep '^memory' "$work/out")"
elif [[ $mode == redis ]]; then
  [[ -n ${DLOCK_REDIS_URI:-} ]] || { echo "FAIL: DLOCK_REDIS_URI is not set: eval \"\$(compose/native/dlock-servers up redis)\" first"; exit 1; }
  start=$(date +%s)
  "$dlock" compare --backends redis,redis+unsafe-del --faults holder-pause --duration 1s --no-speed \
    --log "$work/pause.log" --json "$work/report.json" >"$work/out" 2>"$work/err"
  rc=$?
  echo "redis,redis+unsafe-del x holder-pause: $(($(date +%s) - start)) s"
  cat "$work/out"
  completed "the run" "$rc"
  check_json "$work/report.json" '
for b in ("redis", "redis+unsafe-del"):
    c = cells.get((b, "holder-pause"))
    expect(c is not None and c["ran"], f"{b}: not reported as run: {c}")
    if c is not None and c["ran"]:
        expect(c["victim"] is not None and c["fault_not_injected"] == "", f"{b}: no holder was paused: {c}")
        paused, uri = c["paused_for_ms"], c["uri"]
        expect(paused >= 2500, f"{b}: paused only {paused} ms, not 2.5 ttls")
        expect(("unsafe=true" in uri) == b.endswith("unsafe-del"), f"{b}: opened as {uri}")
' "$fence_python" && ok "both rows reported, each holder paused 2.5 ttls, the fence refuses every stale write"
  grep -q "lease on lock" "$work/err" && fail "a worker's lease line reached stderr: $(grep -m1 'lease on lock' "$work/err")"

  # Kleppmann's pause on a fencing backend: the first holder stops itself between its grant and its
  # write for 2.5 ttls; Redis frees the key after 1 ttl, a successor writes with a larger token, and
  # the resumed holder's write is stale: the fenced resource must refuse it.
  "$dlock" compare --backends redis,redis+unsafe-del --faults pause-before-write --no-speed \
    --log "$work/kleppmann.log" --json "$work/kleppmann.json" >"$work/out" 2>"$work/err"
  rc=$?
  cat "$work/out"
  completed "the pause-before-write run" "$rc"
  check_json "$work/kleppmann.json" '
c = cells.get(("redis", "pause-before-write"))
expect(c is not None and c["ran"] and c["victim"] is not None, f"redis: the first holder did not stop itself: {c}")
if not problems:
    r = c["check"]
    expect(r["stale_writes_accepted_by_naive"] >= 1, f"the resumed holder wrote no stale token: {r}")
    expect(r["counts"]["writes_without_token"] == 0, "redis:// gives every write a token")
    # The resumed holder writes while its successors hand the lock on: overlapping, with tokens
    # the fence orders: safe with fencing (safe, were no successor writing just then).
    want = "safe_with_fencing" if r["overlaps"] > 0 else "safe"
    verdict, overlaps = c["verdict"], r["overlaps"]
    expect(c["verdict_kind"] == want, f"redis pause-before-write: {verdict} with {overlaps} overlaps")
u = cells.get(("redis+unsafe-del", "pause-before-write"))
expect(u is not None and u["ran"], f"redis+unsafe-del: not run: {u}")
if u is not None and u["ran"]:
    counts, verdict, overlaps = u["check"]["counts"], u["verdict"], u["check"]["overlaps"]
    expect(counts["writes_without_token"] == counts["writes"], "redis+unsafe-del gives no token")
    expect(u["verdict_kind"] == ("unsafe" if overlaps > 0 else "safe"),
           f"redis+unsafe-del pause-before-write: {verdict} with {overlaps} overlaps")
named = report["worker_log"]
expect(named == sys.argv[1].replace(".json", ".log"), f"the report names {named}, not the --log file")
' "$fence_python" && ok "paused before its write: redis's stale write refused, safe with fencing; redis+unsafe-del unsafe"
  # Resumed, the holder writes for 200 ms, and its watchdog reports its lease lost ("dlock: lease
  # on lock ... lost"): that line goes to the workers' log (--log), after its cell, which the
  # report names; never between the progress lines on stderr.
  grep -q "lease on lock" "$work/err" && fail "a worker's lease line reached stderr: $(grep -m1 'lease on lock' "$work/err")"
  grep -q "pause-before-write on redis" "$work/err" || fail "no progress line on stderr: $(cat "$work/err")"
  if grep -q "^\[redis x pause-before-write\] dlock: lease on lock" "$work/kleppmann.log"; then
    ok "the workers' lease lines are in the --log file, after their cell"
  else
    fail "no lease line of the resumed redis holder in the log: $(head -3 "$work/kleppmann.log")"
  fi
  grep -qF "$work/kleppmann.log" "$work/out" || fail "the terminal's report does not name the log"
  grep -qF "dlock compare: the workers' stderr" "$work/err" || fail "stderr does not name the workers' log"

  # The server restarted through the launcher, the holder inside a 2-ttl write: the run completes,
  # the lock is granted again, and the server is up afterwards. (Whether the holder was told before
  # its successor's grant is reported, not asserted: wait_after_restart's margin over the holder's
  # watchdog is a fraction of a second, too thin for a loaded machine.)
  if [[ -z ${DLOCK_SERVERS:-} ]]; then
    fail "DLOCK_SERVERS is not set: eval \"\$(compose/native/dlock-servers up redis)\" first"
  else
    "$dlock" compare --backends redis --faults server-restart --no-speed --log "$work/restart.log" \
      --json "$work/restart.json" >"$work/out" 2>"$work/err"
    rc=$?
    cat "$work/out"
    completed "the server-restart run" "$rc"
    "$DLOCK_SERVERS" pid redis >/dev/null 2>&1 || { fail "redis is not running after the run"; "$DLOCK_SERVERS" start redis; }
    check_json "$work/restart.json" '
c = cells.get(("redis", "server-restart"))
expect(c is not None and c["ran"] and c["fault_not_injected"] == "" and c["server_down_for_ms"] is not None,
       f"redis: the server was not restarted: {c}")
if not problems:
    expect(c["recovered_after_ms"] is not None, "no grant after the restart")
' "$fence_python" && ok "redis restarted: granted again, the fence refuses every stale write"
  fi
else
  echo "usage: cli_compare_test.sh DLOCK local|redis"
  exit 2
fi
exit $((failures > 0))
