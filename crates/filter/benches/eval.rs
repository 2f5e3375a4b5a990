//! Filter evaluation throughput on one core: `cargo bench -p latscope-filter`.
//!
//! Builds a 1M-event batch with a realistic mix (10 command names, mixed fd types, log-spread
//! latencies, some block events) and times the three-clause filter from sysdig's spectrogram
//! post, plus a few others for comparison.

use latscope_event::{Event, EventBatch, TraceHeader};
use latscope_filter::{EvalContext, Filter};
use std::hint::black_box;
use std::time::Instant;

const N: usize = 1_000_000;

fn batch() -> EventBatch {
    let comms = ["httpd", "postgres", "nginx", "bash", "java", "python3", "sshd", "cron", "kworker/0:1", "systemd"];
    let paths = ["/var/www/index.html", "/mnt/data/log", "/tmp/x", "", "/usr/lib/libc.so.6"];
    let mut r = latscope_trace::synth::Rng::new(0x9e37_79b9_7f4a_7c15);
    let mut b = EventBatch::with_capacity(N);
    for i in 0..N {
        let x = r.next_u64();
        let block = x % 100 < 5;
        // Latency spread over 100ns .. 100ms, log-uniform.
        let lat = (100.0 * 10f64.powf((x >> 8) as f64 / (1u64 << 56) as f64 * 6.0)) as u64;
        b.push(&Event {
            kind: u8::from(block),
            ts: i as u64 * 1000,
            lat,
            pid: 1000 + (x >> 20) as u32 % 50,
            tid: 1000 + (x >> 26) as u32 % 200,
            nr: if block { (x >> 30) as u16 % 2 } else { [0u16, 1, 17, 18, 257, 3, 232, 202][(x >> 30) as usize % 8] },
            fd: 3,
            fd_type: [1u8, 1, 1, 3, 5, 6, 9, 2][(x >> 34) as usize % 8],
            bytes: 4096,
            comm: comms[(x >> 40) as usize % comms.len()].into(),
            path: paths[(x >> 44) as usize % paths.len()].into(),
            ..Default::default()
        });
    }
    b
}

fn time(name: &str, f: &Filter, b: &EventBatch, ctx: &EvalContext) -> f64 {
    // Warm up, then take the best of several passes.
    let mut best = f64::INFINITY;
    let mut hits = 0;
    for _ in 0..7 {
        let t = Instant::now();
        hits = 0usize;
        for row in 0..b.len() {
            hits += usize::from(f.matches(black_box(b), row, ctx));
        }
        best = best.min(t.elapsed().as_secs_f64());
    }
    let rate = b.len() as f64 / best / 1e6;
    println!("  {name:<62} {rate:7.1} M events/s  ({:.1} ns/event, {hits} matches)", best * 1e9 / b.len() as f64);
    rate
}

/// `LATSCOPE_BENCH_ONLY=N` times only the N-th filter (0 is the first), `none` none: with
/// `perf stat -e instructions:u` the difference between the two counts one filter's work, which a
/// shared machine does not disturb.
fn main() {
    let only = std::env::var("LATSCOPE_BENCH_ONLY").ok();
    let b = batch();
    let mut ctx = EvalContext::new(&TraceHeader::default());
    ctx.observe(&b);
    println!("filters over {} events, one core:", b.len());
    let filters = [
        "proc.name=httpd and fd.type=file and evt.latency > 1ms",
        "",
        "evt.latency > 1000000000",
        "proc.name=test and evt.is_io_write=true and fd.name contains /mnt",
        "evt.type in (read, write, pread64) and evt.latency >= 250us",
        "proc.name in (httpd, nginx, postgres) or fd.name startswith /tmp",
        "fd.name glob '/var/*/*.html' and not proc.pid in (1000, 1001)",
    ];
    let mut rate = 0.0;
    for (i, f) in filters.iter().enumerate() {
        if only.as_ref().is_some_and(|o| *o != i.to_string()) {
            continue;
        }
        let r = time(if f.is_empty() { "(empty filter)" } else { f }, &Filter::parse(f).unwrap(), &b, &ctx);
        if i == 0 {
            rate = r;
        }
    }
    println!("filter eval: {rate:.1} M events/s per core");
}
