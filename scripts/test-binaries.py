#!/usr/bin/env python3
"""Keeps each crate's integration tests in one test binary.

Cargo builds every `tests/*.rs` as a binary of its own, and each one links the crate's whole
dependency graph: ~70 links were most of the time `cargo test --no-run` took. A crate with
several test files instead has `tests/it/main.rs`, made by this script: one `#[path]` module per
`tests/<name>.rs` (the files stay where they are, unchanged: `mod common;` in them still finds
`tests/common/`), and `autotests = false` with one `[[test]] name = "it"` in its Cargo.toml.
A test's name gains its file as a module: `cargo test -p latscope --test it -- why::` runs what
`--test why` ran. A file that measures its whole process keeps a binary of its own, named as the
file: one with a `#[global_allocator]` (it counts every allocation of the process) or one that
reads `RUSAGE_CHILDREN` (the peak resident size of every child the process waited for).

usage: scripts/test-binaries.py           writes tests/it/main.rs and the [[test]] entry
       scripts/test-binaries.py --check   fails naming any tests/*.rs no binary builds
"""

import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
HEADER = """\
//! Every integration test of this crate, in one test binary: one link instead of one per file.
//! Each `tests/<name>.rs` is a module of its own. Made by `scripts/test-binaries.py` (run it
//! after adding a test file; `scripts/run-tests.py` refuses a file left out). The files are as
//! they were as binaries of their own: each loads the shared helpers with its own `mod common;`.
#![allow(clippy::duplicate_mod)]
"""
TEST_ENTRY = '\n[[test]]\nname = "it"\npath = "tests/it/main.rs"\n'


# What makes a test file measure its whole process (and so need a process of its own).
WHOLE_PROCESS = re.compile(r"#\[global_allocator\]|RUSAGE_CHILDREN")


def test_files(crate):
    tests = os.path.join(crate, "tests")
    if not os.path.isdir(tests):
        return []
    return sorted(f[:-3] for f in os.listdir(tests) if f.endswith(".rs"))


def own_binary(crate, name):
    return bool(WHOLE_PROCESS.search(open(os.path.join(crate, "tests", name + ".rs")).read()))


def merged(crate):
    return [n for n in test_files(crate) if not own_binary(crate, n)]


def crates():
    base = os.path.join(ROOT, "crates")
    for name in sorted(os.listdir(base)):
        path = os.path.join(base, name)
        if len(merged(path)) >= 2:
            yield path


def main_rs(names):
    return HEADER + "".join(f'\n#[path = "../{n}.rs"]\nmod {n};\n' for n in names)


def write(crate):
    names = merged(crate)
    os.makedirs(os.path.join(crate, "tests", "it"), exist_ok=True)
    with open(os.path.join(crate, "tests", "it", "main.rs"), "w") as f:
        f.write(main_rs(names))
    manifest = os.path.join(crate, "Cargo.toml")
    text = open(manifest).read()
    if "autotests = false" not in text:
        # The [package] table ends at the first blank line or the next table.
        text = re.sub(r"(\[package\]\n(?:[^\[\n].*\n)*)", r"\1autotests = false\n", text, count=1)
    if 'path = "tests/it/main.rs"' not in text:
        text = text.rstrip("\n") + "\n" + TEST_ENTRY
    for n in test_files(crate):
        if own_binary(crate, n) and f'path = "tests/{n}.rs"' not in text:
            text += f'\n[[test]]\nname = "{n}"\npath = "tests/{n}.rs"\n'
    with open(manifest, "w") as f:
        f.write(text)


def check():
    """Names every tests/*.rs that no binary builds (a file added after the merge into `it`)."""
    missing = []
    for crate in crates():
        main = os.path.join(crate, "tests", "it", "main.rs")
        listed = set(re.findall(r'#\[path = "\.\./(\w+)\.rs"\]', open(main).read())) if os.path.exists(main) else set()
        manifest = open(os.path.join(crate, "Cargo.toml")).read()
        rel = os.path.relpath(crate, ROOT)
        missing += [f"{rel}/tests/{n}.rs" for n in test_files(crate)
                    if n not in listed and f'path = "tests/{n}.rs"' not in manifest]
    return missing


if __name__ == "__main__":
    if sys.argv[1:] == ["--check"]:
        missing = check()
        if missing:
            sys.exit("these test files are in no test binary: " + ", ".join(missing)
                     + "\nrun scripts/test-binaries.py to add them to their crate's tests/it/main.rs")
    elif sys.argv[1:]:
        sys.exit(__doc__)
    else:
        for c in crates():
            write(c)
