//! Read throughput of the trace reader, full and projected, in events per CPU-second.
//!
//! ```text
//! cargo bench -p latscope-trace --bench read --no-run
//! taskset -c 0 target/release/deps/read-<hash> --bench
//! ```
//!
//! (or `taskset -c 0 cargo bench -p latscope-trace --bench read`). Environment:
//! `LATSCOPE_BENCH_EVENTS` (default 10 M), `LATSCOPE_BENCH_REPS` (default 5, the best run
//! counts), `LATSCOPE_BENCH_TRACE` (the trace file; default under the target directory, written
//! once and reused; compare builds on the same file, as the page cache's state of a file
//! changes what reading it costs), `LATSCOPE_BENCH_ONLY` (run only the parts whose name
//! contains this), `LATSCOPE_BENCH_LEVELS` (e.g. `-1,1,3`: also write the first 2 M events at
//! these zstd levels and read them back, to see what the writer's level does to reading),
//! `LATSCOPE_BENCH_ZSTD` (set: compressed size and decompression speed of `ts` and `lat` under
//! several zstd settings).
//!
//! The events are realistic rather than repeated ([`EventMix`] with [`Latency::Wide`]): mostly
//! syscalls, `ts` increasing by small random steps, `lat` log-uniform between 256 ns and 8 ms,
//! ~30 % with a path from a small set, a few comm names; blocks of 64 Ki events. Besides the
//! reader itself, the bench measures the parts no reader can avoid (reading the file, the
//! CRC-32C of every body, zstd decompression of the projected buffers alone), which bound what a
//! projected read can reach.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use latscope_event::{EventBatch, TraceHeader};
use latscope_trace::synth::{EventMix, Latency};
use latscope_trace::{Column, Compression, Summary, TraceReader, TraceWriter, WriterOptions};

const BLOCK: usize = 65536;
/// Bump when the generator changes, so that a cached trace is rewritten.
const GENERATOR: u32 = 1;

fn write_trace(path: &Path, events: usize, compression: Compression) -> Duration {
    let header = TraceHeader { hostname: "bench".into(), kernel: "6.8".into(), ..Default::default() };
    let opts = WriterOptions { compression, sync_on_finish: false, ..Default::default() };
    let tmp = path.with_extension("partial");
    let mut w = TraceWriter::create_with(&tmp, &header, opts).unwrap();
    let mut mix = EventMix::new(Latency::Wide);
    let mut left = events;
    let mut busy = Duration::ZERO;
    while left > 0 {
        let n = left.min(BLOCK);
        let b = mix.batch(n);
        let t = Instant::now();
        w.write_batch(&b, 0).unwrap();
        busy += t.elapsed();
        left -= n;
    }
    w.finish(Summary::default()).unwrap();
    std::fs::rename(&tmp, path).unwrap();
    busy
}

/// CPU time of the calling thread in ns (Linux). The kernel brings a running thread's count up
/// to date only at scheduler ticks (4 ms) and switches: yielding first makes it exact.
fn thread_cpu_ns() -> u64 {
    std::thread::yield_now();
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap();
    s.split_whitespace().next().unwrap().parse().unwrap()
}

/// Best of `reps` runs of `f` (which returns the number of events it handled and a checksum):
/// (events per CPU-second, events per wall second), both in millions.
fn measure(reps: usize, mut f: impl FnMut() -> (u64, u64)) -> (f64, f64, u64) {
    let mut best = (0.0f64, 0.0f64, 0);
    for _ in 0..reps {
        let t = Instant::now();
        let c = thread_cpu_ns();
        let (n, sum) = f();
        let cpu = (thread_cpu_ns() - c) as f64 / 1e9;
        let wall = t.elapsed().as_secs_f64();
        let r = (n as f64 / cpu / 1e6, n as f64 / wall / 1e6, sum);
        if r.0 > best.0 {
            best = r;
        }
    }
    best
}

