//! Read arbitrary bytes, and structure-aware mutations of a small valid trace, as a trace file
//! (every column, a projection, zone-map pruning) and as a stream; check the invariants of
//! `latscope_trace::fuzz_support::check_one`: no panic, the reader ends, the heap (counted by
//! this target's global allocator) stays within `allocation_bound`, and every block returned
//! from a mutated trace is one of its blocks or was reported.
//!
//! cargo +nightly fuzz run trace_read fuzz/corpus/trace_read fuzz/seeds/trace_read -- -max_len=65536
#![no_main]

use latscope_trace::fuzz_support::{check_one, CountingAlloc};
use libfuzzer_sys::fuzz_target;

#[global_allocator]
static A: CountingAlloc = CountingAlloc;

fuzz_target!(|data: &[u8]| {
    check_one(data);
});
