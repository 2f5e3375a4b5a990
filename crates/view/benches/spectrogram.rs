//! Rate at which the spectrogram model counts events (the part of `spectrogram -r` that is the
//! view's own: the trace reader's decompression comes on top) and draws rows.
//! Run: cargo bench -p latscope-view --bench spectrogram

use latscope_view::spectrogram::render::{DrawOptions, PlainPrinter};
use latscope_view::spectrogram::{Palette, Spectrogram};
use std::hint::black_box;
use std::time::Instant;

fn main() {
    // 50 M syscalls over 100 s: ends in time order (as a trace is, roughly), latencies spread
    // over 200 ns .. 20 ms like a busy machine's.
    let n: u64 = 50_000_000;
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut lat = Vec::with_capacity(1 << 20);
    for _ in 0..(1 << 20) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let e = 8 + (x % 17);
        lat.push((1u64 << e) + (x >> 40) % (1 << e));
    }
    let mut best = f64::MAX;
    for _ in 0..3 {
        let mut s = Spectrogram::new(500_000_000, 0, 1_000_000);
        let t = Instant::now();
        for i in 0..n {
            let l = lat[(i & ((1 << 20) - 1)) as usize];
            s.add(i * 2_000 + l, l, 0);
        }
        s.seal_until(s.row_of(n * 2_000) + 1);
        let el = t.elapsed().as_secs_f64();
        black_box(&s);
        best = best.min(el);
    }
    println!("spectrogram model: {:.0} M events/s per core ({} events in {:.3} s)", n as f64 / best / 1e6, n, best);

    // Drawing: 200 rows of 200 columns as plain text.
    let mut s = Spectrogram::new(500_000_000, 0, 1_000_000);
    for i in 0..2_000_000u64 {
        let l = lat[(i & ((1 << 20) - 1)) as usize];
        s.add(i * 50_000, l, 0);
    }
    s.seal_until(s.row_of(2_000_000 * 50_000) + 1);
    let rows = s.sealed() - s.first_index();
    let t = Instant::now();
    let mut p = PlainPrinter::new(209, &DrawOptions { palette: Palette::Ansi256, ..Default::default() });
    let out = p.rows(&s);
    let el = t.elapsed().as_secs_f64();
    black_box(out);
    println!("plain rows (256 colours, 200 columns): {:.0} rows/s ({rows} rows in {:.4} s)", rows as f64 / el, el);
}
