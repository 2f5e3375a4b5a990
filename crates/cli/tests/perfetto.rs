//! `latscope export --perfetto` read back with Perfetto's own schema (`perfetto_trace_pb2` of
//! the PyPI package `perfetto`, through tests/perfetto_check.py, which reads packets as
//! trace_processor does): every slice nests on its track, every flow starts and ends on a
//! slice, every thread and process is named, and the slices are the events `events --json`
//! prints, count and durations exact. Flows of a real recording follow a request through a
//! queue, a lock and a disk in the order the workload's own log says.

mod common;

use common::{bin, compile_c, json_lines, latscope, latscope_json, latscope_ok, require_bpf};
use latscope_event::{
    comm_to_words, syscall_nr, BlockDevice, CgroupInfo, Event, EventKind, ProcOp, ProcessInfo, TraceHeader,
};
use latscope_trace::synth::{BusyServer, Layout};
use latscope_trace::Summary;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Runs the checker on `files`; fails the test on any problem it lists.
fn check(test: &str, files: &[PathBuf]) -> Option<Value> {
    if !latscope_testkit::require_python(test, &["perfetto.protos.perfetto.trace.perfetto_trace_pb2"]) {
        return None;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/perfetto_check.py");
    let out = Command::new("python3").arg(script).args(files).output().unwrap();
    assert!(out.status.success(), "perfetto_check.py failed: {}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let errors = v["errors"].as_array().unwrap();
    assert!(errors.is_empty(), "{} problems, first: {:#?}", errors.len(), &errors[..errors.len().min(10)]);
    Some(v)
}

/// `(name, ts, duration, tid or pid)` of every event `events --json FILTER` prints.
fn events_of(trace: &Path, filter: &str) -> BTreeMap<(String, u64, u64, u64), u64> {
    let mut m = BTreeMap::new();
    for e in json_lines(&latscope_ok(&["events", "-r", s(trace), "--json", "--window", "1000s", filter])) {
        let who = if e["kind"] == "syscall" { e["tid"].as_u64() } else { e["pid"].as_u64() };
        let key = (
            e["type"].as_str().unwrap().to_string(),
            e["ts_ns"].as_u64().unwrap(),
            e["latency_ns"].as_u64().unwrap(),
            who.unwrap(),
        );
        *m.entry(key).or_default() += 1;
    }
    m
}

/// The same of the exported slices (the queue-time slices, category `latscope`, left out).
fn slices_of(v: &Value) -> BTreeMap<(String, u64, u64, u64), u64> {
    let mut m = BTreeMap::new();
    for sl in v["slices"].as_array().unwrap() {
        if sl["cat"] == "latscope" {
            continue;
        }
        let who = if sl["cat"] == "syscall" { sl["tid"].as_u64() } else { sl["pid"].as_u64().or(Some(0)) };
        let who = match sl["cat"].as_str() {
            // A request's process is its issuer (`comm/pid`); none for a kernel thread's.
            Some("block") => sl["args"]["issuer"].as_str().and_then(|i| i.rsplit('/').next()?.parse().ok()).or(Some(0)),
            _ => who,
        };
        let key = (
            sl["name"].as_str().unwrap().to_string(),
            sl["ts"].as_u64().unwrap(),
            sl["dur"].as_u64().unwrap(),
            who.unwrap(),
        );
        *m.entry(key).or_default() += 1;
    }
    m
}

fn assert_same_events(trace: &Path, filter: &str, v: &Value) {
    let want = events_of(trace, filter);
    let got = slices_of(v);
    let n: u64 = want.values().sum();
    assert!(n > 0, "no events for {filter:?}");
    if want != got {
        let missing: Vec<_> = want.iter().filter(|(k, c)| got.get(*k) != Some(c)).take(5).collect();
        let extra: Vec<_> = got.iter().filter(|(k, c)| want.get(*k) != Some(c)).take(5).collect();
        panic!(
            "slices differ from events ({n} events, {} slices): missing {missing:?}, extra {extra:?}",
            got.values().sum::<u64>()
        );
    }
}

/// A recording made with `--why` (so that its wake-ups are linked) of three threads of one
/// process handing work along, with block requests and process events:
///
/// - tid 11 (`client`) calls futex (wake) at 1_000_100..1_000_120; tid 12 (`worker`) waits in
///   futex 1_000_000..1_000_150, woken by 11 (cpu 10, run queue 20: the wake-up came after
///   1_000_120);
/// - tid 13 (`holder`) calls futex (wake, an unlock) 1_000_200..1_000_220 while 12 waits in
///   futex 1_000_160..1_000_240, woken by 13, which was itself woken by 11 (13's futex wait
///   1_000_050..1_000_130): a chain 11 -> 13 -> 12;
/// - 12 reads with pread64 1_000_300..1_000_700, woken by the completion of the request on
///   vda sector 800 (issued 1_000_400, 250 ns on the device; an earlier request on the same
///   sector completed before the call and is not it);
/// - 12 writes 1_000_850..1_000_880 to a pipe 11 reads 1_000_250..1_000_900: woken by 12;
/// - 14 (`stray`) is woken by tid 99, which is not in the trace: no flow;
/// - a fork, an exec and an exit of process 20.
fn why_trace(dir: &Path) -> PathBuf {
    const CGROUP: u64 = 4242;
    let futex = syscall_nr("futex").unwrap();
    let nr = |s: &str| syscall_nr(s).unwrap();
    let call = |tid: u32, comm: &str, n: u16, ts: u64, end: u64| Event {
        kind: EventKind::Syscall as u8,
        ts,
        lat: end - ts,
        pid: 10,
        tid,
        nr: n,
        fd: -1,
        off: -1,
        dirfd: -1,
        off2: -1,
        comm: comm.into(),
        cgroup: CGROUP,
        ..Default::default()
    };
    let woken = |mut e: Event, waker: u32, wcomm: &str, cpu: u64, runq: u64, part: &str| {
        let (lo, hi) = comm_to_words(wcomm);
        e.waker_ctx = 1;
        e.waker_tid = waker;
        e.waker_comm_lo = lo;
        e.waker_comm_hi = hi;
        e.why_cpu = cpu;
        e.why_runq = runq;
        let rest = e.lat - cpu - runq;
        match part {
            "lock" => e.why_lock = rest,
            "ipc" => e.why_ipc = rest,
            _ => e.why_other = rest,
        }
        e
    };
    let mut read = call(12, "worker", nr("pread64"), 1_000_300, 1_000_700);
    read.fd = 5;
    read.off = 8192;
    read.bytes = 4096;
    read.ret = 4096;
    read.path = "/dev/vda".into();
    read.wake_dev = 254 << 20;
    read.wake_sector = 800;
    read.why_cpu = 30;
    read.why_io = 370;
    read.waker_ctx = 3;
    read.waker_tid = 4;
    let req = |ts: u64, lat: u64| Event {
        kind: EventKind::Block as u8,
        ts,
        lat,
        pid: 10,
        tid: 12,
        nr: 0,
        dev: 254 << 20,
        off: 800,
        bytes: 4096,
        qtime: 50,
        comm: "worker".into(),
        ..Default::default()
    };
    let mut pipe_read = woken(call(11, "client", nr("read"), 1_000_250, 1_000_900), 12, "worker", 20, 10, "ipc");
    pipe_read.fd = 3;
    pipe_read.bytes = 1;
    pipe_read.ret = 1;
    let mut pipe_write = call(12, "worker", nr("write"), 1_000_850, 1_000_880);
    pipe_write.fd = 4;
    pipe_write.bytes = 1;
    pipe_write.ret = 1;
    let proc_ev = |op: u16, ts: u64, ret: i64, path: &str| Event {
        kind: EventKind::Proc as u8,
        ts,
        pid: 20,
        tid: 20,
        nr: op,
        ret,
        fd: -1,
        off: -1,
        dirfd: -1,
        off2: -1,
        comm: "child".into(),
        path: path.into(),
        ..Default::default()
    };
    // In the order a recording holds them (by completion), block requests in blocks of their own.
    let syscalls = vec![
        call(11, "client", futex, 1_000_100, 1_000_120),
        woken(call(13, "holder", futex, 1_000_050, 1_000_130), 11, "client", 10, 5, "lock"),
        // Its longest wait recorded (113 ns of the lock's 120, woken during the client's
        // futex): a slice inside the call.
        Event {
            wait_start: 1_000_002,
            wait_end: 1_000_115,
            ..woken(call(12, "worker", futex, 1_000_000, 1_000_150), 11, "client", 10, 20, "lock")
        },
        call(13, "holder", futex, 1_000_200, 1_000_220),
        // A wait said to begin before its call (a damaged trace): none.
        Event {
            wait_start: 1_000_100,
            wait_end: 1_000_200,
            ..woken(call(12, "worker", futex, 1_000_160, 1_000_240), 13, "holder", 5, 20, "lock")
        },
        read,
        pipe_write,
        pipe_read,
        woken(call(14, "stray", futex, 1_000_000, 1_001_000), 99, "ghost", 10, 10, "lock"),
    ];
    let others = vec![
        req(1_000_100, 100),
        req(1_000_400, 250),
        proc_ev(0, 1_000_010, 10, ""),
        proc_ev(1, 1_000_020, 0, "/usr/bin/child"),
        proc_ev(2, 1_000_990, 3, ""),
    ];
    let header = TraceHeader {
        hostname: "why-host".into(),
        start_ns: 1_000_000,
        realtime_offset_ns: 1_700_000_000_000_000_000,
        command_line: vec!["latscope".into(), "record".into(), "--why".into()],
        block_devices: vec![BlockDevice { dev: 254 << 20, name: "vda".into(), ..Default::default() }],
        processes: vec![ProcessInfo {
            pid: 10,
            comm: "app".into(),
            cmdline: "app --serve".into(),
            ..Default::default()
        }],
        // Process 10 runs in a container.
        cgroups: vec![CgroupInfo {
            id: CGROUP,
            path: format!("/system.slice/docker-{}.scope", "ab".repeat(32)),
            runtime: "docker".into(),
            container_id: "ab".repeat(32),
            container_name: "web".into(),
            image: "nginx:1.27".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let path = dir.join("why.lst");
    let mut w = latscope_trace::TraceWriter::create(&path, &header).unwrap();
    for batch in [syscalls, others] {
        let mut b = latscope_event::EventBatch::default();
        batch.iter().for_each(|e| b.push(e));
        w.write_batch(&b, 0).unwrap();
    }
    w.finish(Summary { duration_ns: 1_000_000, end_ns: 2_000_000, ..Default::default() }).unwrap();
    path
}

/// The files a `--split` export's summary lists, in order, each checked to be within `max`
/// bytes (and a slice's worth: a part is closed once the slice that reaches its size is in it).
fn parts_within(j: &Value, max: u64) -> Vec<PathBuf> {
    let files: Vec<PathBuf> =
        j["files"].as_array().unwrap().iter().map(|f| PathBuf::from(f["path"].as_str().unwrap())).collect();
    for f in &files {
        assert!(std::fs::metadata(f).unwrap().len() <= max + 4096, "{} is larger than asked", f.display());
    }
    files
}

/// The slice of `name` on thread `tid` starting at `ts`.
fn slice<'a>(v: &'a Value, tid: u64, name: &str, ts: u64) -> &'a Value {
    v["slices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["tid"].as_u64() == Some(tid) && s["name"] == name && s["ts"].as_u64() == Some(ts))
        .unwrap_or_else(|| panic!("no {name} of {tid} at {ts}"))
}

fn flow_between(v: &Value, out: &Value, inn: &Value) -> bool {
    v["flows"].as_array().unwrap().iter().any(|f| f["out"] == out["id"] && f["in"] == inn["id"])
}

#[test]
fn perfetto_export_parses_with_perfettos_schema_and_its_slices_are_the_events() {
    let dir = tempfile::tempdir().unwrap();
    let trace = why_trace(dir.path());
    let out = dir.path().join("why.pftrace");
    let summary = latscope_json(&["export", "-r", s(&trace), "--perfetto", s(&out), "--json"]);
    assert_eq!(summary["events_exported"], 14, "{summary}");
    let Some(v) = check("perfetto_export_parses_with_perfettos_schema_and_its_slices_are_the_events", &[out]) else {
        return;
    };
    assert_same_events(&trace, "", &v);

    // Threads and processes named; the snapshot's process with its command line.
    let tracks = v["tracks"].as_array().unwrap();
    let thread = |tid: u64| tracks.iter().find(|t| t["kind"] == "thread" && t["tid"].as_u64() == Some(tid)).unwrap();
    assert_eq!(thread(11)["name"], "client");
    assert_eq!(thread(12)["name"], "worker");
    let app = tracks.iter().find(|t| t["kind"] == "process" && t["pid"] == 10).unwrap();
    assert_eq!((app["name"].as_str(), app["cmdline"][1].as_str()), (Some("app"), Some("--serve")));
    let labels: Vec<&str> = app["labels"].as_array().unwrap().iter().map(|l| l.as_str().unwrap()).collect();
    assert!(labels.contains(&"container=web") && labels.contains(&"image=nginx:1.27"), "{labels:?}");
    let child = tracks.iter().find(|t| t["kind"] == "process" && t["pid"] == 20).unwrap();
    assert_eq!(child["name"], "child");

    // Wake-ups: 11 -> 13 -> 12 (a chain), 11 -> 12, 12 -> 11 by the pipe, the request -> 12.
    let wake11 = slice(&v, 11, "futex", 1_000_100);
    let wait13 = slice(&v, 13, "futex", 1_000_050);
    let unlock13 = slice(&v, 13, "futex", 1_000_200);
    let wait12 = slice(&v, 12, "futex", 1_000_000);
    let lock12 = slice(&v, 12, "futex", 1_000_160);
    assert!(flow_between(&v, wake11, wait12), "client's wake -> worker's wait");
    assert!(flow_between(&v, wake11, wait13), "client's wake -> holder's wait");
    assert!(flow_between(&v, unlock13, lock12), "holder's unlock -> worker's lock");
    assert!(flow_between(&v, slice(&v, 12, "write", 1_000_850), slice(&v, 11, "read", 1_000_250)), "pipe");
    let req =
        v["slices"].as_array().unwrap().iter().find(|s| s["name"] == "block_read" && s["ts"] == 1_000_400).unwrap();
    assert!(flow_between(&v, req, slice(&v, 12, "pread64", 1_000_300)), "request -> pread64");
    assert_eq!(v["flows"].as_array().unwrap().len(), 5, "{}", v["flows"]);
    assert_eq!(summary["links"]["wakeups_not_linked"], 1, "the stray call's waker is not traced");
    assert_eq!(summary["links"]["requests_linked"], 1);

    // The breakdown and the waker as arguments; the request's queue time on a lane of its own.
    let a = &wait12["args"];
    assert_eq!(
        (a["why.lock_ns"].as_u64(), a["why.main"].as_str(), a["why.waker"].as_str()),
        (Some(120), Some("lock"), Some("client/11"))
    );
    // The call's longest wait, where it was: a slice inside the call, named by its part.
    let waits: Vec<&Value> =
        v["slices"].as_array().unwrap().iter().filter(|s| s["name"].as_str().unwrap().starts_with("blocked")).collect();
    assert_eq!(waits.len(), 1, "{waits:?}");
    assert_eq!(summary["part_slices"], 1, "{summary}");
    let w = waits[0];
    assert_eq!(
        (w["name"].as_str(), w["cat"].as_str(), w["ts"].as_u64(), w["dur"].as_u64(), w["depth"].as_u64()),
        (Some("blocked: lock"), Some("latscope"), Some(1_000_002), Some(113), Some(1))
    );
    assert_eq!((w["parent"].as_u64(), w["tid"].as_u64()), (wait12["id"].as_u64(), Some(12)));
    let q = v["slices"].as_array().unwrap().iter().find(|s| s["cat"] == "latscope" && s["ts"] == 1_000_350).unwrap();
    assert_eq!((q["name"].as_str(), q["dur"].as_u64()), (Some("queued"), Some(50)));
    // Process events are instants on their process.
    let exit = v["slices"].as_array().unwrap().iter().find(|s| s["name"] == "proc_exit").unwrap();
    assert_eq!((exit["pid"].as_u64(), exit["args"]["exit_code"].as_i64()), (Some(20), Some(3)));
}

/// A system-wide recording mixes process events (instants) with calls: once an instant has been
/// written, the calls that follow are still slices from entry to return, and a flow ends at the
/// woken call's return, after the waking call began (a call written as an instant would end
/// its flow at its entry, before its waker started).
#[test]
fn perfetto_calls_after_process_events_stay_slices_and_their_flows_start_before_they_end() {
    const TEST: &str = "perfetto_calls_after_process_events_stay_slices_and_their_flows_start_before_they_end";
    let dir = tempfile::tempdir().unwrap();
    let futex = syscall_nr("futex").unwrap();
    let ev = |kind: EventKind, tid: u32, nr: u16, ts: u64, end: u64| Event {
        kind: kind as u8,
        ts,
        lat: end - ts,
        pid: tid,
        tid,
        nr,
        fd: -1,
        off: -1,
        dirfd: -1,
        off2: -1,
        comm: "app".into(),
        ..Default::default()
    };
    // Process events 3 s before the calls: written (and their room reused) as the calls arrive.
    let procs: Vec<Event> = (0..4u32)
        .map(|k| {
            let ts = 1_000_000_000 + u64::from(k);
            ev(EventKind::Proc, 20 + k, ProcOp::Exit as u16, ts, ts)
        })
        .collect();
    let t = 4_000_000_000;
    let (lo, hi) = comm_to_words("app");
    let mut woken = ev(EventKind::Syscall, 12, futex, t, t + 150);
    (woken.waker_ctx, woken.waker_tid, woken.waker_comm_lo, woken.waker_comm_hi) = (1, 11, lo, hi);
    (woken.why_cpu, woken.why_runq, woken.why_lock) = (10, 20, 120);
    let calls = vec![
        ev(EventKind::Syscall, 15, syscall_nr("read").unwrap(), t - 500, t - 400),
        ev(EventKind::Syscall, 11, futex, t + 100, t + 120),
        woken,
        ev(EventKind::Syscall, 15, syscall_nr("read").unwrap(), t + 200, t + 300),
    ];
    let header = TraceHeader {
        start_ns: 1_000_000_000,
        command_line: vec!["latscope".into(), "record".into(), "--why".into()],
        ..Default::default()
    };
    let trace = dir.path().join("mixed.lst");
    let mut w = latscope_trace::TraceWriter::create(&trace, &header).unwrap();
    for batch in [procs, calls] {
        let mut b = latscope_event::EventBatch::default();
        batch.iter().for_each(|e| b.push(e));
        w.write_batch(&b, 0).unwrap();
    }
    w.finish(Summary { duration_ns: 3_000_001_000, end_ns: t + 1000, ..Default::default() }).unwrap();
    let out = dir.path().join("mixed.pftrace");
    let summary = latscope_json(&["export", "-r", s(&trace), "--perfetto", s(&out), "--json"]);
    assert_eq!(summary["links"]["wakeups_linked"], 1, "{summary}");
    let Some(v) = check(TEST, &[out]) else { return };
    assert_same_events(&trace, "", &v);
    assert!(flow_between(&v, slice(&v, 11, "futex", t + 100), slice(&v, 12, "futex", t)));
}

#[test]
fn perfetto_export_takes_a_filter_and_a_window_as_events_would() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("busy.lst");
    BusyServer { events: 30_000, block_every: 20, layout: Layout::ByKind }.write(&trace).unwrap();
    let out = dir.path().join("busy.pftrace");
    latscope_ok(&[
        "export",
        "-q",
        "-r",
        s(&trace),
        "--perfetto",
        s(&out),
        "--from",
        "10ms",
        "--to",
        "40ms",
        "proc.name != tar",
    ]);
    let Some(v) = check("perfetto_export_takes_a_filter_and_a_window_as_events_would", &[out]) else { return };
    assert_same_events(&trace, "proc.name != tar and evt.reltime >= 10ms and evt.reltime < 40ms", &v);
    // The synthetic server's calls overlap on a thread (a real thread's never do): they go on lanes
    // beside the thread's track, nesting on each.
    let lanes = v["tracks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["name"].as_str().unwrap_or("").contains("overlapping"))
        .count();
    assert!(lanes > 0);
    // Counters: one 1 s interval, of which the window covers 30 ms: its rate is per second of
    // those 30 ms.
    let rates: Vec<f64> = v["counters"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["name"] == "latscope: syscalls/s")
        .map(|c| c["value"].as_f64().unwrap())
        .collect();
    let calls = v["slices"].as_array().unwrap().iter().filter(|x| x["cat"] == "syscall" && x["depth"] == 0).count();
    assert!(calls > 0);
    assert_eq!(rates.len(), 1, "{rates:?}");
    assert!((rates[0] - calls as f64 / 0.030).abs() < 1e-6 * rates[0], "{} calls in 30 ms: {rates:?}", calls);

    // The whole trace, every event.
    let all = dir.path().join("all.pftrace");
    latscope_ok(&["export", "-q", "-r", s(&trace), "--perfetto", s(&all)]);
    let v = check("perfetto_export_takes_a_filter_and_a_window_as_events_would", &[all]).unwrap();
    assert_same_events(&trace, "", &v);
    // Each interval's rate times the part of it the recording covers adds up to the calls.
    let info = latscope_json(&["info", "--json", "-r", s(&trace)]);
    let (end, dur) = (info["end_ns"].as_u64().unwrap(), info["duration_ns"].as_u64().unwrap());
    let total: f64 = v["counters"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["name"] == "latscope: syscalls/s")
        .map(|c| {
            let ts = c["ts"].as_u64().unwrap();
            let covered = (end.min(ts + 1_000_000_000).saturating_sub(ts.max(end - dur))) as f64 / 1e9;
            c["value"].as_f64().unwrap() * covered
        })
        .sum();
    let calls = 30_000 - 30_000 / 20;
    assert_eq!(total.round() as u64, calls as u64, "calls per second over the time covered add up to the calls");
}

#[test]
fn perfetto_export_too_large_is_refused_naming_a_window_or_cut_into_parts() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("busy.lst");
    // Laid out as a `record --why` recording: its wake-ups are flows, some open at every moment.
    BusyServer { events: 60_000, block_every: 20, layout: Layout::ByKind }.write_why(&trace).unwrap();
    let out = dir.path().join("big.pftrace");
    let o = latscope(&["export", "-q", "-r", s(&trace), "--perfetto", s(&out), "--max-size", "1MiB"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("--max-size") && err.contains("--to ") && err.contains("--split"), "{err}");
    assert!(!out.exists(), "nothing is left under the name");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary file left either");

    let j =
        latscope_json(&["export", "-r", s(&trace), "--perfetto", s(&out), "--max-size", "1MiB", "--split", "--json"]);
    let files = parts_within(&j, 1 << 20);
    assert!(files.len() >= 3, "{j}");
    assert_eq!(files[0], dir.path().join("big.part1.pftrace"));
    // Each part is a trace of its own (every flow in it begins and ends in it); together they
    // hold every event once, and every flow linked but those left out at the cuts.
    let Some(v) = check("perfetto_export_too_large_is_refused_naming_a_window_or_cut_into_parts", &files) else {
        return;
    };
    assert_same_events(&trace, "", &v);
    let linked = j["links"]["wakeups_linked"].as_u64().unwrap();
    let cut = j["flows_cut_between_files"].as_u64().unwrap();
    assert!(linked > 1000 && cut < linked / 4, "{j}");
    assert_eq!(v["flows"].as_array().unwrap().len() as u64, linked - cut, "{j}");
}

/// Parts cut at their size while flows are open: a recording writes block requests in blocks of
/// their own, so a call woken by a request's completion is written long before the request. The
/// flows a cut leaves open are closed by an instant in their file (category `latscope`): every
/// flow in every part has both ends, and the slices are still the events.
#[test]
fn perfetto_parts_cut_with_flows_open_close_them_in_their_file() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("requests.lst");
    const N: u64 = 12_000;
    let dev = 254 << 20;
    let calls: Vec<Event> = (0..N)
        .map(|i| Event {
            kind: EventKind::Syscall as u8,
            ts: 1_000_000 + i * 1000,
            lat: 900,
            pid: 10,
            tid: 12,
            nr: syscall_nr("pread64").unwrap(),
            fd: 5,
            off: (i * 4096) as i64,
            bytes: 4096,
            ret: 4096,
            dirfd: -1,
            off2: -1,
            comm: "reader".into(),
            path: format!("/data/part-{i}"),
            why_cpu: 100,
            why_io: 800,
            wake_dev: dev,
            wake_sector: i * 8,
            ..Default::default()
        })
        .collect();
    let requests: Vec<Event> = (0..N)
        .map(|i| Event {
            kind: EventKind::Block as u8,
            ts: 1_000_000 + i * 1000 + 200,
            lat: 500,
            pid: 10,
            tid: 12,
            dev,
            off: (i * 8) as i64,
            bytes: 4096,
            comm: "reader".into(),
            ..Default::default()
        })
        .collect();
    let header = TraceHeader {
        hostname: "requests".into(),
        start_ns: 1_000_000,
        command_line: vec!["latscope".into(), "record".into(), "--why".into()],
        block_devices: vec![BlockDevice { dev, name: "vda".into(), ..Default::default() }],
        ..Default::default()
    };
    let mut w = latscope_trace::TraceWriter::create(&trace, &header).unwrap();
    for batch in [calls, requests] {
        let mut b = latscope_event::EventBatch::default();
        batch.iter().for_each(|e| b.push(e));
        w.write_batch(&b, 0).unwrap();
    }
    w.finish(Summary { duration_ns: N * 1000, end_ns: 1_000_000 + N * 1000, ..Default::default() }).unwrap();
    let out = dir.path().join("r.pftrace");
    let j =
        latscope_json(&["export", "-r", s(&trace), "--perfetto", s(&out), "--split", "--max-size", "1MiB", "--json"]);
    let files = parts_within(&j, 1 << 20);
    assert!(files.len() >= 2, "{j}");
    assert_eq!(j["links"]["requests_linked"].as_u64(), Some(N), "{j}");
    let cut = j["flows_cut_between_files"].as_u64().unwrap();
    assert!(cut > 0, "no flow was open at a cut: {j}");
    let Some(v) = check("perfetto_parts_cut_with_flows_open_close_them_in_their_file", &files) else {
        return;
    };
    assert_same_events(&trace, "", &v);
    let closing: Vec<&Value> = v["slices"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["name"].as_str().is_some_and(|n| n.starts_with("flow ")))
        .collect();
    assert!(!closing.is_empty() && closing.iter().all(|s| s["cat"] == "latscope" && s["dur"] == 0), "{closing:?}");
    // Every flow linked is in one file whole, or closed in the file of its end written.
    assert_eq!(v["flows"].as_array().unwrap().len() as u64, N - cut + closing.len() as u64, "{j}");
}

#[test]
fn perfetto_interning_tables_are_cleared_when_they_grow_and_every_string_still_resolves() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("paths.lst");
    let header = TraceHeader { hostname: "paths".into(), start_ns: 1000, ..Default::default() };
    let events: Vec<Event> = (0..40_000u64)
        .map(|i| Event {
            kind: 0,
            ts: 1000 + i * 100,
            lat: 50,
            pid: 7,
            tid: 7,
            nr: syscall_nr("openat").unwrap(),
            fd: -1,
            off: -1,
            dirfd: -100,
            off2: -1,
            ret: 3,
            comm: "opener".into(),
            path: format!("/var/lib/data/file-{i}"),
            ..Default::default()
        })
        .collect();
    latscope_trace::synth::write_events(&trace, &header, &events, Summary::default()).unwrap();
    let out = dir.path().join("paths.pftrace");
    let j = latscope_json(&["export", "-r", s(&trace), "--perfetto", s(&out), "--json"]);
    assert!(j["interning_resets"].as_u64().unwrap() >= 1, "{j}");
    let Some(v) = check(
        "perfetto_interning_tables_are_cleared_when_they_grow_and_every_string_still_resolves",
        std::slice::from_ref(&out),
    ) else {
        return;
    };
    let paths: Vec<&str> =
        v["slices"].as_array().unwrap().iter().map(|s| s["args"]["path"].as_str().unwrap()).collect();
    assert_eq!(paths.len(), 40_000);
    for (i, p) in paths.iter().enumerate() {
        assert_eq!(*p, format!("/var/lib/data/file-{i}"));
    }

    // Cut into parts of 1 MiB: a part starts with the interning entries of the generation so
    // far, kept to a fraction of a part, so that parts hold slices rather than one each.
    let parts = dir.path().join("parts.pftrace");
    let j =
        latscope_json(&["export", "-r", s(&trace), "--perfetto", s(&parts), "--split", "--max-size", "1MiB", "--json"]);
    let files = parts_within(&j, 1 << 20);
    let whole = std::fs::metadata(&out).unwrap().len();
    assert!(files.len() as u64 <= whole / (1 << 19) + 2, "{} parts for {whole} bytes: {j}", files.len());
    let Some(v) = check("perfetto_interning_tables_are_cleared_when_they_grow_and_every_string_still_resolves", &files)
    else {
        return;
    };
    let paths: Vec<&str> =
        v["slices"].as_array().unwrap().iter().map(|s| s["args"]["path"].as_str().unwrap()).collect();
    assert_eq!(paths.len(), 40_000);
    for (i, p) in paths.iter().enumerate() {
        assert_eq!(*p, format!("/var/lib/data/file-{i}"), "in the parts");
    }
}

#[test]
fn perfetto_bad_options_are_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("busy.lst");
    BusyServer { events: 100, block_every: 20, layout: Layout::ByKind }.write(&trace).unwrap();
    let out = dir.path().join("x.pftrace");
    for (args, want) in [
        (vec!["--from", "yesterday"], "--from yesterday"),
        (vec!["--to", "25:00:00"], "not a time of day"),
        (vec!["--counter-interval", "0"], "positive"),
        // A window wholly before or after the recording: said as such, nothing written.
        (vec!["--from", "2020-01-01T00:00:00Z", "--to", "2020-01-01T00:00:01Z"], "not after the recording's start"),
        (vec!["--from", "100s", "--to", "200s"], "no event began in the window"),
    ] {
        let mut a = vec!["export", "-r", s(&trace), "--perfetto", s(&out)];
        a.extend(args);
        let o = latscope(&a);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(want), "{a:?}: {err}");
        assert!(!out.exists());
    }
    let o = latscope(&["export", "-r", s(&trace), "-r", s(&trace), "--perfetto", s(&out)]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("one trace at a time"));
    let o = latscope(&["export", "-r", s(&trace), "--parquet", s(&dir.path().join("p.parquet")), "--split"]);
    assert!(!o.status.success(), "--split is for --perfetto");
    let o = latscope(&["export", "-r", s(&trace), "--perfetto", s(&trace)]);
    assert!(!o.status.success(), "the output may not be the trace");
}

