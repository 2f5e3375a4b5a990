#!/usr/bin/env python3
"""Extract the filter expressions of libsinsp's unit tests, with what each test expects.

Usage: extract.py CHECKOUT [COMMIT] > expressions.jsonl

CHECKOUT is a clone of https://github.com/falcosecurity/libs. Reads the C++ tests under
userspace/libsinsp/test and writes one JSON object per expression:
  {"src": "file:line", "expect": "accept" | "reject" | "true" | "false", "expr": "...",
   "test": "TEST_F name", "event": {...}}
"true"/"false": the test compiles the expression and expects that result on its event.
"event" (with "true"/"false" only, when the test built one): the last call before the
expression, in the same test, that built the event it is evaluated on, as written:
  {"line": N, "call": "add_event_advance_ts" | "generate_..._event", "type": "PPME_..." (the event
   type, add_event_advance_ts only), "params": ["...", ...] (the event's parameters, or the
   generator's arguments, as C++ source text), "tree": true when the test set up
   DEFAULT_TREE (libsinsp's made-up process tree: init, then bash ancestors)}
Only calls whose expression is a string literal (or adjacent literals) are taken; calls built
from variables are skipped. The first line is a header naming the source and the commit.
"""
import json
import os
import re
import subprocess
import sys

CALLS = {
    # name: (index of the expression argument, how the expectation is decided)
    "test_accept": (0, "accept"),
    "test_reject": (0, "reject"),
    "test_filter_compile": (1, "compile"),
    "test_filter_run": (1, "run"),
    "eval_filter": (1, "macro"),
    "filter_compiles": (0, "macro"),
}
WRAPPERS = {
    "EXPECT_TRUE": "true", "ASSERT_TRUE": "true",
    "EXPECT_FALSE": "false", "ASSERT_FALSE": "false",
    "EXPECT_THROW": "reject", "ASSERT_THROW": "reject", "EXPECT_ANY_THROW": "reject",
    "ASSERT_ANY_THROW": "reject", "EXPECT_NO_THROW": "accept", "ASSERT_NO_THROW": "accept",
}
SIMPLE = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", "'": "'", '"': '"', "?": "?",
          "a": "\a", "b": "\b", "f": "\f", "v": "\v"}


def skip_ws(s, i):
    while i < len(s):
        if s[i].isspace():
            i += 1
        elif s.startswith("//", i):
            i = s.find("\n", i)
            i = len(s) if i < 0 else i
        elif s.startswith("/*", i):
            i = s.find("*/", i) + 2
        else:
            break
    return i


def literal(s, i):
    """Parse one C++ string literal at s[i]; return (text, next index) or None."""
    m = re.match(r'R"([^(\s]*)\(', s[i:])
    if m:
        end = s.find(")" + m.group(1) + '"', i + m.end())
        return s[i + m.end():end], end + len(m.group(1)) + 2
    if s[i] != '"':
        return None
    out, j = [], i + 1
    while s[j] != '"':
        c = s[j]
        if c == "\\":
            e = s[j + 1]
            if e == "x":
                m = re.match(r"[0-9a-fA-F]+", s[j + 2:])
                out.append(chr(int(m.group(0), 16)))
                j += 2 + m.end()
                continue
            if e in "01234567":
                m = re.match(r"[0-7]{1,3}", s[j + 1:])
                out.append(chr(int(m.group(0), 8)))
                j += 1 + m.end()
                continue
            out.append(SIMPLE.get(e, e))
            j += 2
            continue
        out.append(c)
        j += 1
    return "".join(out), j + 1


def string_arg(s, i):
    """Adjacent literals at s[i] (after white space) ending at ',' or ')'; else None."""
    parts = []
    i = skip_ws(s, i)
    while True:
        r = literal(s, i) if i < len(s) else None
        if r is None:
            break
        parts.append(r[0])
        i = skip_ws(s, r[1])
    if not parts or s[i] not in ",)":
        return None
    return "".join(parts), i


def skip_arg(s, i):
    """Skip one argument (balanced parentheses, literals); return the index of ',' or ')'."""
    depth = 0
    while i < len(s):
        c = s[i]
        if c == '"':
            i = literal(s, i)[1]
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            if depth == 0:
                return i
            depth -= 1
        elif c == "," and depth == 0:
            return i
        i += 1
    return i


