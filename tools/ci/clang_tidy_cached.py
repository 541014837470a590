#!/usr/bin/env python3
"""clang-tidy over the sources of a compilation database, skipping files it already found clean.

usage: clang_tidy_cached.py -p BUILD_DIR [-j N] [--source DIR] [--cache DIR] FILE_REGEX

clang-tidy takes 5-15 s of CPU a file, and most of a change leaves most files as they were: over
the library's 130 sources that is the largest CPU cost of a CI run, spent again on every clean
clone. A file is checked again unless the same clang-tidy, with the same configuration and the same
compile command, already found the same preprocessed text clean (what clang-tidy sees: the file
and every header it includes, so a header's change checks again every file that includes it).
Only clean results are kept, so a finding is printed on every run until it is fixed.

The key leaves out where the tree is (a fresh clone's path differs each time): the source and build
folders are replaced by placeholders in the compile command and in the preprocessed text.
Prints clang-tidy's output for the files it checked, then one summary line naming clang-tidy;
exits 0 (the caller judges the output, as with run-clang-tidy).
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys

CLANG_TIDY = "clang-tidy"  # the clang-tidy package's, as dev installs it


def tidy_version():
    return subprocess.run([CLANG_TIDY, "--version"], capture_output=True, text=True, check=True).stdout


def configs_for(path, root):
    """The .clang-tidy files clang-tidy reads for PATH: each folder's from PATH's up to ROOT."""
    texts = []
    folder = os.path.dirname(path)
    while True:
        candidate = os.path.join(folder, ".clang-tidy")
        if os.path.isfile(candidate):
            with open(candidate, "rb") as f:
                texts.append(f.read())
        if os.path.samefile(folder, root) or os.path.dirname(folder) == folder:
            return texts
        folder = os.path.dirname(folder)


def preprocess_command(entry):
    """The entry's compile command, writing the preprocessed text without line markers to stdout."""
    args = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    out = []
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a == "-o":
            skip = True
            continue
        if a == "-c" or a == "ccache" or a.endswith("/ccache"):
            continue
        out.append(a)
    return out + ["-E", "-P", "-o", "-"]


def cache_key(entry, source_root, build_root, version):
    def placeholders(data):
        return data.replace(source_root.encode(), b"@SOURCE@").replace(build_root.encode(), b"@BUILD@")

    preprocessed = subprocess.run(preprocess_command(entry), cwd=entry["directory"], capture_output=True)
    if preprocessed.returncode != 0:
        return None  # not preprocessable as it is: always check it
    h = hashlib.sha256()
    h.update(version.encode())
    for text in configs_for(entry["file"], source_root):
        h.update(b"\0config\0" + text)
    command = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    h.update(b"\0command\0" + placeholders(" ".join(a for a in command if not a.endswith("ccache")).encode()))
    h.update(b"\0file\0" + placeholders(entry["file"].encode()))
    h.update(b"\0text\0" + placeholders(preprocessed.stdout))
    return h.hexdigest()


def is_clean(output):
    return re.search(r"(warning|error): ", output) is None


def check(entry, build_dir, source_root, build_root, version, cache_dir):
    key = cache_key(entry, source_root, build_root, version)
    marker = os.path.join(cache_dir, key) if key else None
    if marker and os.path.exists(marker):
        return entry["file"], True, ""
    done = subprocess.run([CLANG_TIDY, "-p", build_dir, "-quiet", entry["file"]], capture_output=True, text=True)
    output = done.stdout + done.stderr
    # "N warnings generated." alone counts the warnings of system headers, which clang-tidy hides.
    shown = "\n".join(line for line in output.splitlines() if not re.fullmatch(r"\d+ warnings? generated\.", line))
    if marker and done.returncode == 0 and is_clean(output):
        os.makedirs(cache_dir, exist_ok=True)
        with open(marker, "w") as f:
            f.write(entry["file"].replace(source_root, "@SOURCE@") + "\n")
    return entry["file"], False, f"{CLANG_TIDY} {entry['file']}\n{shown}".rstrip() + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-p", dest="build_dir", required=True)
    parser.add_argument("-j", dest="jobs", type=int, default=os.cpu_count() or 1)
    default_cache = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "dlock", "clang-tidy")
    parser.add_argument("--cache", default=default_cache)
    parser.add_argument("--source", default=".", help="the source tree (default: this folder)")
    parser.add_argument("file_regex")
    opts = parser.parse_args()

    build_root = os.path.realpath(opts.build_dir)
    source_root = os.path.realpath(opts.source)
    with open(os.path.join(build_root, "compile_commands.json")) as f:
        entries = [e for e in json.load(f) if re.search(opts.file_regex, e["file"])]
    if not entries:
        print(f"clang-tidy: no file of {build_root}/compile_commands.json matches {opts.file_regex}", file=sys.stderr)
        return 1
    version = tidy_version()
    cached = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=opts.jobs) as pool:
        futures = [pool.submit(check, e, build_root, source_root, build_root, version, opts.cache) for e in entries]
        for future in concurrent.futures.as_completed(futures):
            _, from_cache, output = future.result()
            cached += from_cache
            sys.stdout.write(output)
    print(f"clang-tidy: {len(entries)} files, {len(entries) - cached} checked, {cached} found clean before "
          f"with this text, configuration and command (cache: {opts.cache})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
