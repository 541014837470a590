#!/usr/bin/env python3
"""conventions/file_sizes: small files with one job.

No library source file (core, backends' src/ and compare/, adapters, tools' sources) is longer than
600 lines, and no test file (a .cpp or .hpp under a tests/ folder) longer than 900: a file past its
bound has grown a second job, which goes to a file of its own. Counts the files git tracks; each
failure names the file, its length and its bound.

usage: file_sizes.py SOURCE_DIR
"""
import pathlib
import subprocess
import sys

LIBRARY_LINES = 600
TEST_LINES = 900


def bound_of(path):
    """The bound of a tracked C++ file, or None for a file no bound applies to (examples, benches, fuzzers)."""
    parts = path.parts
    if path.suffix not in (".cpp", ".hpp"):
        return None
    if "tests" in parts:
        return TEST_LINES
    if parts[0] == "core" or parts[0] == "adapters":
        return LIBRARY_LINES
    if parts[0] == "backends" and len(parts) > 2 and parts[2] in ("src", "include", "compare"):
        return LIBRARY_LINES
    if parts[0] == "tools" and "src" in parts or parts[0] == "tools" and "include" in parts:
        return LIBRARY_LINES
    return None


def main():
    root = pathlib.Path(sys.argv[1])
    tracked = subprocess.run(["git", "-C", str(root), "ls-files"], capture_output=True, text=True, check=True).stdout
    failures, checked = [], 0
    for name in tracked.splitlines():
        path = pathlib.PurePosixPath(name)
        bound = bound_of(path)
        if bound is None:
            continue
        checked += 1
        lines = (root / name).read_text(encoding="utf-8").count("\n")
        if lines > bound:
            failures.append(f"{name}: {lines} lines, more than {bound}: split off what is a job of its own")
    for f in failures:
        print(f)
    print(f"{checked} files checked, {len(failures)} too long")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
