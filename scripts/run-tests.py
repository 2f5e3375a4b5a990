#!/usr/bin/env python3
"""Builds and runs every test binary of the workspace, and says where the time went.

`make test` calls this after the lints and the build. It builds the test binaries once
(`cargo test --no-run`), runs the binaries that touch no probes, devices, servers or other
global state two at a time, then the rest one after another with one test thread, and ends with the ten
slowest tests and binaries and one closing line; `--report` prints the phase times (`scripts/phase`
writes them).

A test that printed `SKIPPED <name>: <why>` (the project's tests do that where they need root or
BPF and have neither) is counted as skipped, not passed. libtest's per-test timings need its
JSON output, which stable Rust keeps behind `-Z unstable-options`: RUSTC_BOOTSTRAP=1 allows it
for the test binaries only (the code under test is built by stable cargo as usual).

usage: scripts/run-tests.py [--profile ci] [--jobs 2] [--out out] [FILTER]
       scripts/run-tests.py --report [--out out]     phase times of the last `make test`
"""

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

# Test binaries whose tests use no BPF, loop device, server, fixed port or process-wide state
# (package, target name): safe to run beside each other. Everything else runs alone.
PARALLEL_PACKAGES = {
    "latscope-event",
    "latscope-trace",
    "latscope-filter",
    "latscope-hist",
    "latscope-view",
    "latscope-stacks",
    "latscope-scan",
    "latscope-store",
}


def cargo_build(profile, filt):
    """Builds every test binary; returns [(package, target, kind, executable)]."""
    cmd = [
        "cargo", "test", "--workspace", "--locked", "--profile", profile, "--no-run",
        "--message-format=json-render-diagnostics",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    bins = []
    for line in proc.stdout:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
            continue
        if not msg.get("profile", {}).get("test"):
            continue
        pkg = msg["package_id"]
        # package ids: "path+file:///...#latscope-trace@0.1.0" or "latscope-trace 0.1.0 (...)"
        name = pkg.split("#", 1)[1].split("@", 1)[0] if "#" in pkg else pkg.split(" ", 1)[0]
        target = msg["target"]
        kind = "lib" if target["kind"][0] in ("lib", "rlib", "proc-macro") else target["kind"][0]
        bins.append((name, target["name"], kind, msg["executable"]))
    if proc.wait() != 0:
        sys.exit("scripts/run-tests.py: building the test binaries failed (cargo's messages above)")
    if filt:
        bins = [b for b in bins if filt in f"{b[0]}::{b[1]}"]
    return bins


class Results:
    def __init__(self):
        self.lock = threading.Lock()
        self.tests = []  # (name, outcome, seconds)
        self.failures = []  # (name, output)
        self.binaries = []  # (name, seconds, exit code)

    def add(self, name, outcome, secs, output=""):
        with self.lock:
            self.tests.append((name, outcome, secs))
            shown = f"{secs:.2f} s" if secs is not None else "-"
            line = f"test {name} ... {outcome} ({shown})"
            if outcome == "SKIPPED":
                why = next((l for l in output.splitlines() if "SKIPPED" in l), "")
                line += f": {why.strip()}"
            print(line, flush=True)
            if outcome == "FAILED":
                self.failures.append((name, output))


LIBTEST_JSON = ["-Z", "unstable-options", "--format", "json", "--report-time", "--show-output"]


def run_binary(b, threads, results):
    pkg, target, kind, exe = b
    label = f"{pkg}::{target}" if kind != "lib" else f"{pkg}::lib"
    cmd = [exe] + LIBTEST_JSON + [f"--test-threads={threads}"]
    # Test binaries run with the package's directory as the working directory, as under cargo.
    run_json(label, cmd, find_manifest_dir(pkg) or ".", results)


def run_doctests(profile, results):
    """Doc tests, through cargo and rustdoc with their plain output (RUSTC_BOOTSTRAP would change
    cargo's fingerprints and rebuild everything): outcomes without per-test times."""
    cmd = ["cargo", "test", "--workspace", "--locked", "--profile", profile, "--doc", "--", "--test-threads=2"]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    seen = False
    for line in proc.stdout.splitlines():
        m = re.match(r"^test (.+) \.\.\. (ok|FAILED|ignored)$", line)
        if m:
            seen = True
            results.add(f"doctests::{m.group(1)}", m.group(2), None, "")
    if proc.returncode != 0:
        results.add("doctests::(cargo test --doc)", "FAILED", None, proc.stdout)
    elif not seen:
        print("no doc tests found", flush=True)


def run_json(label, cmd, cwd, results):
    """Runs a libtest command with JSON output and records each test's outcome and time."""
    env = dict(os.environ, RUSTC_BOOTSTRAP="1")
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, errors="replace")
    err_chunks = []
    t = threading.Thread(target=lambda: err_chunks.append(proc.stderr.read()), daemon=True)
    t.start()
    started = {}
    stray = []
    for line in proc.stdout:
        ev = None
        if line.startswith("{"):
            try:
                ev = json.loads(line)
            except ValueError:
                ev = None
        if ev is None:
            stray.append(line)
            continue
        if ev.get("type") != "test":
            continue
        name = f"{label}::{ev['name']}"
        event = ev.get("event")
        if event == "started":
            started[name] = time.monotonic()
            continue
        started.pop(name, None)
        out = ev.get("stdout", "")
        secs = ev.get("exec_time")
        if event == "ok":
            results.add(name, "SKIPPED" if "SKIPPED" in out else "ok", secs, out)
        elif event == "failed":
            results.add(name, "FAILED", secs, out)
        elif event == "ignored":
            results.add(name, "ignored", 0.0)
    code = proc.wait()
    t.join()
    secs = time.monotonic() - t0
    stderr = "".join(err_chunks)
    # A binary that died (abort, signal) leaves its running tests without a result: each fails.
    for name, since in started.items():
        results.add(name, "FAILED", time.monotonic() - since,
                    f"the test binary exited with {code} while this test ran\n{stderr}{''.join(stray)}")
    if code != 0 and not started and not any(n.startswith(label + "::") and o == "FAILED"
                                             for n, o, _ in results.tests):
        results.add(f"{label}::(binary)", "FAILED", secs, f"exit code {code}\n{stderr}{''.join(stray)}")
    with results.lock:
        results.binaries.append((label, secs, code))


