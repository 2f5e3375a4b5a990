//! Property tests on random events and random filters:
//! - push-down then filter == filter alone (the kernel never drops a matching event), and the
//!   push-down alone == the filter for the kinds it says it is exact for;
//! - matching events lie in `needs_kinds()`;
//! - `not (F)` is the complement of `F`;
//! - names resolved at compile time agree with the generic string path (`f = v` == `f glob v`).

use latscope_event::{BlockDevice, Event, EventBatch, ProcessInfo, TraceHeader};
use latscope_filter::{EvalContext, Filter};
use proptest::prelude::*;

fn header() -> TraceHeader {
    TraceHeader {
        start_ns: 100,
        processes: vec![
            ProcessInfo { pid: 1, ppid: 0, exe: "/sbin/init".into(), ..Default::default() },
            ProcessInfo {
                pid: 2,
                ppid: 1,
                comm: "httpd".into(),
                cmdline: "httpd -k start".into(),
                ..Default::default()
            },
        ],
        fds: vec![latscope_event::FdInfo {
            pid: 1,
            fd: 3,
            path: "0.0.0.0:5120".into(),
            fd_type: 3,
            ..Default::default()
        }],
        users: [(0, "root".to_string())].into_iter().collect(),
        block_devices: vec![
            BlockDevice { dev: 253 << 20, name: "vda".into(), ..Default::default() },
            BlockDevice { dev: 7 << 20, name: "loop0".into(), ..Default::default() },
        ],
        ..Default::default()
    }
}

const COMMS: [&str; 5] = ["httpd", "test", "nginx", "", "a-very-long-pro"];
const PATHS: [&str; 10] = [
    "/mnt/a.log",
    "/etc/passwd",
    "",
    "rel/x",
    "/",
    "/mnt",
    "10.0.0.1:80->10.0.0.7:5120",
    "10.0.0.7:5120->10.0.0.1:80",
    "udp:[::1]:53",
    "udp:10.0.0.7:53->[::1]:9",
];
const LATS: [u64; 7] = [0, 999, 1000, 1_000_000, 1_000_001, 250_000, u64::MAX];

fn event() -> impl Strategy<Value = Event> {
    (
        prop_oneof![4 => Just(0u8), 3 => Just(1u8), 1 => Just(2u8)],
        prop_oneof![
            Just(0u16),
            Just(1),
            Just(2),
            Just(3),
            Just(9),
            Just(17),
            Just(18),
            Just(257),
            Just(42),
            Just(43),
            Just(1000),
            0u16..500
        ],
        prop_oneof![prop::sample::select(LATS.to_vec()), any::<u64>()],
        (1u32..5, 1u32..5, 0u32..3),
        prop_oneof![Just(0i64), Just(-2), Just(-4000), Just(4096), any::<i64>()],
        (prop_oneof![Just(-1i32), 0i32..5], 0u8..20),
        prop::sample::select(vec![253u32 << 20, 7 << 20, (8 << 20) | 1]),
        (
            prop::sample::select(COMMS.to_vec()),
            prop::sample::select(PATHS.to_vec()),
            prop::sample::select(vec!["", "ls -l /tmp", "x"]),
        ),
        (prop::sample::select(vec![0u64, 1, 0x1a2b]), prop::sample::select(vec![0u64, 4096, 65536])),
        0u64..5000,
    )
        .prop_map(
            |(kind, nr, lat, (pid, tid, uid), ret, (fd, fd_type), dev, (comm, path, path2), (cgroup, bytes), ts)| {
                Event {
                    kind,
                    nr: if kind == 2 { nr % 4 } else { nr },
                    lat,
                    pid,
                    tid,
                    uid,
                    ret,
                    fd,
                    fd_type,
                    dev,
                    cgroup,
                    bytes,
                    ts,
                    comm: comm.into(),
                    path: path.into(),
                    path2: path2.into(),
                    ..Default::default()
                }
            },
        )
}

