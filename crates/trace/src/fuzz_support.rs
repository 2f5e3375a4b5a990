//! The fuzzing harness of the trace reader, shared by `fuzz/fuzz_targets/trace_read.rs` and the
//! seeded random test (`tests/fuzz_seeded.rs`); its [`CountingAlloc`] also measures the reader's
//! heap in `tests/bounds.rs`. Not part of the supported API.
//!
//! [`check_one`] takes the fuzzer's bytes: the first byte chooses between arbitrary bytes read
//! as a trace and a program of structure-aware mutations (bit flips, cuts, overwritten words,
//! inserted bytes; blocks spliced over others, duplicated, deleted) applied to a small valid
//! trace ([`seed_trace`]). The result is read as a file (every column, skipping corrupt blocks;
//! a projection; zone-map pruning) and as a stream, and checked:
//!
//! * no panic, and the reader ends (every call moves on);
//! * the heap, counted by [`CountingAlloc`] when the target installs it as its global
//!   allocator, never grows beyond [`allocation_bound`];
//! * for a mutated trace, every block returned is one of the trace's blocks, exactly (or its
//!   projection), unless the reader counted it as unchecked (a block without checksums); the
//!   rest are reported as corrupt, truncated or missing.

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;
use std::os::fd::FromRawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use latscope_event::{Event, EventBatch, ProcessInfo, TraceHeader};

use crate::{Column, ReadOptions, Summary, TraceReader, TraceWriter, WriterOptions, MAX_BLOCK_BYTES, MAX_BLOCK_ROWS};

/// A global allocator that counts the bytes in use and their peak.
pub struct CountingAlloc;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

impl CountingAlloc {
    /// Bytes allocated through the counting allocator and not freed yet.
    pub fn in_use() -> usize {
        CURRENT.load(Ordering::Relaxed)
    }

    /// Starts a new peak at what is in use now.
    pub fn reset_peak() {
        PEAK.store(Self::in_use(), Ordering::Relaxed);
    }

    /// The most bytes in use at once since the last [`CountingAlloc::reset_peak`].
    pub fn peak() -> usize {
        PEAK.load(Ordering::Relaxed)
    }
}

fn grew(by: usize) {
    let now = CURRENT.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: every call is forwarded to the system allocator; the counters do not affect it.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        // SAFETY: as the caller's contract.
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            grew(l.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        // SAFETY: as the caller's contract.
        let p = unsafe { System.alloc_zeroed(l) };
        if !p.is_null() {
            grew(l.size());
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: as the caller's contract.
        unsafe { System.dealloc(p, l) };
        CURRENT.fetch_sub(l.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        // SAFETY: as the caller's contract.
        let q = unsafe { System.realloc(p, l, new) };
        if !q.is_null() {
            CURRENT.fetch_sub(l.size(), Ordering::Relaxed);
            grew(new);
        }
        q
    }
}

/// The most a reader may allocate reading `input_len` bytes: the body and metadata it holds
/// (the input twice: a stream's buffer and the reader's copy), the header's parsed form, and one
/// decoded block ([`MAX_BLOCK_BYTES`], plus zeros for the columns not read), with 16 MiB to spare
/// for the reader's own buffers.
pub fn allocation_bound(input_len: usize) -> usize {
    let row = crate::column::decoded_row_bytes() as usize;
    4 * input_len + MAX_BLOCK_BYTES as usize + MAX_BLOCK_ROWS as usize * row + (16 << 20)
}

/// The small valid trace the mutations start from (3 data blocks of different shapes, an empty
/// one, the summary) and its blocks as written.
pub fn seed_trace() -> &'static (Vec<u8>, Vec<EventBatch>) {
    static S: OnceLock<(Vec<u8>, Vec<EventBatch>)> = OnceLock::new();
    S.get_or_init(|| {
        let header = TraceHeader {
            hostname: "fuzz".into(),
            processes: vec![ProcessInfo { pid: 7, comm: "db".into(), ..Default::default() }],
            ..Default::default()
        };
        let mut blocks = Vec::new();
        let mut b = EventBatch::with_capacity(8);
        for i in 0..6u64 {
            b.push(&Event {
                kind: (i % 3) as u8,
                ts: 1000 + i * 10,
                lat: i * i * 1000,
                pid: 7,
                tid: 7 + i as u32,
                nr: (i * 3) as u16,
                ret: i as i64 - 2,
                fd: i as i32 - 1,
                off: -1,
                comm: "db".into(),
                path: if i % 2 == 0 { format!("/var/ü/{i}") } else { String::new() },
                ..Default::default()
            });
        }
        blocks.push(b);
        blocks.push(EventBatch::with_capacity(0));
        // Equal values in every column (the writer's own zstd frames).
        let mut c = EventBatch::with_capacity(40);
        for _ in 0..40 {
            c.push(&Event { ts: 5000, lat: 3, pid: 9, ret: -1, comm: "k".into(), ..Default::default() });
        }
        blocks.push(c);
        let mut d = EventBatch::with_capacity(3);
        for i in 0..3u64 {
            d.push(&Event { kind: 1, ts: 9000 + i, lat: 77, bytes: 4096, qtime: i, ..Default::default() });
        }
        blocks.push(d);
        let file = MemFile::new();
        let opts = WriterOptions { sync_on_finish: false, existing: crate::Existing::Replace, ..Default::default() };
        let mut w = TraceWriter::create_with(file.path(), &header, opts).expect("seed trace");
        for b in &blocks {
            w.write_batch(b, 1).expect("seed block");
        }
        w.finish(Summary::default()).expect("seed summary");
        (file.read(), blocks)
    })
}

/// An anonymous in-memory file (`memfd`), named by `/proc/self/fd/N`.
struct MemFile(std::fs::File, String);

impl MemFile {
    fn new() -> MemFile {
        // SAFETY: memfd_create with a NUL-terminated name; the descriptor is owned by the File.
        let fd = unsafe { libc::memfd_create(c"latscope-fuzz".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0, "memfd_create: {}", std::io::Error::last_os_error());
        let f = unsafe { std::fs::File::from_raw_fd(fd) };
        MemFile(f, format!("/proc/self/fd/{fd}"))
    }
    fn with(data: &[u8]) -> MemFile {
        let mut m = MemFile::new();
        m.0.write_all(data).expect("memfd write");
        m
    }
    fn path(&self) -> &str {
        &self.1
    }
    fn read(&self) -> Vec<u8> {
        std::fs::read(&self.1).expect("memfd read")
    }
}

/// The seed trace cut into messages: the header, each block, the summary, the end marker.
fn segments(t: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut p = 0;
    while p + 8 <= t.len() {
        let meta = i32::from_le_bytes(t[p + 4..p + 8].try_into().unwrap_or([0; 4])) as usize;
        let body = if meta == 0 {
            0
        } else {
            arrow_ipc::root_as_message(&t[p + 8..p + 8 + meta]).map_or(0, |m| m.bodyLength() as usize)
        };
        let end = (p + 8 + meta + body).min(t.len());
        out.push(t[p..end].to_vec());
        p = end;
    }
    out
}

/// Reads the fuzzer's bytes as numbers.
struct Prog<'a>(&'a [u8]);

impl Prog<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes([self.byte()?, self.byte()?, self.byte()?, self.byte()?]))
    }
}