/// Whether to run the part named `name` (`LATSCOPE_BENCH_ONLY`: a substring of the names to run).
fn wanted(name: &str) -> bool {
    std::env::var("LATSCOPE_BENCH_ONLY").map_or(true, |o| name.contains(o.as_str()))
}

/// Measure and print the part `name` if it is wanted.
fn bench(name: &str, reps: usize, f: impl FnMut() -> (u64, u64)) {
    if wanted(name) {
        report(name, measure(reps, f));
    }
}

fn report(name: &str, (cpu, wall, sum): (f64, f64, u64)) {
    println!("{name:<44} {cpu:>7.1} M events/CPU-s  {wall:>7.1} M events/s wall  (check {sum:016x})");
}

/// Sum of `lat` (and `ts` when read) and the event count, so that nothing is optimised away.
fn consume(b: &EventBatch, n: &mut u64, sum: &mut u64) {
    *n += b.len() as u64;
    *sum = sum.wrapping_add(b.lat.iter().fold(0u64, |a, &x| a.wrapping_add(x)));
    *sum = sum.wrapping_add(b.ts.last().copied().unwrap_or(0));
}

fn read_next_batch(path: &Path, proj: Option<&[Column]>) -> (u64, u64) {
    let mut r = match proj {
        None => TraceReader::open(path).unwrap(),
        Some(p) => TraceReader::open_projected(path, p).unwrap(),
    };
    let (mut n, mut sum) = (0, 0);
    while let Some(b) = r.next_batch() {
        consume(&b.unwrap(), &mut n, &mut sum);
    }
    assert!(r.warnings().is_empty(), "{:?}", r.warnings());
    (n, sum)
}

/// The same with one recycled batch.
fn read_next_batch_into(path: &Path, proj: Option<&[Column]>) -> (u64, u64) {
    let mut r = match proj {
        None => TraceReader::open(path).unwrap(),
        Some(p) => TraceReader::open_projected(path, p).unwrap(),
    };
    let (mut n, mut sum) = (0, 0);
    let mut b = EventBatch::default();
    while let Some(res) = r.next_batch_into(&mut b) {
        res.unwrap();
        consume(&b, &mut n, &mut sum);
    }
    assert!(r.warnings().is_empty(), "{:?}", r.warnings());
    (n, sum)
}

/// The record batch messages of a trace: (metadata, body) pairs, read into memory.
fn messages(file: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos + 8 <= file.len() {
        let len = i32::from_le_bytes(file[pos + 4..pos + 8].try_into().unwrap()) as usize;
        if len == 0 {
            break;
        }
        let meta = file[pos + 8..pos + 8 + len].to_vec();
        let body_len = arrow_ipc::root_as_message(&meta).unwrap().bodyLength() as usize;
        let body_start = pos + 8 + len;
        out.push((meta, file[body_start..body_start + body_len].to_vec()));
        pos = body_start + body_len;
    }
    out.remove(0); // the schema
    out
}

/// zstd decompression of the values buffers of `cols` alone (a floor for any reader).
fn zstd_columns(msgs: &[(Vec<u8>, Vec<u8>)], cols: &[Column]) -> (u64, u64) {
    let mut d = zstd::bulk::Decompressor::new().unwrap();
    let mut out: Vec<u8> = Vec::with_capacity(BLOCK * 8);
    let (mut n, mut sum) = (0u64, 0u64);
    for (meta, body) in msgs {
        let m = arrow_ipc::root_as_message(meta).unwrap();
        let rb = m.header_as_record_batch().unwrap();
        n += rb.length() as u64;
        let bufs = rb.buffers().unwrap();
        // Fixed-width column i (schema order) has buffers 2i (validity) and 2i+1 (values).
        for &col in cols {
            let b = bufs.get(2 * col.index() + 1);
            let raw = &body[b.offset() as usize..(b.offset() + b.length()) as usize];
            if raw.is_empty() {
                continue;
            }
            out.clear();
            d.decompress_to_buffer(&raw[8..], &mut out).unwrap();
            sum = sum.wrapping_add(out.len() as u64 + out[out.len() / 2] as u64);
        }
    }
    (n, sum)
}

