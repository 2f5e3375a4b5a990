//! Waits against ground truth (tests/why.c), recorded with `record --why`: which waits are idle
//! and which are time spent waiting on someone (the idle rule), which lock and who held it, and
//! the chain of waits to its root. Recordings are shared between the tests that read them.

mod common;

use common::{bin, compile_c, json_lines, latscope_json, latscope_ok, require_bpf};
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// A recording and the workload's `key value` lines.
type Recording = (PathBuf, HashMap<String, i64>);

/// `key value` lines of a workload's output (the last of a repeated key wins).
fn key_values(out: &str) -> HashMap<String, i64> {
    out.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

/// Records `sh -c LINE` (with `flags`) into `dir/NAME.lst`; returns it and the workload's lines.
fn record_sh(dir: &Path, name: &str, line: &str, flags: &[&str]) -> Recording {
    let trace = dir.join(format!("{name}.lst"));
    let out = Command::new(bin())
        .args(["record", "-w"])
        .arg(&trace)
        .arg("--quiet")
        .args(flags)
        .args(["--", "sh", "-c", line])
        .output()
        .unwrap();
    assert!(out.status.success(), "record failed: {}", String::from_utf8_lossy(&out.stderr));
    (trace, key_values(&String::from_utf8_lossy(&out.stdout)))
}

/// A directory that lives as long as the test binary (for recordings shared by tests).
fn shared_dir() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().unwrap()).path()
}

/// One recording for the idle rule: a server (`why srv 20 10`: an acceptor polling with 30 ms
/// timeouts, a queue, two workers sharing a lock held 10 ms) and, beside it in the same
/// recording, three threads sharing a GIL (`why gil 10 5`); the server's client (`why cli`) runs
/// outside the recording. The GIL's threads print their ids as `gil0`..`gil2` and its truth as
/// `gil_wait_ns`.
fn server_recording() -> &'static Recording {
    static REC: OnceLock<Recording> = OnceLock::new();
    REC.get_or_init(|| {
        let dir = shared_dir().join("server");
        std::fs::create_dir_all(&dir).unwrap();
        let work = compile_c("why.c", &dir);
        let port = dir.join("port");
        let mut cli = Command::new(&work)
            .args(["cli", "20"])
            .arg(&port)
            .stdout(Stdio::null())
            .spawn()
            .expect("the client starts");
        let w = work.display();
        let line = format!("{w} gil 10 5 > {d}/gil.out & {w} srv 20 10 {p}; wait; cat {d}/gil.out", d = dir.display(), p = port.display());
        let rec = record_sh(&dir, "server", &line, &["--why", "--no-block"]);
        assert!(cli.wait().unwrap().success(), "the client got its replies");
        rec
    })
}

/// Events matching `filter` in `trace`, as JSON.
fn events(trace: &Path, filter: &str) -> Vec<Value> {
    json_lines(&latscope_ok(&["events", "-r", trace.to_str().unwrap(), "--json", filter]))
}

fn lat(e: &Value) -> u64 {
    e["latency_ns"].as_u64().unwrap()
}

/// `got` within `pct` % of `scale` from `want`.
fn assert_near(what: &str, got: u64, want: u64, scale: u64, pct: u64) {
    assert!(
        got.abs_diff(want) * 100 <= scale * pct,
        "{what}: {got} ns attributed, {want} ns true, more than {pct} % of {scale} ns apart"
    );
}

