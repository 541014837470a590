#!/usr/bin/env python3
"""cli/terminal: `dlock run` from an interactive shell on a terminal still behaves like the
command run directly, although the command leads a process group of its own: it can read the
terminal, Ctrl-Z stops the job and `fg` continues it, Ctrl-C ends it with 130.

An interactive bash runs in a pseudo-terminal; every wait is bounded (10 s).
Usage: cli_terminal_test.py DLOCK"""
import os
import pty
import select
import shlex
import shutil
import signal
import sys
import tempfile
import time

dlock = sys.argv[1]
work = tempfile.mkdtemp()
uri = f"file://{work}/locks"
failures = 0

pid, fd = pty.fork()
if pid == 0:
    os.environ["PS1"] = "$ "
    os.execv("/bin/bash", ["bash", "--norc", "--noprofile", "-i"])

seen = b""


def expect(token: bytes, timeout: float = 10) -> bool:
    """Reads the terminal until `token` shows up after what was already consumed."""
    global seen
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        at = seen.find(token)
        if at >= 0:
            seen = seen[at + len(token):]
            return True
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                seen += os.read(fd, 4096)
            except OSError:
                return False
    return False


def check(what: str, ok: bool) -> None:
    global failures
    print(("ok: " if ok else "FAIL: ") + what + ("" if ok else f" (terminal shows {seen[-300:]!r})"))
    failures += not ok


def run(name: str, script: str) -> None:
    # 'rea''dy' in the typed line, so that only the command's output says "ready".
    command = f"{shlex.quote(dlock)} run {shlex.quote(uri)} {name} -- sh -c {shlex.quote(script)}"
    os.write(fd, command.replace("ready", "rea''dy").encode() + b"\n")


def status(want: int, what: str) -> None:
    os.write(fd, b"echo status=$?\n")
    check(f"{what}: exit {want}", expect(f"status={want}\r".encode()))


try:
    check("the shell started", expect(b"$ "))

    run("read", "echo ready; read line; echo got $line")
    if expect(b"ready"):
        os.write(fd, b"hello\n")
        check("the command reads the terminal", expect(b"got hello"))
        status(0, "the command that read the terminal")
    else:
        check("the command started", False)

    run("ctrl-z", "echo ready; read line; echo got $line")
    if expect(b"ready"):
        os.write(fd, b"\x1a")  # Ctrl-Z
        check("Ctrl-Z stops the job", expect(b"Stopped"))
        os.write(fd, b"fg\n")
        expect(b"fg")
        time.sleep(0.5)  # not needed for correctness: typed early, the line waits in the terminal
        os.write(fd, b"after\n")
        check("fg continues it, and it reads the terminal", expect(b"got after"))
        status(0, "the job continued by fg")
    else:
        check("the command started", False)

    # The process that says "ready" is the one Ctrl-C must end, with SIGINT's default action
    # from before it says so: a shell between two commands may swallow a SIGINT (dash catches it
    # while it waits for a child) and would make this check flaky.
    python = shlex.quote(sys.executable)
    run("ctrl-c", f"exec {python} -c 'import signal, time; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                  f"print(\"ready\", flush=True); time.sleep(30)'")
    if expect(b"ready"):
        os.write(fd, b"\x03")  # Ctrl-C
        status(130, "Ctrl-C")
    else:
        check("the command started", False)
finally:
    os.write(fd, b"exit\n")
    for _ in range(50):
        if os.waitpid(pid, os.WNOHANG)[0]:
            break
        time.sleep(0.1)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    # A dlock a failed check left behind (its command line names our folder) is killed; its
    # watcher then kills the command's group.
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if work.encode() in f.read():
                    os.kill(int(entry), signal.SIGKILL)
        except (OSError, ValueError):
            pass
    shutil.rmtree(work, ignore_errors=True)

print(f"{failures} failure(s)")
sys.exit(1 if failures else 0)
