//! Synthetic traces for tests, benchmarks and examples.
//!
//! Everything here is deterministic: the same arguments give the same events, on every machine
//! and in every build, so that a test can name a seed and a benchmark figure can be compared with
//! one measured months before.
//!
//! * [`Rng`]: a seeded pseudo-random generator (splitmix64), for tests that draw their own values.
//! * [`random_batch`]: events with every field drawn at random (strings from [`STRINGS`]: empty,
//!   unicode, long), for round trips; [`sample_header`]: a header with every part filled in.
//! * [`EventMix`]: events shaped like a server's (mostly syscalls with small integers, ~30 % with
//!   a path from a set of 40, a few comm names), with a [`Latency`] distribution: what the trace
//!   benchmarks write and read.
//! * [`BusyServer`]: a whole trace of a busy server (read, pread64, write, openat, close from a
//!   few processes, bimodal latencies, a block request every N events), laid out as
//!   `latscope record` writes it or with both kinds mixed in one block ([`Layout`]): what the
//!   view benchmarks (`bench/views.sh`, through the `synth_trace` example) read.
//! * [`write_events`]: hand-made events (a test's ground truth) written as a trace.
//! * [`Steady`]: a steady workload of known latency distributions, seeded: two seeds are two
//!   recordings of one workload (an A/A comparison), a delay added to one call or a slower disk
//!   a known change (A/B): what the tests of `latscope diff` compare.
//!
//! [`EventMix`] and [`BusyServer`] keep the generators they were first measured with
//! (xorshift64* and xorshift), so that the traces they write, and the figures measured on them,
//! stay the same.
//!
//! ```
//! use latscope_trace::synth::{random_batch, BusyServer, Layout, Rng};
//!
//! let a = random_batch(&mut Rng::new(7), 100);
//! assert_eq!(a, random_batch(&mut Rng::new(7), 100));
//!
//! let server = BusyServer { events: 1000, block_every: 10, layout: Layout::ByKind };
//! let mut events = 0;
//! server.for_each_batch(|b| -> Result<(), ()> {
//!     events += b.len();
//!     Ok(())
//! }).unwrap();
//! assert_eq!(events, 1000);
//! ```

use std::path::Path;

use latscope_event::{
    BlockDevice, Event, EventBatch, EventKind, FdInfo, Mount, ProcessInfo, TraceHeader, TRACE_FORMAT_VERSION,
};

use crate::{Summary, TraceError, TraceWriter};

/// A seeded pseudo-random generator: splitmix64 (Steele, Lea and Flood, "Fast splittable
/// pseudorandom number generators", OOPSLA 2014), small, fast and good enough for test data.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// The generator started from `seed` (any value, 0 included).
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0). Slightly biased for `n` far from a power of two,
    /// which test data does not mind.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// An index in `0..len` (0 when `len` is 0).
    pub fn index(&mut self, len: usize) -> usize {
        self.below(len as u64) as usize
    }

    /// Log-uniform in `2^lo .. 2^hi` (`lo < hi`): 2^e plus a number below 2^e, for e uniform in
    /// `lo..hi`; the shape of latencies.
    pub fn log_uniform(&mut self, lo: u32, hi: u32) -> u64 {
        let e = lo + self.below(u64::from(hi - lo)) as u32;
        (1u64 << e) + self.below(1u64 << e)
    }

    /// One element of `v`, which must not be empty.
    pub fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.index(v.len())]
    }
}

/// The strings [`random_batch`] draws `comm`, `path` and `path2` from: empty, ASCII, unicode,
/// emoji, longer than 64 bytes, with a slash.
pub const STRINGS: &[&str] = &[
    "",
    "cat",
    "/etc/passwd",
    "/tmp/ünïcödé/文件.txt",
    "emoji 🚀 path",
    "a/very/long/path/that/goes/on/and/on/for/a/while/to/make/it/longer/than/sixty/four/bytes.dat",
    "kworker/0:1H",
];

