//! The synthetic events both trace benches write: mostly syscalls with small integers, ~30 %
//! with a path from a set of 40, comm from a few names. Only the latency distribution differs
//! between the benches, so it is the caller's.

use latscope_event::{Event, EventBatch};

/// xorshift64*: deterministic and dependency-free.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const COMMS: &[&str] = &["postgres", "nginx", "java", "node", "kworker/u4:2", "bash"];
const SYSCALLS: &[u16] = &[0, 1, 0, 1, 257, 3, 5, 202, 232, 45, 44, 9, 17, 18, 7];

/// The 40 paths events name.
pub fn paths() -> Vec<String> {
    (0..40)
        .map(|i| match i % 4 {
            0 => format!("/var/lib/postgresql/16/main/base/16384/{}", 2600 + i),
            1 => format!("/usr/lib/x86_64-linux-gnu/lib{i}.so.6"),
            2 => format!("/srv/www/static/img/{i:04}.png"),
            _ => format!("/proc/{}/stat", 1000 + i),
        })
        .collect()
}

/// `n` events starting after `ts`, latencies drawn by `lat`.
pub fn batch(rng: &mut Rng, n: usize, ts: &mut u64, paths: &[String], lat: impl Fn(&mut Rng) -> u64) -> EventBatch {
    let mut b = EventBatch::with_capacity(n);
    for _ in 0..n {
        *ts += rng.below(2000);
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
        let lat = lat(rng);
        let ev = Event {
            kind,
            ts: *ts,
            lat,
            pid,
            tid: pid + rng.below(4) as u32,
            uid: if pid.is_multiple_of(3) { 0 } else { 1000 },
            nr: SYSCALLS[rng.below(SYSCALLS.len() as u64) as usize],
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
            comm: COMMS[(pid % COMMS.len() as u32) as usize].to_string(),
            path: if with_path { paths[rng.below(paths.len() as u64) as usize].clone() } else { String::new() },
            path2: String::new(),
            off2: -1,
            cpu: (pid % 2) as u16,
        };
        b.push(&ev);
    }
    b
}
