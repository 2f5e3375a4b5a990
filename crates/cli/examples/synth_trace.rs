//! Writes the synthetic trace of a busy server for benchmarks ([`latscope_trace::synth::BusyServer`]):
//! `synth_trace OUT.lst EVENTS [BLOCK_EVERY [mixed | containers | why]]`.
//!
//! Syscalls (read, pread64, write, openat, close from a few processes) with a bimodal latency
//! distribution, one block request every BLOCK_EVERY events (default 20; 0: none), timestamps
//! 2 us apart on average. Deterministic. Laid out as `latscope record` writes: syscalls and block
//! requests in separate blocks, flushed together every 64 Ki events; with `mixed`, both kinds
//! share blocks (as other writers or older latscope versions may lay them out). With
//! `containers`, each of the four processes runs in a docker container of its own (the header's
//! cgroup table names them `c0` to `c3`; the `cgroup` column points there). With `why`, as if
//! recorded with `record --why`: every syscall carries a breakdown (half on CPU, half lock) and
//! was woken by the thread of the call before it (what the Perfetto export links as flows).

use latscope_event::CgroupInfo;
use latscope_trace::synth::{BusyServer, Layout};
use latscope_trace::TraceWriter;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: synth_trace OUT.lst EVENTS [BLOCK_EVERY [mixed]]");
        std::process::exit(2);
    }
    let server = BusyServer {
        events: args[2].parse().expect("EVENTS is a number"),
        block_every: args.get(3).map(|s| s.parse().expect("BLOCK_EVERY is a number")).unwrap_or(20),
        layout: if args.get(4).is_some_and(|s| s == "mixed") { Layout::Mixed } else { Layout::ByKind },
    };
    if args.get(4).is_some_and(|s| s == "why") {
        let s = server.write_why(&args[1]).expect("write the trace");
        eprintln!("wrote {} events to {} ({} bytes)", s.events, args[1], s.bytes);
        return;
    }
    if args.get(4).is_some_and(|s| s == "containers") {
        let mut header = server.header();
        header.cgroups = (0..4u64)
            .map(|j| {
                let id = format!("{j:x}").repeat(64);
                let mut c = CgroupInfo::from_path(7000 + j, &format!("/system.slice/docker-{id}.scope"));
                c.container_name = format!("c{j}");
                c.image = format!("img{j}:1");
                c
            })
            .collect();
        let mut w = TraceWriter::create(&args[1], &header).expect("create the trace");
        let summary = server
            .for_each_batch(|b| {
                let mut b = b.clone();
                for (c, p) in b.cgroup.iter_mut().zip(&b.pid) {
                    *c = 7000 + u64::from(p.saturating_sub(1000) % 4);
                }
                w.write_batch(&b, 0)
            })
            .expect("write the trace");
        let s = w.finish(summary).expect("finish the trace");
        eprintln!("wrote {} events to {} ({} bytes)", s.events, args[1], s.bytes);
        return;
    }
    let s = server.write(&args[1]).expect("write the trace");
    eprintln!("wrote {} events to {} ({} bytes)", s.events, args[1], s.bytes);
}
