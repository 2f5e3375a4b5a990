//! Writes the synthetic trace of a busy server for benchmarks ([`latscope_trace::synth::BusyServer`]):
//! `synth_trace OUT.lst EVENTS [BLOCK_EVERY [mixed]]`.
//!
//! Syscalls (read, pread64, write, openat, close from a few processes) with a bimodal latency
//! distribution, one block request every BLOCK_EVERY events (default 20; 0: none), timestamps
//! 2 us apart on average. Deterministic. Laid out as `latscope record` writes: syscalls and block
//! requests in separate blocks, flushed together every 64 Ki events; with `mixed`, both kinds
//! share blocks (as other writers or older latscope versions may lay them out).

use latscope_trace::synth::{BusyServer, Layout};

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
    let s = server.write(&args[1]).expect("write the trace");
    eprintln!("wrote {} events to {} ({} bytes)", s.events, args[1], s.bytes);
}
