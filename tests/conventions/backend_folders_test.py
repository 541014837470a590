#!/usr/bin/env python3
"""conventions/backend_folders: every registered scheme lives in a backend folder of the one shape.

A backend is one folder, backends/<name>/ (<name> a C identifier). The schemes come from the
registry (`dlock backends --markdown`: scheme, scope, summary); the folder of a scheme is the one
whose src/register.cpp names it ("<scheme>"). A folder without src/register.cpp is a library shared
by backends (sql_common), not a backend. What is checked, each failure naming the file:

  folder backends/<name>/ with src/register.cpp:
    - CMakeLists.txt calling dlock_add_backend(<name> ...) once: one target, dlock::<name>
    - a network backend's CMakeLists.txt finds its own client library (dlock_backend_option(...))
    - src/register.cpp defining register_<name>(registry&), the one registration file
    - src/capabilities.hpp, README.md, tests/
    - compare/families.cpp defining families_<name>() and announced by dlock_compare_families(<name>
      ...) in CMakeLists.txt (what dlock compare needs of its schemes: their server, or the URI a
      run opens them with)
    - network scope: tests/hooks.cpp, server/recipe.sh, server/compose.yml (the launcher recipe
      and the Docker compose fragment); process or host scope (embedded): no server/
  every registered scheme:
    - named in exactly one backends/*/src/register.cpp (not registered from another file)
    - its capabilities declared the one way: `inline constexpr capabilities <ident>_caps` in the
      folder's src/capabilities.hpp (<ident>: the scheme with every non-alphanumeric character
      replaced by '_', redis+fair -> redis_fair_caps), used by src/register.cpp
    - unless it is one of the UNSAFE demonstration schemes (never in the conformance suite): its
      conformance hooks, DLOCK_TEST_HOOKS("<scheme>", ...) in the folder's tests/hooks.cpp
  backends/CMakeLists.txt discovers the folders: it names none of them in add_subdirectory().
  no file under backends/ includes a header of the compare harness (tools/compare's
  "dlock_compare/..."): the harness uses the backends' declarations, which see dlock/compare_spi only.
  nothing outside a backend folder depends on that backend's code: no CMake file outside
  backends/<name>/ names its targets (dlock::<name>, dlock_<name>...) and no source outside it
  includes a file under backends/ (the examples/ excepted: they show a user's build). The rest of
  the tree reaches backends through the registry (dlock::open, dlock::all) only.

usage: backend_folders_test.py DLOCK SOURCE_DIR
"""
import pathlib
import re
import subprocess
import sys


