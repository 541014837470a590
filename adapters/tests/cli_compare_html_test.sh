#!/usr/bin/env bash
# cli/compare_html: `dlock compare --html` and the speed columns, on memory:// and file:// (no
# server; ~15 s). The HTML page is well-formed (every element closed in order; each inline SVG
# parses as XML), self-contained (no script, no stylesheet link, nothing loaded from http(s) or
# any other URL), names every backend and fault, colours each cell and each row by its verdict
# (memory:// runs as threads of one process: safe, green, like file://), and draws the
# speed charts; the JSON has the speed fields, positive, for both backends; --no-speed omits them
# (JSON "speed": null, no speed table in the text, the page says so); a bad --speed-duration is 64.
# Usage: cli_compare_html_test.sh DLOCK
set -u
dlock=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=adapters/tests/cli_expect.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_expect.sh"

"$dlock" compare --speed-duration 0 >"$work/out" 2>"$work/err"
rc=$?
if [[ $rc == 64 ]]; then ok "--speed-duration 0: exit 64"; else fail "--speed-duration 0: exit $rc, expected 64"; fi
grep -q "speed-duration" "$work/err" || fail "the bad option is not named: $(cat "$work/err")"

start=$(date +%s)
"$dlock" compare --backends memory,file --faults healthy --duration 1s --speed-duration 300ms --log "$work/workers.log" \
  --html "$work/report.html" --json "$work/report.json" >"$work/out" 2>"$work/err"
rc=$?
echo "memory,file x healthy, with speed: $(($(date +%s) - start)) s"
cat "$work/out"
completed "the run" "$rc"
grep -q "speed on file" "$work/err" || fail "no progress line for the speed phase: $(cat "$work/err")"
grep -q "^memory .*/s" "$work/out" || fail "the text has no speed row for memory"
grep -q "CPU placement: client threads on CPUs" "$work/out" || fail "the text does not state the CPU placement"

if python3 - "$work/report.html" "$work/report.json" <<'PY'; then
import html.parser, json, re, sys
import xml.etree.ElementTree as ET

page = open(sys.argv[1], encoding="utf-8").read()
report = json.load(open(sys.argv[2]))
problems = []
def expect(condition, message):
    if not condition:
        problems.append(message)

# Well-formed: every non-void element closed, in order.
VOID = {"meta", "br", "hr", "img", "input", "link", "col", "area", "base", "wbr", "source"}
class Nesting(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.stack, self.tags, self.urls = [], {}, []
    def handle_starttag(self, tag, attrs):
        self.tags[tag] = self.tags.get(tag, 0) + 1
        for name, value in attrs:
            if name in ("src", "href", "xlink:href", "action", "data") and value:
                self.urls.append(value)
        if tag not in VOID:
            self.stack.append(tag)
    def handle_startendtag(self, tag, attrs):
        self.tags[tag] = self.tags.get(tag, 0) + 1
    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            problems.append(f"</{tag}> closes {self.stack[-1] if self.stack else 'nothing'}")
        else:
            self.stack.pop()
n = Nesting()
n.feed(page)
n.close()
expect(not n.stack, f"elements never closed: {n.stack}")
expect(page.startswith("<!DOCTYPE html>"), "no doctype")

# Self-contained.
expect(not n.urls, f"the page refers to other resources: {n.urls}")
expect("script" not in n.tags and "link" not in n.tags and "iframe" not in n.tags, f"script/link/iframe: {n.tags}")
expect(not re.search(r"url\(|@import|https?://", page), "CSS url(), @import or an http(s) address in the page")

# Each inline SVG is XML.
svgs = re.findall(r"<svg\b.*?</svg>", page, re.S)
expect(len(svgs) >= 3, f"{len(svgs)} SVG charts, expected the ops/s bars and two latency distributions")
for i, svg in enumerate(svgs):
    try:
        ET.fromstring(svg)
    except ET.ParseError as e:
        problems.append(f"SVG {i} is not well-formed XML: {e}")

# Every backend and fault, the grid's colours, the settings.
for word in ("memory", "file", "healthy", "dlock compare --backends memory,file", "host CPUs online", "CPU placement"):
    expect(word in page, f"the page does not mention {word!r}")
cells = re.findall(r'<td class="cell (\w+)" title="([^"]*)"><b>([^<]*)</b>([^<]*)</td>', page)
expect(len(cells) == 2, f"{len(cells)} matrix cells, expected 2")
expect(all(cls == "safe" and verdict == "safe" for cls, _, verdict, _ in cells),
       f"memory (threads of one process) and file are not both safe and green: {cells}")
expect(all("grants" in title for _, title, _, _ in cells), "a cell's tooltip lacks the checker's counts")
rows = re.findall(r'<td class="verdict (\w+)">([^<]*)</td>', page)
expect(rows == [("safe", "safe (1 safe)")] * 2, f"each row's verdict: {rows}")
for term in ("safe with fencing", "unavailable for D", "unsafe", "not run: why"):
    expect(f"</span>{term}</dt>" in page, f"the legend does not define {term!r}")

# The speed fields in the JSON, positive for both backends.
speed = report.get("speed")
expect(speed is not None and speed["clients"] == 8 and speed["duration_per_point_ms"] == 300, f"speed settings: {speed}")
rows = {r["backend"]: r for r in (speed or {}).get("rows", [])}
for b in ("memory", "file"):
    r = rows.get(b)
    expect(r is not None and r["ran"] and not r["unsafe"] and r["errors"] == "", f"{b}: speed row missing or failed: {r}")
    if r and r["ran"]:
        for point, clients, names in (("one_client", 1, 1), ("many_clients", 8, 8), ("contended", 8, 1)):
            p = r[point]
            expect(p["clients"] == clients and p["names"] == names, f"{b}/{point}: {p}")
            expect(p["cycles"] > 0 and p["cycles_per_s"] > 0 and p["cycle_p50_us"] > 0, f"{b}/{point}: no cycle measured: {p}")
            expect(p["errors"] == 0, f"{b}/{point}: errors {p}")
        expect(r["contended"]["handoffs"] > 0 and r["contended"]["handoff_p50_us"] > 0,
               f"{b}: 8 clients on one name measured no handoff: {r['contended']}")
        expect(r["many_clients"]["handoffs"] == 0, f"{b}: clients on names of their own counted handoffs")

for p in problems:
    print("FAIL:", p)
sys.exit(1 if problems else 0)
PY
  ok "the page is well-formed and self-contained, every cell coloured; the JSON has the speed"
else
  failures=$((failures + 1))
fi

"$dlock" compare --backends memory --faults healthy --duration 1s --no-speed --html "$work/nospeed.html" \
  --json "$work/nospeed.json" >"$work/out" 2>"$work/err"
rc=$?
if [[ $rc == 0 ]]; then ok "--no-speed: the run completed"; else fail "--no-speed: exit $rc"; cat "$work/err"; fi
grep -q "speed on" "$work/err" && fail "--no-speed still measured: $(cat "$work/err")"
grep -q "cycles/s" "$work/out" && fail "--no-speed still printed a speed table"
if python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
sys.exit(0 if "speed" in r and r["speed"] is None else 1)' "$work/nospeed.json"; then
  ok "--no-speed: JSON speed is null"
else
  fail "--no-speed: JSON speed is not null"
fi
grep -q "Not measured in this run (--no-speed)" "$work/nospeed.html" || fail "--no-speed: the page does not say the speed was skipped"
exit $((failures > 0))
