//! A trace builder for the replay tests: one syscall per call, 1 ms apart.
#![allow(dead_code)]

use latscope_event::{syscall_nr, Event, EventBatch, Mount, TraceHeader};
use latscope_trace::{Summary, TraceWriter};
use std::path::Path;

/// A trace builder: one syscall per call, 1 ms apart.
pub struct T {
    pub b: EventBatch,
    pub ts: u64,
}

impl T {
    pub fn new() -> T {
        T { b: EventBatch::default(), ts: 1_000_000_000 }
    }
    pub fn sys(&mut self, tid: u32, name: &str, f: impl FnOnce(&mut Event)) -> &mut Self {
        let mut e = Event {
            kind: 0,
            ts: self.ts,
            lat: 1000,
            pid: 100,
            tid,
            nr: syscall_nr(name).unwrap(),
            fd: -1,
            off: -1,
            dirfd: -100,
            comm: "app".into(),
            ..Default::default()
        };
        f(&mut e);
        self.ts += 1_000_000;
        self.b.push(&e);
        self
    }
    pub fn open(&mut self, path: &str, flags: u32, ret: i64, fd_type: u8) -> &mut Self {
        self.sys(100, "openat", |e| {
            e.path = path.into();
            e.flags = flags;
            e.mode = 0o644;
            e.ret = ret;
            e.fd = ret as i32;
            e.fd_type = fd_type;
        })
    }
    pub fn fdop(&mut self, name: &str, fd: i32, bytes: u64, off: i64, ret: i64) -> &mut Self {
        self.sys(100, name, |e| {
            e.fd = fd;
            e.bytes = bytes;
            e.off = off;
            e.ret = ret;
            e.fd_type = 1;
        })
    }
    pub fn write(&self, path: &Path) {
        let m = |mp: &str, fs: &str| Mount { mount_point: mp.into(), fstype: fs.into(), ..Default::default() };
        let h = TraceHeader {
            format_version: 1,
            syscalls: "io".into(),
            mounts: vec![m("/", "ext4"), m("/proc", "proc"), m("/dev", "devtmpfs")],
            ..Default::default()
        };
        let mut w = TraceWriter::create(path, &h).unwrap();
        w.write_batch(&self.b, 0).unwrap();
        w.finish(Summary { events: self.b.len() as u64, ..Default::default() }).unwrap();
    }
}