fn crc_bodies(msgs: &[(Vec<u8>, Vec<u8>)]) -> (u64, u64) {
    let (mut n, mut sum) = (0u64, 0u64);
    for (meta, body) in msgs {
        n += arrow_ipc::root_as_message(meta).unwrap().header_as_record_batch().unwrap().length() as u64;
        sum = sum.wrapping_add(crc32c::crc32c(body) as u64);
    }
    (n, sum)
}

fn main() {
    // Without --bench (`cargo test --benches`), a quick smoke run.
    let quick = !std::env::args().any(|a| a == "--bench");
    let env = |k: &str| std::env::var(k).ok();
    let events: usize =
        env("LATSCOPE_BENCH_EVENTS").and_then(|v| v.parse().ok()).unwrap_or(if quick { 3 * BLOCK } else { 10_000_000 });
    let reps: usize = env("LATSCOPE_BENCH_REPS").and_then(|v| v.parse().ok()).unwrap_or(if quick { 1 } else { 5 });
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let path = env("LATSCOPE_BENCH_TRACE")
        .map(PathBuf::from)
        .unwrap_or_else(|| dir.join(format!("latscope-read-bench-g{GENERATOR}-{events}.lst")));
    if !path.exists() {
        let busy = write_trace(&path, events, Compression::Zstd(1));
        println!(
            "wrote {} ({events} events, {:.1} bytes/event, {:.2} M events/s writing)",
            path.display(),
            std::fs::metadata(&path).unwrap().len() as f64 / events as f64,
            events as f64 / busy.as_secs_f64() / 1e6
        );
    }
    let size = std::fs::metadata(&path).unwrap().len();
    println!(
        "trace {} : {events} events, {:.1} bytes/event; best of {reps}",
        path.display(),
        size as f64 / events as f64
    );
    let ts_lat = [Column::Ts, Column::Lat];
    // The brief's ts+lat, and what `latscope hist` and `latscope heatmap` read.
    let projections: [(&str, Option<&[Column]>); 4] = [
        ("all columns", None),
        ("ts+lat", Some(&ts_lat)),
        ("kind+lat (hist)", Some(&[Column::Kind, Column::Lat])),
        ("kind+ts+lat (heat map)", Some(&[Column::Kind, Column::Ts, Column::Lat])),
    ];
    for (name, proj) in projections {
        bench(&format!("read {name}, next_batch (a new batch each)"), reps, || read_next_batch(&path, proj));
        bench(&format!("read {name}, next_batch_into (recycled)"), reps, || read_next_batch_into(&path, proj));
    }

    // The parts every checked projected read pays.
    bench("floor: pread the whole file (1 MiB reads)", reps, || {
        use std::os::unix::fs::FileExt;
        let f = std::fs::File::open(&path).unwrap();
        let mut buf = vec![0u8; 1 << 20];
        let (mut off, mut sum) = (0u64, 0u64);
        while off < size {
            let k = f.read_at(&mut buf, off).unwrap();
            sum = sum.wrapping_add(buf[k / 2] as u64);
            off += k as u64;
        }
        (events as u64, sum)
    });
    let crc = "floor: CRC-32C of every body (in memory)";
    let zstd = "floor: zstd of ts+lat buffers only (in memory)";
    let zstd_lat = "floor: zstd of kind+lat buffers only (in memory)";
    if wanted(crc) || wanted(zstd) || wanted(zstd_lat) {
        let file = std::fs::read(&path).unwrap();
        let msgs = messages(&file);
        drop(file);
        bench(crc, reps, || crc_bodies(&msgs));
        bench(zstd, reps, || zstd_columns(&msgs, &ts_lat));
        bench(zstd_lat, reps, || zstd_columns(&msgs, &[Column::Kind, Column::Lat]));
    }

    // What the writer's zstd level does to reading (the format is the same at every level).
    if let Some(levels) = env("LATSCOPE_BENCH_LEVELS") {
        let n = events.min(2_000_000);
        for l in levels.split(',').filter_map(|l| l.trim().parse::<i32>().ok()) {
            let p = dir.join(format!("latscope-read-bench-level{l}.lst"));
            let busy = write_trace(&p, n, Compression::Zstd(l));
            let size = std::fs::metadata(&p).unwrap().len();
            println!(
                "zstd level {l:>2}: {:.2} bytes/event, writing {:.2} M events/s (wall, 1 thread)",
                size as f64 / n as f64,
                n as f64 / busy.as_secs_f64() / 1e6
            );
            for (name, proj) in projections.iter().take(3) {
                bench(&format!("  level {l}: read {name}, recycled"), reps, || read_next_batch_into(&p, *proj));
            }
            let file = std::fs::read(&p).unwrap();
            let msgs = messages(&file);
            bench(&format!("  level {l}: zstd of ts+lat only"), reps, || zstd_columns(&msgs, &ts_lat));
            let _ = std::fs::remove_file(&p);
        }
    }
    if env("LATSCOPE_BENCH_ZSTD").is_some() {
        zstd_settings(&path, reps);
    }
    if quick {
        let _ = std::fs::remove_file(&path);
    }
}

