//! Attribution against ground truth: workloads whose calls wait for one known cause (tests/why.c),
//! recorded with `record --why`. For each: the parts of every call add up to its latency, the
//! right cause holds the right share, and the waker is the thread that woke it.

mod common;
mod exportsupport;

use common::{
    bin, compile_c, json_lines, latscope_json, latscope_ok, require_bpf, throttled_loop, Defer, ThrottledLoop,
};
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const PARTS: [&str; 9] = ["cpu", "runq", "io", "lock", "ipc", "timer", "fault", "other", "unknown"];

/// Record `why MODE ARGS...` with attribution and stacks; returns the trace and the workload's
/// `key value` lines (thread ids, ground truth).
fn record(tmp: &Path, args: &[&str], pre: Option<&str>) -> (PathBuf, HashMap<String, i64>) {
    record_with(tmp, args, pre, &["--why", "--stacks", "--no-block"])
}

/// `record` with these flags of `record` (attribution, `--no-block`).
fn record_with(tmp: &Path, args: &[&str], pre: Option<&str>, flags: &[&str]) -> (PathBuf, HashMap<String, i64>) {
    record_by(Command::new(bin()), tmp, args, pre, flags)
}

/// `record_with`, run by `cmd` (latscope, or a command that runs it).
fn record_by(
    mut cmd: Command,
    tmp: &Path,
    args: &[&str],
    pre: Option<&str>,
    flags: &[&str],
) -> (PathBuf, HashMap<String, i64>) {
    let work = compile_c("why.c", tmp);
    let trace = tmp.join(format!("{}.lst", args.join("-").replace('/', "_")));
    cmd.args(["record", "-w"]).arg(&trace).arg("--quiet").args(flags).arg("--");
    match pre {
        // A shell that moves itself (and so the workload it execs) into a cgroup first.
        Some(pre) => {
            let line = format!("{pre} && exec {} {}", work.display(), args.join(" "));
            cmd.args(["sh", "-c", &line]);
        }
        None => {
            cmd.arg(&work).args(args);
        }
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "record failed: {}", String::from_utf8_lossy(&out.stderr));
    let kv = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_string(), v.trim().parse().ok()?))
        })
        .collect();
    (trace, kv)
}

/// The calls of the workload's main thread of type `ty`.
fn calls(trace: &Path, tid: i64, ty: &str) -> Vec<Value> {
    let ev = json_lines(&latscope_ok(&[
        "events",
        "-r",
        trace.to_str().unwrap(),
        "--json",
        &format!("thread.tid = {tid} and evt.type in ({ty})"),
    ]));
    assert!(!ev.is_empty(), "no {ty} call of thread {tid}");
    ev
}

/// The calls of `calls` that waited: those of more than 1 ms.
fn waits(trace: &Path, tid: i64, ty: &str) -> Vec<Value> {
    calls(trace, tid, ty).into_iter().filter(|e| e["latency_ns"].as_u64() > Some(1_000_000)).collect()
}

fn part(e: &Value, p: &str) -> u64 {
    e["why"]["parts_ns"][p].as_u64().unwrap_or_else(|| panic!("no part {p}: {e}"))
}

/// Every call carries a breakdown whose parts add up to its latency (within 1 %).
fn assert_parts_add_up(ev: &[Value]) {
    for e in ev {
        let lat = e["latency_ns"].as_u64().unwrap();
        let sum: u64 = PARTS.iter().map(|p| part(e, p)).sum();
        assert!(sum.abs_diff(lat) * 100 <= lat, "parts add up to {sum} ns of {lat} ns: {e}");
    }
}

/// Sum of part `p` over the calls.
fn total(ev: &[Value], p: &str) -> u64 {
    ev.iter().map(|e| part(e, p)).sum()
}

fn total_lat(ev: &[Value]) -> u64 {
    ev.iter().map(|e| e["latency_ns"].as_u64().unwrap()).sum()
}

/// `got` within 5 % of `scale` from `want`.
fn assert_share(what: &str, got: u64, want: u64, scale: u64) {
    assert!(
        got.abs_diff(want) * 100 <= scale * 5,
        "{what}: {got} ns attributed, {want} ns true, more than 5 % of {scale} ns apart"
    );
}

/// Two threads spin on the CPU of a thread reading /dev/zero: the thread's own CPU time inside
/// the calls (its CPU clock, read around each call) is the on-CPU part; the rest is run queue.
#[test]
fn why_cpu_contention_is_run_queue_with_the_thread_cpu_time_as_on_cpu() {
    if !require_bpf("why_cpu_contention_is_run_queue_with_the_thread_cpu_time_as_on_cpu") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (trace, kv) = record(tmp.path(), &["runq", "60"], None);
    let ev = calls(&trace, kv["main"], "read");
    let ev: Vec<Value> = ev.into_iter().filter(|e| e["bytes"] == 32u64 << 20).collect();
    assert_eq!(ev.len(), 60);
    assert_parts_add_up(&ev);
    let (wall, cpu) = (kv["wall_ns"] as u64, kv["cpu_ns"] as u64);
    let lat = total_lat(&ev);
    // The user-space clocks frame the calls (a preemption between a clock and the call widens
    // the frame, not the call, and adds no CPU time).
    assert!(lat <= wall, "latency {lat} ns, wall {wall} ns");
    assert_share("on CPU", total(&ev, "cpu"), cpu.min(lat), lat);
    assert_share("run queue", total(&ev, "runq"), lat - cpu.min(lat), lat);
    // Who took the CPU: named for preempted calls, never the thread itself. (Which thread it is
    // depends on the scheduler: with lazy preemption the spinners mostly take the CPU when the
    // call returns to user space, outside it.)
    let named: Vec<u64> = ev.iter().filter_map(|e| e["why"]["cpu_held_by"]["tid"].as_u64()).collect();
    assert!(!named.is_empty(), "preempters named");
    assert!(!named.contains(&(kv["main"] as u64)), "{named:?}");
}

