#!/usr/bin/env python3
"""Writes a `dlock compare --markdown` report into README.md between its two markers.

usage: splice_readme.py README REPORT COMMAND MINUTES

The block between `<!-- dlock compare: begin -->` and `<!-- dlock compare: end -->` is replaced
by the report, preceded by the command that made it, the date, the machine's CPU count and how
long the run took, so that the README's matrix is always a real run and says which.
"""
import datetime
import os
import sys

BEGIN = "<!-- dlock compare: begin -->"
END = "<!-- dlock compare: end -->"


def main() -> int:
    if len(sys.argv) != 5:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 64
    readme_path, report_path, command, minutes = sys.argv[1:]
    readme = open(readme_path, encoding="utf-8").read()
    if readme.count(BEGIN) != 1 or readme.count(END) != 1 or readme.index(BEGIN) > readme.index(END):
        print(f"{readme_path}: expected one '{BEGIN}' line before one '{END}' line", file=sys.stderr)
        return 65
    report = open(report_path, encoding="utf-8").read().strip()
    if not report:
        print(f"{report_path}: empty report; did dlock compare run?", file=sys.stderr)
        return 65
    today = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    header = (f"Measured by `{command}` on {today}, on a {os.cpu_count()}-core machine "
              f"({minutes} min for the whole run); every cell is what the run observed.")
    head, rest = readme.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    with open(readme_path, "w", encoding="utf-8") as out:
        out.write(f"{head}{BEGIN}\n{header}\n\n{report}\n{END}{tail}")
    print(f"{readme_path}: matrix from {report_path} written between the markers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