/// Compressed size and decompression speed of the `ts` and `lat` columns of the first blocks
/// under several zstd settings a writer could choose (all produce the same format).
fn zstd_settings(path: &Path, reps: usize) {
    use zstd::zstd_safe::CParameter;
    let mut cols: Vec<Vec<u8>> = Vec::new();
    let mut events = 0u64;
    for b in TraceReader::open_projected(path, &[Column::Ts, Column::Lat]).unwrap().take(32) {
        let b = b.unwrap();
        events += b.len() as u64;
        for c in [&b.ts, &b.lat] {
            cols.push(c.iter().flat_map(|x| x.to_le_bytes()).collect());
        }
    }
    let settings: Vec<(&str, i32, Vec<CParameter>)> = vec![
        ("level -5", -5, vec![]),
        ("level -1", -1, vec![]),
        ("level 1 (default)", 1, vec![]),
        ("level 1 --long", 1, vec![CParameter::EnableLongDistanceMatching(true), CParameter::WindowLog(27)]),
        ("level 3", 3, vec![]),
        ("level 9", 9, vec![]),
        ("level 19", 19, vec![]),
    ];
    println!("zstd settings on ts+lat of {events} events (what a writer could choose; the format is the same):");
    for (name, level, params) in settings {
        let mut c = zstd::bulk::Compressor::new(level).unwrap();
        for p in params {
            c.set_parameter(p).unwrap();
        }
        let t = Instant::now();
        let frames: Vec<Vec<u8>> = cols.iter().map(|x| c.compress(x).unwrap()).collect();
        let ctime = t.elapsed();
        let bytes: usize = frames.iter().map(|f| f.len()).sum();
        let (ts_bytes, lat_bytes): (usize, usize) =
            (frames.iter().step_by(2).map(|f| f.len()).sum(), frames.iter().skip(1).step_by(2).map(|f| f.len()).sum());
        let mut d = zstd::bulk::Decompressor::new().unwrap();
        let _ = d.set_parameter(zstd::zstd_safe::DParameter::WindowLogMax(27));
        let mut out = Vec::with_capacity(BLOCK * 8);
        let r = measure(reps, || {
            let mut sum = 0u64;
            for f in &frames {
                out.clear();
                d.decompress_to_buffer(f, &mut out).unwrap();
                sum = sum.wrapping_add(out[out.len() / 3] as u64);
            }
            (events, sum)
        });
        println!(
            "  {name:<22} ts {:>5.2} + lat {:>5.2} = {:>5.2} bytes/event, compress {:>6.1} M events/s, decompress {:>6.1} M events/CPU-s",
            ts_bytes as f64 / events as f64,
            lat_bytes as f64 / events as f64,
            bytes as f64 / events as f64,
            events as f64 / ctime.as_secs_f64() / 1e6,
            r.0
        );
    }
}
