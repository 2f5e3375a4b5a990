//! `latscope export --perfetto` holds bounded memory whatever the trace size: the peak resident
//! size of an export of 1.2 M events is that of an export of 300 k events, give or take, with every
//! call carrying a wake-up to link (the slices wait in the bounded hold queue). Its own test
//! binary: the peak is measured over this process's children.

mod common;

use latscope_trace::synth::{BusyServer, Layout};
use latscope_trace::TraceWriter;
use std::path::Path;

/// The busy server's trace as if recorded with `--why`: every call woken by the thread of the
/// call before it.
fn write(path: &Path, events: u64) {
    let server = BusyServer { events, block_every: 20, layout: Layout::ByKind };
    let mut header = server.header();
    header.command_line = vec!["latscope".into(), "record".into(), "--why".into()];
    let mut w = TraceWriter::create(path, &header).unwrap();
    let mut prev = 0u32;
    let summary = server
        .for_each_batch(|b| {
            let mut b = b.clone();
            for i in 0..b.len() {
                if b.kind[i] == 0 {
                    b.why_cpu[i] = b.lat[i] / 2;
                    b.why_lock[i] = b.lat[i] - b.lat[i] / 2;
                    b.waker_ctx[i] = 1;
                    b.waker_tid[i] = prev;
                    prev = b.tid[i];
                }
            }
            w.write_batch(&b, 0)
        })
        .unwrap();
    w.finish(summary).unwrap();
}

/// Largest resident size of any child waited for so far, in bytes.
fn children_max_rss() -> u64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    ru.ru_maxrss as u64 * 1024
}

#[test]
fn perfetto_export_memory_does_not_grow_with_the_trace() {
    if cfg!(debug_assertions) {
        eprintln!("SKIPPED perfetto_export_memory_does_not_grow_with_the_trace: needs an optimized build");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (small, big) = (dir.path().join("small.lst"), dir.path().join("big.lst"));
    write(&small, 300_000);
    write(&big, 1_200_000);
    let out = dir.path().join("out.pftrace");
    let j = common::latscope_json(&[
        "export",
        "-r",
        small.to_str().unwrap(),
        "--perfetto",
        out.to_str().unwrap(),
        "--json",
    ]);
    assert!(j["links"]["wakeups_linked"].as_u64().unwrap() > 10_000, "the hold queue is in use: {}", j["links"]);
    let after_small = children_max_rss();
    common::latscope_ok(&["export", "-q", "-r", big.to_str().unwrap(), "--perfetto", out.to_str().unwrap()]);
    let after_big = children_max_rss();
    eprintln!("peak resident size: 300 k events {} MiB, 1.2 M events {} MiB", after_small >> 20, after_big >> 20);
    assert!(after_big <= after_small + after_small / 4 + (16 << 20), "{after_small} -> {after_big} bytes");
    assert!(after_big < 256 << 20, "{after_big} bytes");
}
