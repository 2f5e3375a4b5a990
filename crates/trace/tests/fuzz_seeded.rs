//! The fuzz harness of the trace reader (`fuzz/fuzz_targets/trace_read.rs`) on seeded random
//! inputs, so that `cargo test` covers it without a nightly toolchain: arbitrary bytes, the seed
//! trace with random bytes spliced in, and random mutation programs; the heap is counted as in
//! the fuzz target.
//!
//! `LATSCOPE_FUZZ_CASES=100000 cargo test -p latscope-trace --release --test fuzz_seeded` runs more.

use latscope_trace::fuzz_support::{check_one, seed_trace, CountingAlloc};

#[global_allocator]
static A: CountingAlloc = CountingAlloc;

/// splitmix64: deterministic, dependency-free.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

#[test]
fn the_reader_survives_random_and_mutated_traces() {
    let cases: usize = std::env::var("LATSCOPE_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(1500);
    let (seed, _) = seed_trace();
    let mut rng = Rng(42);
    for i in 0..cases {
        let mut input = vec![rng.next() as u8];
        match i % 3 {
            // A mutation program.
            0 => {
                input[0] |= 1;
                let n = rng.below(40);
                input.extend((0..n).map(|_| rng.next() as u8));
            }
            // The seed trace with a few bytes changed, read as bytes.
            1 => {
                input[0] &= !1;
                input.extend_from_slice(seed);
                for _ in 0..1 + rng.below(4) {
                    let p = 1 + rng.below(input.len() - 1);
                    input[p] = rng.next() as u8;
                }
                let cut = 1 + rng.below(input.len());
                input.truncate(cut.max(input.len() / 2));
            }
            // Arbitrary bytes, starting like a message.
            _ => {
                input[0] &= !1;
                input.extend_from_slice(&[0xff, 0xff, 0xff, 0xff]);
                let n = rng.below(300);
                input.extend((0..n).map(|_| rng.next() as u8));
            }
        }
        check_one(&input);
    }
}

/// The committed seeds, including inputs that once failed a check, pass every check.
#[test]
fn the_committed_seeds_pass() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/trace_read");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).expect("fuzz/seeds/trace_read") {
        let p = e.expect("seed entry").path();
        check_one(&std::fs::read(&p).expect("seed file"));
        n += 1;
    }
    assert!(n >= 10, "only {n} seeds in {}", dir.display());
}
