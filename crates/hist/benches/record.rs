//! `cargo bench -p latscope-hist`: ns per `record()` against the `hdrhistogram` crate on the same
//! values, ns per quantile query, and encoded sizes. Plain `Instant` timing, best of several rounds,
//! because the machine is shared and the minimum is the least disturbed measurement.

use std::hint::black_box;
use std::time::{Duration, Instant};

use hdrhistogram::serialization::{Serializer, V2DeflateSerializer, V2Serializer};
use latscope_hist::{Histogram, PeakOptions};

const VALUES: usize = 10_000_000;
const ROUNDS: usize = 5;

/// Log-uniform values from 1 ns to 2^37 ns (~137 s): every octave equally likely, like latencies
/// gathered over many subsystems. splitmix64, so runs are comparable.
fn log_values(n: usize, mut seed: u64) -> Vec<u64> {
    let mut next = move || {
        seed = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = seed;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    (0..n)
        .map(|_| {
            let octave = next() % 37;
            (next() >> (63 - octave)).max(1)
        })
        .collect()
}

/// Best wall time of `ROUNDS` runs of `f`.
fn best_of(mut f: impl FnMut() -> Duration) -> Duration {
    (0..ROUNDS).map(|_| f()).min().unwrap_or_default()
}

fn ns_per(d: Duration, n: usize) -> f64 {
    d.as_nanos() as f64 / n as f64
}

fn main() {
    let values = log_values(VALUES, 42);

    let ours = best_of(|| {
        let mut h = Histogram::new();
        let t = Instant::now();
        for &v in &values {
            h.record(v);
        }
        let d = t.elapsed();
        black_box(&h);
        d
    });
    let slice = best_of(|| {
        let mut h = Histogram::new();
        let t = Instant::now();
        // In blocks, as a view records a decoded column.
        for c in values.chunks(65536) {
            h.record_slice(c);
        }
        let d = t.elapsed();
        black_box(&h);
        d
    });
    let hdr = |sigfig: u8| {
        best_of(|| {
            let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 1 << 40, sigfig).expect("valid bounds");
            let t = Instant::now();
            for &v in &values {
                // Saturating: the same never-fail clamping semantics as `Histogram::record`.
                h.saturating_record(v);
            }
            let d = t.elapsed();
            black_box(&h);
            d
        })
    };
    let (hdr2, hdr3) = (hdr(2), hdr(3));
    let (o, h2, h3) = (ns_per(ours, VALUES), ns_per(hdr2, VALUES), ns_per(hdr3, VALUES));
    println!("record(), {VALUES} log-distributed values (1 ns .. 137 s), best of {ROUNDS} rounds:");
    println!("  latscope-hist  {o:.2} ns/value | hdrhistogram (2 sig. digits, same 1/128 resolution) {h2:.2} ns/value | ratio (hdr/ours) {:.2}", h2 / o);
    println!("  latscope-hist  {o:.2} ns/value | hdrhistogram (3 sig. digits, 1/1024 resolution)     {h3:.2} ns/value | ratio (hdr/ours) {:.2}", h3 / o);
    let sl = ns_per(slice, VALUES);
    println!(
        "  latscope-hist record_slice() of 64 Ki-value columns {sl:.2} ns/value | ratio (hdr 2 sig. digits/ours) {:.2}",
        h2 / sl
    );

    // Queries and sizes on 1 M values.
    let million = &values[..1_000_000];
    let ours_h: Histogram = million.iter().copied().collect();
    let mut hdr_h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 1 << 40, 2).expect("valid bounds");
    for &v in million {
        hdr_h.saturating_record(v);
    }
    const QUERIES: usize = 20_000;
    let qs: Vec<f64> = (0..QUERIES).map(|i| (i as f64 + 0.5) / QUERIES as f64).collect();
    let q_ours = best_of(|| {
        let t = Instant::now();
        for &q in &qs {
            black_box(ours_h.value_at_quantile(black_box(q)));
        }
        t.elapsed()
    });
    let q_hdr = best_of(|| {
        let t = Instant::now();
        for &q in &qs {
            black_box(hdr_h.value_at_quantile(black_box(q)));
        }
        t.elapsed()
    });
    println!("value_at_quantile() on 1 M values, q uniform in (0, 1):");
    println!(
        "  latscope-hist  {:.0} ns/query | hdrhistogram (2 sig. digits) {:.0} ns/query",
        ns_per(q_ours, QUERIES),
        ns_per(q_hdr, QUERIES)
    );

    let mut v2 = Vec::new();
    V2Serializer::new().serialize(&hdr_h, &mut v2).expect("serialize");
    let mut v2d = Vec::new();
    V2DeflateSerializer::new().serialize(&hdr_h, &mut v2d).expect("serialize");
    let bytes = ours_h.to_bytes();
    assert_eq!(Histogram::from_bytes(&bytes).as_ref(), Ok(&ours_h));
    println!("serialized size of 1 M values ({} non-empty buckets):", ours_h.iter().count());
    println!(
        "  latscope-hist to_bytes {} bytes | hdrhistogram V2 {} bytes, V2+DEFLATE {} bytes",
        bytes.len(),
        v2.len(),
        v2d.len()
    );

    let other = ours_h.clone();
    let merge = best_of(|| {
        let mut h = ours_h.clone();
        let t = Instant::now();
        h.merge(&other);
        let d = t.elapsed();
        black_box(&h);
        d
    });
    let peaks = best_of(|| {
        let t = Instant::now();
        black_box(ours_h.peaks(&PeakOptions::default()));
        t.elapsed()
    });
    let decode = best_of(|| {
        let t = Instant::now();
        black_box(Histogram::from_bytes(&bytes).is_ok());
        t.elapsed()
    });
    println!(
        "other operations on that histogram: merge {:.1} µs | peaks() {:.1} µs | from_bytes {:.1} µs",
        merge.as_secs_f64() * 1e6,
        peaks.as_secs_f64() * 1e6,
        decode.as_secs_f64() * 1e6
    );
}
