//! Hand-built recordings for the replay tests: a builder that produces the events
//! `latscope record` would, one syscall at a time.
#![allow(dead_code)]

use latscope_event::{syscall_nr, Event, EventBatch, FdInfo, Mount, ProcessInfo, TraceHeader};
use latscope_replay::{Op, OpKind, Plan, TraceEvents};

pub const O_RDONLY: u32 = 0;
pub const O_WRONLY: u32 = 1;
pub const O_RDWR: u32 = 2;
pub const O_CREAT: u32 = 0o100;
pub const O_EXCL: u32 = 0o200;
pub const O_TRUNC: u32 = 0o1000;
pub const O_APPEND: u32 = 0o2000;
pub const O_DIRECTORY: u32 = 0o200000;
pub const O_CLOEXEC: u32 = 0o2000000;
pub const AT_FDCWD: i32 = -100;

/// Builds a recording event by event; time advances 1 µs per event.
pub struct Rec {
    pub header: TraceHeader,
    pub batch: EventBatch,
    pub ts: u64,
}

impl Default for Rec {
    fn default() -> Self {
        Self::new()
    }
}

impl Rec {
    pub fn new() -> Rec {
        let m = |mp: &str, fs: &str| Mount { mount_point: mp.into(), fstype: fs.into(), ..Default::default() };
        let header = TraceHeader {
            format_version: 1,
            syscalls: "io".into(),
            mounts: vec![
                m("/", "ext4"),
                m("/proc", "proc"),
                m("/sys", "sysfs"),
                m("/dev", "devtmpfs"),
                m("/tmp", "tmpfs"),
            ],
            processes: vec![ProcessInfo { pid: 100, cwd: "/w".into(), ..Default::default() }],
            ..Default::default()
        };
        Rec { header, batch: EventBatch::default(), ts: 1_000_000 }
    }

    pub fn snapshot_fd(&mut self, pid: u32, fd: i32, path: &str, fd_type: u8) {
        self.header.fds.push(FdInfo { pid, fd, path: path.into(), fd_type, dev: 1, ino: 1, pos: -1, flags: 0 });
    }

    /// An fd of the snapshot whose position and open flags were read from fdinfo.
    pub fn snapshot_fd_at(&mut self, pid: u32, fd: i32, path: &str, pos: i64, flags: u32) {
        self.header.fds.push(FdInfo { pid, fd, path: path.into(), fd_type: 1, dev: 1, ino: 1, pos, flags });
    }

    /// A syscall by `tid` of process `pid`.
    pub fn sys(&mut self, pid: u32, tid: u32, name: &str, f: impl FnOnce(&mut Event)) -> &mut Self {
        let mut e = Event {
            kind: 0,
            ts: self.ts,
            lat: 500,
            pid,
            tid,
            nr: syscall_nr(name).unwrap_or_else(|| panic!("syscall {name}")),
            fd: -1,
            off: -1,
            dirfd: -1,
            comm: "w".into(),
            ..Default::default()
        };
        f(&mut e);
        self.ts += 1000;
        self.batch.push(&e);
        self
    }

    pub fn proc(&mut self, pid: u32, tid: u32, op: u16, ret: i64, path: &str) -> &mut Self {
        let e = Event {
            kind: 2,
            ts: self.ts,
            pid,
            tid,
            nr: op,
            ret,
            fd: -1,
            off: -1,
            dirfd: -1,
            path: path.into(),
            ..Default::default()
        };
        self.ts += 1000;
        self.batch.push(&e);
        self
    }