/// `n` events with every field drawn from `rng` over its whole range (kinds 0 to 2), strings
/// from [`STRINGS`]. The events are not plausible (a `ts` is not after the one before): they
/// exercise encoding, not views.
pub fn random_batch(rng: &mut Rng, n: usize) -> EventBatch {
    let mut b = EventBatch::with_capacity(n);
    for _ in 0..n {
        let e = Event {
            kind: rng.below(3) as u8,
            ts: rng.next_u64() >> 8,
            lat: rng.below(1_000_000),
            pid: rng.below(1 << 22) as u32,
            tid: rng.next_u64() as u32,
            uid: rng.below(70000) as u32,
            nr: rng.below(450) as u16,
            ret: rng.next_u64() as i64,
            fd: rng.next_u64() as i32,
            fd_type: rng.below(12) as u8,
            dev: rng.next_u64() as u32,
            ino: rng.next_u64(),
            bytes: rng.next_u64(),
            off: rng.next_u64() as i64,
            flags: rng.next_u64() as u32,
            mode: rng.next_u64() as u32,
            dirfd: rng.next_u64() as i32,
            addr: rng.next_u64(),
            cgroup: rng.next_u64(),
            qtime: rng.next_u64(),
            off2: rng.next_u64() as i64,
            cpu: rng.below(1024) as u16,
            why_cpu: rng.next_u64(),
            why_runq: rng.next_u64(),
            why_io: rng.next_u64(),
            why_lock: rng.next_u64(),
            why_ipc: rng.next_u64(),
            why_timer: rng.next_u64(),
            why_fault: rng.next_u64(),
            why_other: rng.next_u64(),
            why_unknown: rng.next_u64(),
            waker_ctx: rng.below(4) as u8,
            waker_tid: rng.next_u64() as u32,
            waker_comm_lo: rng.next_u64(),
            waker_comm_hi: rng.next_u64(),
            runq_tid: rng.next_u64() as u32,
            runq_cpu: rng.below(1024) as u16,
            wake_dev: rng.next_u64() as u32,
            wake_sector: rng.next_u64(),
            kstack: rng.next_u64() as u32,
            ustack: rng.next_u64() as u32,
            gid: rng.next_u64() as u32,
            loginuid: rng.next_u64() as u32,
            tty: rng.next_u64() as u32,
            vpid: rng.next_u64() as u32,
            vtid: rng.next_u64() as u32,
            waker_wait_part: rng.below(9) as u8,
            waker_wait_ns: rng.next_u64(),
            wake_held_ns: rng.next_u64(),
            wake_queue_ns: rng.next_u64(),
            wake_device_ns: rng.next_u64(),
            fault_addr: rng.next_u64(),
            fault_off: rng.next_u64() as i64,
            wait_start: rng.next_u64(),
            wait_end: rng.next_u64(),
            wake_flags: rng.below(16) as u8,
            lock_kind: rng.below(6) as u8,
            lock_addr: rng.next_u64(),
            lock_op: rng.next_u64() as u32,
            lock_word: rng.next_u64() as u32,
            lock_owner: rng.next_u64() as u32,
            lock_start: rng.next_u64() as i64,
            lock_len: rng.next_u64() as i64,
            waker_ustack: rng.next_u64() as u32,
            waker_wait_dev: rng.next_u64() as u32,
            off_count: rng.next_u64() as u16,
            off0_part: rng.below(9) as u8,
            off0_start: rng.next_u64(),
            off0_end: rng.next_u64(),
            off1_part: rng.below(9) as u8,
            off1_start: rng.next_u64(),
            off1_end: rng.next_u64(),
            off2_part: rng.below(9) as u8,
            off2_start: rng.next_u64(),
            off2_end: rng.next_u64(),
            off3_part: rng.below(9) as u8,
            off3_start: rng.next_u64(),
            off3_end: rng.next_u64(),
            off4_part: rng.below(9) as u8,
            off4_start: rng.next_u64(),
            off4_end: rng.next_u64(),
            off5_part: rng.below(9) as u8,
            off5_start: rng.next_u64(),
            off5_end: rng.next_u64(),
            off6_part: rng.below(9) as u8,
            off6_start: rng.next_u64(),
            off6_end: rng.next_u64(),
            off7_part: rng.below(9) as u8,
            off7_start: rng.next_u64(),
            off7_end: rng.next_u64(),
            comm: rng.pick(STRINGS).to_string(),
            path: rng.pick(STRINGS).to_string(),
            path2: rng.pick(STRINGS).to_string(),
            fault_path: rng.pick(STRINGS).to_string(),
        };
        b.push(&e);
    }
    b
}

/// A header with every part filled in (a mount, a block device, a process, an open file, user
/// names, non-ASCII text), as a recording writes one.
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
        cgroups: Vec::new(),
        groups: [(0, "root".to_string()), (1000, "ünï".to_string())].into_iter().collect(),
        flight: None,
        truncated: Default::default(),
    }
}

