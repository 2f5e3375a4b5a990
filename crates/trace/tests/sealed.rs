//! Blocks sealed apart from a file and written later (a flight recorder's ring, rotating files):
//! a window cut from the middle of a recording is an ordinary trace.

use latscope_event::{EventBatch, StackEntry, StackKind};
use latscope_trace::synth::{random_batch, sample_header, Rng};
use latscope_trace::{BlockSealer, Compression, SealedBlock, Summary, TraceReader, TraceWriter};
use std::path::PathBuf;
use std::sync::Arc;

/// A fresh directory for one test.
fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("latscope-sealed-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Ten batches, each bringing one stack table entry (id = its number + 1).
fn recording() -> (Vec<EventBatch>, Vec<Arc<SealedBlock>>) {
    let mut rng = Rng::new(40);
    let mut sealer = BlockSealer::new(Compression::Zstd(1), "ring").unwrap();
    let mut batches = Vec::new();
    let mut blocks = Vec::new();
    for i in 0..10u32 {
        let mut b = random_batch(&mut rng, 500 + i as usize * 10);
        let e = StackEntry {
            id: i + 1,
            kind: StackKind::Kernel,
            frames: Vec::new(),
            truncated: false,
            missing: Some("test".into()),
            cut: None,
        };
        b.stacks = e.to_line();
        let sealed = sealer.seal(&b, u64::from(i) * 3).unwrap();
        assert_eq!(sealed.len(), 1);
        assert_eq!(sealed[0].events(), b.len());
        assert_eq!(sealed[0].lost_total(), u64::from(i) * 3);
        blocks.extend(sealed);
        batches.push(b);
    }
    (batches, blocks)
}

#[test]
fn a_window_cut_from_the_middle_of_a_recording_reads_as_an_ordinary_trace() {
    let (batches, blocks) = recording();
    let dir = tempdir("window");
    let path = dir.join("window.lst");
    let mut w = TraceWriter::create(&path, &sample_header()).unwrap();
    // Blocks 4..9: the entries of blocks 0..3 go before block 4's own; losses from block 3's.
    let before: String = blocks[..4].iter().map(|b| b.stacks()).collect();
    let base = blocks[3].lost_total();
    for (i, b) in blocks[4..].iter().enumerate() {
        w.write_sealed(b, b.lost_total() - base, if i == 0 { &before } else { "" }).unwrap();
    }
    let s = w.finish(Summary::default()).unwrap();
    let want: usize = batches[4..].iter().map(EventBatch::len).sum();
    assert_eq!((s.events as usize, s.blocks, s.lost), (want, 6, blocks[9].lost_total() - base));

    let mut r = TraceReader::open(&path).unwrap();
    let mut n = 0;
    for (i, got) in r.by_ref().enumerate() {
        let mut got = got.unwrap();
        let mut expect = batches[4 + i].clone();
        got.stacks.clear();
        expect.stacks.clear();
        assert_eq!(got, expect, "block {i}");
        n += 1;
    }
    assert_eq!(n, 6);
    assert!(r.warnings().is_empty(), "{:?}", r.warnings());
    assert_eq!(r.summary().unwrap().events as usize, want);
    let meta = r.last_block_meta().unwrap();
    assert_eq!(meta.seq, Some(6), "blocks numbered from 0, the summary after them");

    // Every stack entry its events may use is in the file.
    let table = TraceReader::open(&path).unwrap().read_stack_table().unwrap();
    for id in 1..=10 {
        assert!(table.get(id).is_some(), "stack {id} missing");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_sealed_block_is_what_a_writer_would_have_written() {
    let (batches, blocks) = recording();
    let dir = tempdir("same");
    let (a, b) = (dir.join("direct.lst"), dir.join("sealed.lst"));
    let mut w = TraceWriter::create(&a, &sample_header()).unwrap();
    for (i, x) in batches.iter().enumerate() {
        w.write_batch(x, i as u64 * 3).unwrap();
    }
    w.finish(Summary::default()).unwrap();
    let mut w = TraceWriter::create(&b, &sample_header()).unwrap();
    for x in &blocks {
        w.write_sealed(x, x.lost_total(), "").unwrap();
    }
    w.finish(Summary::default()).unwrap();
    // Block by block the same metadata (number, counts, zone map, checksums of body and
    // metadata) and the same events.
    let (mut ra, mut rb) = (TraceReader::open(&a).unwrap(), TraceReader::open(&b).unwrap());
    loop {
        match (ra.next_batch(), rb.next_batch()) {
            (None, None) => break,
            (Some(x), Some(y)) => {
                assert_eq!(x.unwrap(), y.unwrap());
                assert_eq!(ra.last_block_meta(), rb.last_block_meta());
            }
            (x, y) => panic!("different block counts: {:?} {:?}", x.is_some(), y.is_some()),
        }
    }
    assert!(ra.warnings().is_empty() && rb.warnings().is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}