_manifests = {}


def find_manifest_dir(pkg):
    if not _manifests:
        meta = json.loads(subprocess.check_output(
            ["cargo", "metadata", "--no-deps", "--format-version", "1", "--locked"], text=True))
        for p in meta["packages"]:
            _manifests[p["name"]] = os.path.dirname(p["manifest_path"])
    return _manifests.get(pkg)


def report(out):
    phases = os.path.join(out, "test-phases.tsv")
    if os.path.exists(phases):
        print("\nphase times:")
        total = 0.0
        with open(phases) as f:
            for line in f:
                name, secs, status = (line.rstrip("\n").split("\t") + ["", ""])[:3]
                total += float(secs)
                print(f"  {name:<14} {float(secs):8.1f} s  {status}")
        print(f"  {'total':<14} {total:8.1f} s")


def slowest(out):
    times = os.path.join(out, "test-times.tsv")
    if os.path.exists(times):
        rows = []
        with open(times) as f:
            for line in f:
                name, outcome, secs = line.rstrip("\n").split("\t")
                rows.append((float(secs), name, outcome))
        rows.sort(reverse=True)
        print("\nten slowest tests:")
        for secs, name, outcome in rows[:10]:
            print(f"  {secs:8.2f} s  {name}  ({outcome})")


def panic_summary(output, lines=6, width=400):
    """The panic message of a failed test's output (its first lines, each cut to `width`)."""
    text = output.splitlines()
    at = next((i for i, l in enumerate(text) if "panicked at" in l), None)
    keep = text[at:at + lines] if at is not None else text[-lines:]
    return " | ".join(l[:width] + ("..." if len(l) > width else "") for l in keep if l.strip())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="ci")
    ap.add_argument("--jobs", type=int, default=2, help="binaries run at once in the parallel group")
    ap.add_argument("--out", default="out")
    ap.add_argument("--report", action="store_true", help="only print the last run's report")
    ap.add_argument("filter", nargs="?", help="only binaries whose package::target contains this")
    args = ap.parse_args()
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    if args.report:
        report(args.out)
        return 0
    os.makedirs(args.out, exist_ok=True)
    bins = cargo_build(args.profile, args.filter)
    find_manifest_dir("")
    parallel = [b for b in bins if b[0] in PARALLEL_PACKAGES]
    serial = [b for b in bins if b[0] not in PARALLEL_PACKAGES]
    results = Results()
    t0 = time.monotonic()
    print(f"running {len(parallel)} test binaries {args.jobs} at a time, then {len(serial)} one at a time",
          flush=True)
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        list(pool.map(lambda b: run_binary(b, 1, results), parallel))
    for b in serial:
        run_binary(b, 1, results)
    if not args.filter:
        run_doctests(args.profile, results)
    wall = time.monotonic() - t0

    with open(os.path.join(args.out, "test-times.tsv"), "w") as f:
        for name, outcome, secs in results.tests:
            f.write(f"{name}\t{outcome}\t{secs or 0.0:.3f}\n")
    for name, output in results.failures:
        print(f"\n---- {name} ----\n{output}")
    counts = {k: sum(1 for t in results.tests if t[1] == k) for k in ("ok", "FAILED", "SKIPPED", "ignored")}
    if results.failures:
        print("\nfailures:")
        for name, _ in results.failures:
            print(f"    {name}")
    slowest(args.out)
    print("\nslowest test binaries:")
    for label, secs, code in sorted(results.binaries, key=lambda b: -b[1])[:10]:
        print(f"  {secs:8.1f} s  {label}" + (f"  (exit {code})" if code else ""))
    status = "FAILED" if results.failures else "ok"
    print(f"\ntest result: {status}. {counts['ok']} passed; {counts['FAILED']} failed; "
          f"{counts['ignored']} ignored; 0 measured; 0 filtered out; finished in {wall:.2f}s")
    print(f"tests: {counts['ok']} passed, {counts['FAILED']} failed, {counts['SKIPPED'] + counts['ignored']} skipped")
    # Last, so that a log cut to its end still says why each test failed.
    for name, output in results.failures:
        print(f"why {name} failed: {panic_summary(output)}")
    return 1 if results.failures else 0


if __name__ == "__main__":
    sys.exit(main())