/// Writes `events` as a trace at `path` (replacing it, as [`TraceWriter::create`] does) in
/// blocks of 64 Ki events and closes it with `summary` (its counts are the writer's).
pub fn write_events(
    path: impl AsRef<Path>,
    header: &TraceHeader,
    events: &[Event],
    summary: Summary,
) -> Result<Summary, TraceError> {
    let mut w = TraceWriter::create(path, header)?;
    for chunk in events.chunks(BLOCK_EVENTS) {
        let mut b = EventBatch::with_capacity(chunk.len());
        for e in chunk {
            b.push(e);
        }
        w.write_batch(&b, 0)?;
    }
    w.finish(summary)
}

/// Events per block of the generated traces, as `latscope record` writes them.
const BLOCK_EVENTS: usize = 65_536;

/// xorshift64* (Vigna, "An experimental exploration of Marsaglia's xorshift generators,
/// scrambled", 2016): the generator [`EventMix`] was first measured with.
#[derive(Debug, Clone)]
struct XorShift64Star(u64);

impl XorShift64Star {
    fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// The latency distribution of [`EventMix`] events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Latency {
    /// Log-uniform from 256 ns to 8 ms: 2^e to 2^(e+1) ns, e uniform in 8..23 (the read bench).
    Wide,
    /// 200 ns plus up to 2^b ns, b uniform in 0..17: 200 ns to 65 us, mostly a few us (the
    /// write bench).
    Short,
}

impl Latency {
    fn draw(self, r: &mut XorShift64Star) -> u64 {
        match self {
            Latency::Wide => {
                let e = 8 + r.below(15);
                (1u64 << e) + r.below(1 << e)
            }
            Latency::Short => {
                let bits = r.below(17);
                200 + r.below(1 << bits)
            }
        }
    }
}

const MIX_COMMS: &[&str] = &["postgres", "nginx", "java", "node", "kworker/u4:2", "bash"];
const MIX_SYSCALLS: &[u16] = &[0, 1, 0, 1, 257, 3, 5, 202, 232, 45, 44, 9, 17, 18, 7];

/// Events shaped like a server's, batch after batch: 97 % syscalls, 2 % block requests, 1 %
/// process events; `ts` increasing by 0 to 2 us; 20 processes of a few comm names; ~30 % with
/// a path from a set of 40; every value drawn independently (a pessimistic case for compression:
/// recorded traces have runs). The same [`Latency`] gives the same events.
#[derive(Debug, Clone)]
pub struct EventMix {
    rng: XorShift64Star,
    ts: u64,
    latency: Latency,
    paths: Vec<String>,
}

impl EventMix {
    /// The events, starting at `ts` 1 s, with latencies drawn from `latency`.
    pub fn new(latency: Latency) -> EventMix {
        EventMix { rng: XorShift64Star(0x1234_5678_9abc_def1), ts: 1_000_000_000, latency, paths: Self::paths() }
    }

    /// The 40 paths events name.
    fn paths() -> Vec<String> {
        (0..40)
            .map(|i| match i % 4 {
                0 => format!("/var/lib/postgresql/16/main/base/16384/{}", 2600 + i),
                1 => format!("/usr/lib/x86_64-linux-gnu/lib{i}.so.6"),
                2 => format!("/srv/www/static/img/{i:04}.png"),
                _ => format!("/proc/{}/stat", 1000 + i),
            })
            .collect()
    }

