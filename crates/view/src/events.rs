//! One line per event, like sysdig's default output, or one JSON object per event, in the order
//! of their start (or end) time ([`Reorder`]).

use latscope_event::syscalls::desc;
use latscope_event::units::{fmt_bytes, fmt_ns};
use latscope_event::{
    args, dev_major_minor, format_result, op_name, BlockOp, EventBatch, EventKind, FdType, ProcOp, Rwbs, TraceHeader,
};
use serde_json::{json, Map, Value};
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
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

/// One event as a text line, with control characters escaped ([`crate::text::clean`]).
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
            s.push_str(&op_name(b.kind[i], b.nr[i]));
            let at = s.len();
            s.push(' ');
            let _ = args::write_syscall_args(&mut s, b, i);
            if s.len() == at + 1 {
                s.truncate(at); // no arguments: no second space
            }
            let _ = write!(s, " = {}", format_result(b.ret[i]));
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
    // Names and paths come from the traced system: no control character reaches the terminal.
    match crate::text::clean(&s) {
        std::borrow::Cow::Borrowed(_) => s,
        std::borrow::Cow::Owned(c) => c,
    }
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
    m.insert("gid".into(), json!(b.gid[i]));
    // As sysdig's user.loginuid: -1 when unset.
    m.insert("loginuid".into(), json!(if b.loginuid[i] == u32::MAX { -1 } else { i64::from(b.loginuid[i]) }));
    m.insert("tty".into(), json!(b.tty[i]));
    m.insert("vpid".into(), json!(b.vpid[i]));
    m.insert("vtid".into(), json!(b.vtid[i]));
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
            // The flags, modes and addresses as the event line prints them (the raw columns
            // above hold the numbers; a pointer the probes do not follow is left out here).
            let name = latscope_event::syscall_name(b.nr[i]).unwrap_or("");
            let decoded: Map<String, Value> = latscope_event::argnames::decoded(name, b.flags[i], b.mode[i], b.addr[i])
                .into_iter()
                .map(|(k, v)| (k.to_string(), json!(v)))
                .collect();
            m.insert("args".into(), Value::Object(decoded));
            // The file's device as block requests spell theirs (`major:minor`); 0 (no file) is null.
            let (ma, mi) = dev_major_minor(b.dev[i]);
            m.insert("dev".into(), if b.dev[i] == 0 { Value::Null } else { json!(format!("{ma}:{mi}")) });
            m.insert("ino".into(), json!(b.ino[i]));
            if let Some(w) = crate::why::json(h, b, i) {
                m.insert("why".into(), w);
            }
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

/// Which time events are printed in the order of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortBy {
    /// When the call or request began (the time printed).
    Start,
    /// When it completed.
    End,
}

/// One held event: its key, its arrival number (ties keep arrival order) and what is printed.
struct Held<T> {
    key: u64,
    seq: u64,
    item: T,
}

impl<T> PartialEq for Held<T> {
    fn eq(&self, o: &Self) -> bool {
        (self.key, self.seq) == (o.key, o.seq)
    }
}
impl<T> Eq for Held<T> {}
impl<T> PartialOrd for Held<T> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<T> Ord for Held<T> {
    fn cmp(&self, o: &Self) -> Ordering {
        (self.key, self.seq).cmp(&(o.key, o.seq))
    }
}

/// Puts events back in the order of their start (or end) time, with bounded memory.
///
/// Recordings hold events in the order they completed, and the syscall and block request streams
/// are interleaved block by block, so a long call, or a block of the other stream, arrives after
/// events that began later. `Reorder` holds each event until the latest completion seen (the
/// watermark) is `window` past its key, or until it holds `max_held` events (then the earliest
/// goes out): every event whose key is within the window of its arrival comes out in order.
/// An event whose key is before that of one already released (a call longer than the window
/// minus the interleaving, a few seconds' worth) comes out at once, marked late.
pub struct Reorder<T> {
    by: SortBy,
    window_ns: u64,
    max_held: usize,
    held: BinaryHeap<Reverse<Held<T>>>,
    seq: u64,
    watermark: u64,
    released: Option<u64>,
    late: u64,
}

impl<T> Reorder<T> {
    /// Orders by `by`, holding events until the watermark is `window_ns` past them, at most
    /// `max_held` at a time (at least 1).
    pub fn new(by: SortBy, window_ns: u64, max_held: usize) -> Self {
        Reorder {
            by,
            window_ns,
            max_held: max_held.max(1),
            held: BinaryHeap::new(),
            seq: 0,
            watermark: 0,
            released: None,
            late: 0,
        }
    }

    /// Takes an event that began at `start` and ended at `end`; calls `out(item, late)` for every
    /// event that can go out now, in order.
    pub fn push<E>(
        &mut self,
        start: u64,
        end: u64,
        item: T,
        out: &mut impl FnMut(T, bool) -> Result<(), E>,
    ) -> Result<(), E> {
        let key = match self.by {
            SortBy::Start => start,
            SortBy::End => end,
        };
        self.watermark = self.watermark.max(end);
        if self.released.is_some_and(|r| key < r) {
            self.late += 1;
            return out(item, true);
        }
        self.seq += 1;
        self.held.push(Reverse(Held { key, seq: self.seq, item }));
        let due = self.watermark.saturating_sub(self.window_ns);
        while let Some(Reverse(top)) = self.held.peek() {
            if top.key > due && self.held.len() <= self.max_held {
                break;
            }
            let Some(Reverse(h)) = self.held.pop() else { break };
            self.released = Some(h.key);
            out(h.item, false)?;
        }
        Ok(())
    }

