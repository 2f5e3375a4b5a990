//! What a probe adds to what it measures: the same timed operation in a bare loop (two clock
//! reads around it, the difference kept in a register) and through the probe (plus recording into
//! the histogram), alone and under the runner (batches, folding, intervals, reports), interleaved
//! in the same run. `cargo bench -p latscope-micro --bench overhead`.

use latscope_hist::Histogram;
use latscope_micro::clock::read_posix;
use latscope_micro::{parse_probe, Event, RunOptions, Runner};
use std::hint::black_box;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

#[inline(never)]
fn empty() {
    black_box(());
}

const N: u64 = 5_000_000;

/// ns per iteration of the bare loops (no recording).
fn bare_call() -> f64 {
    let f: fn() = black_box(empty);
    let mut acc = 0u64;
    let t = Instant::now();
    for _ in 0..N {
        let t0 = read_posix(libc::CLOCK_MONOTONIC);
        f();
        let t1 = read_posix(libc::CLOCK_MONOTONIC);
        acc = acc.wrapping_add(t1.wrapping_sub(t0));
    }
    black_box(acc);
    t.elapsed().as_nanos() as f64 / N as f64
}

fn bare_clock(id: libc::clockid_t) -> f64 {
    let mut acc = 0u64;
    let t = Instant::now();
    let mut prev = read_posix(id);
    for _ in 0..N {
        let now = read_posix(id);
        acc = acc.wrapping_add(now.wrapping_sub(prev));
        prev = now;
    }
    black_box(acc);
    t.elapsed().as_nanos() as f64 / N as f64
}

/// ns per sample through `Probe::sample`.
fn probe(text: &str) -> f64 {
    let mut p = parse_probe(text).unwrap().remove(0).build(&mut |_| {}).unwrap();
    let mut h = Histogram::new();
    let t = Instant::now();
    p.sample(&mut h, N).unwrap();
    assert_eq!(h.count(), N);
    t.elapsed().as_nanos() as f64 / N as f64
}

/// ns per sample under the runner, with 1 s reports and 100 ms intervals (more than a store's).
fn runner(text: &str) -> f64 {
    let p = parse_probe(text).unwrap().remove(0).build(&mut |_| {}).unwrap();
    let opts = RunOptions {
        duration: Some(Duration::from_millis(1500)),
        report_every: Some(Duration::from_secs(1)),
        interval: Duration::from_millis(100),
        ..RunOptions::default()
    };
    let mut r = Runner::new(vec![(p, None)], opts);
    let t = Instant::now();
    r.run(&AtomicBool::new(false), |e: Event<'_>| {
        black_box(&e);
        Ok::<(), ()>(())
    })
    .unwrap();
    t.elapsed().as_nanos() as f64 / r.probes()[0].total.count() as f64
}

fn main() {
    let mut rows: Vec<(&str, f64, f64, f64)> = Vec::new();
    type Case = (&'static str, &'static str, fn() -> f64);
    let cases: [Case; 3] = [
        ("empty call timed with CLOCK_MONOTONIC", "call", bare_call),
        ("consecutive CLOCK_MONOTONIC reads", "clock:monotonic", || bare_clock(libc::CLOCK_MONOTONIC)),
        ("consecutive CLOCK_MONOTONIC_COARSE reads", "clock:monotonic_coarse", || {
            bare_clock(libc::CLOCK_MONOTONIC_COARSE)
        }),
    ];
    for (what, text, bare) in cases {
        // Interleaved, best of 3: the machine is shared.
        let (mut b, mut p, mut r) = (f64::MAX, f64::MAX, f64::MAX);
        for _ in 0..3 {
            b = b.min(bare());
            p = p.min(probe(text));
            r = r.min(runner(text));
        }
        rows.push((what, b, p, r));
    }
    println!("Probe cost per sample: the same operation in a bare loop and through latscope's probe (best of 3, interleaved)\n");
    println!("| operation | bare loop | probe | added | runner | added | ratio runner/bare |");
    println!("|---|---|---|---|---|---|---|");
    for (what, b, p, r) in rows {
        println!("| {what} | {b:.1} ns | {p:.1} ns | {:.1} ns | {r:.1} ns | {:.1} ns | {:.2}x |", p - b, r - b, r / b);
    }
}
