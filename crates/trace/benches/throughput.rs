//! Trace write and read throughput on synthetic events shaped like real ones.
//!
//! `cargo bench -p latscope-trace` (set `LATSCOPE_BENCH_EVENTS` to change the 5 M events,
//! `LATSCOPE_BENCH_DIR` to write somewhere else than the system temporary directory,
//! `LATSCOPE_BENCH_TRACE` to a recorded trace to write its blocks (of at least 32 Ki events)
//! instead of synthetic ones).
//!
//! Synthetic events: mostly syscalls with small integers, ~30 % with a path from a small set,
//! comm from a few names, every value drawn independently (a pessimistic case for compression:
//! recorded traces have runs), written in blocks of 64 Ki events.

use std::path::Path;
use std::time::{Duration, Instant};

mod synth;

use latscope_event::{EventBatch, TraceHeader};
use latscope_trace::{Column, Compression, Summary, ThreadedTraceWriter, TraceReader, TraceWriter, WriterOptions};
use synth::Rng;

const BLOCK: usize = 65536;

fn header() -> TraceHeader {
    TraceHeader { hostname: "bench".into(), kernel: "6.8".into(), ..Default::default() }
}

fn rate(events: u64, d: Duration) -> String {
    format!("{:>6.2} M events/s", events as f64 / d.as_secs_f64() / 1e6)
}

/// CPU time of the calling thread in ns (Linux), to measure throughput per core on a busy machine.
fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// CPU time of the whole process (every thread, finished ones included) in ns.
fn process_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces): utime and stime are 14 and 15.
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(ticks * 10_000_000) // USER_HZ is 100 on Linux
}

/// Events per CPU-second of this thread since `cpu0`.
fn cpu_rate(events: u64, cpu0: Option<u64>) -> String {
    match (cpu0, thread_cpu_ns()) {
        (Some(a), Some(b)) if b > a => {
            format!("{:>5.2} M/s per CPU-second", events as f64 / ((b - a) as f64 / 1e9) / 1e6)
        }
        _ => String::new(),
    }
}

fn file_size(p: &Path) -> u64 {
    std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}

