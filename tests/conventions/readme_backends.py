#!/usr/bin/env python3
"""docs/readme_backends: README.md's backend tables are what `dlock backends --markdown` prints.

Between `<!-- dlock backends --markdown: begin -->` and `<!-- dlock backends --markdown: end -->`
README.md carries the output of `dlock backends --markdown`: one row per registered scheme with its
scope, capabilities, example URI and summary, then each scheme's URI parameters. The registry is
the source; this test fails when the README says something else, and `--write` (what
`./dev readme` runs) rewrites the block.

When this build lacks some backends (a preset other than `all`), the rows of the schemes it has are
compared and the README's other rows are listed as not checked here.

usage: readme_backends.py DLOCK README [--write]
"""
import difflib
import re
import subprocess
import sys

BEGIN = "<!-- dlock backends --markdown: begin -->"
END = "<!-- dlock backends --markdown: end -->"
REGENERATE = "regenerate them with ./dev readme (or: python3 tests/conventions/readme_backends.py build/adapters/cli/dlock README.md --write)"


def scheme_of(line):
    """The first cell of a table row, or None for text, header and separator lines."""
    if not line.startswith("|"):
        return None
    cell = line.strip().strip("|").split("|")[0].strip()
    return None if cell in ("scheme", "---", "") else cell


def main() -> int:
    if len(sys.argv) not in (3, 4) or (len(sys.argv) == 4 and sys.argv[3] != "--write"):
        print(__doc__.strip().splitlines()[-1])
        return 64
    dlock, readme_path = sys.argv[1:3]
    write = len(sys.argv) == 4
    generated = subprocess.run([dlock, "backends", "--markdown"], capture_output=True, text=True, check=True).stdout
    text = open(readme_path, encoding="utf-8").read()
    match = re.search(re.escape(BEGIN) + r"\n(.*?)" + re.escape(END), text, re.S)
    if not match:
        print(f"FAIL: {readme_path} has no '{BEGIN}' ... '{END}' block for the backend tables")
        return 1

    if write:
        text = text[: match.start(1)] + generated + text[match.end(1):]
        open(readme_path, "w", encoding="utf-8").write(text)
        print(f"wrote the output of `dlock backends --markdown` into {readme_path}")
        return 0

    written = match.group(1)
    built = {scheme_of(line) for line in generated.splitlines()} - {None}
    listed = {scheme_of(line) for line in written.splitlines()} - {None}
    not_built = sorted(listed - built)
    if not_built:
        # Compare the lines this build can vouch for: every line of the output, and the README's
        # lines other than the rows of schemes this build does not have.
        written = "\n".join(line for line in written.splitlines() if scheme_of(line) not in not_built) + "\n"
    if written == generated:
        note = f"; not checked here (not built): {', '.join(not_built)}" if not_built else ""
        print(f"ok: README.md's backend tables are `dlock backends --markdown` ({len(built)} schemes{note})")
        return 0
    print(f"FAIL: README.md's backend tables differ from `dlock backends --markdown`; {REGENERATE}")
    sys.stdout.writelines(difflib.unified_diff(written.splitlines(True), generated.splitlines(True),
                                               "README.md", "dlock backends --markdown"))
    return 1


if __name__ == "__main__":
    sys.exit(main())
