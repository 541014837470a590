#!/usr/bin/env python3
"""Prints the N slowest tests of a ctest run from its JUnit file (ctest --output-junit FILE).

Usage: slowest_tests.py JUNIT_XML [N]
"""
import sys
import xml.etree.ElementTree as ET


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    n = int(sys.argv[2]) if len(sys.argv) == 3 else 10
    try:
        root = ET.parse(sys.argv[1]).getroot()
    except (OSError, ET.ParseError) as e:
        sys.exit(f"slowest_tests: cannot read {sys.argv[1]}: {e}")
    cases = [(float(c.get("time", 0)), c.get("name", "?"), c.find("failure") is not None)
             for c in root.iter("testcase")]
    total = sum(t for t, _, _ in cases)
    print(f"== the {min(n, len(cases))} slowest of {len(cases)} tests ({total:.0f} s of test time in all):")
    for seconds, name, failed in sorted(cases, reverse=True)[:n]:
        print(f"  {seconds:8.1f} s  {name}{'  (failed)' if failed else ''}")


if __name__ == "__main__":
    main()