/// A thread that sleeps on a CPU another thread spins on waits for the CPU after each wake-up:
/// that run-queue time names the thread that held the CPU (mostly the spinner), never the
/// sleeper.
#[test]
fn why_run_queue_after_a_wake_up_names_the_thread_that_held_the_cpu() {
    if !require_bpf("why_run_queue_after_a_wake_up_names_the_thread_that_held_the_cpu") {
        return;
    }
    if std::thread::available_parallelism().map_or(0, |n| n.get()) < 2 {
        latscope_testkit::skip("why_run_queue_after_a_wake_up_names_the_thread_that_held_the_cpu", "needs 2 CPUs");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // The recorder on CPU 0, the sleeper and the spinner on CPU 1: the recorder's own wake-ups
    // (its ring buffer's) do not run on the sleeper's CPU.
    let mut pinned = Command::new("taskset");
    pinned.args(["-c", "0"]).arg(bin());
    let (trace, kv) = record_by(pinned, tmp.path(), &["wakeq", "40", "2", "1"], None, &["--why", "--no-block"]);
    let ev: Vec<Value> = calls(&trace, kv["main"], "nanosleep, clock_nanosleep")
        .into_iter()
        // The 2 ms sleeps, not the 50 ms one before them.
        .filter(|e| (1_000_000..40_000_000).contains(&e["latency_ns"].as_u64().unwrap()))
        .collect();
    assert_eq!(ev.len(), 40, "the 2 ms sleeps");
    assert_parts_add_up(&ev);
    let held: Vec<u64> =
        ev.iter().filter(|e| part(e, "runq") > 0).filter_map(|e| e["why"]["cpu_held_by"]["tid"].as_u64()).collect();
    // The thread named is the last that ran before the sleeper got the CPU back: the spinner,
    // but for a kernel worker that ran on that CPU meanwhile; never the sleeper itself.
    let spinner = kv["spinner0"] as u64;
    assert!(held.len() * 2 >= ev.len(), "waits for the CPU named: {held:?}");
    assert!(held.iter().filter(|&&t| t == spinner).count() * 10 >= held.len() * 8, "spinner {spinner}: {held:?}");
    assert!(!held.contains(&(kv["main"] as u64)), "{held:?}");
}

/// A thread holds a futex 20 ms at a time: the waiter's calls are lock time, woken by the holder.
#[test]
fn why_futex_held_by_another_thread_is_lock_time_woken_by_the_holder() {
    if !require_bpf("why_futex_held_by_another_thread_is_lock_time_woken_by_the_holder") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (trace, kv) = record(tmp.path(), &["futex", "10", "20"], None);
    let ev = waits(&trace, kv["main"], "futex");
    assert!(!ev.is_empty());
    assert_parts_add_up(&ev);
    let lat = total_lat(&ev);
    assert_share("lock", total(&ev, "lock"), kv["blocked_ns"] as u64, lat);
    for e in &ev {
        assert_eq!(e["why"]["waker"]["tid"], kv["holder"], "woken by the holder: {e}");
        assert_eq!(e["why"]["waker"]["kind"], "thread");
        // One level of cascade: the holder held the lock across a sleep, so it was itself
        // waiting for a timer while the waiter waited for it. (A wait that began after the
        // holder woke, while it waited for a CPU to unlock, has no wait of the holder's in it.)
        let was_in = &e["why"]["waker"]["was_in"];
        assert!(was_in.is_null() || was_in["cause"] == "timer", "the holder was asleep: {e}");
    }
    let was_in: u64 = ev.iter().map(|e| e["why"]["waker"]["was_in"]["ns"].as_u64().unwrap_or(0)).sum();
    assert!(was_in > 0, "no cascade: {ev:?}");
    // The truth: the holder's sleeps as far as the waits' blocked time covers them. A sleep is
    // the first 20 ms of its nanosleep call as recorded (the timer fires then, plus up to 50 us
    // of slack: 100 us allowed); the rest of the call, on a loaded host, is the holder waiting
    // for a CPU: in the lock wait too, but not a wait of the holder's own. A wait is blocked at
    // most until the holder's release (its next futex call) and for its lock time at most: on
    // a loaded host the waiter may wait for a CPU before it blocks (and after, while the holder
    // polls for the next round with short sleeps), and may start waiting during the sleep.
    let span = |e: &Value, cap: u64| {
        let ts = e["ts_ns"].as_u64().unwrap();
        (ts, ts + e["latency_ns"].as_u64().unwrap().min(cap))
    };
    let sleeps: Vec<(u64, u64)> =
        calls(&trace, kv["holder"], "nanosleep, clock_nanosleep").iter().map(|e| span(e, 20_100_000)).collect();
    let releases: Vec<u64> = calls(&trace, kv["holder"], "futex").iter().map(|e| span(e, 0).0).collect();
    let truth: u64 = ev
        .iter()
        .map(|e| {
            let (a, b) = span(e, u64::MAX);
            let woken = releases.iter().copied().filter(|&r| r >= a).min().unwrap_or(b).min(b);
            let slept: u64 = sleeps.iter().map(|&(s, t)| woken.min(t).saturating_sub(a.max(s))).sum();
            slept.min(part(e, "lock"))
        })
        .sum();
    assert!(truth > 0, "no wait overlaps a sleep of the holder: {ev:?} {sleeps:?}");
    assert_share("the holder's sleep within the lock wait", was_in, truth, lat);
    let t = trace.to_str().unwrap();
    let f = format!("thread.tid = {} and evt.type = futex and evt.latency > 1ms", kv["main"]);
    let text = latscope_ok(&["events", "-r", t, "--why", &f]);
    assert!(text.contains(&format!("woken by why/{}, which was in timer/sleep ", kv["holder"])), "{text}");
    let c = latscope_json(&["top", "-r", t, "--by", "cause", "--waits", "--json", &f]);
    assert_eq!(c["wakers"][0]["waker"], format!("why/{}", kv["holder"]), "{c}");
    assert_eq!(c["wakers"][0]["was_in"]["cause"], "timer", "{c}");
    let j = latscope_json(&["why", "-r", t, "--waits", "--json", &f]);
    assert_eq!(j["operations"][0]["wakers"][0]["was_in"]["cause"], "timer", "{j}");
    let text = latscope_ok(&["why", "-r", t, "--waits", &f]);
    assert!(text.contains("which was in timer/sleep"), "{text}");
}

/// A writer sleeps 20 ms before each write: the reader's reads are pipe time, woken by the writer.
#[test]
fn why_pipe_whose_writer_sleeps_is_pipe_time_woken_by_the_writer() {
    if !require_bpf("why_pipe_whose_writer_sleeps_is_pipe_time_woken_by_the_writer") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (trace, kv) = record(tmp.path(), &["pipe", "10", "20"], None);
    let ev: Vec<Value> = calls(&trace, kv["main"], "read").into_iter().filter(|e| e["fd_type"] == "pipe").collect();
    assert_eq!(ev.len(), 10);
    assert_parts_add_up(&ev);
    let lat = total_lat(&ev);
    assert_share("pipe", total(&ev, "ipc"), kv["blocked_ns"] as u64, lat);
    for e in &ev {
        assert_eq!(e["why"]["waker"]["tid"], kv["writer"], "woken by the writer: {e}");
    }
    // The front door names the reads first, their cause, their pipe and the writer.
    let f = format!("proc.pid = {}", kv["main"]);
    let j = latscope_json(&["why", "-r", trace.to_str().unwrap(), "--json", &f]);
    let top = &j["operations"][0];
    assert_eq!(top["op"], "read", "{j}");
    assert!(top["parts_ns"]["ipc"].as_u64().unwrap() * 100 >= top["total_ns"].as_u64().unwrap() * 90, "{top}");
    assert!(top["files"][0]["path"].as_str().unwrap().starts_with("pipe:"), "{top}");
    assert_eq!(top["wakers"][0]["waker"], format!("why/{}", kv["writer"]), "{top}");
    let text = latscope_ok(&["why", "-r", trace.to_str().unwrap(), &f]);
    assert!(text.contains("1. read: ") && text.contains("pipe/socket") && text.contains("woken by: why/"), "{text}");
}

/// A recv woken by the first of two bytes it needs (SO_RCVLOWAT) waits again for the second: its
/// intervals off the CPU, in time order, are the wait for the first send (ended after it), run
/// queue, the wait for the second (ended after it); between them the call ran. They and the
/// time on CPU between them add up to the breakdown's parts, exactly, and tile the call, as
/// `events` says them in order and the Perfetto export nests them.
#[test]
fn why_two_waits_of_one_call_are_kept_in_time_order() {
    const TEST: &str = "why_two_waits_of_one_call_are_kept_in_time_order";
    if !require_bpf(TEST) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    const N: usize = 3;
    let (trace, kv) = record_with(tmp.path(), &["lowat", &N.to_string(), "15", "25"], None, &["--why", "--no-block"]);
    let ev = calls(&trace, kv["main"], "recvfrom");
    assert_eq!(ev.len(), N);
    assert_parts_add_up(&ev);
    for (r, e) in ev.iter().enumerate() {
        let (ts, lat) = (e["ts_ns"].as_u64().unwrap(), e["latency_ns"].as_u64().unwrap());
        let (first, second) = (kv[&format!("first{r}")] as u64, kv[&format!("second{r}")] as u64);
        let off = &e["why"]["off_cpu"];
        let kept = off["kept"].as_array().unwrap_or_else(|| panic!("no intervals off the CPU: {e}"));
        assert_eq!(off["count"].as_u64(), Some(kept.len() as u64), "every interval kept: {e}");
        // In time order, inside the call, one after another.
        let mut at = ts;
        let mut by_part: HashMap<String, u64> = HashMap::new();
        for k in kept {
            let (from, d) = (k["start_ns"].as_u64().unwrap(), k["ns"].as_u64().unwrap());
            assert!(from >= at && d > 0, "interval {k} out of order: {e}");
            at = from + d;
            *by_part.entry(k["cause"].as_str().unwrap().to_string()).or_default() += d;
        }
        assert!(at <= ts + lat, "intervals past the call's end: {e}");
        // Off the CPU: exactly the breakdown's parts; the rest is on CPU.
        for p in &PARTS[1..] {
            assert_eq!(by_part.get(*p).copied().unwrap_or(0), part(e, p), "{p} of {e}");
        }
        let off_ns: u64 = by_part.values().sum();
        assert_eq!(part(e, "cpu") + off_ns, lat, "on CPU is the rest of the call: {e}");
        // The two socket waits: the first ended by the first send, the second by the second.
        let ipc: Vec<(u64, u64)> = kept
            .iter()
            .filter(|k| k["cause"] == "ipc")
            .map(|k| (k["start_ns"].as_u64().unwrap(), k["start_ns"].as_u64().unwrap() + k["ns"].as_u64().unwrap()))
            .collect();
        assert_eq!(ipc.len(), 2, "two socket waits: {e}");
        assert!(ipc[0].1 >= first && ipc[0].1 < second, "the first wait ends at the first send ({first}): {e}");
        assert!(ipc[1].0 >= first && ipc[1].1 >= second, "the second wait ends at the second send ({second}): {e}");
    }
    // The text says them in order.
    let text =
        latscope_ok(&["events", "-r", trace.to_str().unwrap(), "--why", &format!("thread.tid = {}", kv["main"])]);
    let order: Vec<&str> = text.lines().filter(|l| l.starts_with("    in order: ")).collect();
    assert!(
        order.iter().filter(|l| l.matches("pipe/socket").count() == 2).count() >= N,
        "an `in order` line with both waits per call: {text}"
    );
    // The Perfetto export nests them in the call, in the same order, as slices.
    if !latscope_testkit::require_python(TEST, &["perfetto.protos.perfetto.trace.perfetto_trace_pb2"]) {
        return;
    }
    let pf = tmp.path().join("lowat.pftrace");
    latscope_ok(&["export", "-r", trace.to_str().unwrap(), "--perfetto", pf.to_str().unwrap(), "proc.name = why"]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/perfetto_check.py");
    let out = Command::new("python3").arg(script).arg(&pf).output().unwrap();
    assert!(out.status.success(), "perfetto_check.py failed: {}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["errors"].as_array().map(Vec::len), Some(0), "{}", v["errors"]);
    let slices = v["slices"].as_array().unwrap();
    for e in &ev {
        let ts = e["ts_ns"].as_u64().unwrap();
        let call = slices
            .iter()
            .find(|s| s["ts"].as_u64() == Some(ts) && s["tid"].as_i64() == Some(kv["main"]) && s["cat"] == "syscall")
            .unwrap_or_else(|| panic!("no slice of {e}"));
        let kids: Vec<&Value> = slices.iter().filter(|s| s["parent"] == call["id"]).collect();
        let names: Vec<&str> = kids.iter().map(|k| k["name"].as_str().unwrap()).collect();
        let blocked: Vec<&&str> = names.iter().filter(|n| n.starts_with("blocked")).collect();
        assert_eq!(blocked, [&"blocked: pipe/socket", &"blocked: pipe/socket"], "{names:?}");
        let (mut at, end) = (ts, ts + e["latency_ns"].as_u64().unwrap());
        for k in &kids {
            assert_eq!(k["ts"].as_u64(), Some(at), "the parts tile the call: {kids:?}");
            at += k["dur"].as_u64().unwrap();
        }
        assert_eq!(at, end, "the parts tile the call: {kids:?}");
    }
}

/// nanosleep 20 ms: timer time of 20 ms per call, woken by a timer. A sleep whose wake-up the
/// probes did not see (its program found task storage in use on the CPU: the kernel does not
/// re-enter it, and other tracers use it too) is timer time as well, from the call alone, with no
/// waker: as many as the recording's summary counts, at most.
#[test]
fn why_sleep_is_timer_time_of_the_requested_length() {
    if !require_bpf("why_sleep_is_timer_time_of_the_requested_length") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let sum = tmp.path().join("summary.json");
    let json = format!("--json={}", sum.display());
    let (trace, kv) =
        record_with(tmp.path(), &["sleep", "10", "20"], None, &["--why", "--stacks", "--no-block", &json]);
    let ev = calls(&trace, kv["main"], "nanosleep, clock_nanosleep");
    assert_eq!(ev.len(), 10);
    assert_parts_add_up(&ev);
    let parts: Vec<&Value> = ev.iter().map(|e| &e["why"]).collect();
    let timer = total(&ev, "timer");
    assert!(timer.abs_diff(10 * 20_000_000) * 20 <= total_lat(&ev), "timer {timer} ns of 200 ms: {parts:?}");
    assert!(ev.iter().all(|e| part(e, "unknown") < 1_000_000), "no sleep is unknown: {parts:?}");
    let summary: Value = serde_json::from_slice(&std::fs::read(&sum).unwrap()).unwrap();
    let unseen = summary["wakeups_unseen"].as_u64().unwrap_or_else(|| panic!("wakeups_unseen: {summary}"));
    let no_waker = ev.iter().filter(|e| e["why"]["waker"].is_null()).count() as u64;
    assert!(no_waker <= unseen, "{no_waker} sleeps without a waker, {unseen} wake-ups unseen: {parts:?}");
    assert!(ev.iter().all(|e| e["why"]["waker"].is_null() || e["why"]["waker"]["kind"] == "timer"), "{parts:?}");
    // The kernel's count of program runs it skipped (Linux 5.12 and later): a number.
    if kernel_at_least(5, 12) {
        assert!(summary["program_runs_skipped"].is_u64(), "{summary}");
    }
}

/// The running kernel is at least `major.minor`.
fn kernel_at_least(major: u32, minor: u32) -> bool {
    let rel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut v = rel.split(|c: char| !c.is_ascii_digit()).filter_map(|x| x.parse::<u32>().ok());
    (v.next().unwrap_or(0), v.next().unwrap_or(0)) >= (major, minor)
}

/// `--why-above 10ms --stacks` over sleeps of 2 ms and of 20 ms: the 20 ms sleeps (and only
/// they) carry a breakdown and both stacks, the kernel one in the sleep's path; the 2 ms ones
/// carry neither.
#[test]
fn why_above_keeps_stacks_only_for_calls_at_or_above_the_threshold() {
    if !require_bpf("why_above_keeps_stacks_only_for_calls_at_or_above_the_threshold") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // Ten 2 ms sleeps in one process, then five 20 ms sleeps in another (same command name).
    let short = format!("{} sleep 10 2", tmp.path().join("why").display());
    let (trace, _) = record_with(
        tmp.path(),
        &["sleep", "5", "20"],
        Some(&short),
        &["--why-above", "10ms", "--stacks", "--no-block"],
    );
    let t = trace.to_str().unwrap();
    let sleeps = "proc.name = why and evt.type in (nanosleep, clock_nanosleep)";
    let ev = json_lines(&latscope_ok(&["events", "-r", t, "--json", sleeps]));
    let (long, short): (Vec<&Value>, Vec<&Value>) =
        ev.iter().partition(|e| e["latency_ns"].as_u64().unwrap() >= 10_000_000);
    assert_eq!((long.len(), short.len()), (5, 10), "{ev:?}");
    assert!(long.iter().all(|e| e["why"].is_object()), "{long:?}");
    assert!(short.iter().all(|e| e.get("why").is_none_or(Value::is_null)), "{short:?}");
    // Every kept sleep carries both stacks: the kernel one through the sleep's path.
    let v: Value =
        serde_json::from_str(&latscope_ok(&["why", "-r", t, "--stacks", "--waits", "--json", sleeps])).unwrap();
    assert_eq!(v["calls_without_stack"], 0, "{v}");
    let stacks = v["stacks"].as_array().unwrap();
    assert_eq!(stacks.iter().map(|s| s["calls"].as_u64().unwrap()).sum::<u64>(), 5, "{v}");
    common::calls_with_switch_unseen(stacks);
    for s in stacks.iter().filter(|s| !common::switch_unseen(s)) {
        let kernel = s["kernel"].as_array().unwrap();
        assert!(kernel.iter().any(|f| f.as_str().unwrap().contains("nanosleep")), "{s}");
        assert!(!s["user"].as_array().unwrap().is_empty(), "{s}");
        assert!(s["user_missing"].is_null() && s["kernel_missing"].is_null(), "{s}");
    }
}

/// write() from pages of an uncached mmap'd file: the copy faults each page in from disk inside
/// the call; the waits are page-fault time, one faulting call per major fault, each naming the
/// mapped file and the page it faulted on (page i*64 in the i-th call).
#[test]
fn why_reads_of_uncached_mapped_pages_are_page_fault_time() {
    let Some(lfs) = ext4_loop("why_reads_of_uncached_mapped_pages_are_page_fault_time") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let file = lfs.mnt.join("data");
    std::fs::write(&file, vec![7u8; 40 << 20]).unwrap();
    let (trace, kv) = record(tmp.path(), &["fault", file.to_str().unwrap(), "100"], None);
    // The workload's own 64-byte writes to its pipe (its stdout is a pipe too).
    let ev: Vec<Value> = calls(&trace, kv["main"], "write")
        .into_iter()
        .filter(|e| e["fd_type"] == "pipe" && e["bytes"] == 64 && e["fd"].as_i64() > Some(2))
        .collect();
    assert_eq!(ev.len(), 100);
    assert_parts_add_up(&ev);
    let faulting = ev.iter().filter(|e| part(e, "fault") > 0).count() as i64;
    assert!(kv["majflt"] >= 90, "the workload took its major faults: {kv:?}");
    assert!(faulting * 100 >= kv["majflt"] * 95, "{faulting} calls with fault time, {} major faults", kv["majflt"]);
    // Of the time the calls were blocked (neither running nor runnable), the faults' share.
    let blocked = total_lat(&ev) - total(&ev, "cpu") - total(&ev, "runq");
    assert_share("page fault", total(&ev, "fault"), blocked, total_lat(&ev));
    assert_faults_name_the_file(&ev, file.to_str().unwrap(), kv["pgsize"]);
    // The breakdown lists the fault time under the file.
    let ticket = latscope_ok(&["why", "-r", trace.to_str().unwrap(), &format!("thread.tid = {}", kv["main"])]);
    assert!(ticket.contains(&format!("page faults in: {}", file.display())), "{ticket}");
    // The Parquet export carries the file and offset of each faulting call.
    if exportsupport::require_python("why_reads_of_uncached_mapped_pages_are_page_fault_time", &["duckdb", "pytz"]) {
        let pq = tmp.path().join("fault.parquet");
        latscope_ok(&["export", "-r", trace.to_str().unwrap(), "--parquet", pq.to_str().unwrap(), "-q"]);
        let got: Value = serde_json::from_str(&exportsupport::python(
            r#"
import sys, json, duckdb
rows = duckdb.connect().execute(
    f"SELECT time_ns, fault_path, fault_off FROM '{sys.argv[1]}' WHERE tid = {int(sys.argv[2])} AND why_fault > 0"
).fetchall()
print(json.dumps([list(r) for r in rows]))
"#,
            &[pq.to_str().unwrap(), &kv["main"].to_string()],
        ))
        .unwrap();
        let want: HashMap<i64, &Value> = ev
            .iter()
            .filter(|e| part(e, "fault") > 0)
            .map(|e| (e["time_ns"].as_i64().unwrap(), &e["why"]["page_fault"]))
            .collect();
        let rows = got.as_array().unwrap();
        assert!(rows.len() >= want.len(), "{} faulting calls in Parquet, {} in events", rows.len(), want.len());
        let mut matched = 0;
        for r in rows.iter().filter(|r| want.contains_key(&r[0].as_i64().unwrap())) {
            let w = want[&r[0].as_i64().unwrap()];
            assert_eq!((&r[1], &r[2]), (&w["path"], &w["offset_bytes"]), "{r}");
            matched += 1;
        }
        assert_eq!(matched, want.len(), "every faulting call of `events` is in Parquet");
    }
}

/// Each call with page-fault time names the mapped `file` and, as the offset, page i*64 of it
/// (`ev` in workload order).
fn assert_faults_name_the_file(ev: &[Value], file: &str, pgsize: i64) {
    let mut named = 0;
    for (i, e) in ev.iter().enumerate() {
        if part(e, "fault") == 0 {
            continue;
        }
        let f = &e["why"]["page_fault"];
        assert_eq!(f["path"].as_str(), Some(file), "call {i}: {e}");
        let off = f["offset_bytes"].as_i64().unwrap_or_else(|| panic!("call {i}: no offset: {e}"));
        assert_eq!(off / pgsize, i as i64 * 64, "call {i}: offset {off} bytes is not in page {}: {e}", i * 64);
        named += 1;
    }
    assert!(named >= 90, "{named} calls named the file");
}

/// A file mapped (and its fd closed) before the recording started: the kernel looks up the
/// mapping at each fault (bpf_find_vma, Linux 5.17), and the recorder names its inode from the
/// process's maps; the faults name the file and page as when the mmap was recorded. On a kernel
/// without bpf_find_vma nothing can name it: the faults say so, with no name.
#[test]
fn why_page_faults_in_a_file_mapped_before_the_recording_name_it() {
    const TEST: &str = "why_page_faults_in_a_file_mapped_before_the_recording_name_it";
    if !require_bpf(TEST) || !common::require_tool("why_fault_premapped", "mkfs.ext4") {
        return;
    }
    let find_vma =
        std::fs::read("/sys/kernel/btf/vmlinux").unwrap_or_default().windows(17).any(|w| w == b"BPF_FUNC_find_vma");
    let tmp = tempfile::tempdir().unwrap();
    let lfs = common::LoopFs::new("ext4", 64);
    let file = lfs.mnt.join("data");
    std::fs::write(&file, vec![7u8; 40 << 20]).unwrap();
    let work = compile_c("why.c", tmp.path());
    let gate = tmp.path().join("gate");
    let ready = tmp.path().join("gate.ready");
    let mut w = Command::new(&work)
        .args(["fault", file.to_str().unwrap(), "100", gate.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let _kill = Defer(format!("kill {} 2>/dev/null", w.id()));
    wait_for(&ready);
    let trace = tmp.path().join("pre.lst");
    let rec = Command::new(bin())
        .args(["record", "-w"])
        .arg(&trace)
        .args(["--quiet", "--why", "--no-block", "--duration", "120", "-p", &w.id().to_string()])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&trace); // in place once the probes are attached
    std::fs::write(&gate, b"").unwrap();
    let status = w.wait().unwrap();
    assert!(status.success());
    // SAFETY: signalling our own child, as Ctrl-C would.
    unsafe { libc::kill(rec.id() as i32, libc::SIGINT) };
    let out = rec.wait_with_output().unwrap();
    assert!(out.status.success(), "record failed: {}", String::from_utf8_lossy(&out.stderr));
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut w.stdout.take().unwrap(), &mut stdout).unwrap();
    let kv: HashMap<String, i64> = stdout
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_string(), v.trim().parse().ok()?))
        })
        .collect();
    let ev: Vec<Value> = calls(&trace, kv["main"], "write")
        .into_iter()
        .filter(|e| e["fd_type"] == "pipe" && e["bytes"] == 64 && e["fd"].as_i64() > Some(2))
        .collect();
    assert_eq!(ev.len(), 100);
    assert!(kv["majflt"] >= 90, "the workload took its major faults: {kv:?}");
    // No mmap or open of the file was recorded: the names come from the kernel's look-up.
    assert!(!latscope_ok(&["events", "-r", trace.to_str().unwrap(), "evt.type in (mmap, openat)"]).contains("data"));
    if find_vma {
        assert_faults_name_the_file(&ev, file.to_str().unwrap(), kv["pgsize"]);
    } else {
        let faulting: Vec<&Value> = ev.iter().filter(|e| part(e, "fault") > 0).collect();
        assert!(faulting.len() >= 90, "{} calls with fault time", faulting.len());
        assert!(faulting.iter().all(|e| e["why"]["page_fault"]["path"].is_null()), "never a guessed name");
    }
}

