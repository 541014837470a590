"""A kazoo lock holder for zookeeper_test: a real peer of another recipe in the same lock folder.

usage: kazoo_peer.py HOSTS PATH KIND RELEASE_FILE [EXTRA_PATTERN ...]
  KIND          lock (kazoo Lock), write (WriteLock) or read (ReadLock)
  RELEASE_FILE  the lock is held until this file exists (at most 60 s)
  EXTRA_PATTERN kazoo's extra_lock_patterns (e.g. -lock- to see Curator's and dlock's nodes)
Prints "acquired <t>" once it holds and "released <t>" just before it releases, t being
time.monotonic() (CLOCK_MONOTONIC, the clock of std::chrono::steady_clock), so the test can
order kazoo's hold against its own grants.
"""
import os
import sys
import time

from kazoo.client import KazooClient

hosts, path, kind, release_file = sys.argv[1:5]
extra = sys.argv[5:]
client = KazooClient(hosts=hosts)
client.start(timeout=10)
recipe = {"lock": client.Lock, "write": client.WriteLock, "read": client.ReadLock}[kind]
lock = recipe(path, "kazoo-peer", extra_lock_patterns=extra)
lock.acquire(timeout=60)
print("acquired %.6f" % time.monotonic(), flush=True)
deadline = time.monotonic() + 60
while not os.path.exists(release_file) and time.monotonic() < deadline:
    time.sleep(0.01)
print("released %.6f" % time.monotonic(), flush=True)
lock.release()
client.stop()