/// One clause, drawn from the fields and operators the push-down knows about and some it does not.
fn clause() -> impl Strategy<Value = String> {
    let pick = |v: &[&str]| prop::sample::select(v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    let op = pick(&["=", "!=", "<", "<=", ">", ">="]);
    let eqop = pick(&["=", "!="]);
    prop_oneof![
        (pick(&["proc.pid", "thread.tid", "user.uid", "proc.ppid"]), op.clone(), 0u32..6)
            .prop_map(|(f, o, v)| format!("{f} {o} {v}")),
        (pick(&["proc.pid", "thread.tid"]), prop::collection::vec(0u32..6, 1..4))
            .prop_map(|(f, v)| { format!("{f} in ({})", v.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")) }),
        (eqop.clone(), pick(&COMMS[..3])).prop_map(|(o, v)| format!("proc.name {o} {v}")),
        Just("proc.name = a-very-long-process-name".to_string()),
        prop::collection::vec(pick(&["httpd", "test", "nginx", "x"]), 1..3)
            .prop_map(|v| format!("proc.name in ({})", v.join(", "))),
        (
            eqop.clone(),
            pick(&[
                "read",
                "write",
                "openat",
                "close",
                "block_flush",
                "fork",
                "proc_fork",
                "proc_exec",
                "exit",
                "proc_exit",
                "syscall_1000",
                "block_other"
            ])
        )
            .prop_map(|(o, v)| format!("evt.type {o} {v}")),
        prop::collection::vec(pick(&["read", "openat", "block_flush", "exit", "pwrite64"]), 1..4)
            .prop_map(|v| format!("evt.type in ({})", v.join(", "))),
        (
            pick(&["evt.is_io", "evt.is_io_read", "evt.is_io_write", "evt.failed"]),
            eqop.clone(),
            pick(&["true", "false"])
        )
            .prop_map(|(f, o, v)| format!("{f} {o} {v}")),
        pick(&["evt.is_io", "evt.is_io_write", "evt.failed"]),
        (
            pick(&["evt.latency", "blk.latency", "blk.qtime", "evt.buflen", "blk.bytes"]),
            op.clone(),
            prop::sample::select(LATS.to_vec())
        )
            .prop_map(|(f, o, v)| format!("{f} {o} {v}")),
        (op.clone(), pick(&["1ms", "250us", "1 s", "0", "-5"])).prop_map(|(o, v)| format!("evt.latency {o} {v}")),
        (
            pick(&["evt.time", "evt.datetime"]),
            op.clone(),
            pick(&[
                "1970-01-01T00:00:00.0000025Z",
                "1970-01-01",
                "'1970-01-01 01:00:00.000001+01:00'",
                "2500",
                "2026-11-22T22:30:13Z"
            ])
        )
            .prop_map(|(f, o, v)| format!("{f} {o} {v}")),
        (eqop.clone(), pick(&["file", "directory", "ipv4", "pipe", "unknown"]))
            .prop_map(|(o, v)| format!("fd.type {o} {v}")),
        prop::collection::vec(pick(&["file", "ipv4", "unknown"]), 1..3)
            .prop_map(|v| format!("fd.type in ({})", v.join(", "))),
        (eqop.clone(), pick(&["253:0", "7:0", "8:1", "9:9"])).prop_map(|(o, v)| format!("blk.dev {o} {v}")),
        (eqop.clone(), pick(&["vda", "loop0", "sdz"])).prop_map(|(o, v)| format!("blk.disk {o} {v}")),
        prop::collection::vec(pick(&["vda", "loop0"]), 1..3).prop_map(|v| format!("blk.disk in ({})", v.join(", "))),
        (eqop.clone(), pick(&["syscall", "block", "proc"])).prop_map(|(o, v)| format!("evt.kind {o} {v}")),
        (eqop.clone(), pick(&["SUCCESS", "ENOENT", "E4000"])).prop_map(|(o, v)| format!("evt.res {o} {v}")),
        (pick(&["contains", "startswith", "endswith", "glob", "icontains"]), pick(&["/mnt", "a", "*.log", "MNT", ""]))
            .prop_map(|(o, v)| format!("fd.name {o} '{v}'")),
        pick(&[
            "fd.name pmatch (/mnt)",
            "fd.directory = /mnt",
            "fd.filename = a.log",
            "container.id = host",
            "container.id != 1a2b"
        ]),
        (pick(&[
            "proc.exe",
            "fd.num",
            "blk.sector",
            "user.name",
            "fd.sip",
            "blk.disk",
            "fd.type",
            "fd.cport",
            "fd.rip"
        ]))
        .prop_map(|f| format!("{f} exists")),
        (
            pick(&["fd.sip", "fd.cip", "fd.lip", "fd.rip"]),
            eqop.clone(),
            pick(&["10.0.0.1", "10.0.0.7", "::1", "0:0::1"])
        )
            .prop_map(|(f, o, v)| format!("{f} {o} {v}")),
        (
            pick(&["fd.sport", "fd.cport", "fd.lport", "fd.rport", "fd.port"]),
            op.clone(),
            pick(&["80", "5120", "53", "9", "0"])
        )
            .prop_map(|(f, o, v)| format!("{f} {o} {v}")),
        prop::collection::vec(pick(&["80", "53", "9"]), 1..3).prop_map(|v| format!("fd.port in ({})", v.join(", "))),
        (eqop, pick(&["tcp", "udp", "unix"])).prop_map(|(o, v)| format!("fd.l4proto {o} {v}")),
        (
            pick(&["proc.cmdline", "proc.args"]),
            pick(&["=", "!=", "contains", "startswith"]),
            pick(&["httpd -k start", "-k start", "ls", "", "x"])
        )
            .prop_map(|(f, o, v)| format!("{f} {o} '{v}'")),
        (
            pick(&["evt.arg.fd", "evt.arg.size", "evt.arg.offset", "evt.arg.pos", "evt.arg.dirfd"]),
            pick(&["=", "!=", "<", ">="]),
            pick(&["0", "3", "4096", "-100"])
        )
            .prop_map(|(f, o, v)| format!("{f} {o} {v}")),
        Just("evt.arg.dirfd = AT_FDCWD".to_string()),
        (
            pick(&[
                "evt.args",
                "evt.arg.name",
                "evt.arg.path",
                "evt.arg.oldpath",
                "evt.arg.newpath",
                "evt.arg.flags",
                "evt.arg.mode",
                "evt.arg.whence",
                "evt.arg.res"
            ]),
            pick(&["=", "!=", "contains", "startswith", "glob"]),
            pick(&["fd=3", "/mnt", "O_RDONLY", "0", "SEEK_SET", "ENOENT", "*"])
        )
            .prop_map(|(f, o, v)| format!("{f} {o} '{v}'")),
        // libsinsp's general forms: never tested in the kernel, mixed with what is.
        (
            pick(&["tolower(proc.name)", "toupper(proc.name)", "basename(fd.name)", "concat(proc.name, fd.name)"]),
            pick(&["=", "!=", "contains", "startswith", "<", ">="]),
            pick(&["httpd", "HTTPD", "a.log", "httpd/mnt/a.log", ""])
        )
            .prop_map(|(f, o, v)| format!("{f} {o} '{v}'")),
        (pick(&["len(fd.name)", "len(proc.name)"]), op.clone(), 0u32..12).prop_map(|(f, o, v)| format!("{f} {o} {v}")),
        (
            pick(&["proc.name", "fd.name", "fd.directory"]),
            pick(&["==", "!=", "contains", "startswith", "glob"]),
            pick(&["oneof", "anyof", "allof"]),
            prop::collection::vec(pick(&["httpd", "test", "/mnt", "/mnt.*", "*.log", "h.*"]), 1..4)
        )
            .prop_map(|(f, o, m, v)| format!("{f} {o} {m} ({})", v.join(", "))),
        (
            pick(&["proc.name", "fd.name"]),
            pick(&["regex", "iglob"]),
            pick(&["h.*d", "HTTP*", "/MNT/*", ".*", "[a-z]+"])
        )
            .prop_map(|(f, o, v)| format!("{f} {o} '{v}'")),
        (
            pick(&["proc.name", "proc.pid", "evt.type", "fd.type", "evt.latency"]),
            pick(&["intersects", "in"]),
            0usize..3
        )
            .prop_map(|(f, o, n)| {
                let v = match f.as_str() {
                    "proc.name" => "httpd",
                    "evt.type" => "read",
                    "fd.type" => "file",
                    _ => "1000",
                };
                format!("{f} {o} ({})", vec![v; n].join(", "))
            }),
        pick(&[
            "proc.name = val(proc.pname)",
            "proc.pid > val(thread.tid)",
            "evt.buflen = val(evt.arg.size)",
            "proc.aname[1] = httpd",
            "proc.aname = httpd",
            "proc.apid[1] = 2",
            "proc.pname = httpd",
            "evt.arg[0] startswith 3",
            "evt.rawarg.size >= 4096",
            "evt.rawarg.res < 0",
            "fd.ip = 10.0.0.1",
            "fd.ip != ::1",
            "fd.net = 10.0.0.0/8",
            "fd.snet in (10.0.0.0/24, ::1/128)",
            "fd.cnet = 10.0.0.7/32",
            "fd.connected = true",
            "evt.is_wait = false",
            "fd.typechar in (f, 4)",
            "evt.num <= 3",
            "evt.latency.human startswith 1",
            "proc.name < m",
            "evt.failed in (true)",
            "proc.name = \"\\x68ttpd\""
        ]),
    ]
}

fn filter() -> impl Strategy<Value = String> {
    clause().prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 2..4).prop_map(|v| format!("({})", v.join(" and "))),
            prop::collection::vec(inner.clone(), 2..4).prop_map(|v| format!("({})", v.join(" or "))),
            inner.prop_map(|f| format!("not {f}")),
        ]
    })
}

