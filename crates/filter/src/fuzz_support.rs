//! The fuzzing harness, shared by `fuzz/fuzz_targets/filter_parse.rs` and the seeded random test.
//! Not part of the supported API.

use crate::{EvalContext, Filter};
use latscope_event::{BlockDevice, Event, EventBatch, ProcessInfo, TraceHeader};
use std::sync::OnceLock;

/// A small batch touching every kind, op and odd value (unknown syscall numbers, unknown kinds,
/// empty and non-ASCII strings, failed calls), and the header that goes with it.
pub fn sample() -> &'static (EventBatch, TraceHeader, EvalContext) {
    static S: OnceLock<(EventBatch, TraceHeader, EvalContext)> = OnceLock::new();
    S.get_or_init(|| {
        let header = TraceHeader {
            start_ns: 1_000,
            realtime_offset_ns: 1_700_000_000_000_000_000,
            processes: vec![
                ProcessInfo {
                    pid: 100,
                    ppid: 1,
                    comm: "httpd".into(),
                    exe: "/usr/sbin/httpd".into(),
                    cmdline: "/usr/sbin/httpd -k start".into(),
                    ..Default::default()
                },
                ProcessInfo { pid: 200, ppid: 100, comm: "test".into(), exe: "/opt/test".into(), ..Default::default() },
            ],
            users: [(0, "root".to_string()), (1000, "alice".to_string())].into_iter().collect(),
            fds: vec![latscope_event::FdInfo {
                pid: 100,
                fd: 4,
                path: "0.0.0.0:5120".into(),
                fd_type: 3,
                ..Default::default()
            }],
            block_devices: vec![
                BlockDevice { dev: 253 << 20, name: "vda".into(), ..Default::default() },
                BlockDevice { dev: 7 << 20, name: "loop0".into(), ..Default::default() },
            ],
            ..Default::default()
        };
        let mut b = EventBatch::with_capacity(64);
        let comms = ["httpd", "test", "", "ü-name", "a-very-long-pro"];
        let paths = [
            "/mnt/data/file.log",
            "",
            "relative/x",
            "/",
            "/etc/passwd",
            "/mnt",
            "ü/ä",
            "10.0.0.1:80->10.0.0.7:5120",
            "udp:[::1]:53",
            "10.0.0.7:5120->10.0.0.1:80",
            "udp:10.0.0.7:41000->[::1]:53",
            "socket:[12]",
            // Longer than the stack scratch buffer of formatted values.
            "/var/lib/a-rather-long-directory-name/with/several/levels/and-a-file-name-that-goes-on-and-on.data",
        ];
        let nrs = [0u16, 1, 257, 3, 1000, 17, 18, 8, 9, 42, 43];
        let rets = [0i64, -2, -4000, 5, -5000, 4096];
        for i in 0..48usize {
            let kind = match i % 8 {
                0..=4 => 0,
                5 | 6 => 1,
                _ => 2,
            };
            let nr = match kind {
                0 => nrs[i % nrs.len()],
                1 => [0u16, 1, 2, 3, 9, 77][i % 6],
                _ => (i % 4) as u16,
            };
            b.push(&Event {
                kind: if i == 47 { 7 } else { kind },
                ts: 500 + (i as u64) * 1_000_000,
                lat: [0u64, 999, 1_000_000, 1_000_001, 5_000_000_000, u64::MAX][i % 6],
                pid: [100u32, 200, 300, 0][i % 4],
                tid: [100u32, 201, 300, 7][i % 4],
                uid: [0u32, 1000, 5][i % 3],
                nr,
                ret: if kind == 2 && nr == 0 { 100 } else { rets[i % rets.len()] },
                fd: [3i32, -1, 0, 100][i % 4],
                fd_type: [1u8, 0, 3, 6, 200, 4, 5][i % 7],
                dev: [253u32 << 20, 7 << 20, (8 << 20) | 1][i % 3],
                bytes: [0u64, 4096, 512, 1 << 20][i % 4],
                off: [0i64, -1, 2048][i % 3],
                cgroup: [0u64, 1, 0x1a2b][i % 3],
                qtime: [0u64, 10, 2_000_000][i % 3],
                comm: comms[i % comms.len()].into(),
                path: paths[i % paths.len()].into(),
                path2: ["", "ls -l /tmp", "/b"][i % 3].into(),
                ..Default::default()
            });
        }
        let mut ctx = EvalContext::new(&header);
        ctx.observe(&b);
        (b, header, ctx)
    })
}

/// Parse `data` as a filter and, if it parses, evaluate it on [`sample`], checking invariants:
/// no panic, errors render, pushdown admits every match and exactly the matches of the kinds it
/// says it is exact for, its clauses are spans of the source, matches lie in `needs_kinds`,
/// `not (F)` is the complement of `F`, and the values of the fields used can be read. Panics when
/// an invariant fails.
pub fn check_one(data: &[u8]) {
    let s = String::from_utf8_lossy(data);
    check_str(&s);
}

/// [`check_one`] for text.
pub fn check_str(s: &str) {
    let (batch, header, ctx) = sample();
    let f = match Filter::parse(s) {
        Err(e) => {
            let shown = e.to_string();
            assert!(shown.lines().count() >= 3, "error display: {shown}");
            assert!(e.column() >= 1);
            return;
        }
        Ok(f) => f,
    };
    let _ = f.explain();
    let used = f.fields_used();
    let _ = f.tests_fd_names();
    let mut p = f.pushdown();
    for c in &p.clauses {
        assert_eq!(s.get(c.span.clone()), Some(c.text.as_str()), "clause span of {s:?}");
    }
    p.resolve_disks(|n| header.block_devices.iter().find(|d| d.name == n).map(|d| d.dev));
    let kinds = f.needs_kinds();
    let neg = Filter::parse(&format!("not ({s})")).ok();
    for row in 0..batch.len() {
        let m = f.matches(batch, row, ctx);
        for info in &used {
            let _ = info.value(batch, row, ctx);
        }
        if m {
            assert!(p.admits(batch, row), "pushdown drops matching row {row} for {s:?}: {p:?}");
            if let Some(k) = latscope_event::EventKind::from_u8(batch.kind[row]) {
                assert!(kinds.contains(k), "row {row} matches {s:?} but needs_kinds is {kinds:?}");
            }
        }
        if let Some(k) = latscope_event::EventKind::from_u8(batch.kind[row]).filter(|&k| p.is_exact(k)) {
            assert_eq!(p.admits(batch, row), m, "exact for {k:?} but row {row} differs for {s:?}: {p:?}");
        }
        if let Some(n) = &neg {
            assert_eq!(n.matches(batch, row, ctx), !m, "not ({s}) on row {row}");
        }
    }
    assert!(!f.matches(batch, batch.len(), ctx));
}
