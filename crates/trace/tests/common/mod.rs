//! Shared helpers of the integration tests: deterministic random events and headers.
#![allow(dead_code)]

use std::path::PathBuf;

use latscope_event::{BlockDevice, Event, EventBatch, FdInfo, Mount, ProcessInfo, TraceHeader, TRACE_FORMAT_VERSION};

/// A small deterministic PRNG (xorshift64*), so tests need no extra crate.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len() as u64) as usize]
    }
}

pub const STRINGS: &[&str] = &[
    "",
    "cat",
    "/etc/passwd",
    "/tmp/ünïcödé/文件.txt",
    "emoji 🚀 path",
    "a/very/long/path/that/goes/on/and/on/for/a/while/to/make/it/longer/than/sixty/four/bytes.dat",
    "kworker/0:1H",
];

/// `n` random events with every field set, including unicode and empty strings.
pub fn random_batch(rng: &mut Rng, n: usize) -> EventBatch {
    let mut b = EventBatch::with_capacity(n);
    for _ in 0..n {
        let e = Event {
            kind: rng.below(3) as u8,
            ts: rng.next() >> 8,
            lat: rng.below(1_000_000),
            pid: rng.below(1 << 22) as u32,
            tid: rng.next() as u32,
            uid: rng.below(70000) as u32,
            nr: rng.below(450) as u16,
            ret: rng.next() as i64,
            fd: rng.next() as i32,
            fd_type: rng.below(12) as u8,
            dev: rng.next() as u32,
            ino: rng.next(),
            bytes: rng.next(),
            off: rng.next() as i64,
            flags: rng.next() as u32,
            mode: rng.next() as u32,
            dirfd: rng.next() as i32,
            addr: rng.next(),
            cgroup: rng.next(),
            qtime: rng.next(),
            off2: rng.next() as i64,
            cpu: rng.below(1024) as u16,
            comm: rng.pick(STRINGS).to_string(),
            path: rng.pick(STRINGS).to_string(),
            path2: rng.pick(STRINGS).to_string(),
        };
        b.push(&e);
    }
    b
}

/// A header with every part filled in.
pub fn sample_header() -> TraceHeader {
    TraceHeader {
        format_version: TRACE_FORMAT_VERSION,
        latscope_version: "0.1.0-test".into(),
        hostname: "höst-1".into(),
        kernel: "6.8.0-test".into(),
        machine: "x86_64".into(),
        cpus: 2,
        boot_time_ns: 1_700_000_000_000_000_000,
        realtime_offset_ns: 1_699_999_000_000_000_000,
        start_ns: 123_456_789,
        command_line: vec!["latscope".into(), "record".into(), "--".into(), "ls".into()],
        syscalls: "all".into(),
        block: true,
        filter: Some("lat > 1ms".into()),
        mounts: vec![Mount {
            dev: (253 << 20) | 1,
            mount_point: "/".into(),
            fstype: "ext4".into(),
            source: "/dev/vda1".into(),
            options: "rw,relatime".into(),
        }],
        block_devices: vec![BlockDevice {
            dev: (253 << 20),
            name: "vda".into(),
            size_bytes: 10 << 30,
            scheduler: Some("mq-deadline".into()),
            rotational: false,
            parent: None,
        }],
        processes: vec![ProcessInfo {
            pid: 1,
            ppid: 0,
            comm: "init".into(),
            exe: "/sbin/init".into(),
            uid: 0,
            cmdline: "/sbin/init splash".into(),
            cwd: "/".into(),
        }],
        fds: vec![FdInfo {
            pid: 1,
            fd: 0,
            path: "/dev/null".into(),
            fd_type: 1,
            dev: 5,
            ino: 6,
            pos: 0,
            flags: 0o2100002,
        }],
        users: [(0, "root".to_string()), (1000, "ünï".to_string())].into_iter().collect(),
        capture: vec!["replay-v1".into()],
    }
}

/// A temporary directory, removed when dropped.
pub struct TmpDir(PathBuf);

impl std::ops::Deref for TmpDir {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TmpDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A fresh temporary directory for one test.
pub fn tmpdir(name: &str) -> TmpDir {
    let d = std::env::temp_dir().join(format!("latscope-trace-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    TmpDir(d)
}

/// Concatenate batches (via rows: slow, tests only).
pub fn concat(batches: &[EventBatch]) -> EventBatch {
    let mut out = EventBatch::with_capacity(0);
    for b in batches {
        for i in 0..b.len() {
            out.push(&b.get(i));
        }
    }
    out
}
