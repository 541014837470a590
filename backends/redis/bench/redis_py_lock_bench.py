#!/usr/bin/python3
"""redis-py's redis.lock.Lock, uncontended acquire+release, on the server of DLOCK_REDIS_URI.
Prints ops/s per repetition and the median: /usr/bin/python3 redis_py_lock_bench.py [reps] [seconds]"""
import os, statistics, sys, time, urllib.parse
import redis

u = urllib.parse.urlparse(os.environ.get("DLOCK_REDIS_URI", "redis://127.0.0.1:6379"))
r = redis.Redis(host=u.hostname, port=u.port or 6379)
reps = int(sys.argv[1]) if len(sys.argv) > 1 else 5
secs = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
rates = []
for rep in range(reps):
    n, end = 0, time.perf_counter() + secs
    while time.perf_counter() < end:
        lock = r.lock("bench:py:%d" % (n % 8), timeout=30)
        assert lock.acquire(blocking=False)
        lock.release()
        n += 1
    rates.append(n / secs)
    print("redis-py Lock rep %d: %.0f acquire+release/s (%.1f us each)" % (rep, rates[-1], 1e6 / rates[-1]))
print("redis-py Lock median: %.0f/s (%.1f us each)" % (statistics.median(rates), 1e6 / statistics.median(rates)))
