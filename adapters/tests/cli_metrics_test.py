#!/usr/bin/env python3
"""dlock hold and dlock bench with --metrics HOST:PORT: what a scrape of /metrics shows while a
holder waits, holds and releases (file:// locks between processes), while bench runs and after it
(every acquire of the run, by outcome), and the errors for an address of the wrong shape or one
already in use."""
import json
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

DLOCK = sys.argv[1]
failures = []


def check(condition, what):
    print(("ok   " if condition else "FAIL ") + what)
    if not condition:
        failures.append(what)


def metrics_url(process):
    """The URL the process announces on stderr ("dlock: metrics at URL")."""
    line = process.stderr.readline()
    found = re.search(r"dlock: metrics at (http://\S+)", line)
    if not found:
        raise SystemExit(f"no metrics address announced; stderr said: {line!r}")
    return found.group(1)


def scrape(url):
    with urllib.request.urlopen(url, timeout=10) as reply:
        return reply.read().decode()


def sample(text, series):
    """The value of `series` (name{labels} as exposed), or None."""
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


def until(predicate, seconds=20.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


HELD = 'dlock_leases_held{backend="file",primitive="mutex"}'
WAITERS = 'dlock_waiters{backend="file",primitive="mutex"}'
GRANTED = 'dlock_acquire_duration_seconds_count{backend="file",outcome="granted",primitive="mutex"}'

with tempfile.TemporaryDirectory(prefix="dlock-metrics-") as folder:
    uri = f"file://{folder}"
    holder = subprocess.Popen([DLOCK, "hold", uri, "report"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    check(holder.stdout.readline().startswith("acquired"), "the first holder acquires")

    waiter = subprocess.Popen([DLOCK, "hold", uri, "report", "--metrics", "127.0.0.1:0"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = metrics_url(waiter)
    check(url.startswith("http://127.0.0.1:") and url.endswith("/metrics") and ":0/" not in url,
          f"hold announces the port it listens on ({url})")
    check(until(lambda: sample(scrape(url), WAITERS) == 1), "a scrape shows the waiter while it waits")
    check(sample(scrape(url), HELD) in (None, 0), "and no lease held yet")

    holder.stdin.close()
    check(holder.wait(timeout=30) == 0, "the first holder releases")
    check(waiter.stdout.readline().startswith("acquired"), "the waiter acquires")
    text = scrape(url)
    check(sample(text, HELD) == 1, "a scrape shows the lease held")
    check(sample(text, WAITERS) == 0, "and no waiter left")
    check(sample(text, GRANTED) == 1, "and one granted acquire")
    check("# TYPE dlock_acquire_duration_seconds histogram" in text, "the acquire duration is a histogram")
    check('name="report"' not in text, "lock names are not labels")
    waiter.stdin.close()
    check(waiter.wait(timeout=30) == 0, "the waiter releases and exits 0")

    bench = subprocess.Popen([DLOCK, "bench", uri, "--threads", "2", "--duration", "4s", "--metrics", "127.0.0.1:0"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = metrics_url(bench)
    check(until(lambda: (sample(scrape(url), GRANTED) or 0) > 10), "bench's scrape counts its grants as it runs")
    check(bench.wait(timeout=60) == 0, "bench exits 0")

    # Three threads on one name, each acquire waiting at most 1 ms: grants and timeouts both. The
    # scrape after the run (--metrics-linger) shows the counts the run printed, outcome by outcome.
    bench = subprocess.Popen([DLOCK, "bench", uri, "--threads", "3", "--names", "1", "--wait", "1ms", "--duration", "2s",
                              "--json", "--metrics", "127.0.0.1:0", "--metrics-linger", "60s"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = metrics_url(bench)
    printed = json.loads(bench.stdout.readline())
    text = scrape(url)
    bench.terminate()
    bench.wait(timeout=30)
    counts = {outcome: sample(text, f'dlock_acquire_duration_seconds_count{{backend="file",outcome="{outcome}",'
                                    'primitive="mutex"}') or 0
              for outcome in ("granted", "timed_out", "cancelled", "error")}
    scraped = sum(counts.values())
    check(printed["timed_out"] > 0 and printed["granted"] > 0, f"the run had grants and timeouts ({printed})")
    check(printed["acquires"] == printed["granted"] + printed["timed_out"] + printed["failed"],
          "bench's acquires are its grants + timeouts + failures")
    check(scraped == printed["acquires"], f"the scrape counts every acquire of the run ({scraped} scraped, {printed})")
    check(counts["granted"] == printed["granted"] and counts["timed_out"] == printed["timed_out"]
          and counts["error"] == printed["failed"] and counts["cancelled"] == 0,
          f"and each outcome as the run counted it ({counts})")

    bad = subprocess.run([DLOCK, "hold", uri, "report", "--metrics", "localhost"], capture_output=True, text=True,
                         timeout=30)
    check(bad.returncode == 64 and "expected HOST:PORT" in bad.stderr,
          f"an address without a port is a usage error naming the shape (exit {bad.returncode}: {bad.stderr.strip()})")
    bad = subprocess.run([DLOCK, "hold", uri, "report", "--metrics", "127.0.0.1:99999"], capture_output=True,
                         text=True, timeout=30)
    check(bad.returncode == 64 and "0 to 65535" in bad.stderr, "a port out of range is a usage error")

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = subprocess.run([DLOCK, "hold", uri, "report", "--metrics", f"127.0.0.1:{port}"], stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=30)
        check(busy.returncode == 69 and f"cannot listen on 127.0.0.1:{port}" in busy.stderr,
              f"a port in use is exit 69 saying so (exit {busy.returncode}: {busy.stderr.strip()})")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("all checks passed")