/// A top-level conjunction of random filters: where push-down has something to extract.
fn top_filter() -> impl Strategy<Value = String> {
    prop::collection::vec(filter(), 1..5).prop_map(|v| v.join(" and "))
}

fn batch(events: &[Event]) -> (EventBatch, EvalContext, TraceHeader) {
    let mut b = EventBatch::with_capacity(events.len());
    for e in events {
        b.push(e);
    }
    let h = header();
    let mut ctx = EvalContext::new(&h);
    ctx.observe(&b);
    (b, ctx, h)
}

proptest! {
    // 500 cases by default; PROPTEST_CASES=N runs more.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(500),
        ..ProptestConfig::default()
    })]

    #[test]
    fn pushdown_never_drops_a_match(events in prop::collection::vec(event(), 1..40), src in top_filter()) {
        let (b, ctx, h) = batch(&events);
        let f = Filter::parse(&src).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut p = f.pushdown();
        p.resolve_disks(|n| h.block_devices.iter().find(|d| d.name == n).map(|d| d.dev));
        let kinds = f.needs_kinds();
        let neg = Filter::parse(&format!("not ({src})")).unwrap();
        for row in 0..b.len() {
            let full = f.matches(&b, row, &ctx);
            let staged = p.admits(&b, row) && f.matches(&b, row, &ctx);
            prop_assert_eq!(staged, full, "row {} {:?} filter {} pushdown {:?}", row, b.get(row), src, p);
            // Where the push-down claims to be exact, the kernel's verdict is the filter's.
            if let Some(k) = latscope_event::EventKind::from_u8(b.kind[row]).filter(|&k| p.is_exact(k)) {
                prop_assert_eq!(p.admits(&b, row), full, "exact for {:?}: row {:?} filter {} pushdown {:?}", k, b.get(row), src, p);
            }
            if full {
                prop_assert!(kinds.contains(latscope_event::EventKind::from_u8(b.kind[row]).unwrap()));
            }
            prop_assert_eq!(neg.matches(&b, row, &ctx), !full);
        }
    }

    /// A process renamed by exec: the execve's return (and what follows) carries the new command
    /// name, while a kernel tests at entry with the old one; the push-down's verdict is on the name
    /// the event carries, and never drops an event the filter keeps.
    #[test]
    fn exec_renames_and_pushdown_still_admits(
        (old, new) in (prop::sample::select(COMMS.to_vec()), prop::sample::select(COMMS.to_vec())),
        ret in prop_oneof![Just(0i64), Just(-2)],
        src in top_filter(),
    ) {
        let execve = latscope_event::syscall_nr("execve").unwrap();
        let at = |nr, comm: &str, ret| Event { kind: 0, nr, pid: 2, tid: 2, fd: -1, ret, lat: 2_000_000, comm: comm.into(), ..Default::default() };
        let events = [
            at(0, old, 5),
            // A failed execve keeps the old name.
            at(execve, if ret == 0 { new } else { old }, ret),
            Event {
                kind: 2,
                nr: 1,
                pid: 2,
                tid: 2,
                comm: new.into(),
                path: format!("/usr/bin/{new}"),
                path2: format!("{new} -x"),
                ..Default::default()
            },
            at(0, new, 5),
        ];
        let (b, ctx, _) = batch(if ret == 0 { &events } else { &events[..2] });
        let f = Filter::parse(&src).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let p = f.pushdown();
        for row in 0..b.len() {
            let full = f.matches(&b, row, &ctx);
            prop_assert!(!full || p.admits(&b, row), "dropped row {} {:?} for {} ({:?})", row, b.get(row), src, p);
            if b.kind[row] == 0 && p.is_exact(latscope_event::EventKind::Syscall) {
                prop_assert_eq!(p.admits(&b, row), full);
            }
        }
    }

    #[test]
    fn resolved_names_agree_with_string_compare(
        events in prop::collection::vec(event(), 1..40),
        (field, value) in prop_oneof![
            Just("evt.type").prop_flat_map(|f| (Just(f), prop::sample::select(vec!["read", "write", "openat", "close", "block_flush", "fork", "proc_exit", "block_other", "syscall_1000", "block_discard"]))),
            Just("fd.type").prop_flat_map(|f| (Just(f), prop::sample::select(vec!["file", "unknown", "ipv4", "pipe"]))),
            Just("blk.op").prop_flat_map(|f| (Just(f), prop::sample::select(vec!["read", "write", "flush", "other"]))),
            Just("evt.kind").prop_flat_map(|f| (Just(f), prop::sample::select(vec!["syscall", "block", "proc"]))),
            Just("evt.res").prop_flat_map(|f| (Just(f), prop::sample::select(vec!["SUCCESS", "ENOENT", "E4000"]))),
            Just("blk.dev").prop_flat_map(|f| (Just(f), prop::sample::select(vec!["253:0", "7:0", "8:1"]))),
            Just("container.id").prop_flat_map(|f| (Just(f), prop::sample::select(vec!["host", "1a2b", "ff"]))),
            Just("proc.name").prop_flat_map(|f| (Just(f), prop::sample::select(vec!["httpd", "test", ""]))),
        ],
    ) {
        let (b, ctx, _) = batch(&events);
        let eq = Filter::parse(&format!("{field} = '{value}'")).unwrap();
        let ne = Filter::parse(&format!("{field} != '{value}'")).unwrap();
        let glob = Filter::parse(&format!("{field} glob '{value}'")).unwrap();
        let exists = Filter::parse(&format!("{field} exists")).unwrap();
        for row in 0..b.len() {
            let g = glob.matches(&b, row, &ctx);
            prop_assert_eq!(eq.matches(&b, row, &ctx), g, "{} = {} on {:?}", field, value, b.get(row));
            prop_assert_eq!(ne.matches(&b, row, &ctx), exists.matches(&b, row, &ctx) && !g);
        }
    }
}
