#!/usr/bin/python3
"""kazoo's Lock, 8 ways on one path, 5 rounds each: the time per handoff (total / acquisitions),
repeated 5 times; prints the median. Compare with zookeeper_bench's dlock_handoff_8way (per 40 items).
Usage: kazoo_handoff.py host:port /dlock"""
import statistics, sys, threading, time, uuid
from kazoo.client import KazooClient

hosts, root = sys.argv[1], sys.argv[2]
client = KazooClient(hosts=hosts)
client.start(timeout=10)
samples = []
for rep in range(5):
    path = f"{root}/kazoo-handoff-{uuid.uuid4().hex}"
    def worker():
        lock = client.Lock(path)
        for _ in range(5):
            with lock:
                pass
    start = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads: t.start()
    for t in threads: t.join()
    samples.append((time.perf_counter() - start) / 40)
print(f"kazoo 8-way handoff: median {statistics.median(samples)*1e3:.3f} ms per acquisition (5 reps of 40)")
client.stop()
