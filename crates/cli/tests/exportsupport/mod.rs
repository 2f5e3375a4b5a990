//! Fixtures for the export tests: a small fleet of traces with known events, and running Python
//! (DuckDB, pyarrow) and servers started by the tests.
#![allow(dead_code)]

use latscope_event::{syscall_nr, BlockDevice, Event, EventBatch, ProcessInfo, TraceHeader};
use latscope_trace::synth::Rng;
use latscope_trace::{Summary, TraceWriter};
use std::path::{Path, PathBuf};
use std::process::Command;

/// 2024-03-10T09:59:50Z in ns: the fleet's traces start 10 s before an hour boundary.
pub const START_WALL_NS: i64 = 1_710_064_790_000_000_000;
/// CLOCK_MONOTONIC of the start of every fixture trace.
pub const START_MONO_NS: u64 = 1_000_000_000_000;
/// Recording length of the fixture traces.
pub const SPAN_NS: u64 = 20_000_000_000;

/// One host of the fleet.
pub struct Host {
    pub name: &'static str,
    pub disks: Vec<(u32, &'static str)>,
    pub seed: u64,
    pub events: usize,
}

/// The hosts of the fixture fleet.
pub fn fleet_hosts(events: usize) -> Vec<Host> {
    vec![
        Host { name: "web1", disks: vec![(254 << 20, "vda"), ((254 << 20) | 1, "vda1")], seed: 0x9e37_79b9, events },
        Host { name: "db1.example.com", disks: vec![(259 << 20, "nvme0n1")], seed: 0x85eb_ca6b, events },
    ]
}

/// The events of a host: syscalls (file reads/writes on a dozen files, some sockets, some
/// failures), block requests on its disks, process events; spread over [`SPAN_NS`].
pub fn host_events(h: &Host) -> Vec<Event> {
    let mut r = Rng::new(h.seed);
    let ops: Vec<u16> =
        ["read", "pread64", "write", "openat", "fsync", "close"].iter().map(|s| syscall_nr(s).unwrap()).collect();
    let comms = ["postgres", "nginx", "backup"];
    let step = SPAN_NS / h.events as u64;
    let mut out = Vec::with_capacity(h.events);
    for i in 0..h.events {
        let ts = START_MONO_NS + i as u64 * step + r.below(step);
        let pid = 2000 + r.below(6) as u32;
        let comm = comms[(pid % 3) as usize].to_string();
        let k = r.below(100);
        let e = if k < 90 {
            let nr = ops[r.below(ops.len() as u64) as usize];
            let socket = r.below(10) == 0;
            // fsync is slow (a flush to disk), the rest from the page cache or a wait.
            let lat = if nr == ops[4] { r.log_uniform(20, 24) } else { r.log_uniform(9, 21) };
            let mut e = Event {
                kind: 0,
                ts,
                lat,
                pid,
                tid: pid + r.below(3) as u32,
                uid: if pid.is_multiple_of(2) { 0 } else { 1000 },
                nr,
                ret: if r.below(25) == 0 { -2 } else { 4096 },
                fd: 3 + r.below(10) as i32,
                fd_type: if socket { 3 } else { 1 },
                dev: if socket { 0 } else { h.disks.last().unwrap().0 },
                ino: 5000 + r.below(12),
                bytes: 4096,
                off: (r.below(1000) * 4096) as i64,
                comm,
                path: if socket {
                    "10.0.0.1:5432->10.0.0.7:40100".into()
                } else {
                    format!("/data/{}/file{}.dat", h.name, r.below(12))
                },
                ..Default::default()
            };
            if nr == ops[4] {
                with_breakdown(&mut e, i);
            }
            e
        } else if k < 99 {
            let (dev, _) = h.disks[r.below(h.disks.len() as u64) as usize];
            Event {
                kind: 1,
                ts,
                lat: r.log_uniform(15, 25),
                pid,
                tid: pid,
                nr: r.below(2) as u16,
                fd: -1,
                dev,
                bytes: 4096 << r.below(5),
                off: r.below(1 << 30) as i64,
                flags: 1,
                qtime: r.log_uniform(8, 16),
                comm,
                ..Default::default()
            }
        } else {
            let op = r.below(3) as u16;
            Event {
                kind: 2,
                ts,
                pid,
                tid: pid,
                nr: op,
                ret: if op == 0 { 1 } else { 0 },
                fd: -1,
                off: -1,
                comm,
                path: if op == 1 { "/usr/bin/backup".into() } else { String::new() },
                ..Default::default()
            }
        };
        out.push(e);
    }
    out
}

/// An fsync as `record --why` records it: mostly block I/O, woken by the block softirq, with
/// the kernel stack where it waited ([`STACK_TABLE`] 1 or 2) and its user stack (3, or 4: lost).
/// The parts add up to the latency. Consumes nothing of the random sequence.
fn with_breakdown(e: &mut Event, i: usize) {
    e.why_cpu = e.lat / 8;
    e.why_runq = e.lat / 16;
    e.why_unknown = (i % 3) as u64;
    e.why_io = e.lat - e.why_cpu - e.why_runq - e.why_unknown;
    e.waker_ctx = 3;
    e.waker_tid = 4; // the block softirq
    e.runq_tid = 77;
    e.runq_cpu = 1;
    e.kstack = 1 + (i % 2) as u32;
    e.ustack = if i.is_multiple_of(5) { 4 } else { 3 };
}

/// The stack table of every fixture trace (JSON lines, as `record --why` stores them): two
/// kernel stacks of an fsync's I/O wait, a user stack in a file not at hand, and a lost one.
pub const STACK_TABLE: &str = concat!(
    r#"{"id":1,"kind":"kernel","frames":[{"addr":18446744071579000000,"sym":"io_schedule+0x4a"},{"addr":18446744071579001000,"sym":"folio_wait_bit_common+0x130"},{"addr":18446744071579002000,"sym":"file_write_and_wait_range+0x91"},{"addr":18446744071579003000,"sym":"__x64_sys_fsync+0x3b"}]}"#,
    "\n",
    r#"{"id":2,"kind":"kernel","frames":[{"addr":18446744071579000000,"sym":"io_schedule+0x4a"},{"addr":18446744071579004000,"sym":"jbd2_log_wait_commit+0xa2"},{"addr":18446744071579003000,"sym":"__x64_sys_fsync+0x3b"}],"truncated":true}"#,
    "\n",
    r#"{"id":3,"kind":"user","frames":[{"addr":94000000000000,"file":"/usr/lib/fixture/postgres","build_id":"0a1b2c","off":4660},{"addr":94000000004096,"file":"/usr/lib/fixture/postgres","build_id":"0a1b2c","off":8756}]}"#,
    "\n",
    r#"{"id":4,"kind":"user","missing":"process exited"}"#,
    "\n",
);

/// The trace header of a host.
pub fn host_header(h: &Host) -> TraceHeader {
    TraceHeader {
        format_version: latscope_event::TRACE_FORMAT_VERSION,
        latscope_version: "test".into(),
        hostname: h.name.into(),
        kernel: "6.18.0".into(),
        machine: "x86_64".into(),
        cpus: 2,
        start_ns: START_MONO_NS,
        realtime_offset_ns: START_WALL_NS - START_MONO_NS as i64,
        command_line: vec!["latscope".into(), "record".into()],
        syscalls: "all".into(),
        block: true,
        block_devices: h
            .disks
            .iter()
            .map(|&(dev, name)| BlockDevice {
                dev,
                name: name.into(),
                size_bytes: 1 << 34,
                scheduler: (dev & 0xfffff == 0).then(|| "mq-deadline".to_string()),
                parent: (dev & 0xfffff != 0).then(|| name.trim_end_matches(char::is_numeric).to_string()),
                ..Default::default()
            })
            .collect(),
        processes: (0..6)
            .map(|i| ProcessInfo {
                pid: 2000 + i,
                ppid: 1,
                comm: ["postgres", "nginx", "backup"][(i % 3) as usize].into(),
                exe: "/usr/bin/x".into(),
                uid: if i % 2 == 0 { 0 } else { 1000 },
                cmdline: format!("x --id {i}"),
                cwd: "/".into(),
            })
            .collect(),
        users: [(0, "root".to_string()), (1000, "app".to_string())].into_iter().collect(),
        ..Default::default()
    }
}

/// Writes a host's trace as `record` lays it out (syscalls and other kinds in separate blocks of
/// at most 4096 events) and returns its path.
pub fn write_host_trace(dir: &Path, h: &Host) -> PathBuf {
    let path = dir.join(format!("{}.lst", h.name));
    let events = host_events(h);
    let mut w = TraceWriter::create(&path, &host_header(h)).unwrap();
    for (n, chunk) in events.chunks(4096).enumerate() {
        let (mut sys, mut other) = (EventBatch::default(), EventBatch::default());
        if n == 0 {
            sys.stacks.push_str(STACK_TABLE);
        }
        for e in chunk {
            if e.kind == 0 { &mut sys } else { &mut other }.push(e);
        }
        for b in [other, sys] {
            if !b.is_empty() {
                w.write_batch(&b, 0).unwrap();
            }
        }
    }
    let end = START_MONO_NS + SPAN_NS;
    w.finish(Summary { events: events.len() as u64, duration_ns: SPAN_NS, end_ns: end, ..Default::default() }).unwrap();
    path
}

/// Writes the fleet's traces into `dir`.
pub fn write_fleet(dir: &Path, events: usize) -> Vec<PathBuf> {
    fleet_hosts(events).iter().map(|h| write_host_trace(dir, h)).collect()
}

/// Whether `python3 -c 'import MODULE'` works; otherwise SKIPPED (or a failure under CI=true).
#[allow(unused_imports)] // each test file uses some
pub use latscope_testkit::require_python;

/// Runs a Python script with arguments; returns stdout, panicking with stderr on failure.
pub fn python(script: &str, args: &[&str]) -> String {
    let o = Command::new("python3").arg("-c").arg(script).args(args).output().expect("python3 runs");
    assert!(o.status.success(), "python failed:\n{}\n--- script ---\n{script}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}