    pub fn open(&mut self, tid: u32, path: &str, flags: u32, ret: i64) -> &mut Self {
        self.open_p(100, tid, path, flags, ret)
    }
    pub fn open_p(&mut self, pid: u32, tid: u32, path: &str, flags: u32, ret: i64) -> &mut Self {
        let dir = flags & O_DIRECTORY != 0;
        self.sys(pid, tid, "openat", |e| {
            e.path = path.into();
            e.flags = flags;
            e.mode = 0o644;
            e.ret = ret;
            e.fd = if ret >= 0 { ret as i32 } else { -1 };
            e.dirfd = AT_FDCWD;
            e.fd_type = if ret >= 0 {
                if dir {
                    2
                } else {
                    1
                }
            } else {
                0
            };
        })
    }
    #[allow(clippy::too_many_arguments)]
    pub fn fdop(&mut self, pid: u32, tid: u32, name: &str, fd: i32, bytes: u64, off: i64, ret: i64) -> &mut Self {
        self.sys(pid, tid, name, |e| {
            e.fd = fd;
            e.bytes = bytes;
            e.off = off;
            e.ret = ret;
            e.fd_type = 1;
        })
    }
    pub fn read(&mut self, tid: u32, fd: i32, bytes: u64, pos: i64, ret: i64) -> &mut Self {
        self.fdop(100, tid, "read", fd, bytes, pos, ret)
    }
    pub fn write(&mut self, tid: u32, fd: i32, bytes: u64, pos: i64, ret: i64) -> &mut Self {
        self.fdop(100, tid, "write", fd, bytes, pos, ret)
    }
    pub fn pread(&mut self, tid: u32, fd: i32, bytes: u64, off: i64, ret: i64) -> &mut Self {
        self.fdop(100, tid, "pread64", fd, bytes, off, ret)
    }
    pub fn pwrite(&mut self, tid: u32, fd: i32, bytes: u64, off: i64, ret: i64) -> &mut Self {
        self.fdop(100, tid, "pwrite64", fd, bytes, off, ret)
    }
    pub fn close(&mut self, tid: u32, fd: i32) -> &mut Self {
        self.fdop(100, tid, "close", fd, 0, -1, 0)
    }
    pub fn path_op(&mut self, tid: u32, name: &str, path: &str, ret: i64) -> &mut Self {
        self.sys(100, tid, name, |e| {
            e.path = path.into();
            e.ret = ret;
            e.dirfd = AT_FDCWD;
        })
    }
    pub fn rename(&mut self, tid: u32, from: &str, to: &str) -> &mut Self {
        self.sys(100, tid, "rename", |e| {
            e.path = from.into();
            e.path2 = to.into();
        })
    }

    pub fn events(&self) -> TraceEvents {
        TraceEvents {
            header: self.header.clone(),
            events: self.batch.clone(),
            selected: vec![true; self.batch.len()],
            complete: true,
            ..Default::default()
        }
    }
}

/// The operations of a plan as (thread index, op), waits left out.
pub fn ops(plan: &Plan) -> Vec<(usize, Op)> {
    let mut v = Vec::new();
    for t in 0..plan.threads.len() {
        for op in plan.thread_ops(t) {
            if op.kind != OpKind::Wait {
                v.push((t, *op));
            }
        }
    }
    v
}

/// The waits before the first operation of `kind` on `path` (a rel path) in thread `t`.
pub fn waits_before(plan: &Plan, t: usize, kind: OpKind, nth: usize) -> Vec<(u32, u64)> {
    let body = plan.thread_ops(t);
    let mut seen = 0;
    let mut pending = Vec::new();
    for op in body {
        if op.kind == OpKind::Wait {
            pending.push((op.slot, op.size));
            continue;
        }
        if op.kind == kind {
            if seen == nth {
                return pending;
            }
            seen += 1;
        }
        pending.clear();
    }
    panic!("no {kind:?} #{nth} in thread {t}");
}

pub fn rel(plan: &Plan, path: u32) -> String {
    plan.paths.get(path).map(|p| p.rel.clone()).unwrap_or_default()
}

/// The starting tree as (rel, kind, size).
pub fn init_tree(plan: &Plan) -> Vec<(String, latscope_replay::InitKind, u64)> {
    plan.init.iter().map(|e| (rel(plan, e.path), e.kind, e.size)).collect()
}
