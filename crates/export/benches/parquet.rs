//! Parquet export speed next to reading the same trace, in events per CPU-second (all threads)
//! and per wall-clock second.
//!
//! ```text
//! cargo bench -p latscope-export --bench parquet
//! ```
//!
//! Environment: `LATSCOPE_BENCH_EVENTS` (default 5 M), `LATSCOPE_BENCH_REPS` (default 3, the best
//! run counts), `LATSCOPE_BENCH_TRACE` (a trace to use instead of the synthetic one: mostly
//! syscalls, ~30 % with a path from a set of 40, a few processes, log-uniform latency, 3 % block
//! requests; written once under the target directory).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use latscope_event::{BlockDevice, Event, EventBatch, TraceHeader};
use latscope_export::parquet_export::{export_parquet, Output, ParquetOptions};
use latscope_trace::synth::Rng;
use latscope_trace::{Summary, TraceReader, TraceWriter};

/// `n` events after `ts` (syscalls in one batch, block requests in another, as recorded).
fn events(r: &mut Rng, n: usize, ts: &mut u64, paths: &[String]) -> [EventBatch; 2] {
    const COMMS: &[&str] = &["postgres", "nginx", "java", "node", "kworker/u4:2", "bash"];
    const NRS: &[u16] = &[0, 1, 0, 1, 257, 3, 5, 202, 232, 45, 44, 9, 17, 18, 7];
    let (mut sys, mut blk) = (EventBatch::with_capacity(n), EventBatch::default());
    for _ in 0..n {
        *ts += r.below(2000);
        let e = 8 + r.below(15);
        let lat = (1u64 << e) + r.below(1 << e);
        let pid = 1000 + r.below(20) as u32;
        let comm = COMMS[pid as usize % COMMS.len()].to_string();
        if r.below(100) < 3 {
            blk.push(&Event {
                kind: 1,
                ts: *ts,
                lat,
                pid,
                tid: pid,
                nr: r.below(2) as u16,
                fd: -1,
                dev: 253 << 20,
                bytes: 4096 << r.below(5),
                off: r.below(1 << 30) as i64,
                qtime: r.below(100_000),
                comm,
                ..Default::default()
            });
            continue;
        }
        let fd = if r.below(10) == 0 { -1 } else { r.below(64) as i32 };
        let with_path = r.below(100) < 30;
        sys.push(&Event {
            kind: 0,
            ts: *ts,
            lat,
            pid,
            tid: pid + r.below(4) as u32,
            uid: if pid.is_multiple_of(3) { 0 } else { 1000 },
            nr: NRS[r.below(NRS.len() as u64) as usize],
            ret: if r.below(20) == 0 { -11 } else { 4096 },
            fd,
            fd_type: if fd < 0 { 0 } else { 1 + r.below(3) as u8 },
            dev: if fd < 0 { 0 } else { (253 << 20) | 1 },
            ino: if fd < 0 { 0 } else { 131072 + r.below(500) },
            bytes: [0, 4096, 8192, 64, 512][r.below(5) as usize],
            off: if r.below(2) == 0 { -1 } else { (r.below(1 << 16) * 4096) as i64 },
            dirfd: if with_path { -100 } else { -1 },
            cgroup: 4000 + u64::from(pid % 4),
            comm,
            path: if with_path { paths[r.below(paths.len() as u64) as usize].clone() } else { String::new() },
            ..Default::default()
        });
    }
    [sys, blk]
}

fn cpu_time() -> Duration {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage fills the struct it is given.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn write_trace(path: &Path, n_events: usize) {
    if path.exists() {
        return;
    }
    let paths: Vec<String> = (0..40).map(|i| format!("/var/lib/postgresql/16/main/base/16384/{}", 2600 + i)).collect();
    let header = TraceHeader {
        hostname: "bench".into(),
        realtime_offset_ns: 1_700_000_000_000_000_000,
        block_devices: vec![
            BlockDevice { dev: 253 << 20, name: "vda".into(), ..Default::default() },
            BlockDevice { dev: (253 << 20) | 1, name: "vda1".into(), ..Default::default() },
        ],
        ..Default::default()
    };
    let tmp = path.with_extension("partial");
    let mut w = TraceWriter::create(&tmp, &header).unwrap();
    let mut rng = Rng::new(0x1234_5678_9abc_def1);
    let mut ts = 1_000_000_000u64;
    let mut left = n_events;
    while left > 0 {
        let n = left.min(65536);
        for b in events(&mut rng, n, &mut ts, &paths) {
            w.write_batch(&b, 0).unwrap();
        }
        left -= n;
    }
    w.finish(Summary::default()).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// Best (cpu, wall) of `reps` runs of `f`.
fn best(reps: usize, mut f: impl FnMut()) -> (Duration, Duration) {
    (0..reps)
        .map(|_| {
            let (c, w) = (cpu_time(), Instant::now());
            f();
            (cpu_time() - c, w.elapsed())
        })
        .min()
        .unwrap()
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return; // `cargo test` runs benches as tests: nothing to check here.
    }
    let events: usize = std::env::var("LATSCOPE_BENCH_EVENTS").ok().and_then(|s| s.parse().ok()).unwrap_or(5_000_000);
    let reps: usize = std::env::var("LATSCOPE_BENCH_REPS").ok().and_then(|s| s.parse().ok()).unwrap_or(3);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let trace = match std::env::var_os("LATSCOPE_BENCH_TRACE") {
        Some(t) => PathBuf::from(t),
        None => {
            let t = dir.join(format!("export-bench-v2-{events}.lst"));
            write_trace(&t, events);
            t
        }
    };
    let events = TraceReader::open(&trace).unwrap().read_all().unwrap().len();
    let out = tempfile::tempdir_in(&dir).unwrap();
    let rate = |d: Duration| events as f64 / d.as_secs_f64() / 1e6;

    println!("| {events} events | M events per CPU-second | M events/s wall | output |");
    println!("|---|---|---|---|");
    let (c, w) = best(reps, || {
        let mut r = TraceReader::open(&trace).unwrap();
        let mut b = EventBatch::default();
        while let Some(x) = r.next_batch_into(&mut b) {
            x.unwrap();
        }
    });
    println!("| read the trace, every column | {:.1} | {:.1} | |", rate(c), rate(w));
    for (name, output) in [
        ("export, one file", Output::File(out.path().join("e.parquet"))),
        ("export, partitioned", Output::Partitioned(out.path().join("part"))),
    ] {
        let mut bytes = 0;
        let (c, w) = best(reps, || {
            if let Output::Partitioned(p) = &output {
                let _ = std::fs::remove_dir_all(p);
            }
            let s = export_parquet(std::slice::from_ref(&trace), &ParquetOptions::new(output.clone()), &mut |_| {})
                .unwrap();
            bytes = s.files.iter().filter(|f| f.table == "events").map(|f| f.bytes).sum::<u64>();
        });
        println!(
            "| {name} | {:.1} | {:.1} | {:.1} bytes/event (trace: {:.1}) |",
            rate(c),
            rate(w),
            bytes as f64 / events as f64,
            std::fs::metadata(&trace).unwrap().len() as f64 / events as f64
        );
    }
}
