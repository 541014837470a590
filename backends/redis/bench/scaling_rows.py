"""tools/bench/scaling's rows for the redis folder (redis_bench's scaling/<scheme>/raw|dlock benchmarks).

On Redis the contended table also shows the server calls per cycle (scripts run, from INFO
commandstats), and the run ends with the raw pub/sub handoff floor (redis_bench's
BM_raw_pubsub_handoff: release script, message, acquire script on raw hiredis).
"""
import json
import os
import re
import socket
import urllib.parse

# scheme -> where its server is: "$VARIABLE" (the launcher's URI, the scheme replaced)
ROWS = {
    "redis": "$DLOCK_REDIS_URI",
    "redis+reentrant": "$DLOCK_REDIS_URI",
    "redis+fair": "$DLOCK_REDIS_URI",
}

# Appended to the contended table's targets.
TARGETS = "redis calls/cycle <= 3"


def server_calls(uri):
    """The calls the clients have made on the server so far: every redis scheme sends its work as
    scripts, one call each (the commands a script runs inside are counted by commandstats too, but
    are not calls: they cost no round trip). Pub/sub bookkeeping (SUBSCRIBE per waiter) is not per
    cycle. None when the server does not answer."""
    parsed = urllib.parse.urlsplit(uri)
    try:
        with socket.create_connection((parsed.hostname, parsed.port or 6379), timeout=5) as s:
            s.sendall(b"*2\r\n$4\r\nINFO\r\n$12\r\ncommandstats\r\n")
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
                header, _, body = data.partition(b"\r\n")
                if header.startswith(b"$") and len(body) >= int(header[1:]):
                    break
    except OSError:
        return None
    scripts = {"evalsha", "eval", "evalsha_ro", "eval_ro", "fcall", "fcall_ro"}
    return sum(int(m.group(2)) for m in re.finditer(rb"cmdstat_([a-z|_]+):calls=(\d+)", data)
               if m.group(1).decode() in scripts)


def _raw_pubsub_floor(run, build):
    program = os.path.join(build, "backends", "redis", "redis_bench")
    out = run([program, "--benchmark_filter=BM_raw_pubsub_handoff", "--benchmark_format=json"])
    try:
        b = json.loads(out.stdout)["benchmarks"][0]
        return b["median_handoff_us"], b["p99_handoff_us"]
    except (json.JSONDecodeError, KeyError, IndexError):
        return None


def footer(run, median, build, rounds, schemes):
    """The line after the contended table: the raw pub/sub handoff floor, when redis ran."""
    if "redis" not in schemes:
        return None
    floors = [f for f in (_raw_pubsub_floor(run, build) for _ in range(rounds)) if f]
    if not floors:
        return None
    p50, p99 = median([f[0] for f in floors]), median([f[1] for f in floors])
    return (f"Redis raw pub/sub handoff floor (release script, message, acquire script on raw hiredis): "
            f"p50 {p50:.0f} us, p99 {p99:.0f} us; target: redis handoff p50 <= 1.5x the floor")