    /// Lets every held event out, in order.
    pub fn finish<E>(&mut self, out: &mut impl FnMut(T, bool) -> Result<(), E>) -> Result<(), E> {
        while let Some(Reverse(h)) = self.held.pop() {
            self.released = Some(h.key);
            out(h.item, false)?;
        }
        Ok(())
    }

    /// Events that came out late (out of order).
    pub fn late(&self) -> u64 {
        self.late
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use latscope_event::{syscall_nr, BlockDevice, Event};

    /// Events as (start, end) in the order they arrive, through a reorder window; returns
    /// (start, late) as they come out.
    fn reorder(by: SortBy, window: u64, max: usize, events: &[(u64, u64)]) -> Vec<(u64, bool)> {
        let mut r = Reorder::new(by, window, max);
        let mut got = Vec::new();
        let mut out = |x: (u64, u64), late: bool| {
            got.push((if by == SortBy::Start { x.0 } else { x.1 }, late));
            Ok::<(), ()>(())
        };
        for &(s, e) in events {
            r.push(s, e, (s, e), &mut out).unwrap();
        }
        r.finish(&mut out).unwrap();
        got
    }

    #[test]
    fn reorder_sorts_within_the_window_and_marks_what_is_longer() {
        // Completion order of two streams interleaved: syscalls [0..10] ms, then block requests
        // that began earlier, calls every 100 ms to 9.9 s, then an 11 s call that began at the
        // very start.
        let mut ev: Vec<(u64, u64)> = (0..10).map(|k| (k * 1_000_000 + 500_000, (k + 1) * 1_000_000)).collect();
        ev.extend((0..5).map(|k| (k * 1_500_000, k * 1_500_000 + 100_000)));
        ev.extend((1..100).map(|k| (k * 100_000_000, k * 100_000_000 + 1000)));
        ev.push((10, 11_000_000_000));
        ev.extend((0..3).map(|k| (11_000_000_000 + k, 11_000_000_100 + k)));
        let got = reorder(SortBy::Start, 2_000_000_000, 1000, &ev);
        assert_eq!(got.len(), ev.len());
        let starts: Vec<u64> = got.iter().map(|g| g.0).collect();
        let mut sorted = starts.clone();
        sorted.sort_unstable();
        // Everything is in start order except the 10 s call, longer than the window: it comes
        // out as soon as it arrives, after events that began later, marked late.
        let late: Vec<_> = got.iter().filter(|g| g.1).collect();
        assert_eq!(late, vec![&(10, true)]);
        let on_time: Vec<u64> = got.iter().filter(|g| !g.1).map(|g| g.0).collect();
        assert!(on_time.windows(2).all(|w| w[0] <= w[1]), "{on_time:?}");
        // A window longer than the call: everything in order, nothing late.
        let got = reorder(SortBy::Start, 20_000_000_000, 1000, &ev);
        assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), sorted);
        assert!(got.iter().all(|g| !g.1));
        // By end time.
        let got = reorder(SortBy::End, 2_000_000_000, 1000, &ev);
        assert!(got.windows(2).all(|w| w[0].0 <= w[1].0) && got.iter().all(|g| !g.1), "{got:?}");
        let got = reorder(SortBy::Start, u64::MAX, 3, &[(5, 6), (4, 7), (3, 8), (2, 9), (1, 10)]);
        // Memory is bounded: with room for 3, the earliest held goes out when a fourth comes, and
        // one that began before it is late.
        assert_eq!(got, vec![(2, false), (1, true), (3, false), (4, false), (5, false)]);
    }

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
    fn lines_have_no_dangling_equals_nor_double_spaces_nor_control_characters() {
        let h = TraceHeader::default();
        let mut b = EventBatch::default();
        let ev = |nr: &str, path: &str, comm: &str| Event {
            kind: 0,
            nr: syscall_nr(nr).unwrap(),
            ret: 42,
            fd: -1,
            dirfd: 0,
            flags: 0x1000,
            comm: comm.into(),
            path: path.into(),
            ..Default::default()
        };
        b.push(&ev("getpid", "", "sh"));
        b.push(&ev("newfstatat", "", "sh"));
        b.push(&ev("openat", "/tmp/a\x1b[2Jb\nfake 12:00:00 line", "evil\x1b]0;x\x07"));
        b.push(&Event { kind: 2, nr: ProcOp::Exec as u16, path: "".into(), comm: "x".into(), ..Default::default() });
        let lines: Vec<String> = (0..b.len()).map(|i| line(&h, &b, i, TimeFormat::Relative)).collect();
        assert!(lines[0].ends_with(" getpid = 42"), "{}", lines[0]);
        assert!(lines[1].contains(" newfstatat dirfd=0 path=\"\" flags=AT_EMPTY_PATH = 42"), "{}", lines[1]);
        assert!(
            lines[2].contains("path=/tmp/a\\x1b[2Jb\\nfake 12:00:00 line") && lines[2].contains("evil\\x1b]0;x\\x07"),
            "{}",
            lines[2]
        );
        assert!(lines[3].ends_with("proc_exec path=\"\""), "{}", lines[3]);
        for l in &lines {
            let after_pid = &l[l.find('/').unwrap()..];
            let op = after_pid.trim_start_matches(|c: char| c != ' ').trim_start();
            assert!(!op.contains("  ") && !op.contains("= =") && !op.ends_with('='), "{l}");
            assert!(!l.chars().any(|c| c.is_control()), "{l:?}");
        }
        // JSON keeps the bytes as they are, escaped by JSON's rules.
        let j = serde_json::to_string(&json(&h, &b, 2)).unwrap();
        assert!(j.contains("\\u001b[2Jb\\nfake") && !j.contains('\x1b'), "{j}");
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