def wrapper_of(s, start):
    """The gtest macro directly around the call starting at `start`, if any."""
    m = re.search(r"(\w+)\s*\(\s*$", s[max(0, start - 200):start])
    return WRAPPERS.get(m.group(1)) if m else None


EVENT_CALL = re.compile(r"\b(add_event_advance_ts|generate_\w+_event\w*)\s*\(")
TEST_START = re.compile(r"\bTEST(?:_F)?\s*\(\s*\w+\s*,\s*(\w+)\s*\)")


def args_of(s, i):
    """The top-level arguments of the call whose '(' ends at s[i-1], as source text."""
    out = []
    while i < len(s):
        j = skip_arg(s, i)
        out.append(" ".join(s[i:j].split()))
        if j >= len(s) or s[j] != ",":
            break
        i = j + 1
    return out


def context(s, start):
    """The test around s[start] and the event it evaluates on (see the module's doc)."""
    tests = [m for m in TEST_START.finditer(s, 0, start)]
    if not tests:
        return None, None
    t = tests[-1]
    event = None
    for m in EVENT_CALL.finditer(s, t.end(), start):
        line_start = s.rfind("\n", 0, m.start()) + 1
        if re.match(r"\s*(static\s+)?(void|bool|inline|sinsp_evt\*?)\s", s[line_start:m.start()]) \
                and "=" not in s[line_start:m.start()]:
            continue
        a = args_of(s, m.end())
        event = {"line": s.count("\n", 0, m.start()) + 1, "call": m.group(1)}
        if m.group(1) == "add_event_advance_ts":
            event["type"] = a[2] if len(a) > 2 else None
            event["params"] = a[4:]
        else:
            event["params"] = [x for x in a if x]
    if event is not None and "DEFAULT_TREE" in s[t.end():start]:
        event["tree"] = True
    return t.group(1), event


def extract(path, rel):
    s = open(path, encoding="utf-8", errors="replace").read()
    out = []
    for m in re.finditer(r"\b(" + "|".join(CALLS) + r")\s*\(", s):
        name = m.group(1)
        # Skip the helpers' own definitions.
        line_start = s.rfind("\n", 0, m.start()) + 1
        if re.match(r"\s*(static\s+)?(void|bool|inline)\b", s[line_start:m.start()]):
            continue
        idx, how = CALLS[name]
        i = m.end()
        for _ in range(idx):
            i = skip_arg(s, i)
            if s[i] != ",":
                break
            i += 1
        r = string_arg(s, i)
        if r is None:
            continue
        expr, j = r
        line = s.count("\n", 0, m.start()) + 1
        if how in ("accept", "reject"):
            expect = how
        elif how == "compile":
            rest = s[j:skip_arg(s, j + 1) if s[j] == "," else j]
            expect = "reject" if s[j] == "," and rest.strip(", \n\t") == "true" else "accept"
        elif how == "run":
            first = s[m.end():skip_arg(s, m.end())].strip()
            expect = first if first in ("true", "false") else "accept"
        else:
            w = wrapper_of(s, m.start())
            if w is None:
                continue
            if name == "filter_compiles":
                # filter_compiles answers whether it compiles, not the result.
                w = {"true": "accept", "false": "reject"}.get(w, w)
            expect = w
        row = {"src": f"{rel}:{line}", "expect": expect, "expr": expr}
        if expect in ("true", "false"):
            test, event = context(s, m.start())
            if test:
                row["test"] = test
            if event:
                row["event"] = event
        out.append(row)
    return out


def main():
    root = sys.argv[1]
    commit = sys.argv[2] if len(sys.argv) > 2 else subprocess.run(
        ["git", "-C", root, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    tests = os.path.join(root, "userspace/libsinsp/test")
    rows = []
    for dirpath, _, files in sorted(os.walk(tests)):
        for f in sorted(files):
            if f.endswith((".cpp", ".h")):
                p = os.path.join(dirpath, f)
                rows.extend(extract(p, os.path.relpath(p, root)))
    print(json.dumps({"source": "https://github.com/falcosecurity/libs", "commit": commit,
                      "path": "userspace/libsinsp/test", "expressions": len(rows)}))
    for r in rows:
        print(json.dumps(r, ensure_ascii=False))


if __name__ == "__main__":
    main()
