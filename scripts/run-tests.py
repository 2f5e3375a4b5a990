#!/usr/bin/env python3
"""Builds and runs every test binary of the workspace, and says where the time went.

`make test` calls this after the lints and the build. It builds the test binaries once
(`cargo test --no-run`), runs the binaries that touch no probes, devices, servers or other
global state two at a time, then the rest one after another with one test thread (beside them, in
a lane of their own, the tests that only wait on servers and timers: BACKGROUND; those whose
figures move with load, QUIET, start after it), and ends with the ten
slowest tests and binaries and one closing line; `--report` prints the phase times (`scripts/phase`
writes them).

A crate's integration tests are one binary, `it` (scripts/test-binaries.py), with a module per
file of tests/. Each module runs in a process of its own, as when each file was a binary:
`latscope::it::why` is one entry of the report, its tests `latscope::it::why::<test>`.

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
# Test files of other packages that qualify as well (package, module of the `it` binary or a
# binary of its own): they run latscope on generated traces and read its output with Python
# readers, Spark or headless Chromium (each with a profile of its own); none loads a probe.
PARALLEL_MODULES = {
    ("latscope", "views_words"),
    ("latscope", "view_layout"),
    ("latscope", "export_parquet"),
    ("latscope", "export_readers"),
    ("latscope", "export_memory"),
    ("latscope", "export_perfetto_memory"),
}

# Tests that load no probe, start their servers on ports the kernel picks, and mostly wait on
# timers and sockets (slow clients, scrape intervals, carbon's flushes): they run in a lane of
# their own beside the one-at-a-time group, which is mostly waiting too. A module name alone
# means all of its tests.
BACKGROUND = {
    ("latscope-export", "prometheus"): None,
    ("latscope-export", "dashboard"): None,
    ("latscope-export", "graphite"): None,
    ("latscope-flight", "ring"): None,
    ("latscope", "replay_graphite"): None,
    ("latscope", "server_attacks"): [
        "a_slowloris_of_64_connections_does_not_shut_out_a_normal_client_of_the_dashboard",
        "wrong_bearer_tokens_are_answered_at_a_limited_rate",
        "a_flood_of_wrong_tokens_from_another_user_does_not_lock_the_right_token_out",
    ],
    ("latscope", "serve"): ["at_the_connection_cap_idle_and_slow_connections_make_room"],
}

# One-at-a-time tests whose figures move with the machine's load (A/A replay verdicts, memory
# under overload, timings against a workload's own clock, loss under pressure): they start once
# the lane above has ended, the others run beside it.
QUIET = {
    "diff", "record_pressure", "replay", "flight", "live", "why", "why_waits", "why_stacks",
    "record_truth", "view_truth", "spectrogram", "perfetto", "record_command",
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
    jobs = [j for b in bins for j in split_modules(b)]
    jobs = [part for j in jobs for part in split_background(j)]
    if filt:
        jobs = [j for j in jobs if filt in j.label]
    return jobs


class Job:
    """One run of a test binary: the whole binary, or the tests of one module of a merged one."""

    def __init__(self, pkg, target, kind, exe, module=None, names=()):
        self.pkg, self.target, self.kind, self.exe, self.module = pkg, target, kind, exe, module
        self.names = list(names)
        # Tests are named package::target::test (libtest's name has the module); binaries and
        # modules package::target[::module].
        self.prefix = f"{pkg}::{target}" if kind != "lib" else f"{pkg}::lib"
        self.label = self.prefix + (f"::{module}" if module else "")
        self.parallel = pkg in PARALLEL_PACKAGES or (pkg, module or target) in PARALLEL_MODULES
        self.background = False


def split_modules(b):
    """A merged binary (target `it`) as one job per top-level module, each with its tests named
    exactly; any other binary as one job."""
    pkg, target, kind, exe = b
    if target != "it":
        return [Job(pkg, target, kind, exe)]
    out = subprocess.run([exe, "--list", "--format", "terse"], stdout=subprocess.PIPE, text=True,
                         cwd=find_manifest_dir(pkg) or ".")
    modules = {}
    for line in out.stdout.splitlines():
        if line.endswith(": test"):
            name = line[: -len(": test")]
            modules.setdefault(name.split("::", 1)[0], []).append(name)
    if out.returncode != 0 or not modules:
        return [Job(pkg, target, kind, exe)]
    return [Job(pkg, target, kind, exe, m, names) for m, names in sorted(modules.items())]


def split_background(job):
    """The job, or its BACKGROUND tests as a job of their own (marked) and the rest."""
    key = (job.pkg, job.module or job.target)
    if key not in BACKGROUND or job.parallel:
        return [job]
    wanted = BACKGROUND[key]
    if wanted is None:
        job.background = True
        return [job]
    names = [n for n in job.names if n.split("::")[-1] in wanted]
    rest = [n for n in job.names if n not in names]
    if not names:
        return [job]
    bg = Job(job.pkg, job.target, job.kind, job.exe, job.module, names)
    bg.background = True
    bg.label += " (waiting tests)"
    return [bg] + ([Job(job.pkg, job.target, job.kind, job.exe, job.module, rest)] if rest else [])


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


def run_binary(job, threads, results):
    cmd = [job.exe] + LIBTEST_JSON + [f"--test-threads={threads}"]
    if job.module:
        cmd += ["--exact"] + job.names
    # Test binaries run with the package's directory as the working directory, as under cargo.
    run_json(job.label, cmd, find_manifest_dir(job.pkg) or ".", results, job.prefix)


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


def run_json(label, cmd, cwd, results, prefix=None):
    """Runs a libtest command with JSON output and records each test's outcome and time (each
    test named `prefix::<libtest's name>`; the run as a whole is `label`)."""
    prefix = prefix or label
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
        name = f"{prefix}::{ev['name']}"
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
    check = subprocess.run([sys.executable, "scripts/test-binaries.py", "--check"])
    if check.returncode != 0:
        return 1
    find_manifest_dir("")
    jobs = cargo_build(args.profile, args.filter)
    parallel = [j for j in jobs if j.parallel]
    background = [j for j in jobs if j.background]
    serial = [j for j in jobs if not j.parallel and not j.background]
    results = Results()
    t0 = time.monotonic()
    print(f"running {len(parallel)} test binaries or modules {args.jobs} at a time, then {len(serial)} one at a time "
          f"beside {len(background)} that wait on servers and timers",
          flush=True)
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        list(pool.map(lambda b: run_binary(b, 1, results), parallel))
    lane = threading.Thread(target=lambda: [run_binary(b, 1, results) for b in background])
    lane.start()
    quiet = [b for b in serial if (b.module or b.target) in QUIET]
    for b in [b for b in serial if b not in quiet]:
        run_binary(b, 1, results)
    lane.join()
    for b in quiet:
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
    print("\nslowest test binaries (a merged binary's modules each on their own):")
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