/// Wait until `file` exists, up to 60 s.
fn wait_for(file: &Path) {
    for _ in 0..1200 {
        if file.exists() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("{} did not appear within 60 s", file.display());
}

/// Root, BPF and mkfs.ext4, else `None` (said): then an ext4 file system of 64 MiB on a loop
/// device of its own, so that evicting a file means reading it back from the device.
fn ext4_loop(test: &str) -> Option<common::LoopFs> {
    (require_bpf(test) && common::require_tool(test, "mkfs.ext4")).then(|| common::LoopFs::new("ext4", 64))
}

/// Root and BPF, and a throttled loop device, else `None` (said): then `why MODE DEV 4` recorded
/// with attribution and stacks, in the device's cgroup (the temporary directory and the device
/// live as long as what is returned).
fn record_throttled(
    test: &str,
    mode: &str,
) -> Option<(tempfile::TempDir, ThrottledLoop, PathBuf, HashMap<String, i64>)> {
    if !require_bpf(test) {
        return None;
    }
    let tmp = tempfile::tempdir().unwrap();
    let tl = throttled_loop(test)?;
    let (trace, kv) = record_with(tmp.path(), &[mode, &tl.dev, "4"], Some(&tl.pre), &["--why", "--stacks"]);
    Some((tmp, tl, trace, kv))
}

/// fsync of new files on ext4: the journal thread (jbd2) commits their new blocks, and each
/// fsync waits for that commit: its wait is woken by the journal thread, "which was in" block
/// I/O (the journal's writes and the cache flush), for most of the wait. The journal thread is
/// in no traced call: its I/O waits are remembered for the cascade all the same.
#[test]
fn why_fsync_of_new_files_waits_for_the_journal_thread_in_block_io() {
    let test = "why_fsync_of_new_files_waits_for_the_journal_thread_in_block_io";
    let Some(lfs) = ext4_loop(test) else {
        return;
    };
    let dir = lfs.mnt.join("new");
    std::fs::create_dir(&dir).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let (trace, kv) = record_with(tmp.path(), &["fsyncnew", dir.to_str().unwrap(), "20"], None, &["--why"]);
    let ev = calls(&trace, kv["main"], "fsync");
    assert_eq!(ev.len(), 20);
    assert_parts_add_up(&ev);
    let journal: Vec<&Value> =
        ev.iter().filter(|e| e["why"]["waker"]["name"].as_str().is_some_and(|n| n.starts_with("jbd2/"))).collect();
    assert!(journal.len() * 2 >= ev.len(), "most fsyncs wait for the journal thread: {ev:?}");
    let (mut waited, mut in_io) = (0, 0);
    for e in &journal {
        let was = &e["why"]["waker"]["was_in"];
        assert_eq!(was["cause"], "io", "the journal thread was in block I/O: {e}");
        let ns = was["ns"].as_u64().unwrap();
        // The wait for the journal is not an I/O wait of the call's own: "other".
        assert!(ns > 0 && ns <= part(e, "other"), "{e}");
        waited += part(e, "other");
        in_io += ns;
    }
    assert!(in_io * 2 >= waited, "of {waited} ns waiting for the journal thread, {in_io} ns its block I/O");
}

/// fsync of writes to a throttled loop device: the time is block I/O; the requests that ended
/// its waits were held before they existed (the throttle) for that time, and spent little of it
/// queued or on the device.
#[test]
fn why_fsync_behind_a_throttled_device_is_block_io_time() {
    let Some((_tmp, tl, trace, kv)) = record_throttled("why_fsync_behind_a_throttled_device_is_block_io_time", "fsync")
    else {
        return;
    };
    let ev = calls(&trace, kv["main"], "fsync");
    assert_eq!(ev.len(), 4);
    assert_parts_add_up(&ev);
    let lat = total_lat(&ev);
    assert!(lat > 4 * 100_000_000, "the throttle held each fsync: {lat} ns");
    // Everything but the call's own CPU time and its waits for a CPU is I/O.
    let truth = lat - total(&ev, "cpu") - total(&ev, "runq");
    assert_share("block I/O", total(&ev, "io"), truth, lat);
    assert!(total(&ev, "io") * 100 >= lat * 90, "block I/O dominates: {} of {lat} ns", total(&ev, "io"));
    // The requests behind the waits: each call's I/O is the throttle holding its writes before
    // they became requests (within 5 % of the call), the requests themselves were quick.
    for e in &ev {
        let (io, l) = (part(e, "io"), e["latency_ns"].as_u64().unwrap());
        let r = &e["why"]["io_requests"];
        let held = r["held_ns"].as_u64().unwrap_or_else(|| panic!("no request times: {e}"));
        assert_share("held before the request", held, io, l);
        let (q, d) = (r["queue_ns"].as_u64().unwrap(), r["device_ns"].as_u64().unwrap());
        assert!(d > 0 && (q + d) * 100 <= l * 5, "queued {q} ns, on the device {d} ns, of {l} ns: {e}");
        assert!(e["why"]["woken_by_request"]["disk"].as_str().unwrap().contains(&tl.dev[5..]), "{e}");
    }
    let t = trace.to_str().unwrap();
    let f = format!("thread.tid = {} and evt.type = fsync", kv["main"]);
    let text = latscope_ok(&["events", "-r", t, "--why", &f]);
    assert!(text.contains("requests that ended the I/O waits: held "), "{text}");
    let j = latscope_json(&["why", "-r", t, "--json", &f]);
    let disk = &j["operations"][0]["disks"][0];
    let held = disk["requests"]["held_ns"].as_u64().unwrap();
    assert_share("the why view's held time", held, total(&ev, "io"), lat);
    assert!(latscope_ok(&["why", "-r", t, &f]).contains("requests that ended the I/O waits: held "));

    // Where the fsyncs blocked: the kernel stack goes through the block device's sync path
    // (blkdev_fsync, which writes the dirty pages and waits for their writeback) down to the
    // writeback wait (__filemap_fdatawait_range; the scheduler's own frames below it, such as
    // io_schedule, are left out by the kernel), and that stack holds the block I/O time.
    let v = latscope_json(&["why", "-r", trace.to_str().unwrap(), "--stacks", "--json", &f]);
    let top = &v["stacks"][0];
    let kernel: Vec<&str> = top["kernel"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
    let has = |name: &str| kernel.iter().any(|f| f.split('+').next() == Some(name));
    assert!(has("blkdev_fsync") && has("file_write_and_wait_range"), "the sync path: {kernel:?}");
    assert!(has("__filemap_fdatawait_range"), "the writeback wait: {kernel:?}");
    assert!(
        kernel.iter().position(|f| f.starts_with("__filemap_fdatawait_range"))
            < kernel.iter().position(|f| f.starts_with("blkdev_fsync")),
        "innermost first: {kernel:?}"
    );
    // Neither the capture's frames nor the switch's.
    let switch =
        ["bpf_", "__bpf_trace", "__traceiter_", "__schedule", "schedule+", "__switch_to", "finish_task_switch"];
    assert!(!kernel.iter().any(|f| switch.iter().any(|s| f.starts_with(s))), "{kernel:?}");
    // Every call blocked in the sync path (an fsync may wait for its writeback or, on another
    // machine's timing, for the cache flush after it: two stacks through blkdev_fsync), and
    // those stacks hold the block I/O time.
    let sync: Vec<&Value> = v["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["kernel"].as_array().unwrap().iter().any(|f| f.as_str().unwrap().starts_with("blkdev_fsync")))
        .collect();
    let calls: u64 = sync.iter().map(|s| s["calls"].as_u64().unwrap()).sum();
    assert!(calls >= 4, "each fsync blocked in the sync path: {sync:?}");
    let blocked: u64 = sync.iter().map(|s| s["blocked_ns"].as_u64().unwrap()).sum();
    assert_share("the sync stacks' blocked time", blocked, total(&ev, "io"), lat);
}

/// A thread holds a lock across an fsync of a throttled loop device while the main thread waits
/// for it: the wait is lock time, woken by the holder, which was in block I/O for the fsync's
/// time (one level of cascade through block I/O).
#[test]
fn why_lock_held_across_a_throttled_fsync_cascades_to_block_io() {
    let Some((_tmp, _tl, trace, kv)) =
        record_throttled("why_lock_held_across_a_throttled_fsync_cascades_to_block_io", "fsynclock")
    else {
        return;
    };
    let ev = waits(&trace, kv["main"], "futex");
    assert!(!ev.is_empty());
    assert_parts_add_up(&ev);
    let lat = total_lat(&ev);
    assert!(lat > 4 * 100_000_000, "the throttle held each fsync, and the lock with it: {lat} ns");
    assert_share("lock", total(&ev, "lock"), lat - total(&ev, "cpu") - total(&ev, "runq"), lat);
    for e in &ev {
        assert_eq!(e["why"]["waker"]["tid"], kv["holder"], "woken by the holder: {e}");
        let was_in = &e["why"]["waker"]["was_in"];
        assert!(was_in.is_null() || was_in["cause"] == "io", "the holder was in block I/O: {e}");
    }
    // The truth: the holder's fsyncs (its clock around each), as far as the waits cover them
    // (the waiter starts waiting a little after the holder took the lock and wrote; the
    // holder's time on CPU in fsync is no wait of its own).
    let was_in: u64 = ev.iter().map(|e| e["why"]["waker"]["was_in"]["ns"].as_u64().unwrap_or(0)).sum();
    let truth = (kv["fsync_ns"] as u64).min(lat);
    assert_share("the holder's fsync within the lock wait", was_in, truth, lat);
    let t = trace.to_str().unwrap();
    let f = format!("thread.tid = {} and evt.type = futex and evt.latency > 1ms", kv["main"]);
    let text = latscope_ok(&["events", "-r", t, "--why", &f]);
    assert!(text.contains(&format!("woken by why/{}, which was in block I/O ", kv["holder"])), "{text}");
    let j = latscope_json(&["why", "-r", t, "--waits", "--json", &f]);
    assert_eq!(j["operations"][0]["wakers"][0]["was_in"]["cause"], "io", "{j}");
}

/// `why ARGS` (N, its second-last argument, calls of type `ty`) recorded: the N calls, whose
/// parts add up, with part `p` the workload's blocked time (within 5 %); and the workload's
/// `key value` lines.
fn blocked_in(args: &[&str], ty: &str, p: &str) -> (Vec<Value>, HashMap<String, i64>) {
    let tmp = tempfile::tempdir().unwrap();
    let (trace, kv) = record(tmp.path(), args, None);
    let ev = waits(&trace, kv["main"], ty);
    let n: usize = args[args.len() - 2].parse().unwrap();
    assert_eq!(ev.len(), n, "{args:?}: {ev:?}");
    assert_parts_add_up(&ev);
    let lat = total_lat(&ev);
    assert_share(&format!("{args:?}: {p}"), total(&ev, p), kv["blocked_ns"] as u64, lat);
    (ev, kv)
}

/// Records `why ARGS...`; its main thread's calls of type `ty` that waited more than 1 ms hold
/// the workload's `blocked_ns` in part `p` (within 5 % of their latency), their parts add up, and
/// each was woken by the thread `waker` printed (or, with `None`, by a timer).
fn assert_blocked_in(args: &[&str], ty: &str, p: &str, waker: Option<&str>) -> Vec<Value> {
    let (ev, kv) = blocked_in(args, ty, p);
    for e in &ev {
        match waker {
            Some(w) => {
                assert_eq!(e["why"]["waker"]["kind"], "thread", "{args:?}: {e}");
                assert_eq!(e["why"]["waker"]["tid"], kv[w], "{args:?}: woken by the {w}: {e}");
            }
            None => assert_eq!(e["why"]["waker"]["kind"], "timer", "{args:?}: {e}"),
        }
    }
    ev
}

/// flock and fcntl(F_SETLKW) on a file another process holds locked 20 ms: lock time, woken by
/// the holder (neither a futex nor a pipe).
#[test]
fn why_file_locks_held_by_another_process_are_lock_time_woken_by_the_holder() {
    if !require_bpf("why_file_locks_held_by_another_process_are_lock_time_woken_by_the_holder") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("lockfile");
    for kind in ["flock", "fcntl"] {
        let ev = assert_blocked_in(&[kind, file.to_str().unwrap(), "5", "20"], kind, "lock", Some("holder"));
        // The holder held the lock across a sleep: the cascade says so.
        assert!(ev.iter().any(|e| e["why"]["waker"]["was_in"]["cause"] == "timer"), "{ev:?}");
    }
}

/// semop on a SysV semaphore another thread holds 20 ms: lock time, woken by the holder.
#[test]
fn why_semaphore_held_by_another_thread_is_lock_time_woken_by_the_holder() {
    if !require_bpf("why_semaphore_held_by_another_thread_is_lock_time_woken_by_the_holder") {
        return;
    }
    assert_blocked_in(&["sem", "5", "20"], "semop, semtimedop", "lock", Some("holder"));
}

/// poll, select and epoll_wait on a pipe a writer writes to after 20 ms: pipe/socket time, woken
/// by the writer; with nobody writing, their 20 ms timeouts are timer time, woken by a timer.
#[test]
fn why_poll_select_epoll_are_pipe_time_woken_by_the_writer_or_timer_time() {
    if !require_bpf("why_poll_select_epoll_are_pipe_time_woken_by_the_writer_or_timer_time") {
        return;
    }
    let waits = "poll, ppoll, select, pselect6, epoll_wait, epoll_pwait";
    for kind in ["poll", "select", "epoll"] {
        assert_blocked_in(&["poll", kind, "5", "20"], waits, "ipc", Some("writer"));
    }
    assert_blocked_in(&["poll", "epoll", "5", "0"], waits, "timer", None);
}

/// Loopback TCP: recv from a peer that sends after 20 ms, and accept of a peer that connects after
/// 20 ms, are pipe/socket time, woken by the peer (whose send ran the receive softirq), which was
/// asleep meanwhile.
#[test]
fn why_loopback_tcp_recv_and_accept_are_socket_time_woken_by_the_peer() {
    if !require_bpf("why_loopback_tcp_recv_and_accept_are_socket_time_woken_by_the_peer") {
        return;
    }
    for (mode, ty) in [("tcp", "recvfrom, read"), ("accept", "accept, accept4")] {
        let ev = assert_blocked_in(&[mode, "5", "20"], ty, "ipc", Some("peer"));
        assert!(ev.iter().all(|e| e["fd_type"] == "ipv4"), "{ev:?}");
        assert!(ev.iter().any(|e| e["why"]["waker"]["was_in"]["cause"] == "timer"), "{ev:?}");
    }
}

/// wait4 for a child that sleeps 20 ms then exits: other wait, woken by the exiting child.
#[test]
fn why_wait4_for_a_sleeping_child_is_other_wait_woken_by_the_child() {
    if !require_bpf("why_wait4_for_a_sleeping_child_is_other_wait_woken_by_the_child") {
        return;
    }
    let (ev, kv) = blocked_in(&["wait", "5", "20"], "wait4", "other");
    for (i, e) in ev.iter().enumerate() {
        assert_eq!(e["why"]["waker"]["tid"], kv[&format!("child{i}")], "woken by its child: {e}");
    }
}

/// CPU-bound calls (reads of 16 MiB of /dev/zero) in a cgroup whose CPU quota is 10 % (cgroup v1
/// `cpu.cfs_quota_us`, or v2 `cpu.max`): the thread's CPU clock is the on-CPU part, and the time
/// it was throttled (runnable, not allowed a CPU) is run queue.
#[test]
fn why_cpu_quota_throttling_is_run_queue_time_with_the_cpu_clock_on_cpu() {
    if !require_bpf("why_cpu_quota_throttling_is_run_queue_time_with_the_cpu_clock_on_cpu") {
        return;
    }
    let name = format!("latscope-why-cpu-{}", std::process::id());
    let v1 = Path::new("/sys/fs/cgroup/cpu");
    let v2 = Path::new("/sys/fs/cgroup");
    let (cg, limits): (PathBuf, Vec<(&str, &str)>) = if v1.join("cpu.cfs_quota_us").exists() {
        (v1.join(&name), vec![("cpu.cfs_period_us", "50000"), ("cpu.cfs_quota_us", "5000")])
    } else if std::fs::read_to_string(v2.join("cgroup.controllers")).unwrap_or_default().contains("cpu") {
        let _ = std::fs::write(v2.join("cgroup.subtree_control"), "+cpu");
        (v2.join(&name), vec![("cpu.max", "5000 50000")])
    } else {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("why_cpu_quota: no cpu controller (v1 or v2) to throttle a thread with");
        }
        eprintln!("SKIPPED why_cpu_quota: no cpu controller (v1 or v2) to throttle a thread with");
        return;
    };
    std::fs::create_dir(&cg).unwrap();
    let _rm = Defer(format!("rmdir {}", cg.display()));
    for (f, v) in limits {
        std::fs::write(cg.join(f), v).unwrap();
    }
    let tmp = tempfile::tempdir().unwrap();
    let pre = format!("echo $$ > {}/cgroup.procs", cg.display());
    let (trace, kv) = record(tmp.path(), &["cpu", "20"], Some(&pre));
    let stat = std::fs::read_to_string(cg.join("cpu.stat")).unwrap();
    let throttled = stat.lines().find_map(|l| l.strip_prefix("nr_throttled ")).unwrap_or("0");
    assert!(throttled.trim().parse::<u64>().unwrap() > 0, "the quota throttled the thread: {stat}");
    let ev: Vec<Value> = calls(&trace, kv["main"], "read").into_iter().filter(|e| e["bytes"] == 16u64 << 20).collect();
    assert_eq!(ev.len(), 20);
    assert_parts_add_up(&ev);
    let (wall, cpu) = (kv["wall_ns"] as u64, kv["cpu_ns"] as u64);
    let lat = total_lat(&ev);
    assert!(lat <= wall, "latency {lat} ns, wall {wall} ns");
    assert_share("on CPU", total(&ev, "cpu"), cpu.min(lat), lat);
    assert_share("run queue", total(&ev, "runq"), lat - cpu.min(lat), lat);
}

/// O_DIRECT reads of 512 KiB from a loop device: the time they were blocked is block I/O, that of
/// their block requests (from insertion to completion), woken by a completion of the device.
#[test]
fn why_direct_reads_of_a_loop_device_are_block_io_of_their_requests() {
    if !require_bpf("why_direct_reads_of_a_loop_device_are_block_io_of_their_requests") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let lo = common::LoopDev::new(64);
    let majmin = &lo.majmin;
    let (trace, kv) = record_with(tmp.path(), &["dread", &lo.dev, "10", "512"], None, &["--why", "--stacks"]);
    let ev: Vec<Value> =
        calls(&trace, kv["main"], "pread64").into_iter().filter(|e| e["fd_type"] == "blockdev").collect();
    assert_eq!(ev.len(), 10);
    assert_parts_add_up(&ev);
    let t = trace.to_str().unwrap();
    let rq = json_lines(&latscope_ok(&["events", "-r", t, "--json", "evt.type = block_read"]));
    let rq: Vec<(u64, u64)> = rq
        .iter()
        .filter(|r| r["dev"] == majmin.as_str())
        .map(|r| {
            let done = r["time_ns"].as_u64().unwrap() + r["latency_ns"].as_u64().unwrap();
            (r["time_ns"].as_u64().unwrap() - r["qtime_ns"].as_u64().unwrap(), done)
        })
        .collect();
    assert!(!rq.is_empty(), "block requests of {majmin} recorded");
    // The time blocked: each call's latency less its CPU time (the thread's clock around it)
    // and its run-queue time; all of it is I/O. It is bounded by the union of the call's
    // requests' spans (insertion to completion) within the call, which also holds the call's
    // own CPU time while its first requests are already on the device (submitting the rest).
    let mut union = 0;
    for e in &ev {
        let (s, l) = (e["time_ns"].as_u64().unwrap(), e["latency_ns"].as_u64().unwrap());
        let mut spans: Vec<(u64, u64)> =
            rq.iter().filter(|&&(a, b)| a < s + l && b > s).map(|&(a, b)| (a.max(s), b.min(s + l))).collect();
        spans.sort();
        let mut cur: Option<(u64, u64)> = None;
        for (a, b) in spans {
            cur = match cur {
                Some((c0, c1)) if a <= c1 => Some((c0, c1.max(b))),
                Some((c0, c1)) => {
                    union += c1 - c0;
                    Some((a, b))
                }
                None => Some((a, b)),
            };
        }
        union += cur.map_or(0, |(a, b)| b - a);
        let by = e["why"]["woken_by_request"]["disk"].as_str().unwrap_or_default();
        assert!(by.ends_with(&format!("({majmin})")), "woken by the completion of a request of {majmin}: {e}");
    }
    let lat = total_lat(&ev);
    let blocked = lat - kv["cpu_ns"] as u64 - total(&ev, "runq");
    assert_share("block I/O", total(&ev, "io"), blocked, lat);
    assert!(total(&ev, "io") <= union + lat / 100, "I/O waits {} ns within the requests' {union} ns", total(&ev, "io"));
}

/// The times of the requests that ended a call's I/O waits (held before they existed, queued,
/// on the device) are each clipped to the wait: they add up to no more than its blocked I/O.
fn assert_request_times_within_the_waits(ev: &[Value]) {
    for e in ev {
        let r = &e["why"]["io_requests"];
        let sum: u64 = ["held_ns", "queue_ns", "device_ns"].iter().map(|k| r[k].as_u64().unwrap_or(0)).sum();
        assert!(sum <= part(e, "io") + part(e, "fault"), "request times {sum} ns beyond the I/O waits: {e}");
    }
}

/// Buffered reads of 256 KiB of an uncached file on a loop device (with stacks, as `--why`
/// records by default): their blocked time is block I/O, woken by the device's completions; the
/// copies to the user buffer fault (minor faults) and the user stack walk at each exit reads
/// user memory, neither of which is a page fault's I/O wait. Then sequential reads of 1 MiB with
/// read-ahead, each into freshly mapped memory: every page of the copy is a minor fault between
/// the read's I/O waits, and the waits after a fault are still block I/O, not page fault; the
/// read-ahead requests queued before a wait add only their time inside it.
#[test]
fn why_buffered_reads_of_an_uncached_file_are_block_io_not_page_fault() {
    let Some(lfs) = ext4_loop("why_buffered_reads_of_an_uncached_file_are_block_io_not_page_fault") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let file = lfs.mnt.join("data");
    std::fs::write(&file, vec![7u8; 24 << 20]).unwrap();
    let (trace, kv) = record_with(tmp.path(), &["bread", file.to_str().unwrap(), "20"], None, &["--why", "--stacks"]);
    assert_eq!(kv["majflt"], 0, "no major fault: {kv:?}");
    let ev: Vec<Value> = calls(&trace, kv["main"], "pread64").into_iter().filter(|e| e["bytes"] == 256 << 10).collect();
    assert_eq!(ev.len(), 20);
    assert_parts_add_up(&ev);
    let lat = total_lat(&ev);
    let blocked = lat - total(&ev, "cpu") - total(&ev, "runq");
    assert_eq!(total(&ev, "fault"), 0, "{ev:?}");
    assert_share("block I/O", total(&ev, "io"), blocked, lat);
    let by_disk = ev.iter().filter(|e| !e["why"]["woken_by_request"]["disk"].is_null()).count();
    assert!(by_disk * 10 >= ev.len() * 9, "woken by the device's completions: {ev:?}");
    assert_request_times_within_the_waits(&ev);

    // Into fresh memory: each read of 1 MiB takes a minor fault per page of its copy.
    let fresh: Vec<Value> = calls(&trace, kv["main"], "read").into_iter().filter(|e| e["bytes"] == 1 << 20).collect();
    assert_eq!(fresh.len(), 20);
    assert!(kv["fresh_minflt"] >= 20 * 256 && kv["fresh_majflt"] == 0, "minor faults only, in every read: {kv:?}");
    assert_parts_add_up(&fresh);
    let lat = total_lat(&fresh);
    let blocked = lat - total(&fresh, "cpu") - total(&fresh, "runq");
    assert!(blocked > 0, "the reads waited for the device: {fresh:?}");
    assert_eq!(total(&fresh, "fault"), 0, "{fresh:?}");
    assert_share("block I/O of reads into fresh memory", total(&fresh, "io"), blocked, lat);
    assert_request_times_within_the_waits(&fresh);
}

/// Buffered writes to a file on a loop device whose writeback is throttled to 4 MiB/s (blkio v1
/// `blkio.throttle.write_bps_device`, or v2 `io.max` on the writer's cgroup), with the device's
/// dirty pages held to 2 MiB (`strict_limit`, `max_bytes`): the writer is paused in
/// `balance_dirty_pages`, an I/O wait ended by a timer. Its blocked time is block I/O, woken by a
/// timer, in a kernel stack through `balance_dirty_pages`.
#[test]
fn why_writes_throttled_by_dirty_page_balancing_are_block_io_in_balance_dirty_pages() {
    let Some(lfs) = ext4_loop("why_writes_throttled_by_dirty_page_balancing_are_block_io_in_balance_dirty_pages")
    else {
        return;
    };
    let majmin = lfs.majmin();
    let bdi = PathBuf::from(format!("/sys/class/bdi/{majmin}"));
    let v1 = Path::new("/sys/fs/cgroup/blkio/blkio.throttle.write_bps_device");
    let v2 = Path::new("/sys/fs/cgroup");
    let v2_io = std::fs::read_to_string(v2.join("cgroup.controllers")).unwrap_or_default().contains("io");
    if !bdi.join("max_bytes").exists() || !(v1.exists() || v2_io) {
        let why = "no per-device dirty limit (max_bytes, Linux 6.2) or no blkio/io controller";
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("why_dirty: {why}");
        }
        eprintln!("SKIPPED why_dirty: {why}");
        return;
    }
    // Loop devices keep their settings across attachments: put them back.
    let was = |f: &str| std::fs::read_to_string(bdi.join(f)).unwrap().trim().to_string();
    let _restore = Defer(format!(
        "echo {} > {b}/strict_limit; echo {} > {b}/max_ratio",
        was("strict_limit"),
        was("max_ratio"),
        b = bdi.display()
    ));
    std::fs::write(bdi.join("strict_limit"), "1").unwrap();
    std::fs::write(bdi.join("max_bytes"), "2097152").unwrap();
    // Writeback runs outside the writer on cgroup v1: the limit is the root's, on this device only.
    let (pre, _undo) = if v1.exists() {
        std::fs::write(v1, format!("{majmin} 4194304")).unwrap();
        (None, vec![Defer(format!("echo '{majmin} 0' > {}", v1.display()))])
    } else {
        let _ = std::fs::write(v2.join("cgroup.subtree_control"), "+io");
        let cg = v2.join(format!("latscope-why-dirty-{}", std::process::id()));
        std::fs::create_dir(&cg).unwrap();
        std::fs::write(cg.join("io.max"), format!("{majmin} wbps=4194304")).unwrap();
        (Some(format!("echo $$ > {}/cgroup.procs", cg.display())), vec![Defer(format!("rmdir {}", cg.display()))])
    };
    let tmp = tempfile::tempdir().unwrap();
    let sum = tmp.path().join("summary.json");
    let json = format!("--json={}", sum.display());
    let file = lfs.mnt.join("dirty");
    let (trace, kv) = record_with(
        tmp.path(),
        &["bwrite", file.to_str().unwrap(), "32"],
        pre.as_deref(),
        &["--why", "--stacks", "--no-block", &json],
    );
    let ev: Vec<Value> = calls(&trace, kv["main"], "write").into_iter().filter(|e| e["bytes"] == 256 << 10).collect();
    assert_eq!(ev.len(), 32);
    assert_parts_add_up(&ev);
    let lat = total_lat(&ev);
    let blocked = lat - total(&ev, "cpu") - total(&ev, "runq");
    assert!(blocked * 2 > lat, "the throttle held the writes: {blocked} of {lat} ns blocked");
    assert_share("block I/O", total(&ev, "io"), blocked, lat);
    let paused: Vec<&Value> = ev.iter().filter(|e| part(e, "io") > 10_000_000).collect();
    // A pause whose wake-up the probes did not see is I/O time still, with no waker: no more
    // of them than the summary counts.
    let summary: Value = serde_json::from_slice(&std::fs::read(&sum).unwrap()).unwrap();
    let unseen = summary["wakeups_unseen"].as_u64().unwrap_or_else(|| panic!("wakeups_unseen: {summary}"));
    let no_waker = paused.iter().filter(|e| e["why"]["waker"].is_null()).count() as u64;
    assert!(no_waker <= unseen, "{no_waker} pauses without a waker, {unseen} wake-ups unseen: {paused:?}");
    assert!(
        paused.iter().all(|e| e["why"]["waker"].is_null() || e["why"]["waker"]["kind"] == "timer"),
        "the pauses end by a timer: {paused:?}"
    );
    let f = format!("thread.tid = {} and evt.type = write", kv["main"]);
    let v = latscope_json(&["why", "-r", trace.to_str().unwrap(), "--stacks", "--json", &f]);
    let top = &v["stacks"][0];
    let kernel: Vec<&str> = top["kernel"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
    assert!(kernel.iter().any(|f| f.starts_with("balance_dirty_pages")), "the pause: {kernel:?}");
    // The pause is the kernel's I/O wait with a timeout (io_schedule_timeout), a scheduler
    // function the kernel leaves out of a switched-out task's stack: the stack starts at
    // balance_dirty_pages, under the write.
    assert!(
        kernel.iter().any(|f| f.starts_with("generic_perform_write") || f.contains("write_iter")),
        "the write: {kernel:?}"
    );
}

/// `--no-stacks` (stacks were on by default once) is accepted but contradicts `--stacks`: said,
/// before anything is recorded or written.
#[test]
fn record_stacks_with_no_stacks_is_refused_before_recording() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("t.lst");
    let out =
        Command::new(bin()).args(["record", "-w"]).arg(&trace).args(["--stacks", "--no-stacks"]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--stacks") && err.contains("--no-stacks"), "{err}");
    assert!(!trace.exists(), "nothing written");
}

/// Each thread's whole time (`why --threads`): a thread that burns CPU in user space, one that
/// sleeps, one that waits for a mutex, over their whole lives. Every thread's parts add up to its
/// wall time; the burner's CPU is its own CPU clock, in user space; the sleep is timer time in
/// calls, the wait lock time in calls (each within 5 % of the thread's wall time). A process
/// asleep in a call begun before the recording (`-p`) spends the recording in that call.
#[test]
fn why_threads_accounts_for_each_thread_s_whole_time() {
    if !require_bpf("why_threads_accounts_for_each_thread_s_whole_time") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (trace, kv) = record_with(tmp.path(), &["whole", "300"], None, &["--why", "--no-block"]);
    let t = trace.to_str().unwrap();
    let j: Value = serde_json::from_str(&latscope_ok(&["why", "-r", t, "--threads", "--json"])).unwrap();
    let threads = j["threads"].as_array().unwrap();
    let of = |tid: i64| {
        threads.iter().find(|a| a["tid"] == tid).unwrap_or_else(|| panic!("no account of thread {tid}: {j}")).clone()
    };
    let n = |a: &Value, p: &[&str]| p.iter().fold(a, |v, k| &v[*k]).as_u64().unwrap_or_else(|| panic!("{p:?}: {a}"));
    for a in threads {
        let (wall, out, inside) =
            (n(a, &["wall_ns"]), n(a, &["outside_calls", "total_ns"]), n(a, &["in_calls", "total_ns"]));
        assert!((out + inside).abs_diff(wall) * 100 <= wall, "parts {out} + {inside} ns of {wall} ns: {a}");
    }
    let burner = of(kv["burner"]);
    let (wall, cpu) = (n(&burner, &["wall_ns"]), kv["burner_cpu_ns"] as u64);
    assert_share("burner: CPU", n(&burner, &["cpu_ns"]), cpu, wall);
    let user = n(&burner, &["outside_calls", "user_cpu_ns"]);
    assert!(user * 10 >= cpu * 9, "burner: {user} ns in user space of {cpu} ns on CPU: {burner}");
    let sleeper = of(kv["sleeper"]);
    let wall = n(&sleeper, &["wall_ns"]);
    assert_share(
        "sleeper: timer in calls",
        n(&sleeper, &["in_calls", "by_cause", "timer_ns"]),
        kv["sleeper_ns"] as u64,
        wall,
    );
    let locker = of(kv["locker"]);
    let wall = n(&locker, &["wall_ns"]);
    assert_share(
        "locker: lock in calls",
        n(&locker, &["in_calls", "by_cause", "lock_ns"]),
        kv["locker_ns"] as u64,
        wall,
    );
    let procs = j["processes"].as_array().unwrap();
    let p = procs.iter().find(|p| p["pid"] == kv["main"]).unwrap_or_else(|| panic!("no process {}: {j}", kv["main"]));
    assert_eq!(p["threads"], 4, "{p}");
    let text = latscope_ok(&["why", "-r", t, "--threads"]);
    assert!(text.contains(&format!("/{}", kv["burner"])) && text.contains("user CPU"), "{text}");

    // A thread asleep in nanosleep since before the recording, recorded by pid for 500 ms.
    let work = compile_c("why.c", tmp.path());
    let mut child =
        Command::new(&work).args(["sleep", "1", "3000"]).stdout(std::process::Stdio::null()).spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let child_pid = u64::from(child.id());
    let pid = child_pid.to_string();
    let trace2 = tmp.path().join("asleep.lst");
    let t2 = trace2.to_str().unwrap();
    latscope_ok(&["record", "-w", t2, "--quiet", "--why", "--no-block", "-p", &pid, "-d", "500ms"]);
    let _ = child.kill();
    let _ = child.wait();
    let j: Value = serde_json::from_str(&latscope_ok(&["why", "-r", t2, "--threads", "--json"])).unwrap();
    let a = j["threads"].as_array().unwrap().iter().find(|a| a["tid"].as_u64() == Some(child_pid)).cloned();
    let a = a.unwrap_or_else(|| panic!("no account of thread {pid}: {j}"));
    let wall = n(&a, &["wall_ns"]);
    assert_share("asleep: timer in calls", n(&a, &["in_calls", "by_cause", "timer_ns"]), wall, wall);
    assert_share("asleep: in a call begun before", n(&a, &["in_calls", "unrecorded_ns"]), wall, wall);
}