/// Apply the mutation program `prog` to the seed trace.
fn mutate(prog: &[u8]) -> Vec<u8> {
    let (seed, _) = seed_trace();
    let mut segs = segments(seed);
    let mut p = Prog(prog);
    let mut flat: Option<Vec<u8>> = None;
    for _ in 0..16 {
        let Some(op) = p.byte() else { break };
        // Block-level operations first, on the segments; byte-level ones on the whole.
        let n = segs.len().max(1);
        match op % 8 {
            0..=3 => {
                let bytes = flat.get_or_insert_with(|| segs.concat());
                if bytes.is_empty() {
                    break;
                }
                let Some(pos) = p.u32().map(|x| x as usize % bytes.len()) else { break };
                match op % 8 {
                    0 => bytes[pos] ^= 1 << (p.byte().unwrap_or(0) % 8),
                    1 => bytes.truncate(pos),
                    2 => {
                        let v = p.u32().unwrap_or(u32::MAX).to_le_bytes();
                        let end = (pos + 4).min(bytes.len());
                        bytes[pos..end].copy_from_slice(&v[..end - pos]);
                    }
                    _ => {
                        let k = (p.byte().unwrap_or(0) % 16) as usize;
                        let ins: Vec<u8> = (0..k).map_while(|_| p.byte()).collect();
                        bytes.splice(pos..pos, ins);
                    }
                }
            }
            op => {
                if flat.is_some() || segs.is_empty() {
                    continue;
                }
                let (Some(i), Some(j)) = (p.byte(), p.byte()) else { break };
                let (i, j) = (i as usize % n, j as usize % n);
                match op {
                    4 => segs[j] = segs[i].clone(),
                    5 => {
                        let s = segs[i].clone();
                        segs.insert(j, s);
                    }
                    6 => {
                        segs.remove(i);
                    }
                    _ => segs.swap(i, j),
                }
            }
        }
    }
    flat.unwrap_or_else(|| segs.concat())
}

/// `b` with only `cols` kept (the others zero, as a projected read returns them).
fn project(b: &EventBatch, cols: &[Column]) -> EventBatch {
    let mut out = b.clone();
    macro_rules! zero {
        ($([$(($var:ident, $field:ident, $aty:ty, $dt:ident, $miss:expr)),*])*) => { $($(
            if !cols.contains(&Column::$var) {
                out.$field.iter_mut().for_each(|x| *x = 0);
            }
        )*)* };
    }
    crate::column::with_prim_columns!(zero);
    for (c, col) in [
        (Column::Comm, &mut out.comm),
        (Column::Path, &mut out.path),
        (Column::Path2, &mut out.path2),
        (Column::FaultPath, &mut out.fault_path),
    ] {
        if !cols.contains(&c) {
            col.offsets.iter_mut().for_each(|o| *o = 0);
            col.data.clear();
        }
    }
    out
}

