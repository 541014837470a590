#!/usr/bin/env bash
# cli/compare_file: `dlock compare` on file:// (no server), asserting only what cannot flake:
# file x healthy,holder-pause (2 s, 3 clients): healthy is safe; the lock stays with its paused
# holder (a stopped process keeps its flock), so nobody is granted for the 2.5-ttl pause: no
# overlap, unavailable, and the row's worst verdict says so, in the JSON and the Markdown.
# Usage: cli_compare_file_test.sh DLOCK
set -u
dlock=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$dlock" compare --backends file --faults healthy,holder-pause --duration 2s --clients 3 --no-speed \
  --log "$work/workers.log" --json "$work/report.json" --markdown "$work/report.md" >"$work/out" 2>"$work/err"
rc=$?
cat "$work/out"
[[ $rc == 0 ]] || { echo "FAIL: the run exited $rc"; cat "$work/err"; exit 1; }
python3 - "$work/report.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
cells = {(c["backend"], c["scenario"]): c for c in report["cells"]}
problems = []
def expect(condition, message):
    if not condition:
        problems.append(message)
for f in ("healthy", "holder-pause"):
    c = cells.get(("file", f))
    expect(c is not None and c["ran"] and c["check"]["overlaps"] == 0, f"file {f}: not run, or overlapped: {c}")
if not problems:
    seen = cells[("file", "healthy")]
    expect(seen["observation"] == "ok" and seen["verdict"] == "safe", f"file healthy: {seen['observation']}, {seen['verdict']}")
    paused = cells[("file", "holder-pause")]
    expect(paused["victim"] is not None, "no file:// holder was paused")
    expect(paused["verdict_kind"] == "unavailable" and paused["unavailable_for_ms"] >= 2400,
           f"file holder-pause: {paused['verdict']}")
rows = {r["backend"]: r for r in report["backends"]}
expect(rows["file"]["worst"] == "unavailable", f"file row: {rows['file']}")
for p in problems:
    print("FAIL:", p)
print("ok: file healthy safe; holder-pause unavailable while its holder is paused" if not problems else "")
sys.exit(1 if problems else 0)
PY
status=$?
row="| file | unavailable (1 safe, 1 unavailable) | **safe** |"
grep -qF "$row" "$work/report.md" || { echo "FAIL: the Markdown table has no row '$row'"; status=1; }
exit $status