    /// The next `n` events.
    pub fn batch(&mut self, n: usize) -> EventBatch {
        let rng = &mut self.rng;
        let mut b = EventBatch::with_capacity(n);
        for _ in 0..n {
            self.ts += rng.below(2000);
            let r = rng.below(100);
            let kind = if r < 97 {
                0
            } else if r < 99 {
                1
            } else {
                2
            };
            let pid = 1000 + rng.below(20) as u32;
            let with_path = rng.below(100) < 30;
            let fd = if rng.below(10) == 0 { -1 } else { rng.below(64) as i32 };
            let bytes = [0u64, 4096, 8192, 64, 512, 131072][rng.below(6) as usize];
            let lat = self.latency.draw(rng);
            let ev = Event {
                kind,
                ts: self.ts,
                lat,
                pid,
                tid: pid + rng.below(4) as u32,
                uid: if pid.is_multiple_of(3) { 0 } else { 1000 },
                nr: MIX_SYSCALLS[rng.below(MIX_SYSCALLS.len() as u64) as usize],
                ret: if rng.below(20) == 0 { -11 } else { bytes as i64 },
                fd,
                fd_type: if fd < 0 { 0 } else { 1 + rng.below(3) as u8 },
                dev: if fd < 0 { 0 } else { (253 << 20) | 1 },
                ino: if fd < 0 { 0 } else { 131072 + rng.below(500) },
                bytes,
                off: if rng.below(2) == 0 { -1 } else { (rng.below(1 << 16) * 4096) as i64 },
                flags: if rng.below(10) == 0 { 0o2000000 } else { 0 },
                mode: 0,
                dirfd: if with_path { -100 } else { -1 },
                addr: 0,
                cgroup: 4000 + (pid as u64 % 4),
                qtime: if kind == 1 { rng.below(100_000) } else { 0 },
                comm: MIX_COMMS[(pid % MIX_COMMS.len() as u32) as usize].to_string(),
                path: if with_path {
                    self.paths[rng.below(self.paths.len() as u64) as usize].clone()
                } else {
                    String::new()
                },
                path2: String::new(),
                off2: -1,
                cpu: (pid % 2) as u16,
                ..Default::default()
            };
            b.push(&ev);
        }
        b
    }
}

/// How [`BusyServer`] lays out its two kinds of events in blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Layout {
    /// As `latscope record` writes: syscalls and block requests in separate blocks, flushed
    /// together every 64 Ki events (block requests first).
    #[default]
    ByKind,
    /// Both kinds in the same blocks, in time order (as other writers or older latscope
    /// versions may lay them out).
    Mixed,
}

/// The trace of a busy server: syscalls (read, pread64, write, openat, close; 4 processes
/// "postgres", "nginx", "tar", "java" with 16 threads; 32 files) with a bimodal latency
/// distribution (80 % 0.3 to 3.3 us, 20 % 20 us to 2 ms), one block request (50 us to 5 ms, on
/// device 254:0 "vda") every `block_every` events, timestamps 2 us apart on average from
/// 5000 s. What `bench/views.sh` measures the views on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BusyServer {
    /// Events in the trace.
    pub events: u64,
    /// One block request every this many events (the first event is one); 0: none.
    pub block_every: u64,
    /// How the kinds share blocks.
    pub layout: Layout,
}

impl Default for BusyServer {
    /// 1 M events, a block request every 20, laid out by kind.
    fn default() -> Self {
        BusyServer { events: 1_000_000, block_every: 20, layout: Layout::ByKind }
    }
}

/// Monotonic ns of the first [`BusyServer`] event.
const BUSY_START_NS: u64 = 5_000_000_000_000;

impl BusyServer {
    /// The trace header: host "synthetic", all syscalls and block requests, device "vda".
    pub fn header(&self) -> TraceHeader {
        let start = BUSY_START_NS;
        TraceHeader {
            format_version: TRACE_FORMAT_VERSION,
            hostname: "synthetic".into(),
            start_ns: start,
            realtime_offset_ns: 1_700_000_000_000_000_000 - start as i64,
            syscalls: "all".into(),
            block: true,
            block_devices: vec![BlockDevice { dev: 254 << 20, name: "vda".into(), ..Default::default() }],
            ..Default::default()
        }
    }

