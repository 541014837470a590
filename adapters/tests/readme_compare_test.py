#!/usr/bin/env python3
"""docs/readme_compare_matrix: the matrix README.md carries under "Choosing one" is a whole run.

Between `<!-- dlock compare: begin -->` and `<!-- dlock compare: end -->` (written by
`./dev compare --readme`) there must be the command and date of the run, the row's verdict column
and one column per fault `dlock compare` knows, one row per scheme built into this `dlock`, each
cell led by its verdict (`**safe**`, `**safe with fencing**`, `**unavailable ...**`, `**unsafe**`,
`not run: why`), and a speed row for each scheme. A new fault or backend, or a report without
verdicts, without a new run fails here, so the README cannot silently describe less than the tool
does.

usage: readme_compare_test.py DLOCK README
"""
import re
import subprocess
import sys


def table_after(lines, start):
    """The rows (lists of cells) of the first Markdown table at or after line `start`."""
    i = start
    while i < len(lines) and not lines[i].startswith("|"):
        i += 1
    rows = []
    while i < len(lines) and lines[i].startswith("|"):
        rows.append([cell.strip() for cell in lines[i].strip().strip("|").split("|")])
        i += 1
    return rows, i


def main() -> int:
    dlock, readme_path = sys.argv[1:3]
    text = open(readme_path, encoding="utf-8").read()
    problems = []
    match = re.search(r"<!-- dlock compare: begin -->\n(.*?)<!-- dlock compare: end -->", text, re.S)
    if not match:
        print("FAIL: README.md has no '<!-- dlock compare: begin/end -->' block: run ./dev compare --readme")
        return 1
    block = match.group(1)
    if not re.search(r"Measured by `[^`]*compare[^`]*` on \d{4}-\d{2}-\d{2}", block):
        problems.append("the block does not say which command made it and when")

    listed = subprocess.run([dlock, "backends", "--markdown"], capture_output=True, text=True, check=True).stdout
    schemes = [row[0] for row in (r.strip().strip("|").split("|") for r in listed.splitlines() if r.startswith("|"))
               if row[0].strip() not in ("scheme", "---", "")]
    schemes = sorted({s.strip() for s in schemes if not s.strip().startswith("-")})
    unknown = subprocess.run([dlock, "compare", "--faults", "no-such-fault"], capture_output=True, text=True)
    faults_text = unknown.stderr.split("expected one of: ", 1)[-1].splitlines()[0]
    faults = [f.strip() for f in faults_text.split(",")]

    lines = block.splitlines()
    matrix, after = table_after(lines, 0)
    if not matrix:
        print("FAIL: no matrix table in the block")
        return 1
    if matrix[0][:2] != ["backend", "verdict"]:
        problems.append(f"the matrix does not begin with the columns backend, verdict: {matrix[0][:2]}")
    header = matrix[0][2:]
    if header != faults:
        problems.append(f"the matrix's columns {header} are not dlock compare's faults {faults}")
    verdicts = ("safe", "safe with fencing", "unavailable", "unsafe", "not run")
    for row in matrix[2:]:
        if not row[1].startswith(verdicts):
            problems.append(f"{row[0]}: the row's verdict {row[1]!r} is none of {verdicts}")
        for fault, cell in zip(header, row[2:]):
            if not (cell.startswith("not run: ") or re.match(r"\*\*(safe|safe with fencing|unavailable[^*]*|unsafe|not run)\*\*", cell)):
                problems.append(f"{row[0]} x {fault}: the cell does not begin with its verdict: {cell[:60]!r}")
    matrix_rows = {row[0] for row in matrix[2:]}
    for scheme in schemes:
        if scheme not in matrix_rows:
            problems.append(f"no matrix row for the built scheme '{scheme}'")
    speed, _ = table_after(lines, after)
    speed_rows = {row[0] for row in speed[2:]}
    for scheme in schemes:
        if scheme not in speed_rows:
            problems.append(f"no speed row for the built scheme '{scheme}'")

    for p in problems:
        print("FAIL:", p, "(re-run ./dev compare --readme)")
    if not problems:
        print(f"ok: the README's matrix has {len(faults)} faults x {len(matrix_rows)} backends and their speed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
