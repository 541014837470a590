#!/usr/bin/env python3
"""Prints why each failed test of a ctest run failed, from its JUnit file (ctest --output-junit).

CI keeps the tail of a long log, and ctest's --output-on-failure prints a test's output where it
fails, far above that tail. This prints, last, the lines of each failed test that say why: each
GoogleTest failure with the lines under it, each sanitizer report's first lines and its summary,
or else the test's last lines.

Usage: failed_tests.py JUNIT_XML [MAX_LINES_PER_TEST]
"""
import re

from junit import testcases_and_count

# A GoogleTest failure ("file:line: Failure") and what follows it, up to the next result line.
GTEST_FAILURE = re.compile(r":\d+: Failure$|^unknown file: Failure$")
GTEST_RESULT = re.compile(r"^\[ +[A-Z]+ +\]")
# The lines of a sanitizer report worth reading first: what it found, where, and its summary.
SANITIZER = re.compile(r"(Sanitizer|runtime error:|Direct leak|Indirect leak|^\s+#[0-3] )")


def why(output, max_lines):
    lines = output.splitlines()
    picked, in_failure = [], False
    for line in lines:
        if GTEST_FAILURE.search(line):
            in_failure = True
        elif GTEST_RESULT.match(line):
            in_failure = False
        if in_failure or SANITIZER.search(line):
            picked.append(line)
    if not picked:  # neither: a script's test, a crash, a timeout
        picked = lines[-max_lines:]
    if len(picked) > max_lines:
        summaries = [line for line in picked[max_lines:] if "SUMMARY:" in line]
        picked = picked[:max_lines] + [f"... ({len(picked) - max_lines} more lines in the test's output)"] + summaries
    return picked


def main():
    cases, max_lines = testcases_and_count(__doc__, 40)
    failed = [c for c in cases if c.find("failure") is not None]
    for case in failed:
        print(f"== why {case.get('name', '?')} failed ({float(case.get('time', 0)):.1f} s):")
        output = case.findtext("system-out") or ""
        for line in why(output, max_lines):
            print(f"  {line}")


if __name__ == "__main__":
    main()