    /// Hands the trace's blocks to `sink` in file order and returns the summary a writer should
    /// close the trace with (duration and end; the counts are the writer's). Stops at the first
    /// error of `sink`.
    pub fn for_each_batch<E>(&self, mut sink: impl FnMut(&EventBatch) -> Result<(), E>) -> Result<Summary, E> {
        let nrs: Vec<u16> = ["read", "pread64", "write", "openat", "close"]
            .iter()
            .map(|s| latscope_event::syscall_nr(s).expect("known syscall"))
            .collect();
        let comms = ["postgres", "nginx", "tar", "java"];
        // xorshift (Marsaglia, "Xorshift RNGs", 2003): the generator the views were first
        // measured with.
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mixed = self.layout == Layout::Mixed;
        let start = BUSY_START_NS;
        let mut t = start;
        let mut b = EventBatch::with_capacity(BLOCK_EVENTS);
        let mut blk = EventBatch::default(); // block requests, unless mixed
        for i in 0..self.events {
            t += rnd() % 4000;
            let r = rnd();
            let block = self.block_every > 0 && i % self.block_every == 0;
            let lat = if block {
                50_000 + r % 5_000_000
            } else if r % 10 < 8 {
                300 + (r >> 8) % 3_000
            } else {
                20_000 + (r >> 8) % 2_000_000
            };
            let k = (r >> 20) as usize;
            let to = if block && !mixed { &mut blk } else { &mut b };
            to.push(&Event {
                kind: if block { EventKind::Block as u8 } else { EventKind::Syscall as u8 },
                ts: t,
                lat,
                pid: 1000 + (k % 4) as u32,
                tid: 1000 + (k % 16) as u32,
                nr: if block { (k % 2) as u16 } else { nrs[k % nrs.len()] },
                ret: 4096,
                fd: if block { -1 } else { 3 + (k % 8) as i32 },
                fd_type: if block { 0 } else { 1 },
                dev: if block { 254 << 20 } else { 0 },
                bytes: 4096,
                off: ((r >> 12) % (1 << 30)) as i64,
                comm: comms[k % comms.len()].into(),
                path: if block { String::new() } else { format!("/data/file{}", k % 32) },
                ..Default::default()
            });
            if b.len() + blk.len() == BLOCK_EVENTS {
                for x in [&mut blk, &mut b] {
                    if !x.is_empty() {
                        sink(x)?;
                        x.clear();
                    }
                }
            }
        }
        for x in [&blk, &b] {
            if !x.is_empty() {
                sink(x)?;
            }
        }
        Ok(Summary { duration_ns: t - start + 1, end_ns: t, ..Default::default() })
    }

    /// Writes the trace at `path` (replacing it, as [`TraceWriter::create`] does) and returns
    /// its summary.
    pub fn write(&self, path: impl AsRef<Path>) -> Result<Summary, TraceError> {
        let mut w = TraceWriter::create(path, &self.header())?;
        let summary = self.for_each_batch(|b| w.write_batch(b, 0))?;
        w.finish(summary)
    }

    /// Writes the trace laid out as `record --why` writes one (its header says so): every
    /// syscall carries a breakdown (half on CPU, half lock) and was woken by the thread of the
    /// syscall before it, when that is another (the wake-ups the Perfetto export links as flows).
    pub fn write_why(&self, path: impl AsRef<Path>) -> Result<Summary, TraceError> {
        let mut header = self.header();
        header.command_line = vec!["latscope".into(), "record".into(), "--why".into()];
        let mut w = TraceWriter::create(path, &header)?;
        let mut prev = 0u32;
        let summary = self.for_each_batch(|b| {
            let mut b = b.clone();
            for i in 0..b.len() {
                if b.kind[i] == EventKind::Syscall as u8 {
                    b.why_cpu[i] = b.lat[i] / 2;
                    b.why_lock[i] = b.lat[i] - b.lat[i] / 2;
                    if prev != 0 && prev != b.tid[i] {
                        b.waker_ctx[i] = 1;
                        b.waker_tid[i] = prev;
                    }
                    prev = b.tid[i];
                }
            }
            w.write_batch(&b, 0)
        })?;
        w.finish(summary)
    }
}

/// One kind of call of a [`Steady`] workload: arrivals a Poisson process at `per_sec`, latency
/// lognormal with median `median_ns` and log standard deviation `sigma`, plus `delay_ns`.
#[derive(Debug, Clone, PartialEq)]
pub struct SteadyCall {
    /// The syscall (ignored for the disk: block reads).
    pub syscall: &'static str,
    /// Calls per second.
    pub per_sec: f64,
    /// Median latency before the delay (ns).
    pub median_ns: f64,
    /// Standard deviation of the log latency.
    pub sigma: f64,
    /// Added to every latency (ns): a known delay.
    pub delay_ns: f64,
}

impl SteadyCall {
    /// `syscall` at `per_sec`, lognormal around `median_ns` with `sigma`, no delay.
    pub fn new(syscall: &'static str, per_sec: f64, median_ns: f64, sigma: f64) -> SteadyCall {
        SteadyCall { syscall, per_sec, median_ns, sigma, delay_ns: 0.0 }
    }

    /// The `q` quantile of its latency (`z` the standard normal's `q` quantile).
    pub fn quantile_ns(&self, z: f64) -> f64 {
        self.median_ns * (self.sigma * z).exp() + self.delay_ns
    }
}