fn main() {
    // `cargo test` runs benches with --bench only under `cargo bench`; be quick otherwise.
    let quick = !std::env::args().any(|a| a == "--bench");
    let total: usize = std::env::var("LATSCOPE_BENCH_EVENTS").ok().and_then(|v| v.parse().ok()).unwrap_or(if quick {
        2 * BLOCK
    } else {
        5_000_000
    });
    let dir = std::env::var("LATSCOPE_BENCH_DIR")
        .map(Into::into)
        .unwrap_or_else(|_| std::env::temp_dir().join(format!("latscope-trace-bench-{}", std::process::id())));
    std::fs::create_dir_all(&dir).unwrap();

    let mut rng = Rng(0x1234_5678_9abc_def1);
    let mut ts = 1_000_000_000u64;
    let paths = synth::paths();
    let templates: Vec<EventBatch> = match std::env::var_os("LATSCOPE_BENCH_TRACE") {
        Some(p) => {
            let r = TraceReader::open(&p).unwrap_or_else(|e| panic!("LATSCOPE_BENCH_TRACE: {e}"));
            let t: Vec<EventBatch> = r.map(|b| b.unwrap()).filter(|b| b.len() >= BLOCK / 2).take(16).collect();
            assert!(!t.is_empty(), "LATSCOPE_BENCH_TRACE has no block of {} events or more", BLOCK / 2);
            println!("events from {}", std::path::Path::new(&p).display());
            t
        }
        None => (0..8)
            .map(|_| {
                synth::batch(&mut rng, BLOCK, &mut ts, &paths, |r| {
                    let bits = r.below(17);
                    200 + r.below(1 << bits)
                })
            })
            .collect(),
    };
    let per_block = templates.iter().map(|b| b.len()).sum::<usize>() / templates.len();
    let raw: usize = templates[0].len() * 112
        + [&templates[0].comm, &templates[0].path, &templates[0].path2]
            .iter()
            .map(|c| c.data.len() + c.offsets.len() * 4)
            .sum::<usize>();
    let raw_per_event = raw as f64 / templates[0].len() as f64;
    let blocks = total.div_ceil(per_block);
    let n_events = |blocks: usize| (0..blocks).map(|i| templates[i % templates.len()].len() as u64).sum::<u64>();
    println!("latscope-trace throughput: {} events in {blocks} blocks of ~{per_block}", n_events(blocks));
    println!("raw event size in memory: {raw_per_event:.1} bytes/event");

    // Single-threaded writer, several compression settings.
    let mut main_file = None;
    for (name, c) in [
        ("zstd 1", Compression::Zstd(1)),
        ("zstd -1", Compression::Zstd(-1)),
        ("zstd 3", Compression::Zstd(3)),
        ("none", Compression::None),
    ] {
        let nb = if c == Compression::Zstd(1) { blocks } else { blocks.min(16) };
        let path = dir.join(format!("bench-{}.lst", name.replace(' ', "")));
        let opts = WriterOptions { compression: c, sync_on_finish: false, ..Default::default() };
        let t = Instant::now();
        let cpu0 = thread_cpu_ns();
        let mut w = TraceWriter::create_with(&path, &header(), opts).unwrap();
        for i in 0..nb {
            w.write_batch(&templates[i % templates.len()], 0).unwrap();
        }
        w.finish(Summary::default()).unwrap();
        let d = t.elapsed();
        let cpu = cpu_rate(n_events(nb), cpu0);
        let size = file_size(&path);
        println!(
            "write  single-threaded {name:>7}: {} ({cpu})  {:>6.2} bytes/event on disk ({:.1}x smaller than raw), {:.0} MB/s raw",
            rate(n_events(nb), d),
            size as f64 / n_events(nb) as f64,
            raw_per_event * n_events(nb) as f64 / size as f64,
            raw_per_event * n_events(nb) as f64 / d.as_secs_f64() / 1e6,
        );
        if c == Compression::Zstd(1) {
            main_file = Some(path);
        } else {
            let _ = std::fs::remove_file(&path);
        }
    }

    // Threaded writer: the caller fills recycled batches (as the ring-buffer reader would); one
    // encoding thread, then two (a helper compresses every other batch).
    for threads in [1, 2] {
        let path = dir.join("bench-threaded.lst");
        let opts = WriterOptions { sync_on_finish: false, threads, ..Default::default() };
        let t = Instant::now();
        let pcpu0 = process_cpu_ns();
        let mut w = ThreadedTraceWriter::create_with(&path, &header(), opts, 4).unwrap();
        let cpu0 = thread_cpu_ns();
        let mut caller_blocked = Duration::ZERO;
        let mut fill_cpu = 0u64;
        for i in 0..blocks {
            let f0 = thread_cpu_ns();
            let mut b = w.spare_batch();
            let src = &templates[i % templates.len()];
            fill(&mut b, src);
            fill_cpu += thread_cpu_ns().zip(f0).map_or(0, |(b, a)| b - a);
            let tw = Instant::now();
            w.write_batch(b, 0).unwrap();
            caller_blocked += tw.elapsed();
        }
        let caller_cpu = cpu_rate(n_events(blocks), cpu0);
        let tf = Instant::now();
        w.finish(Summary::default()).unwrap();
        let drain = tf.elapsed();
        let d = t.elapsed();
        let caller_total = thread_cpu_ns().zip(cpu0).map_or(0, |(b, a)| b - a);
        // The writer's CPU: the whole process's, less what the caller thread took.
        let writer_cpu = process_cpu_ns().zip(pcpu0).map(|(b, a)| (b - a).saturating_sub(caller_total));
        let per_cpu = writer_cpu.filter(|&c| c > 0).map_or(String::new(), |c| {
            format!("{:.2} M/s per writer CPU-second", n_events(blocks) as f64 / (c as f64 / 1e9) / 1e6)
        });
        println!(
            "write  threaded  zstd 1, {threads} encoding thread(s): {} end to end, {per_cpu}; caller thread: {caller_cpu} \
             ({:.0} ms filling batches); caller waited {:.0} ms for queue room in total, {:.0} ms to drain at finish",
            rate(n_events(blocks), d),
            fill_cpu as f64 / 1e6,
            caller_blocked.as_secs_f64() * 1e3,
            drain.as_secs_f64() * 1e3
        );
        let _ = std::fs::remove_file(&path);
    }

    // Reading.
    let path = main_file.unwrap();
    for (name, proj) in [("full", None), ("ts+lat", Some(vec![Column::Ts, Column::Lat]))] {
        let t = Instant::now();
        let cpu0 = thread_cpu_ns();
        let mut r = match &proj {
            None => TraceReader::open(&path).unwrap(),
            Some(p) => TraceReader::open_projected(&path, p).unwrap(),
        };
        let mut n = 0u64;
        let mut sum = 0u64;
        for b in r.by_ref() {
            let b = b.unwrap();
            n += b.len() as u64;
            sum = sum.wrapping_add(b.lat.iter().sum::<u64>());
        }
        let d = t.elapsed();
        assert!(r.warnings().is_empty());
        println!("read   {name:>6}: {} ({})  (checksum {sum:x})", rate(n, d), cpu_rate(n, cpu0));
    }
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_dir(&dir);
}

/// Copy `src` into `dst` column by column (what a producer filling a batch costs).
fn fill(dst: &mut EventBatch, src: &EventBatch) {
    dst.clear();
    macro_rules! ext {
        ($($f:ident),*) => { $( dst.$f.extend_from_slice(&src.$f); )* };
    }
    ext!(
        kind, ts, lat, pid, tid, uid, nr, ret, fd, fd_type, dev, ino, bytes, off, flags, mode, dirfd, addr, cgroup,
        qtime
    );
    for (d, s) in [(&mut dst.comm, &src.comm), (&mut dst.path, &src.path), (&mut dst.path2, &src.path2)] {
        d.offsets.clear();
        d.offsets.extend_from_slice(&s.offsets);
        d.data.clear();
        d.data.extend_from_slice(&s.data);
    }
}
