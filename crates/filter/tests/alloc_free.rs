//! Evaluating a filter allocates nothing per event: every field, string and numeric tests, on a
//! batch with every kind of event, long paths and socket names, counted by the allocator.

use latscope_filter::{fields, fuzz_support, FieldType, Filter};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;

static ALLOCS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Count only this thread's allocations while set (the test harness runs others meanwhile).
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.with(Cell::get) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.with(Cell::get) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static A: Counting = Counting;

#[test]
fn evaluation_allocates_nothing_per_event() {
    let (batch, _, ctx) = fuzz_support::sample();
    let mut filters = Vec::new();
    // Fields read by the general checks (several values, an argument): those compute their values
    // per event, and may allocate.
    let general = [
        "evt.arg",
        "evt.rawarg",
        "proc.aname",
        "proc.apid",
        "fd.ip",
        "fd.net",
        "fd.snet",
        "fd.cnet",
        "evt.is_wait",
        "fd.connected",
        "fd.named",
    ];
    for f in fields().iter().filter(|f| !general.contains(&f.name)) {
        let n = f.name;
        filters.push(format!("{n} exists"));
        match f.ty {
            FieldType::String => {
                filters.push(format!("{n} contains 'a-file-name' or {n} glob '*/*'"));
                filters.push(format!("{n} icontains X and not {n} startswith /"));
                filters.push(format!("{n} pmatch (/var/lib, /mnt) or {n} endswith .data"));
            }
            FieldType::Bool => filters.push(format!("{n} = false")),
            _ => {
                filters.push(format!("{n} > 5 or {n} in (1, 2)"));
                filters.push(format!("{n} != 80"));
            }
        }
    }
    filters.push("proc.name=httpd and fd.type=file and evt.latency > 1ms".into());
    filters.push("fd.sip = 10.0.0.1 or fd.cip = ::1 or fd.l4proto in (udp, tcp)".into());
    let compiled: Vec<Filter> = filters.iter().map(|s| Filter::parse(s).unwrap_or_else(|e| panic!("{e}"))).collect();
    let run = || {
        let mut hits = 0usize;
        for f in &compiled {
            for row in 0..batch.len() {
                hits += usize::from(f.matches(batch, row, ctx));
            }
        }
        hits
    };
    // The first pass may grow the thread's spare buffer for long formatted values; the next one
    // must not allocate at all.
    let first = run();
    ALLOCS.store(0, Ordering::Relaxed);
    COUNTING.with(|c| c.set(true));
    let second = run();
    COUNTING.with(|c| c.set(false));
    assert_eq!(first, second);
    assert!(second > 0);
    assert_eq!(ALLOCS.load(Ordering::Relaxed), 0, "allocations while evaluating {} filters", compiled.len());
}