/// A steady workload with known latency distributions (see [`SteadyCall`]): process "app"
/// (pid 100) calling each syscall on its own file (`/data/<syscall>`), and block reads on disk
/// "vda" (254:0). Seeded: the same seed gives the same events; two seeds are two recordings of
/// one workload.
#[derive(Debug, Clone, PartialEq)]
pub struct Steady {
    /// The seed.
    pub seed: u64,
    /// Seconds recorded.
    pub secs: f64,
    /// The syscalls made.
    pub calls: Vec<SteadyCall>,
    /// Block requests, if any.
    pub disk: Option<SteadyCall>,
}

impl Steady {
    /// The trace header: host "steady", started at 1000 s.
    pub fn header(&self) -> TraceHeader {
        TraceHeader {
            format_version: TRACE_FORMAT_VERSION,
            hostname: "steady".into(),
            start_ns: 1_000_000_000_000,
            syscalls: "all".into(),
            block: self.disk.is_some(),
            block_devices: vec![BlockDevice { dev: 254 << 20, name: "vda".into(), ..Default::default() }],
            ..Default::default()
        }
    }

    /// The events, in time order.
    pub fn events(&self) -> Vec<Event> {
        let mut rng = Rng::new(self.seed);
        let start = self.header().start_ns;
        let span = (self.secs * 1e9) as u64;
        let mut out = Vec::new();
        let all = self.calls.iter().map(|c| (c, false)).chain(self.disk.iter().map(|c| (c, true)));
        for (k, (c, block)) in all.enumerate() {
            let mut t = 0.0f64;
            loop {
                let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                t += -(1.0 - u).ln() / c.per_sec * 1e9;
                if t >= span as f64 {
                    break;
                }
                let (u1, u2) = ((rng.next_u64() >> 11) as f64 + 0.5, (rng.next_u64() >> 11) as f64);
                let z = (-2.0 * (u1 / (1u64 << 53) as f64).ln()).sqrt()
                    * (2.0 * std::f64::consts::PI * u2 / (1u64 << 53) as f64).cos();
                let lat = (c.median_ns * (c.sigma * z).exp() + c.delay_ns).max(1.0) as u64;
                out.push(if block {
                    Event {
                        kind: EventKind::Block as u8,
                        ts: start + t as u64,
                        lat,
                        dev: 254 << 20,
                        bytes: 4096,
                        comm: "app".into(),
                        pid: 100,
                        tid: 100,
                        ..Default::default()
                    }
                } else {
                    Event {
                        kind: EventKind::Syscall as u8,
                        ts: start + t as u64,
                        lat,
                        nr: latscope_event::syscall_nr(c.syscall).expect("a known syscall"),
                        ret: 4096,
                        fd: 3 + k as i32,
                        fd_type: 1,
                        bytes: 4096,
                        pid: 100,
                        tid: 100 + k as u32,
                        comm: "app".into(),
                        path: format!("/data/{}", c.syscall),
                        ..Default::default()
                    }
                });
            }
        }
        out.sort_by_key(|e| e.ts);
        out
    }

