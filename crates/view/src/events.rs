//! One line per event, like sysdig's default output, or one JSON object per event.

use latscope_event::syscalls::desc;
use latscope_event::units::{fmt_bytes, fmt_ns};
use latscope_event::{
    args, dev_major_minor, format_result, op_name, BlockOp, EventBatch, EventKind, FdType, ProcOp, Rwbs, TraceHeader,
};
use serde_json::{json, Map, Value};
use std::fmt::Write;

/// How to print the time column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeFormat {
    /// Wall-clock time of day, `HH:MM:SS.nnnnnnnnn` (UTC).
    Wall,
    /// Seconds since the start of the recording.
    Relative,
    /// Raw CLOCK_MONOTONIC ns.
    Monotonic,
}

/// Open flags as `O_WRONLY|O_CREAT|O_TRUNC` (the event crate's, shared with the filter's fields).
pub use latscope_event::args::open_flags;

/// Format a monotonic timestamp per `fmt`.
pub fn fmt_time(h: &TraceHeader, ts: u64, fmt: TimeFormat) -> String {
    match fmt {
        TimeFormat::Monotonic => ts.to_string(),
        TimeFormat::Relative => {
            let rel = ts.saturating_sub(h.start_ns);
            format!("{}.{:09}", rel / 1_000_000_000, rel % 1_000_000_000)
        }
        TimeFormat::Wall => {
            let w = h.wall_ns(ts).max(0) as u64;
            let secs = w / 1_000_000_000;
            let day = secs % 86_400;
            format!("{:02}:{:02}:{:02}.{:09}", day / 3600, day / 60 % 60, day % 60, w % 1_000_000_000)
        }
    }
}

/// Name of a block device: `vda (254:0)` or just `254:0` when the header does not know it.
pub fn disk_label(h: &TraceHeader, dev: u32) -> String {
    let mut s = String::new();
    let _ = args::write_disk(&mut s, dev, h.disk_name(dev));
    s
}

/// The arguments part of a syscall line: `fd=3(<file>/etc/hosts) bytes=4096 off=0` (formatted by
/// [`latscope_event::args`], which the filter's `evt.args` field uses too).
pub fn syscall_args(b: &EventBatch, i: usize) -> String {
    args::syscall_args(b, i)
}

/// One event as a text line.
pub fn line(h: &TraceHeader, b: &EventBatch, i: usize, tf: TimeFormat) -> String {
    let mut s = String::with_capacity(160);
    let _ = write!(
        s,
        "{} {:>8} {:<15} {:>7}/{:<7} ",
        fmt_time(h, b.ts[i], tf),
        fmt_ns(b.lat[i]),
        b.comm.get(i),
        b.pid[i],
        b.tid[i]
    );
    match EventKind::from_u8(b.kind[i]) {
        Some(EventKind::Syscall) => {
            let name = op_name(b.kind[i], b.nr[i]);
            let _ = write!(s, "{name} {} = {}", syscall_args(b, i), format_result(b.ret[i]));
            let d = desc(b.nr[i]);
            if d.is_io() && b.ret[i] > 0 {
                let _ = write!(s, " ({})", fmt_bytes(b.ret[i] as u64));
            }
        }
        Some(EventKind::Block) => {
            let _ = write!(s, "block_{} ", BlockOp::from_u16(b.nr[i]).name());
            let _ = args::write_block_args(&mut s, b, i, h.disk_name(b.dev[i]));
        }
        Some(EventKind::Proc) => match ProcOp::from_u16(b.nr[i]) {
            Some(op) => {
                let _ = write!(s, "proc_{} ", op.name());
                let _ = args::write_proc_args(&mut s, b, i);
            }
            None => s.push_str("proc_?"),
        },
        None => {
            let _ = write!(s, "unknown kind {}", b.kind[i]);
        }
    }
    s
}

