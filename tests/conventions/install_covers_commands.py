#!/usr/bin/env python3
"""Every program the server launcher needs comes from a package that `./dev install all` installs.

A fresh Debian 12 machine has only its base system and what `./dev install all` puts on it. A
server recipe that requires a program whose package is not in that list works on a machine that
got the package some other way (by hand, from earlier work) and fails on a fresh one: this test
fails instead, on any machine where the program is present.

For each program `compose/native/dlock-servers commands` lists (each recipe's required programs
and the launcher's own), the package that owns it (dpkg -S, following symlinks and Debian's
alternatives) must be one of:
  - the packages `./dev packages all` lists, or one of their dependencies (apt-cache depends,
    recursively, without recommends: `./dev install` installs with --no-install-recommends);
  - a package of the base system (Essential: yes, or Priority: required), which every Debian
    machine has.
A program that is not on this machine at all fails too: `./dev install all` should have put it here.

Usage: install_covers_commands.py SOURCE_DIR
"""
import os
import shutil
import subprocess
import sys


def run(args, cwd=None):
    return subprocess.run(args, cwd=cwd, check=True, text=True, capture_output=True).stdout


def program_path(program):
    if program.startswith("/"):
        return program if os.path.exists(program) else None
    return shutil.which(program)


def aliases(path):
    """The names dpkg may know `path` by: Debian 12 merges /bin into /usr/bin (and sbin, lib), but a
    package's file list keeps the name it was built with."""
    names = [path, os.path.realpath(os.path.dirname(path)) + "/" + os.path.basename(path)]
    for merged in ("/bin/", "/sbin/", "/lib/"):
        if path.startswith("/usr" + merged):
            names.append(path[len("/usr"):])
        elif path.startswith(merged):
            names.append("/usr" + path)
    return names


def link_chain(path):
    """`path` and every name on its way to the real file (/usr/bin/java -> /etc/alternatives/java ->
    /usr/lib/jvm/.../java), each with its merged-/usr aliases."""
    names, seen, todo = [], set(), [path]
    while todo:
        p = todo.pop(0)
        if p in seen:
            continue
        seen.add(p)
        names.extend(aliases(p))
        if os.path.islink(p):
            target = os.readlink(p)
            todo.append(target if target.startswith("/") else os.path.join(os.path.dirname(p), target))
        real = os.path.realpath(p)
        if real != p:
            todo.append(real)
    return list(dict.fromkeys(names))


def owners_of(paths):
    """path -> the packages that ship it, for every path dpkg knows (one dpkg -S for all)."""
    found = subprocess.run(["dpkg", "-S"] + paths, text=True, capture_output=True)  # exit 1: some unknown
    owners = {}
    for line in found.stdout.splitlines():
        if ": " not in line:
            continue
        packages, path = line.rsplit(": ", 1)
        # "pkg[:arch][, pkg2]": a path shared by several packages names them all.
        owners[path] = [o.strip().split(":")[0] for o in packages.split(",")]
    return owners


def install_closure(packages):
    """The packages and every package they depend on (Depends and Pre-Depends, recursively)."""
    out = run(["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests", "--no-conflicts",
               "--no-breaks", "--no-replaces", "--no-enhances"] + packages)
    closure = set(packages)
    for line in out.splitlines():
        word = line.strip().lstrip("|")
        if ":" in word:  # "Depends: libc6" or "PreDepends: <virtual>"
            word = word.split(":", 1)[1].strip()
        word = word.strip("<>")
        if word:
            closure.add(word.split(":")[0])
    return closure


def base_system():
    out = run(["dpkg-query", "-W", "-f", "${Package} ${Essential} ${Priority}\n"])
    base = set()
    for line in out.splitlines():
        name, essential, priority = (line.split() + ["", "", ""])[:3]
        if essential == "yes" or priority == "required":
            base.add(name)
    return base


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    root = sys.argv[1]
    listed = run([os.path.join(root, "dev"), "packages", "all"], cwd=root).split()
    try:
        closure = install_closure(listed)
    except subprocess.CalledProcessError as e:
        sys.exit(f"apt-cache depends failed ({e.stderr.strip()}); run 'apt-get update' (./dev install does)")
    base = base_system()
    needed = [line.split(" ", 1) for line in
              run([os.path.join(root, "compose/native/dlock-servers"), "commands"], cwd=root).splitlines()]
    paths = {program: program_path(program) for _, program in needed}
    chains = {program: link_chain(path) for program, path in paths.items() if path}
    known = owners_of(sorted({name for chain in chains.values() for name in chain}))
    failures = []
    for server, program in needed:
        path = paths[program]
        if path is None:
            failures.append(f"{server}: '{program}' is not on this machine, although './dev install all' ran")
            continue
        owners = next((known[name] for name in chains[program] if name in known), [])
        if not owners:
            failures.append(f"{server}: no Debian package owns {path} ('{program}'): it cannot come from './dev install'")
        elif not any(o in closure or o in base for o in owners):
            failures.append(f"{server}: '{program}' ({path}) comes from {', '.join(owners)}, which './dev install all' "
                            f"does not install: add it to the recipe's recipe_packages (or to dev's lists)")
    print(f"{len(needed)} programs of {len({s for s, _ in needed})} servers (launcher included), "
          f"{len(listed)} listed packages, {len(closure)} with their dependencies")
    for f in failures:
        print("FAIL " + f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
