#!/usr/bin/env python3
"""Prints the N slowest tests of a ctest run from its JUnit file (ctest --output-junit FILE).

Usage: slowest_tests.py JUNIT_XML [N]
"""
from junit import testcases_and_count


def main():
    testcases, n = testcases_and_count(__doc__, 10)
    cases = [(float(c.get("time", 0)), c.get("name", "?"), c.find("failure") is not None) for c in testcases]
    total = sum(t for t, _, _ in cases)
    print(f"== the {min(n, len(cases))} slowest of {len(cases)} tests ({total:.0f} s of test time in all):")
    for seconds, name, failed in sorted(cases, reverse=True)[:n]:
        print(f"  {seconds:8.1f} s  {name}{'  (failed)' if failed else ''}")


if __name__ == "__main__":
    main()