/// One event as a JSON object (all columns plus decoded names).
pub fn json(h: &TraceHeader, b: &EventBatch, i: usize) -> Value {
    let kind = EventKind::from_u8(b.kind[i]);
    let mut m = Map::new();
    m.insert("kind".into(), json!(kind.map(|k| k.name()).unwrap_or("unknown")));
    m.insert("type".into(), json!(op_name(b.kind[i], b.nr[i])));
    m.insert("ts_ns".into(), json!(b.ts[i]));
    m.insert("time_ns".into(), json!(h.wall_ns(b.ts[i])));
    m.insert("latency_ns".into(), json!(b.lat[i]));
    m.insert("pid".into(), json!(b.pid[i]));
    m.insert("tid".into(), json!(b.tid[i]));
    m.insert("uid".into(), json!(b.uid[i]));
    m.insert("comm".into(), json!(b.comm.get(i)));
    m.insert("cgroup".into(), json!(b.cgroup[i]));
    m.insert("cpu".into(), json!(b.cpu[i]));
    match kind {
        Some(EventKind::Syscall) => {
            m.insert("nr".into(), json!(b.nr[i]));
            m.insert("ret".into(), json!(b.ret[i]));
            m.insert(
                "res".into(),
                json!(if (-4095..0).contains(&b.ret[i]) { format_result(b.ret[i]) } else { "SUCCESS".into() }),
            );
            m.insert("fd".into(), json!(b.fd[i]));
            m.insert("fd_type".into(), json!(FdType::from_u8(b.fd_type[i]).name()));
            m.insert("path".into(), json!(b.path.get(i)));
            m.insert("path2".into(), json!(b.path2.get(i)));
            m.insert("bytes".into(), json!(b.bytes[i]));
            m.insert("offset".into(), json!(b.off[i]));
            m.insert("offset2".into(), json!(b.off2[i]));
            m.insert("flags".into(), json!(b.flags[i]));
            m.insert("mode".into(), json!(b.mode[i]));
            m.insert("dirfd".into(), json!(b.dirfd[i]));
            m.insert("addr".into(), json!(b.addr[i]));
            m.insert("dev".into(), json!(b.dev[i]));
            m.insert("ino".into(), json!(b.ino[i]));
        }
        Some(EventKind::Block) => {
            let op = BlockOp::from_u16(b.nr[i]);
            let (ma, mi) = dev_major_minor(b.dev[i]);
            m.insert("op".into(), json!(op.name()));
            m.insert("rwbs".into(), json!(Rwbs::format(op, b.flags[i])));
            m.insert("dev".into(), json!(format!("{ma}:{mi}")));
            m.insert("disk".into(), json!(h.disk_name(b.dev[i])));
            m.insert("sector".into(), json!(b.off[i]));
            m.insert("bytes".into(), json!(b.bytes[i]));
            m.insert("qtime_ns".into(), json!(b.qtime[i]));
            m.insert("error".into(), json!(b.ret[i]));
        }
        Some(EventKind::Proc) => {
            m.insert("ret".into(), json!(b.ret[i]));
            m.insert("path".into(), json!(b.path.get(i)));
            if b.nr[i] == ProcOp::Exec as u16 {
                m.insert("args".into(), json!(b.path2.get(i)));
            }
        }
        None => {}
    }
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use latscope_event::{syscall_nr, BlockDevice, Event};

    #[test]
    fn syscall_line() {
        let h = TraceHeader { start_ns: 1_000, ..Default::default() };
        let mut b = EventBatch::default();
        b.push(&Event {
            kind: 0,
            ts: 1_500,
            lat: 2_500,
            pid: 7,
            tid: 8,
            nr: syscall_nr("openat").unwrap(),
            ret: -2,
            fd: -1,
            dirfd: -100,
            flags: 0o2000101,
            comm: "cat".into(),
            path: "/nope".into(),
            ..Default::default()
        });
        b.push(&Event {
            kind: 0,
            nr: syscall_nr("pread64").unwrap(),
            ret: 4096,
            fd: 3,
            fd_type: 1,
            bytes: 4096,
            off: 8192,
            path: "/data".into(),
            comm: "db".into(),
            ..Default::default()
        });
        let l = line(&h, &b, 0, TimeFormat::Relative);
        assert!(l.starts_with("0.000000500 "), "{l}");
        assert!(
            l.contains("openat dirfd=AT_FDCWD path=/nope flags=O_WRONLY|O_CREAT|O_CLOEXEC mode=00 = ENOENT"),
            "{l}"
        );
        let l = line(&h, &b, 1, TimeFormat::Monotonic);
        assert!(l.contains("pread64 fd=3(<file>/data) bytes=4096 off=8192 = 4096 (4.00KiB)"), "{l}");
        let j = json(&h, &b, 0);
        assert_eq!(j["res"], "ENOENT");
        assert_eq!(j["type"], "openat");
    }

    #[test]
    fn block_line() {
        let h = TraceHeader {
            block_devices: vec![BlockDevice { dev: 7 << 20, name: "loop0".into(), ..Default::default() }],
            ..Default::default()
        };
        let mut b = EventBatch::default();
        b.push(&Event {
            kind: 1,
            nr: 1,
            flags: Rwbs::SYNC,
            dev: 7 << 20,
            off: 2048,
            bytes: 4096,
            lat: 90_000,
            ..Default::default()
        });
        let l = line(&h, &b, 0, TimeFormat::Monotonic);
        assert!(l.contains("block_write dev=loop0(7:0) sector=2048 bytes=4096 (4.00KiB) rwbs=WS"), "{l}");
        assert_eq!(json(&h, &b, 0)["disk"], "loop0");
    }

    #[test]
    fn flags() {
        assert_eq!(open_flags(0), "O_RDONLY");
        assert_eq!(open_flags(0o4010002), "O_RDWR|O_SYNC");
        assert_eq!(open_flags(0o40001), "O_WRONLY|O_DIRECT");
    }
}