/// Read `r` to its end; every block returned must be one of `known` (when given) unless it was
/// read unchecked. Panics otherwise, or when the reader does not end.
fn drain(mut r: TraceReader, known: Option<&[EventBatch]>, read: Option<&[Column]>, what: &str) {
    // A damaged schema can lose an optional column's name (a bit flip in "off2"): the file then
    // reads as one written before the column existed, which is what the format promises for
    // such files, so the known blocks are compared with that column "not recorded".
    let missing: Vec<Column> = Column::ALL
        .into_iter()
        .filter(|c| c.optional() && r.arrow_schema().field_with_name(c.name()).is_err())
        .filter(|c| read.is_none_or(|cols| cols.contains(c)))
        .collect();
    let known: Option<Vec<EventBatch>> = known.map(|k| {
        k.iter()
            .map(|b| {
                let mut b = b.clone();
                let n = b.len();
                for &c in &missing {
                    crate::column::fill_missing(&mut b, c, n);
                }
                b
            })
            .collect()
    });
    let known = known.as_deref();
    let mut b = EventBatch::default();
    for _ in 0..100_000 {
        let unchecked = r.stats().unchecked_blocks;
        match r.next_batch_into(&mut b) {
            None => return,
            Some(Err(_)) => {}
            Some(Ok(())) => {
                if let Some(known) = known {
                    if r.stats().unchecked_blocks == unchecked && !known.contains(&b) {
                        panic!("{what}: a block was returned that the trace does not hold: {} events\nGOT {:?}\nKNOWN {:?}", b.len(), b, known);
                    }
                }
            }
        }
    }
    panic!("{what}: the reader does not end");
}

/// Run the checks on one input; see the module docs.
pub fn check_one(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else { return };
    let (bytes, known) = if mode % 2 == 0 {
        (rest.to_vec(), None)
    } else {
        let (_, blocks) = seed_trace();
        (mutate(rest), Some(blocks.as_slice()))
    };
    let proj: Vec<Column> = Column::ALL.into_iter().filter(|c| (mode >> 1) & (1 << (c.index() % 7)) != 0).collect();
    let known_proj: Option<Vec<EventBatch>> = known.map(|k| k.iter().map(|b| project(b, &proj)).collect());
    let file = MemFile::with(&bytes);
    let base = CountingAlloc::in_use();
    CountingAlloc::reset_peak();
    let all = ReadOptions { projection: None, skip_corrupt: true };
    if let Ok(r) = TraceReader::open_with(file.path(), all.clone()) {
        drain(r, known, None, "file");
    }
    let projected = ReadOptions { projection: Some(proj.clone()), skip_corrupt: mode & 0x80 != 0 };
    if let Ok(r) = TraceReader::open_with(file.path(), projected.clone()) {
        drain(r, known_proj.as_deref(), Some(&proj), "projected file");
    }
    if let Ok(mut r) = TraceReader::open_with(file.path(), projected) {
        // Pruning: only the block's metadata decides; the values are not checked.
        let mut b = EventBatch::default();
        let mut steps = 0;
        while r
            .next_batch_pruned(&mut b, |m| {
                if m.only_kind(0) {
                    &[Column::Kind][..]
                } else if m.ts_max < Some(2000) {
                    &Column::ALL[..]
                } else {
                    &[][..]
                }
            })
            .is_some()
        {
            steps += 1;
            assert!(steps < 100_000, "pruned read: the reader does not end");
        }
    }
    if let Ok(r) = TraceReader::from_reader("stream", std::io::Cursor::new(bytes.clone()), all) {
        drain(r, known, None, "stream");
    }
    let peak = CountingAlloc::peak().saturating_sub(base);
    let bound = allocation_bound(bytes.len());
    assert!(peak <= bound, "the reader allocated {peak} bytes reading {} bytes (bound {bound})", bytes.len());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_trace_and_its_segments() {
        let (t, blocks) = seed_trace();
        let segs = segments(t);
        // Header, 4 blocks, summary, end marker.
        assert_eq!(segs.len(), 7);
        assert_eq!(segs.concat(), *t);
        let f = MemFile::with(t);
        let got: Vec<EventBatch> = TraceReader::open(f.path()).unwrap().map(|b| b.unwrap()).collect();
        assert_eq!(got.len(), 4);
        assert!(got.iter().all(|b| blocks.contains(b)));
        // No mutation: the trace as it is.
        assert_eq!(mutate(&[]), *t);
        check_one(&[1]);
        check_one(&[0]);
    }
}