    /// Writes the trace at `path` and returns its summary (duration `secs`).
    pub fn write(&self, path: impl AsRef<Path>) -> Result<Summary, TraceError> {
        let start = self.header().start_ns;
        let span = (self.secs * 1e9) as u64;
        write_events(
            path,
            &self.header(),
            &self.events(),
            Summary { duration_ns: span, end_ns: start + span, ..Default::default() },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_gives_the_published_sequence() {
        // The first outputs of splitmix64 seeded with 1234567, as Rosetta Code's
        // "Pseudo-random numbers/Splitmix64" lists them.
        let mut r = Rng::new(1234567);
        let want = [6457827717110365317u64, 3203168211198807973, 9817491932198370423, 4593380528125082431];
        for w in want {
            assert_eq!(r.next_u64(), w);
        }
    }

    #[test]
    fn log_uniform_values_stay_in_range_and_cover_every_power_of_two() {
        let mut r = Rng::new(5);
        let mut seen = [0u32; 64];
        for _ in 0..10_000 {
            let v = r.log_uniform(9, 21);
            assert!((1 << 9..1 << 21).contains(&v), "{v}");
            seen[63 - v.leading_zeros() as usize] += 1;
        }
        assert!(seen[9..21].iter().all(|&n| n > 600), "{seen:?}");
    }

    #[test]
    fn the_same_seed_gives_the_same_events_and_another_seed_others() {
        assert_eq!(random_batch(&mut Rng::new(3), 50), random_batch(&mut Rng::new(3), 50));
        assert_ne!(random_batch(&mut Rng::new(3), 50), random_batch(&mut Rng::new(4), 50));
        let mut a = EventMix::new(Latency::Wide);
        let mut b = EventMix::new(Latency::Wide);
        assert_eq!(a.batch(100), b.batch(100));
        assert_ne!(a.batch(100), EventMix::new(Latency::Wide).batch(100), "batches continue the stream");
    }

    #[test]
    fn event_mix_time_increases_and_latencies_stay_in_their_range() {
        for (latency, lo, hi) in [(Latency::Wide, 256, 1 << 23), (Latency::Short, 200, 200 + (1 << 16))] {
            let b = EventMix::new(latency).batch(10_000);
            assert!(b.ts.windows(2).all(|w| w[0] <= w[1]));
            assert!(b.lat.iter().all(|&l| (lo..hi).contains(&l)), "{latency:?}");
            let with_path = b.dirfd.iter().filter(|&&d| d == -100).count();
            assert!((2500..3500).contains(&with_path), "{with_path} of 10000 with a path");
        }
    }

    /// Events per kind and the block layout of a busy server trace.
    fn busy_blocks(server: &BusyServer) -> (Vec<(usize, usize)>, Summary) {
        let mut blocks = Vec::new();
        let s = server
            .for_each_batch(|b| -> Result<(), ()> {
                let block = b.kind.iter().filter(|&&k| k == EventKind::Block as u8).count();
                blocks.push((b.len() - block, block));
                Ok(())
            })
            .unwrap();
        (blocks, s)
    }

    #[test]
    fn busy_server_counts_every_event_and_lays_kinds_out_as_asked() {
        let by_kind = BusyServer { events: 200_000, block_every: 20, layout: Layout::ByKind };
        let (blocks, s) = busy_blocks(&by_kind);
        assert_eq!(blocks.iter().map(|(s, b)| s + b).sum::<usize>(), 200_000);
        assert_eq!(blocks.iter().map(|(_, b)| b).sum::<usize>(), 10_000);
        assert!(blocks.iter().all(|&(s, b)| s == 0 || b == 0), "one kind per block: {blocks:?}");
        // Flushed together every 64 Ki events: block requests first.
        assert_eq!(blocks[0], (0, 3277));
        assert_eq!(blocks[1], (65_536 - 3277, 0));
        assert!(s.end_ns > BUSY_START_NS && s.duration_ns == s.end_ns - BUSY_START_NS + 1);

        let mixed = BusyServer { layout: Layout::Mixed, ..by_kind.clone() };
        let (blocks, s2) = busy_blocks(&mixed);
        assert_eq!(s2, s, "the same events");
        assert_eq!(blocks.len(), 4);
        assert!(blocks[..3].iter().all(|&(s, b)| s + b == 65_536 && b > 0));

        let none = BusyServer { block_every: 0, ..by_kind };
        assert_eq!(busy_blocks(&none).0.iter().map(|(_, b)| b).sum::<usize>(), 0);
    }

    #[test]
    fn a_steady_workload_has_its_rates_and_quantiles() {
        let mut slow = SteadyCall::new("pread64", 2000.0, 50_000.0, 0.5);
        slow.delay_ns = 10_000.0;
        let w = Steady {
            seed: 9,
            secs: 5.0,
            calls: vec![SteadyCall::new("read", 1000.0, 20_000.0, 0.5), slow.clone()],
            disk: Some(SteadyCall::new("", 200.0, 1_000_000.0, 0.3)),
        };
        let ev = w.events();
        assert_eq!(ev, w.events(), "seeded");
        assert!(ev.windows(2).all(|p| p[0].ts <= p[1].ts));
        let pread = latscope_event::syscall_nr("pread64").unwrap();
        let mut lat: Vec<u64> = ev.iter().filter(|e| e.kind == 0 && e.nr == pread).map(|e| e.lat).collect();
        assert!((lat.len() as f64 - 10_000.0).abs() < 400.0, "{}", lat.len());
        lat.sort_unstable();
        let median = lat[lat.len() / 2] as f64;
        assert!((median / slow.quantile_ns(0.0) - 1.0).abs() < 0.03, "{median}");
        assert!((ev.iter().filter(|e| e.kind == 1).count() as f64 - 1000.0).abs() < 120.0);
    }
}