/// The idle rule on a server: its workers' waits for the lock (released by the other worker)
/// and for the queue (signalled by the acceptor) are waits on a thread of the recording, ranked
/// with the work; the acceptor's polls that their 30 ms timeout ended and the reads of requests a
/// client outside the recording sent are idle, left out, and each kind counted and timed.
#[test]
fn waits_ended_by_the_recording_s_threads_rank_and_timeouts_and_outside_requests_are_idle() {
    if !require_bpf("waits_ended_by_the_recording_s_threads_rank_and_timeouts_and_outside_requests_are_idle") {
        return;
    }
    let (trace, kv) = server_recording();
    let t = trace.to_str().unwrap();
    // The workers' futex waits: every one waited on someone (the other worker, the acceptor).
    let gil: Vec<String> = (0..3).map(|i| kv[&format!("gil{i}")].to_string()).collect();
    let not_gil = format!("not thread.tid in ({})", gil.join(", "));
    let workers = format!("evt.type = futex and thread.tid in ({}, {})", kv["worker"], kv["worker1"]);
    let fx = events(trace, &workers);
    let waits: Vec<&Value> = fx.iter().filter(|e| lat(e) > 1_000_000).collect();
    assert!(!waits.is_empty(), "futex waits recorded");
    for e in &waits {
        // Waited on someone (or, on a loaded machine, mostly for a CPU after the wake-up: work).
        assert!(matches!(e["why"]["wait"].as_str(), Some("on_someone" | "work")), "{e}");
        assert_eq!(e["why"]["waker"]["kind"], "thread", "{e}");
    }
    assert!(waits.iter().filter(|e| e["why"]["wait"] == "on_someone").count() * 2 >= waits.len(), "{waits:?}");
    let truth = (kv["lock_ns"] + kv["queue_ns"]) as u64;
    let got: u64 = fx.iter().map(lat).sum();
    assert_near("the workers' waits on the lock and the queue", got, truth, truth, 5);
    // The requests' reads: a client outside the recording sent them.
    let reads = events(trace, &format!("evt.type in (recvfrom, read) and fd.type = ipv4 and evt.latency > 1ms and {not_gil}"));
    assert!(reads.len() >= 15, "{reads:?}");
    let kinds: Vec<&str> = reads.iter().map(|e| e["why"]["wait"].as_str().unwrap_or("")).collect();
    assert!(kinds.iter().filter(|k| **k == "idle_outside").count() + 1 >= kinds.len(), "{kinds:?}");
    // The acceptor's polls: timeouts, and the connections of the client (outside).
    let polls = events(trace, "evt.type = poll and evt.latency > 1ms");
    assert!(polls.iter().any(|e| e["why"]["wait"] == "idle_timeout"), "{}", polls.len());
    // (A wake-up the probes did not see leaves a poll idle by its syscall.)
    let kinds: Vec<&str> = polls.iter().map(|e| e["why"]["wait"].as_str().unwrap_or("")).collect();
    assert!(kinds.iter().all(|k| *k != "on_someone"), "{kinds:?}");
    assert!(kinds.iter().filter(|k| k.starts_with("idle")).count() + 2 >= kinds.len(), "{kinds:?}");
    let line = latscope_ok(&["events", "-r", t, "--why", "evt.type = poll and evt.latency > 25ms"]);
    assert!(line.contains("; idle: ended by its own timeout"), "{line}");

    // The rankings: futex ranks with the work, poll and the reads do not; the note counts and
    // times each kind.
    // The server's process, and its workers alone (for the time by cause).
    let only_srv = format!("proc.pid = {}", kv["acceptor"]);
    let j = latscope_json(&["top", "-r", t, "--by", "syscall", "--json", &only_srv]);
    let rows: Vec<&str> = j["rows"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
    // (A poll or read that waited longer for a CPU than for its fd, on a loaded machine, is
    // work: ranked, a few at most.)
    let left = &j["waits_left_out"]["by_syscall"];
    assert!(rows.contains(&"futex") && left["recvfrom"].as_u64() >= Some(15) && left["poll"].as_u64() > Some(0), "{j}");
    let kinds = &j["waits_left_out"]["kinds"];
    assert!(kinds["idle_timeout"]["count"].as_u64() > Some(0), "{j}");
    assert!(kinds["idle_outside"]["count"].as_u64() >= Some(15), "{j}");
    let on = waits.iter().filter(|e| e["why"]["wait"] == "on_someone").count() as u64;
    assert!(kinds["on_someone"]["count"].as_u64() >= Some(on), "{j}");
    let text = latscope_ok(&["top", "-r", t, "--by", "syscall", &only_srv]);
    assert!(
        text.contains("ended by their own timeout") && text.contains("by outside work") && text.contains("waits on another thread"),
        "{text}"
    );
    // why and top --by cause: the lock ranks (first, but for sleeps that a loaded machine kept
    // waiting for a CPU longer than they slept: work), attributed to the threads that released it.
    let w = latscope_json(&["why", "-r", t, "--json", &only_srv]);
    let ops = w["operations"].as_array().unwrap();
    let fx = ops.iter().take(2).find(|o| o["op"] == "futex").unwrap_or_else(|| panic!("{w}"));
    assert!(fx["wakers"][0]["waker"].as_str().unwrap().starts_with("why/"), "{w}");
    assert!(w["waits"]["kinds"]["idle_outside"]["count"].as_u64() >= Some(15), "{w}");
    let c = latscope_json(&["top", "-r", t, "--by", "cause", "--json", &workers]);
    // Their time, by cause: the lock's, and on a loaded machine a share of run queue after the
    // wake-ups (in the workers' clocks too).
    assert_near("the workers' futex time", c["total_ns"].as_u64().unwrap(), truth, truth, 5);
    assert!(c["parts_ns"]["lock"].as_u64().unwrap() * 2 >= truth, "{c}");
    // hist and timeline apply the same rule.
    let h = latscope_json(&["hist", "-r", t, "--by", "syscall", "--json", &only_srv]);
    let groups: Vec<&str> = h["groups"].as_array().unwrap().iter().map(|g| g["group"].as_str().unwrap()).collect();
    assert!(groups.contains(&"futex") && !groups.contains(&"poll"), "{h}");
    let tl = latscope_ok(&["timeline", "-r", t, &only_srv]);
    assert!(tl.contains("ended by their own timeout"), "{tl}");
}

/// A lock passed as CPython passes its GIL (a condition variable waited on with 5 ms timeouts,
/// after which the waiter asks the holder to drop it): a wait its timeout ended while another
/// thread held the lock is lock contention on that thread, not idle time. The threads' futex
/// waits add up to their time waiting for the GIL (their clocks).
#[test]
fn timeouts_of_a_wait_for_a_held_gil_are_contention_on_its_holder() {
    if !require_bpf("timeouts_of_a_wait_for_a_held_gil_are_contention_on_its_holder") {
        return;
    }
    let (trace, kv) = server_recording();
    let gil: Vec<String> = (0..3).map(|i| kv[&format!("gil{i}")].to_string()).collect();
    let fx = events(trace, &format!("evt.type = futex and thread.tid in ({})", gil.join(", ")));
    let waits: Vec<&Value> = fx.iter().filter(|e| lat(e) > 100_000).collect();
    assert!(!waits.is_empty());
    let truth = kv["gil_wait_ns"] as u64;
    let idle: u64 = fx.iter().filter(|e| e["why"]["wait"].as_str().unwrap_or("").starts_with("idle")).map(lat).sum();
    let all: u64 = fx.iter().map(lat).sum();
    // The futex calls hold the GIL's waits but for the threads' preemptions between the calls
    // inside take_gil (their clocks count those too): on a loaded machine, a few percent.
    assert!(all <= truth + truth / 50 && all * 4 >= truth * 3, "futex {all} ns, waiting for the GIL {truth} ns");
    // The timeouts while a thread held the GIL are not idle: what is left idle are the first
    // waits, before the programs saw the GIL handed over, and those of a thread woken for it
    // that another took first (the holder is then not known).
    let n_idle = fx.iter().filter(|e| e["why"]["wait"].as_str().unwrap_or("").starts_with("idle")).count();
    assert!(idle * 5 <= all, "{idle} ns in {n_idle} of the GIL's {all} ns of futex calls left idle");
    // The timed-out waits name the holder, a GIL thread.
    let held: Vec<&&Value> = waits.iter().filter(|e| !e["why"]["held_by"].is_null()).collect();
    assert!(!held.is_empty(), "timeouts while the GIL was held: {waits:?}");
    for e in &held {
        let tid = e["why"]["held_by"]["tid"].to_string();
        assert!(gil.contains(&tid) && tid != e["tid"].to_string(), "{e}");
        assert_eq!(e["why"]["waker"]["kind"], "timer", "{e}");
    }
}