/// One real `record --why` of tests/pipeline.c: a request passes from the client through a queue
/// to the worker, which waits for a lock the holder keeps, reads the disk with O_DIRECT and
/// answers through a pipe. The exported flows connect the threads as the workload's log says,
/// for every request, in its order.
#[test]
fn perfetto_flows_follow_a_request_through_queue_lock_and_disk_in_the_logs_order() {
    const TEST: &str = "perfetto_flows_follow_a_request_through_queue_lock_and_disk_in_the_logs_order";
    if !require_bpf(TEST) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let work = compile_c("pipeline.c", dir.path());
    let lo = common::LoopDev::new(16);
    let trace = dir.path().join("pipeline.lst");
    const REQUESTS: usize = 6;
    let out = Command::new(bin())
        .args(["record", "-w", s(&trace), "--quiet", "--why", "--"])
        .arg(&work)
        .args([lo.dev.as_str(), &REQUESTS.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "record failed: {}", String::from_utf8_lossy(&out.stderr));
    let log = String::from_utf8_lossy(&out.stdout).into_owned();
    let tid = |who: &str| -> u64 {
        log.lines().find_map(|l| l.strip_prefix(&format!("{who} "))).unwrap().trim().parse().unwrap()
    };
    let (client, worker, holder) = (tid("client"), tid("worker"), tid("holder"));
    // step REQUEST NAME NS
    let step = |req: usize, name: &str| -> u64 {
        log.lines()
            .find_map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                (f.len() == 4 && f[0] == "step" && f[1] == req.to_string() && f[2] == name)
                    .then(|| f[3].parse().unwrap())
            })
            .unwrap_or_else(|| panic!("no step {name} of request {req} in {log}"))
    };
    let pf = dir.path().join("pipeline.pftrace");
    let summary = latscope_json(&["export", "-r", s(&trace), "--perfetto", s(&pf), "--json"]);
    let Some(v) = check(TEST, &[pf]) else { return };
    assert_same_events(&trace, "", &v);
    let slices = v["slices"].as_array().unwrap();
    let by_id: BTreeMap<u64, &Value> = slices.iter().map(|s| (s["id"].as_u64().unwrap(), s)).collect();
    // Each flow as (from thread or disk, to thread, the woken call's end).
    let flows: Vec<(String, u64, u64, String)> = v["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let (o, i) = (by_id[&f["out"].as_u64().unwrap()], by_id[&f["in"].as_u64().unwrap()]);
            let from = match o["tid"].as_u64() {
                Some(t) => t.to_string(),
                None => "disk".to_string(),
            };
            let end = i["ts"].as_u64().unwrap() + i["dur"].as_u64().unwrap();
            (from, i["tid"].as_u64().unwrap_or(0), end, i["name"].as_str().unwrap().to_string())
        })
        .collect();
    let find = |from: &str, to: u64, after: u64, before: u64, what: &str| {
        flows
            .iter()
            .filter(|(f, t, end, _)| f == from && *t == to && *end >= after && *end <= before)
            .map(|(_, _, end, name)| (*end, name.clone()))
            .min()
            .unwrap_or_else(|| {
                panic!("no flow {what} ({from} -> {to}) between {after} and {before}: {flows:?}\n{summary}")
            })
    };
    let (c, w, h) = (client.to_string(), worker, holder.to_string());
    for r in 0..REQUESTS {
        let (queued, dequeued, locked) = (step(r, "queued"), step(r, "dequeued"), step(r, "locked"));
        let (read, answered, received) = (step(r, "read"), step(r, "answered"), step(r, "received"));
        // The queue: the client's signal woke the worker's wait, which returned before it dequeued.
        let q = find(&c, w, queued, dequeued, "queue");
        // The lock: the holder's unlock woke the worker's lock, returned before "locked".
        let l = find(&h, w, dequeued, locked, "lock");
        // The disk: the request's completion woke the worker's pread64.
        let d = find("disk", w, locked, read, "disk");
        assert_eq!(d.1, "pread64");
        // The answer: the worker's write woke the client's read.
        let a = find(&w.to_string(), client, answered, received, "answer");
        assert_eq!(a.1, "read");
        assert!(q.0 < l.0 && l.0 < d.0 && d.0 < a.0, "request {r}: flows out of order: {q:?} {l:?} {d:?} {a:?}");
    }
    // Each call's parts are slices inside it, one after another from its start to its end, in
    // time order; off the CPU they add up to the breakdown's parts (all kept: short calls).
    let mut tiled = 0;
    for call in slices.iter().filter(|s| s["cat"] == "syscall") {
        let kids: Vec<&Value> = slices.iter().filter(|s| s["parent"] == call["id"]).collect();
        if kids.is_empty() {
            continue;
        }
        let (mut at, end) =
            (call["ts"].as_u64().unwrap(), call["ts"].as_u64().unwrap() + call["dur"].as_u64().unwrap());
        let mut by_name: BTreeMap<&str, u64> = BTreeMap::new();
        for k in &kids {
            assert_eq!(k["ts"].as_u64(), Some(at), "the parts of {call} tile it: {kids:?}");
            at += k["dur"].as_u64().unwrap();
            *by_name.entry(k["name"].as_str().unwrap()).or_default() += k["dur"].as_u64().unwrap();
        }
        assert_eq!(at, end, "the parts of {call} tile it: {kids:?}");
        if by_name.contains_key("on CPU, and shorter waits") {
            continue; // (more intervals than a recording keeps: their time is not split)
        }
        for (name, arg) in
            [("run queue", "why.runq_ns"), ("blocked: lock", "why.lock_ns"), ("blocked: block I/O", "why.io_ns")]
        {
            let want = call["args"][arg].as_u64().unwrap_or(0);
            assert_eq!(by_name.get(name).copied().unwrap_or(0), want, "{name} of {call}: {kids:?}");
        }
        tiled += 1;
    }
    assert!(tiled >= 2 * REQUESTS, "{tiled} calls with parts");
    // Each call's longest wait is a slice inside it, named by what it waited for: the worker's
    // reads waited for the disk, its lock calls for the lock, each no longer than that part.
    let mut checked = 0;
    for f in v["flows"].as_array().unwrap() {
        let (o, i) = (by_id[&f["out"].as_u64().unwrap()], by_id[&f["in"].as_u64().unwrap()]);
        let want = match (o["tid"].as_u64(), i["tid"].as_u64(), i["name"].as_str()) {
            (None, Some(t), Some("pread64")) if t == worker => ("blocked: block I/O", "why.io_ns"),
            (Some(t), Some(u), Some("futex")) if t == holder && u == worker => ("blocked: lock", "why.lock_ns"),
            _ => continue,
        };
        let mut waits: Vec<&Value> = slices
            .iter()
            .filter(|s| s["parent"] == i["id"] && s["name"].as_str().is_some_and(|n| n.starts_with("blocked")))
            .collect();
        // The longest: the one its waker ended.
        waits.sort_by_key(|w| std::cmp::Reverse(w["dur"].as_u64()));
        assert!(!waits.is_empty(), "the wait of {i}: {waits:?}");
        assert_eq!(waits[0]["name"], want.0, "{i}");
        assert!(waits[0]["dur"].as_u64().unwrap() <= i["args"][want.1].as_u64().unwrap(), "{} in {i}", waits[0]);
        // It ended at the wake-up: inside the holder's unlock, after the request's completion.
        let wait_end = waits[0]["ts"].as_u64().unwrap() + waits[0]["dur"].as_u64().unwrap();
        let (o_ts, o_end) = (o["ts"].as_u64().unwrap(), o["ts"].as_u64().unwrap() + o["dur"].as_u64().unwrap());
        if o["tid"].is_u64() {
            assert!(o_ts <= wait_end && wait_end <= o_end, "{} ends outside its waker {o}", waits[0]);
        } else {
            assert!(o_end <= wait_end, "{} ends before the request {o} completed", waits[0]);
        }
        checked += 1;
    }
    assert!(checked >= 2 * REQUESTS, "{checked} waits checked");
    assert!(summary["part_slices"].as_u64().unwrap() >= 2 * REQUESTS as u64, "{summary}");
    // Every flow from a thread starts at its call in progress at the wake-up (the end of the
    // woken call's wait), the queue's and the answer's too.
    let mut from_threads = 0;
    for f in v["flows"].as_array().unwrap() {
        let (o, i) = (by_id[&f["out"].as_u64().unwrap()], by_id[&f["in"].as_u64().unwrap()]);
        let Some(w) = slices
            .iter()
            .filter(|s| s["parent"] == i["id"] && s["name"].as_str().is_some_and(|n| n.starts_with("blocked")))
            .max_by_key(|w| w["dur"].as_u64())
        else {
            continue;
        };
        if !o["tid"].is_u64() {
            continue;
        }
        let wake = w["ts"].as_u64().unwrap() + w["dur"].as_u64().unwrap();
        let (o_ts, o_end) = (o["ts"].as_u64().unwrap(), o["ts"].as_u64().unwrap() + o["dur"].as_u64().unwrap());
        assert!(o_ts <= wake && wake <= o_end, "{o} was not in progress at the wake-up of {i} ({wake})");
        from_threads += 1;
    }
    // (18 here: the queue's, the lock's and the answer's of each request; a wake-up that came
    // before its call was seen blocked has no wait to check.)
    assert!(from_threads >= REQUESTS, "{from_threads} flows from threads checked");

    // The process and its threads are named; the workload's exit is on its process.
    let tracks = v["tracks"].as_array().unwrap();
    for t in [client, worker, holder] {
        assert!(tracks
            .iter()
            .any(|x| x["kind"] == "thread" && x["tid"].as_u64() == Some(t) && x["name"] == "pipeline"));
    }
    assert!(slices.iter().any(|s| s["name"] == "proc_exit" && s["pid"].as_u64() == Some(client)));

    // The same recording as `timeline --threads --json`: every call of the trace drawn, and its
    // wake-ups join the client, the holder and the worker in the log's order too.
    let t = latscope_json(&["timeline", "-r", s(&trace), "--threads", "--rows", "1000", "--json"]);
    let all = json_lines(&latscope_ok(&["events", "-r", s(&trace), "--json", "--window", "1000s"]));
    let calls = all.iter().filter(|e| e["kind"] == "syscall").count() as u64;
    assert_eq!(t["calls"].as_u64().unwrap(), calls, "{t}");
    assert_eq!(t["dropped"], 0, "{t}");
    let tl_call_end = |w: &Value, who: &str| -> Option<u64> {
        let tid = w[who]["tid"].as_u64()?;
        let ts = w[who]["ts_ns"].as_u64()?;
        t["threads"].as_array()?.iter().filter(|r| r["tid"].as_u64() == Some(tid)).find_map(|r| {
            r["calls"]
                .as_array()?
                .iter()
                .find(|c| c["ts_ns"].as_u64() == Some(ts))
                .map(|c| ts + c["latency_ns"].as_u64().unwrap())
        })
    };
    let wakes: Vec<(u64, u64, u64)> = t["wakeups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| (w["from"]["tid"].as_u64().unwrap(), w["to"]["tid"].as_u64().unwrap(), tl_call_end(w, "to").unwrap()))
        .collect();
    let woke = |from: u64, to: u64, after: u64, before: u64, what: &str| {
        wakes
            .iter()
            .filter(|&&(f, w, end)| f == from && w == to && end >= after && end <= before)
            .map(|&(_, _, end)| end)
            .min()
            .unwrap_or_else(|| panic!("no wake-up {what} ({from} -> {to}) between {after} and {before}: {t}"))
    };
    for r in 0..REQUESTS {
        let (queued, dequeued, locked) = (step(r, "queued"), step(r, "dequeued"), step(r, "locked"));
        let (answered, received) = (step(r, "answered"), step(r, "received"));
        let q = woke(client, worker, queued, dequeued, "queue");
        let l = woke(holder, worker, dequeued, locked, "lock");
        let a = woke(worker, client, answered, received, "answer");
        assert!(q < l && l < a, "request {r}: wake-ups out of order: {q} {l} {a}");
    }
}
