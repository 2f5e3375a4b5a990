//! Writes a synthetic trace for benchmarks: `synth_trace OUT.lst EVENTS [BLOCK_EVERY [mixed]]`.
//!
//! Syscalls (read, pread64, write, openat, close from a few processes) with a bimodal latency
//! distribution, one block request every BLOCK_EVERY events (default 20), timestamps 2 us apart
//! on average. Deterministic. Laid out as `latscope record` writes: syscalls and block requests
//! in separate blocks, flushed together every 64 Ki events; with `mixed`, both kinds share
//! blocks (as other writers or older latscope versions may lay them out).

use latscope_event::{BlockDevice, Event, EventBatch, EventKind, TraceHeader};
use latscope_trace::{Summary, TraceWriter};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: synth_trace OUT.lst EVENTS [BLOCK_EVERY]");
        std::process::exit(2);
    }
    let n: u64 = args[2].parse().expect("EVENTS is a number");
    let block_every: u64 = args.get(3).map(|s| s.parse().expect("BLOCK_EVERY is a number")).unwrap_or(20);
    let mixed = args.get(4).is_some_and(|s| s == "mixed");
    let start = 5_000_000_000_000u64;
    let header = TraceHeader {
        format_version: latscope_event::TRACE_FORMAT_VERSION,
        hostname: "synthetic".into(),
        start_ns: start,
        realtime_offset_ns: 1_700_000_000_000_000_000 - start as i64,
        syscalls: "all".into(),
        block: true,
        block_devices: vec![BlockDevice { dev: 254 << 20, name: "vda".into(), ..Default::default() }],
        ..Default::default()
    };
    let mut w = TraceWriter::create(&args[1], &header).expect("create the trace");
    let nrs: Vec<u16> = ["read", "pread64", "write", "openat", "close"]
        .iter()
        .map(|s| latscope_event::syscall_nr(s).expect("known syscall"))
        .collect();
    let comms = ["postgres", "nginx", "tar", "java"];
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut t = start;
    let mut b = EventBatch::with_capacity(65_536);
    let mut blk = EventBatch::default(); // block requests, unless mixed
    for i in 0..n {
        t += rnd() % 4000;
        let r = rnd();
        let block = block_every > 0 && i % block_every == 0;
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
        if b.len() + blk.len() == 65_536 {
            for x in [&mut blk, &mut b] {
                if !x.is_empty() {
                    w.write_batch(x, 0).expect("write");
                    x.clear();
                }
            }
        }
    }
    for x in [&blk, &b] {
        if !x.is_empty() {
            w.write_batch(x, 0).expect("write");
        }
    }
    let s = w.finish(Summary { duration_ns: t - start + 1, end_ns: t, ..Default::default() }).expect("finish");
    eprintln!("wrote {} events to {} ({} bytes)", s.events, args[1], s.bytes);
}
