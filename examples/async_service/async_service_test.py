#!/usr/bin/env python3
"""examples/async_service: the coroutine service on the launcher's Redis (DLOCK_REDIS_URI; unset
FAILS). Client A takes "orders"; clients B and C wait for it, B with 30 s, C with 1 s; C times out,
B is granted once A releases; then B holds it and D waits: SIGTERM cancels D's pending acquire
("canceled orders"), the service exits 0, and the lock is free at once for a new service.

Usage: async_service_test.py SERVICE"""
import os
import signal
import socket
import subprocess
import sys
import time
import uuid


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def start(service, uri):
    proc = subprocess.Popen([service, uri], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not line.startswith("listening on 127.0.0.1:"):
        proc.kill()
        fail(f"the service did not start: {line!r}")
    return proc, int(line.rsplit(":", 1)[1])


class Client:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.buffer = b""

    def send(self, line):
        self.sock.sendall(line.encode() + b"\n")

    def answer(self, timeout):
        self.sock.settimeout(timeout)
        while b"\n" not in self.buffer:
            try:
                chunk = self.sock.recv(4096)
            except socket.timeout:
                return None
            if not chunk:
                return ""
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.decode()


def main():
    service = sys.argv[1]
    uri = os.environ.get("DLOCK_REDIS_URI")
    if not uri:
        fail('DLOCK_REDIS_URI is not set: eval "$(compose/native/dlock-servers up redis)" first')
    # A long ttl: anything left behind would keep the name far past the bounds below. A fresh Redis
    # grants nothing for a ttl (wait_after_restart), so the first request waits long enough.
    uri += ("&" if "?" in uri else "?") + "ttl=20s"
    name = "async-service-" + uuid.uuid4().hex[:8]
    proc, port = start(service, uri)
    try:
        a, b, c = Client(port), Client(port), Client(port)
        a.send(f"{name} 45")
        got = a.answer(50)
        if not got or not got.startswith("granted " + name):
            fail(f"A: {got!r}")
        b.send(f"{name} 30")
        c.send(f"{name} 1")
        if (got := c.answer(10)) != "timeout " + name:
            fail(f"C, waiting 1 s behind A: {got!r}")
        if (got := b.answer(0.5)) is not None:
            fail(f"B answered while A held the lock: {got!r}")
        a.send("release")
        if (got := a.answer(10)) != "released " + name:
            fail(f"A's release: {got!r}")
        got = b.answer(10)
        if not got or not got.startswith("granted " + name):
            fail(f"B after A's release: {got!r}")
        d = Client(port)
        d.send(f"{name} 60")
        if (got := d.answer(0.5)) is not None:
            fail(f"D answered while B held the lock: {got!r}")
        asked = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        got = d.answer(10)
        if got != "canceled " + name:
            fail(f"D after SIGTERM: {got!r}")
        try:
            rc = proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            fail("the service did not exit within 15 s of SIGTERM")
        print(f"D's acquire canceled and the service ended {time.monotonic() - asked:.2f} s after SIGTERM")
        if rc != 0:
            fail(f"the service exited {rc}")
    finally:
        if proc.poll() is None:
            proc.kill()
    # Nothing left behind: B's lease was released at shutdown, D left no waiter.
    proc, port = start(service, uri)
    try:
        e = Client(port)
        e.send(f"{name} 2")
        got = e.answer(10)
        if not got or not got.startswith("granted " + name):
            fail(f"a new service after the shutdown: {got!r} (the old one left the lock taken)")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)
    print("PASS")


if __name__ == "__main__":
    main()
