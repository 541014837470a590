#!/usr/bin/env bash
# cli/compare_server_<backend>: `dlock compare --faults connection-kill,server-pause` on the launcher's
# real servers (the family's variable unset FAILS the test), asserting the declared capabilities:
#   - the fault was injected: the holder caught inside its write, >= 1 connection ended on the
#     server (connection-kill), the server frozen for >= 2.5 ttls (server-pause);
#   - fencing: the fenced resource refuses every stale write;
#   - lost_notification: a holder told it lost the lock was told before any other client's grant,
#     and no overlap went unnotified. A session-bound SQL lock (postgres+advisory, postgres+forupdate,
#     mysql+getlock, mysql+forupdate) is freed by the server the instant its session dies, before the
#     holder can be told: there the holder must be told within a ttl plus a margin, and the test
#     prints by how much its notification came after the successor's grant;
#   - expiring: the next grant comes within the holder's write (connection-kill: 2 ttls) plus a ttl
#     plus a generous 5 s after the kill, within a ttl plus 5 s after the server's resume.
# Every cell runs with ttl 1s. The server a fault froze is resumed by dlock compare's own guard;
# this script checks it answers afterwards.
# Usage: cli_compare_server_test.sh DLOCK VARIABLE PROCESS RUN...
#   VARIABLE holds the server's URI, PROCESS is its launcher name; each RUN is "SCHEMES FAULTS", one
#   dlock compare run (a representative scheme under both faults; the session-bound SQL schemes
#   under connection-kill, where they behave differently). Each backend's CMakeLists.txt gives them
#   (dlock_compare_families).
set -u
if [[ $# -lt 4 ]]; then
  echo "usage: cli_compare_server_test.sh DLOCK VARIABLE PROCESS \"SCHEMES FAULTS\"..."
  exit 2
fi
dlock=$1 variable=$2 process=$3
shift 3
runs=("$@")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for v in "$variable" DLOCK_SERVERS; do
  [[ -n ${!v:-} ]] || { echo "FAIL: $v is not set: eval \"\$(compose/native/dlock-servers up $process)\" first"; exit 1; }
done

failures=0
reports=()
for i in "${!runs[@]}"; do
  read -r backends faults <<<"${runs[$i]}"
  start=$(date +%s)
  "$dlock" compare --backends "$backends" --faults "$faults" --log "$work/workers-$i.log" --json "$work/report-$i.json" \
    >"$work/out" 2>"$work/err"
  rc=$?
  echo "$backends x $faults: $(($(date +%s) - start)) s"
  sed -n '1,/^$/p' "$work/out"  # the table, not its key
  [[ $rc == 0 ]] || { echo "FAIL: dlock compare exited $rc"; cat "$work/err"; failures=1; }
  reports+=("$work/report-$i.json")
done
"$DLOCK_SERVERS" pid "$process" >/dev/null 2>&1 || { echo "FAIL: $process is not running after the run"; failures=1; }
grep -q "^T" <(ps -o state= -p "$("$DLOCK_SERVERS" pid "$process" | head -1)" 2>/dev/null) &&
  { echo "FAIL: $process is still stopped after the run"; failures=1; }

python3 - "${runs[@]}" -- "${reports[@]}" <<'PY' || failures=1
import json, sys
split = sys.argv.index("--")
runs, files = sys.argv[1:split], sys.argv[split + 1:]
cells, ttl = {}, None
for f in files:
    try:
        report = json.load(open(f))
    except (OSError, ValueError) as e:
        print("FAIL: no report", f, e)
        sys.exit(1)
    ttl = report["ttl_ms"]
    cells.update({(c["backend"], c["scenario"]): c for c in report["cells"]})
session_bound = {"postgres+advisory", "postgres+forupdate", "mysql+getlock", "mysql+forupdate"}
problems = []
def expect(condition, message):
    if not condition:
        problems.append(message)
for run in runs:
    backends, faults = run.split()
    for backend, fault in ((b, f) for b in backends.split(",") for f in faults.split(",")):
        c = cells.get((backend, fault))
        key = f"{backend} x {fault}"
        if c is None or not c["ran"]:
            expect(False, f"{key}: not run: {c and c['observation']}")
            continue
        r = c["check"]
        expect(c["victim"] is not None and c["fault_not_injected"] == "", f"{key}: not injected: {c['observation']}")
        if fault == "connection-kill":
            expect(c["connections_killed"] >= 1, f"{key}: no connection ended on the server")
            recovery_bound = 2 * ttl + ttl + 5000
        else:
            expect(c["paused_for_ms"] >= 2.5 * ttl, f"{key}: the server was frozen only {c['paused_for_ms']} ms")
            recovery_bound = ttl + 5000
        stale, refused = r["stale_writes_accepted_by_naive"], r["stale_writes_refused_by_fenced"]
        expect(refused == stale, f"{key}: the fence refused {refused} of {stale} stale writes")
        recovered = c["recovered_after_ms"]
        expect(recovered is not None and recovered <= recovery_bound,
               f"{key}: next grant {recovered} ms after the fault, expected within {recovery_bound} ms")
        told, successor = c["victim_told_after_ms"], c["successor_granted_after_ms"]
        if fault == "connection-kill" and backend in session_bound:
            expect(told is not None and told <= ttl + 5000, f"{key}: the holder was told {told} ms after the kill, expected within {ttl + 5000} ms")
            if told is not None and successor is not None and told > successor:
                print(f"{key}: the server freed the session's lock at once: the holder was told {told - successor:.0f} ms "
                      f"after the successor's grant ({told:.0f} ms after the kill, the successor {successor:.0f} ms)")
        else:
            expect(r["unnotified_losses"] == 0, f"{key}: {r['unnotified_losses']} overlaps unnotified")
            if told is not None and successor is not None:
                expect(told < successor, f"{key}: the holder was told {told - successor:.0f} ms after the successor's grant")
        print(f"{key}: {c['observation']}")
for p in problems:
    print("FAIL:", p)
sys.exit(1 if problems else 0)
PY
exit $failures
