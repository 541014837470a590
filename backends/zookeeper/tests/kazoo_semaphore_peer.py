"""A semaphore peer for zookeeper_primitives_test: Curator InterProcessSemaphoreV2's steps, taken
with kazoo's primitives, so that a Python service can share permits with Curator and dlock.

kazoo's own Semaphore cannot: it keeps its lease nodes right under PATH (plain ephemeral nodes
named by a hex uuid, the maximum stored as PATH's data) and its lock at "PATH-__lock__", while
Curator (and dlock) keep the leases in PATH/leases and the lock in PATH/locks. This peer uses
kazoo's Lock on PATH/locks (extra pattern "-lock-", so it queues with Curator's and dlock's mutex
nodes), creates a protected ephemeral sequential lease node in PATH/leases, and waits until
PATH/leases has at most MAX children, then releases the lock: Curator's acquire.

usage: kazoo_semaphore_peer.py HOSTS PATH MAX ROUNDS HOLD_SECONDS
Prints "acquired <t>" and "released <t>" per round (t = time.monotonic(), the clock of
std::chrono::steady_clock), then "done".
"""
import sys
import threading
import time
import uuid

from kazoo.client import KazooClient

hosts, path = sys.argv[1], sys.argv[2]
max_leases, rounds, hold = int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
client = KazooClient(hosts=hosts)
client.start(timeout=10)
leases = path + "/leases"
for _ in range(rounds):
    lock = client.Lock(path + "/locks", "kazoo-semaphore-peer", extra_lock_patterns=["-lock-"])
    lock.acquire(timeout=60)
    try:
        client.ensure_path(leases)
        node = client.create(leases + "/_c_%s-lease-" % uuid.uuid4(), b"kazoo-semaphore-peer",
                             ephemeral=True, sequence=True)
        changed = threading.Event()
        while True:
            changed.clear()
            if len(client.get_children(leases, watch=lambda event: changed.set())) <= max_leases:
                break
            changed.wait(60)
    finally:
        lock.release()
    print("acquired %.6f" % time.monotonic(), flush=True)
    time.sleep(hold)
    print("released %.6f" % time.monotonic(), flush=True)
    client.delete(node)
print("done", flush=True)
client.stop()