def registered_schemes(dlock):
    """(scheme, scope, summary) of every scheme this dlock has, from the first --markdown table."""
    out = subprocess.run([dlock, "backends", "--markdown"], capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        if not line.startswith("|"):
            if rows:
                break
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if cells[0] in ("scheme", "---"):
            continue
        rows.append((cells[0], cells[1], cells[-1]))
    return rows


def identifier(scheme):
    return re.sub(r"[^A-Za-z0-9]", "_", scheme)


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[-1])
        return 64
    dlock, source = sys.argv[1], pathlib.Path(sys.argv[2])
    backends = source / "backends"
    problems = []

    def need(condition, message):
        if not condition:
            problems.append(message)
        return condition

    def read(path):
        return path.read_text(encoding="utf-8") if path.is_file() else ""

    folders = sorted(p for p in backends.iterdir() if p.is_dir())
    schemes = registered_schemes(dlock)
    sources = sorted(p for p in backends.glob("*/src/**/*") if p.suffix in (".cpp", ".hpp"))

    # The folder of each scheme: the one whose src/register.cpp names it; failing that (for the
    # message, and so the folder is still checked), the folder whose sources name it.
    folder_of = {}
    for scheme, _, _ in schemes:
        literal = f'"{scheme}"'
        owners = sorted({p.parents[len(p.relative_to(backends).parts) - 2] for p in sources
                         if p.name == "register.cpp" and p.parent.name == "src" and literal in read(p)})
        if len(owners) == 1:
            folder_of[scheme] = owners[0]
            continue
        if len(owners) > 1:
            need(False, f"{scheme}: named in several register.cpp files: "
                        + ", ".join(f"backends/{f.name}/src/register.cpp" for f in owners))
            continue
        elsewhere = [p for p in sources if literal in read(p)]
        need(False, f"{scheme}: no backends/<name>/src/register.cpp registers it (the one registration file of "
                    f"its folder should name {literal})"
                    + (f"; it is named in {', '.join(str(p.relative_to(source)) for p in elsewhere)}" if elsewhere else ""))
        homes = {backends / p.relative_to(backends).parts[0] for p in elsewhere}
        if len(homes) == 1:
            folder_of[scheme] = homes.pop()

    # A backend folder has src/register.cpp or registers a scheme; the others are libraries.
    backend_folders = sorted({f for f in folders if (f / "src" / "register.cpp").is_file()} | set(folder_of.values()))
    libraries = [f.name for f in folders if f not in backend_folders]

    scope_of_folder = {}
    for scheme, scope, _ in schemes:
        if scheme in folder_of:
            scope_of_folder.setdefault(folder_of[scheme], set()).add(scope)

    for folder in backend_folders:
        name, rel = folder.name, f"backends/{folder.name}"
        need(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) is not None, f"{rel}: the folder name is not a C identifier")
        cmake = read(folder / "CMakeLists.txt")
        if need(cmake != "", f"{rel}/CMakeLists.txt is missing"):
            targets = re.findall(r"dlock_add_backend\(\s*([^\s)]+)", cmake)
            need(targets == [name], f"{rel}/CMakeLists.txt: expected one dlock_add_backend({name} ...) (one target, "
                                    f"dlock::{name}), found {', '.join(targets) or 'none'}")
        register = read(folder / "src" / "register.cpp")
        need(register != "", f"{rel}/src/register.cpp is missing (the one file registering every scheme of the folder)")
        need(register == "" or re.search(rf"\bregister_{name}\s*\(\s*(dlock::)?registry\s*&", register) is not None,
             f"{rel}/src/register.cpp does not define void dlock::register_{name}(registry&)")
        need((folder / "src" / "capabilities.hpp").is_file(), f"{rel}/src/capabilities.hpp is missing (each scheme's "
                                                                "inline constexpr capabilities <ident>_caps)")
        need((folder / "README.md").is_file(), f"{rel}/README.md is missing")
        need((folder / "tests").is_dir(), f"{rel}/tests/ is missing")
        scopes = scope_of_folder.get(folder, set())
        need(scopes, f"{rel}: src/register.cpp registers none of the schemes this dlock lists (not built here?)")
        families = read(folder / "compare" / "families.cpp")
        need(re.search(rf"\bfamilies_{name}\s*\(", families) is not None,
             f"{rel}/compare/families.cpp does not define families_{name}() (what dlock compare needs of its "
             "schemes: their server, or the URI a run opens them with)")
        need(re.search(rf"dlock_compare_families\(\s*{name}\b", cmake) is not None,
             f"{rel}/CMakeLists.txt does not call dlock_compare_families({name} SOURCE compare/families.cpp ...)")
        if "network" in scopes:
            need("dlock_backend_option(" in cmake, f"{rel}/CMakeLists.txt does not find its client library "
                                                   "(no dlock_backend_option(...) call in the folder)")
            need((folder / "tests" / "hooks.cpp").is_file(), f"{rel}/tests/hooks.cpp is missing (network backend)")
            need((folder / "server" / "recipe.sh").is_file(),
                 f"{rel}/server/recipe.sh is missing (the launcher's recipe for this network backend's server)")
            need((folder / "server" / "compose.yml").is_file(),
                 f"{rel}/server/compose.yml is missing (the Docker compose fragment for its server)")
        elif scopes:
            need(not (folder / "server").exists(), f"{rel}/server/ exists, but an embedded backend "
                                                   f"({', '.join(sorted(scopes))} scope) has no server")

    for scheme, scope, summary in schemes:
        folder = folder_of.get(scheme)
        if folder is None:
            continue
        rel, caps = f"backends/{folder.name}", f"{identifier(scheme)}_caps"
        declared = re.search(rf"inline\s+constexpr\s+(::)?(dlock::)?capabilities\s+{caps}\b",
                             read(folder / "src" / "capabilities.hpp"))
        need(declared is not None, f"{scheme}: {rel}/src/capabilities.hpp does not declare "
                                   f"`inline constexpr capabilities {caps}`")
        register = read(folder / "src" / "register.cpp")
        need(register == "" or re.search(rf"\b{caps}\b", register) is not None,
             f"{scheme}: {rel}/src/register.cpp does not use {caps}")
        if not summary.startswith("UNSAFE"):
            need(f'DLOCK_TEST_HOOKS("{scheme}"' in read(folder / "tests" / "hooks.cpp"),
                 f'{scheme}: {rel}/tests/hooks.cpp has no DLOCK_TEST_HOOKS("{scheme}", ...) (its conformance hooks)')

    listing = read(backends / "CMakeLists.txt")
    for folder in folders:
        need(re.search(rf"add_subdirectory\(\s*{folder.name}\s*\)", listing) is None,
             f"backends/CMakeLists.txt names backends/{folder.name} (add_subdirectory({folder.name})): it should "
             "discover backends/*/CMakeLists.txt instead of listing them")

    for path in sorted(backends.rglob("*")):
        if path.suffix in (".cpp", ".hpp", ".h", ".cc", ".in") and path.is_file():
            for number, line in enumerate(read(path).splitlines(), 1):
                if re.match(r'\s*#\s*include\s*[<"]dlock_compare/', line):
                    need(False, f"{path.relative_to(source)}:{number} includes a header of the compare harness "
                                f"({line.strip()}): a backend builds against dlock/compare_spi/ only")

    tracked = subprocess.run(["git", "-C", str(source), "ls-files"], capture_output=True, text=True,
                             check=True).stdout.splitlines()
    names = "|".join(sorted(f.name for f in folders))
    target = re.compile(rf"\bdlock(::|_)({names})(\b|_)")
    for name in tracked:
        if name.startswith(("backends/", "examples/")):
            continue
        path = source / name
        if path.name == "CMakeLists.txt" or path.suffix == ".cmake":
            for number, line in enumerate(read(path).splitlines(), 1):
                code = line.split("#", 1)[0]
                if target.search(code):
                    need(False, f"{name}:{number} names a backend's target ({code.strip()}): only the backend's "
                                "folder may; the rest of the tree links dlock::all")
        elif path.suffix in (".cpp", ".hpp", ".h", ".cc"):
            for number, line in enumerate(read(path).splitlines(), 1):
                if re.match(r'\s*#\s*include\s*[<"](\.\./)*backends/', line):
                    need(False, f"{name}:{number} includes a backend's file ({line.strip()}): only the backend's "
                                "folder may")

    for p in problems:
        print("FAIL:", p)
    print(f"{len(schemes)} schemes in {len(backend_folders)} backend folders "
          f"({', '.join(f.name for f in backend_folders)}); libraries: {', '.join(libraries) or 'none'}; "
          f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
