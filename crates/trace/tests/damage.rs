//! Damaged files: cut short at every byte, bit flips, foreign and future files.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::*;
use latscope_event::{EventBatch, TraceHeader};
use latscope_trace::{
    arrow_schema, ReadOptions, Summary, TraceError, TraceReader, TraceWriter, WarningKind, KEY_FORMAT_VERSION,
    KEY_HEADER, KEY_HEADER_CRC,
};

/// A small 3-block trace; returns the batches, the block boundaries
/// (header end, end of each block) and the start of the end-of-stream marker.
fn small_trace(path: &Path) -> (Vec<EventBatch>, Vec<u64>, u64) {
    let mut rng = Rng::new(11);
    let batches: Vec<EventBatch> = [3, 4, 5].iter().map(|&n| random_batch(&mut rng, n)).collect();
    let mut w = TraceWriter::create(path, &sample_header()).unwrap();
    let mut bounds = vec![w.bytes()];
    for b in &batches {
        w.write_batch(b, 1).unwrap();
        bounds.push(w.bytes());
    }
    w.finish(Summary::default()).unwrap();
    let len = std::fs::metadata(path).unwrap().len();
    (batches, bounds, len - 8)
}

struct Outcome {
    batches: Vec<EventBatch>,
    errors: Vec<TraceError>,
    warnings: Vec<WarningKind>,
    messages: Vec<String>,
    summary: bool,
}

fn read(path: &Path, skip_corrupt: bool) -> Result<Outcome, TraceError> {
    let mut r = TraceReader::open_with(path, ReadOptions { skip_corrupt, projection: None })?;
    let (mut batches, mut errors) = (Vec::new(), Vec::new());
    for b in r.by_ref() {
        match b {
            Ok(b) => batches.push(b),
            Err(e) => errors.push(e),
        }
    }
    Ok(Outcome {
        batches,
        errors,
        warnings: r.warnings().iter().map(|w| w.kind.clone()).collect(),
        messages: r.warnings().iter().map(|w| w.to_string()).collect(),
        summary: r.summary().is_some(),
    })
}

#[test]
fn truncation_at_every_byte() {
    let dir = tmpdir("truncate");
    let path = dir.join("t.lst");
    let (batches, bounds, eos) = small_trace(&path);
    let full = std::fs::read(&path).unwrap();
    let cut = dir.join("cut.lst");
    let header_end = bounds[0];
    let summary_start = bounds[3];
    for len in 0..=full.len() as u64 {
        std::fs::write(&cut, &full[..len as usize]).unwrap();
        let res = read(&cut, false);
        if len == 0 {
            assert!(matches!(res, Err(TraceError::Empty { .. })), "len 0");
            continue;
        }
        if len < header_end {
            match res {
                Err(TraceError::HeaderTruncated { offset, .. }) => assert_eq!(offset, len),
                Err(e) => panic!("len {len}: {e}"),
                Ok(_) => panic!("len {len}: opened"),
            }
            continue;
        }
        let o = res.unwrap_or_else(|e| panic!("len {len}: {e}"));
        assert!(o.errors.is_empty(), "len {len}: {:?}", o.errors);
        let complete = bounds[1..].iter().filter(|&&b| b <= len).count().min(3);
        assert_eq!(o.batches, batches[..complete], "len {len}");
        let last_bound = *bounds.iter().filter(|&&b| b <= len).max().unwrap();
        if len == full.len() as u64 {
            assert!(o.warnings.is_empty() && o.summary, "len {len}: {:?}", o.warnings);
        } else if len >= eos {
            assert!(o.summary, "len {len}");
            assert!(matches!(o.warnings[..], [WarningKind::NoEndMarker { .. }]), "len {len}: {:?}", o.warnings);
        } else if len == last_bound {
            assert!(!o.summary);
            assert_eq!(
                o.warnings,
                vec![WarningKind::NotClosed { offset: len, blocks_read: complete as u64, events_read: o.events() }],
                "len {len}"
            );
        } else {
            assert!(!o.summary);
            let block = if last_bound == summary_start { 3 } else { complete as u64 };
            assert_eq!(
                o.warnings,
                vec![WarningKind::Truncated {
                    block,
                    offset: last_bound,
                    ignored_bytes: len - last_bound,
                    blocks_read: complete as u64,
                    events_read: o.events(),
                }],
                "len {len}"
            );
            let msg = &o.messages[0];
            let expect = format!(
                "file ends inside block {block} at byte {last_bound}: {} bytes of an incomplete block ignored; \
                 the recording was not closed cleanly (no summary)",
                len - last_bound
            );
            assert!(msg.contains(&expect), "{msg}");
        }
    }
}

impl Outcome {
    fn events(&self) -> u64 {
        self.batches.iter().map(|b| b.len() as u64).sum()
    }
}

fn body_range(full: &[u8], start: u64, end: u64) -> (usize, usize) {
    let s = start as usize;
    let meta_len = i32::from_le_bytes(full[s + 4..s + 8].try_into().unwrap()) as usize;
    (s + 8 + meta_len, end as usize)
}

#[test]
fn bit_flip_in_a_body_is_a_checksum_error_naming_block_and_offset() {
    let dir = tmpdir("bitflip");
    let path = dir.join("t.lst");
    let (batches, bounds, _) = small_trace(&path);
    let full = std::fs::read(&path).unwrap();
    let bad = dir.join("bad.lst");
    for i in 0..3 {
        let (bs, be) = body_range(&full, bounds[i], bounds[i + 1]);
        let mut data = full.clone();
        data[(bs + be) / 2] ^= 0x10;
        std::fs::write(&bad, &data).unwrap();

        // Without skipping: the blocks before, then the error, then the end.
        let o = read(&bad, false).unwrap();
        assert_eq!(o.batches, batches[..i]);
        assert_eq!(o.errors.len(), 1);
        let e = &o.errors[0];
        assert!(matches!(e, TraceError::Checksum { .. }), "{e}");
        assert_eq!((e.block(), e.offset()), (Some(i as u64), Some(bounds[i])));
        let msg = e.to_string();
        assert!(msg.contains(&format!("block {i} at byte {}", bounds[i])), "{msg}");
        assert!(msg.contains("bad.lst") && msg.contains("checksum mismatch"), "{msg}");

        // Skipping: every other block, and the summary.
        let o = read(&bad, true).unwrap();
        let mut expect = batches.clone();
        expect.remove(i);
        assert_eq!(o.batches, expect);
        assert_eq!(o.errors.len(), 1);
        assert!(o.summary);
        assert!(o.warnings.is_empty(), "{:?}", o.warnings);
    }
}

/// Flip one bit at every byte of block 1 (framing, metadata, body): never a panic, blocks 0
/// and 2 always come back when skipping, block 1 comes back intact or is reported as block 1
/// at its offset.
#[test]
fn bit_flip_at_every_byte_of_a_block() {
    let dir = tmpdir("bitflip-all");
    let path = dir.join("t.lst");
    let (batches, bounds, _) = small_trace(&path);
    let full = std::fs::read(&path).unwrap();
    let bad = dir.join("bad.lst");
    let (mut intact, mut reported) = (0, 0);
    for pos in bounds[1]..bounds[2] {
        let mut data = full.clone();
        data[pos as usize] ^= 1 << (pos % 8);
        std::fs::write(&bad, &data).unwrap();
        let o = read(&bad, true).unwrap_or_else(|e| panic!("flip at {pos}: {e}"));
        assert!(o.summary, "flip at {pos}: {:?} {:?}", o.errors, o.warnings);
        if o.errors.is_empty() {
            assert_eq!(o.batches, batches, "flip at {pos} went unnoticed and changed data");
            intact += 1;
        } else {
            assert_eq!(o.errors.len(), 1, "flip at {pos}: {:?}", o.errors);
            let e = &o.errors[0];
            assert_eq!((e.block(), e.offset()), (Some(1), Some(bounds[1])), "flip at {pos}: {e}");
            assert_eq!(o.batches, vec![batches[0].clone(), batches[2].clone()], "flip at {pos}");
            reported += 1;
        }
        // Without skipping: never a panic, block 0 always readable (every few bytes, to save time).
        if pos.is_multiple_of(4) {
            let o = read(&bad, false).unwrap();
            assert_eq!(o.batches[0], batches[0]);
        }
    }
    assert!(reported > intact, "{reported} reported, {intact} harmless");
}

/// The same with a projected read (only `kind`, `lat` and `path` buffers are read and verified,
/// against the per-buffer checksums): never a panic, blocks 0 and 2 always come back, block 1
/// comes back with the right values or is reported as block 1. A flip in a buffer that is not
/// read may go unnoticed, but never changes what is returned.
#[test]
fn bit_flip_at_every_byte_of_a_block_read_projected() {
    use latscope_trace::Column;
    let dir = tmpdir("bitflip-projected");
    let path = dir.join("t.lst");
    let (batches, bounds, _) = small_trace(&path);
    let full = std::fs::read(&path).unwrap();
    let bad = dir.join("bad.lst");
    let cols = [Column::Kind, Column::Lat, Column::Path];
    let proj = |b: &EventBatch| (b.kind.clone(), b.lat.clone(), b.path.clone());
    let (mut intact, mut reported) = (0, 0);
    for pos in bounds[1]..bounds[2] {
        let mut data = full.clone();
        data[pos as usize] ^= 1 << (pos % 8);
        std::fs::write(&bad, &data).unwrap();
        let opts = ReadOptions { skip_corrupt: true, projection: Some(cols.to_vec()) };
        let mut r = TraceReader::open_with(&bad, opts).unwrap_or_else(|e| panic!("flip at {pos}: {e}"));
        let (mut got, mut errors) = (Vec::new(), Vec::new());
        for b in r.by_ref() {
            match b {
                Ok(b) => got.push(proj(&b)),
                Err(e) => errors.push(e),
            }
        }
        assert!(r.summary().is_some(), "flip at {pos}: {errors:?}");
        if errors.is_empty() {
            assert_eq!(got, batches.iter().map(proj).collect::<Vec<_>>(), "flip at {pos} changed data");
            intact += 1;
        } else {
            assert_eq!(errors.len(), 1, "flip at {pos}: {errors:?}");
            assert_eq!((errors[0].block(), errors[0].offset()), (Some(1), Some(bounds[1])), "flip at {pos}");
            assert_eq!(got, vec![proj(&batches[0]), proj(&batches[2])], "flip at {pos}");
            reported += 1;
        }
    }
    assert!(reported > 0 && intact > 0, "{reported} reported, {intact} harmless");
}

#[test]
fn garbage_between_blocks_is_skipped() {
    let dir = tmpdir("garbage");
    let path = dir.join("t.lst");
    let (batches, bounds, _) = small_trace(&path);
    let full = std::fs::read(&path).unwrap();
    // Overwrite block 1 entirely with 0xff bytes (continuation markers everywhere).
    let mut data = full.clone();
    data[bounds[1] as usize..bounds[2] as usize].fill(0xff);
    let bad = dir.join("bad.lst");
    std::fs::write(&bad, &data).unwrap();
    let o = read(&bad, true).unwrap();
    assert_eq!(o.batches, vec![batches[0].clone(), batches[2].clone()]);
    assert_eq!(o.errors.len(), 1);
    assert!(o.errors[0].to_string().contains(&format!("block 1 at byte {}", bounds[1])), "{}", o.errors[0]);
    assert!(o.summary);
    assert!(
        o.warnings.iter().all(|w| matches!(w, WarningKind::MissingBlocks { expected: 2, found: 2, .. }))
            || o.warnings.is_empty(),
        "{:?}",
        o.warnings
    );

    // Everything after block 0 destroyed: the rest is reported unreadable.
    let mut data = full.clone();
    let n = data.len();
    data[bounds[1] as usize..n].fill(0);
    std::fs::write(&bad, &data).unwrap();
    let o = read(&bad, true).unwrap();
    assert_eq!(o.batches, vec![batches[0].clone()]);
    assert_eq!(o.errors.len(), 1);
    assert!(matches!(o.warnings[..], [WarningKind::Unreadable { .. }]), "{:?}", o.warnings);
}

#[test]
fn trailing_bytes_after_the_end_are_a_warning() {
    let dir = tmpdir("trailing");
    let path = dir.join("t.lst");
    let (batches, _, _) = small_trace(&path);
    let mut data = std::fs::read(&path).unwrap();
    let end = data.len() as u64;
    data.extend_from_slice(b"junk");
    std::fs::write(&path, &data).unwrap();
    let o = read(&path, false).unwrap();
    assert_eq!(o.batches, batches);
    assert_eq!(o.warnings, vec![WarningKind::TrailingData { offset: end, bytes: 4 }]);
}

fn open_err(path: &Path) -> String {
    match TraceReader::open(path) {
        Ok(_) => panic!("{} opened", path.display()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn non_trace_files_are_clear_errors() {
    let dir = tmpdir("nontrace");
    let p = dir.join("empty.lst");
    std::fs::write(&p, b"").unwrap();
    let e = open_err(&p);
    assert!(e.contains("empty.lst") && e.contains("empty file"), "{e}");

    let p = dir.join("text.lst");
    std::fs::write(&p, b"hello world, this is not a trace\n").unwrap();
    let e = open_err(&p);
    assert!(e.contains("text.lst: not a latscope trace: a text file"), "{e}");

    let p = dir.join("bin.lst");
    std::fs::write(&p, [0u8, 1, 2, 3, 4, 5, 6, 7, 8, 9]).unwrap();
    let e = open_err(&p);
    assert!(e.contains("not an Arrow IPC stream (it starts with bytes 00 01 02 03"), "{e}");

    let p = dir.join("file.arrow");
    std::fs::write(&p, b"ARROW1\0\0whatever").unwrap();
    let e = open_err(&p);
    assert!(e.contains("an Arrow IPC file (Feather v2)"), "{e}");

    let p = dir.join("missing.lst");
    let e = open_err(&p);
    assert!(e.contains("missing.lst: opening:"), "{e}");

    // An Arrow stream of something else.
    let p = dir.join("other.arrows");
    let schema =
        Arc::new(arrow_schema::Schema::new(vec![arrow_schema::Field::new("x", arrow_schema::DataType::Int32, false)]));
    let mut w = arrow_ipc::writer::StreamWriter::try_new(std::fs::File::create(&p).unwrap(), &schema).unwrap();
    let col = Arc::new(arrow_array::Int32Array::from(vec![1, 2, 3])) as arrow_array::ArrayRef;
    w.write(&arrow_array::RecordBatch::try_new(schema.clone(), vec![col]).unwrap()).unwrap();
    w.finish().unwrap();
    let e = open_err(&p);
    assert!(e.contains("not a latscope trace: an Arrow IPC stream without latscope metadata (columns: x)"), "{e}");

    // A stream that is only an end-of-stream marker.
    let p = dir.join("eos.lst");
    std::fs::write(&p, [0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]).unwrap();
    let e = open_err(&p);
    assert!(e.contains("empty Arrow IPC stream"), "{e}");
}

/// Write a stream with the latscope schema and chosen schema metadata through plain arrow-ipc
/// (no per-block latscope metadata), keeping the header's checksum as a tool that copies the
/// schema's metadata does.
fn foreign_trace(path: &Path, version: &str, header: &str, batch: &EventBatch) {
    let crc = format!("{:08x}", crc32c::crc32c(header.as_bytes()));
    foreign_trace_with(path, version, header, (KEY_HEADER_CRC, &crc), batch)
}

/// As `foreign_trace`, with the header checksum stored under `crc.0`.
fn foreign_trace_with(path: &Path, version: &str, header: &str, crc: (&str, &str), batch: &EventBatch) {
    let md = [
        (KEY_FORMAT_VERSION.to_string(), version.to_string()),
        (KEY_HEADER.to_string(), header.to_string()),
        (crc.0.to_string(), crc.1.to_string()),
    ];
    let schema = Arc::new(arrow_schema().with_metadata(md.into_iter().collect::<std::collections::HashMap<_, _>>()));
    // Build the record batch through the crate: write a trace, read it with arrow-ipc.
    let tmp = path.with_extension("tmp");
    let mut w = TraceWriter::create(&tmp, &sample_header()).unwrap();
    w.write_batch(batch, 0).unwrap();
    w.finish(Summary::default()).unwrap();
    let r = arrow_ipc::reader::StreamReader::try_new(std::fs::File::open(&tmp).unwrap(), None).unwrap();
    let mut out = arrow_ipc::writer::StreamWriter::try_new(std::fs::File::create(path).unwrap(), &schema).unwrap();
    for rb in r {
        let rb = rb.unwrap();
        if rb.num_rows() > 0 {
            out.write(&arrow_array::RecordBatch::try_new(schema.clone(), rb.columns().to_vec()).unwrap()).unwrap();
        }
    }
    out.finish().unwrap();
}

#[test]
fn future_version_and_bad_headers_are_clear_errors() {
    let dir = tmpdir("version");
    let mut rng = Rng::new(12);
    let b = random_batch(&mut rng, 10);
    let header = serde_json::to_string(&sample_header()).unwrap();

    let p = dir.join("future.lst");
    foreign_trace(&p, "2", &header, &b);
    let e = open_err(&p);
    assert!(
        e.contains("future.lst: trace format version 2 is newer than this latscope reads (up to version 1)")
            && e.contains("newer latscope"),
        "{e}"
    );

    let p = dir.join("badjson.lst");
    foreign_trace(&p, "1", "{not json", &b);
    let e = open_err(&p);
    assert!(e.contains("bad trace header at byte 0: unreadable header JSON"), "{e}");

    let p = dir.join("badversion.lst");
    foreign_trace(&p, "one", &header, &b);
    assert!(open_err(&p).contains("is not a number"));
}

#[test]
fn a_header_whose_checksum_key_was_renamed_is_refused_not_read_as_valid() {
    let dir = tmpdir("renamedcrc");
    let mut rng = Rng::new(14);
    let b = random_batch(&mut rng, 10);
    let mut header = sample_header();
    let good = serde_json::to_string(&header).unwrap();
    let crc = format!("{:08x}", crc32c::crc32c(good.as_bytes()));
    header.hostname = "altered-host".into();
    let altered = serde_json::to_string(&header).unwrap();
    let p = dir.join("renamed.lst");
    foreign_trace_with(&p, "1", &altered, ("latscope.header_crc32x", &crc), &b);
    let e = open_err(&p);
    assert!(e.contains("renamed.lst") && e.contains("latscope.header_crc32c metadata is missing"), "{e}");
    assert!(e.contains("altered"), "{e}");
    // The same altered header under the right key is a checksum mismatch.
    let p = dir.join("mismatch.lst");
    foreign_trace_with(&p, "1", &altered, (KEY_HEADER_CRC, &crc), &b);
    assert!(open_err(&p).contains("header checksum mismatch"));
}

#[test]
fn streams_rewritten_by_other_tools_are_read_unchecked() {
    let dir = tmpdir("foreign");
    let mut rng = Rng::new(13);
    let b = random_batch(&mut rng, 100);
    let p = dir.join("rewritten.lst");
    let header = sample_header();
    foreign_trace(&p, "1", &serde_json::to_string(&header).unwrap(), &b);
    let mut r = TraceReader::open(&p).unwrap();
    assert_eq!(r.header(), &header);
    assert_eq!(r.read_all().unwrap(), b);
    assert_eq!(r.stats().unchecked_blocks, 1);
    assert!(r.summary().is_none());
    let w: Vec<String> = r.warnings().iter().map(|w| w.to_string()).collect();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("without a summary"), "{w:?}");
}

#[test]
fn header_damage_is_detected() {
    let dir = tmpdir("headerdamage");
    let path = dir.join("t.lst");
    let (_, bounds, _) = small_trace(&path);
    let full = std::fs::read(&path).unwrap();
    // Flip a bit in the hostname inside the header JSON.
    let needle = "höst-1".as_bytes();
    let at = full.windows(needle.len()).position(|w| w == needle).unwrap();
    assert!((at as u64) < bounds[0]);
    let mut data = full.clone();
    data[at] ^= 0x02;
    let bad = dir.join("bad.lst");
    std::fs::write(&bad, &data).unwrap();
    let e = open_err(&bad);
    assert!(e.contains("header checksum mismatch"), "{e}");

    // Every single-bit flip in the header: an error or an identical header, never a panic.
    let good = TraceReader::open(&path).unwrap().header().clone();
    for pos in 0..bounds[0] as usize {
        let mut data = full.clone();
        data[pos] ^= 1 << (pos % 8);
        std::fs::write(&bad, &data).unwrap();
        if let Ok(r) = TraceReader::open(&bad) {
            assert_eq!(r.header(), &good, "flip at {pos}");
        }
    }
}

#[test]
fn writer_errors_name_the_file() {
    let e = TraceWriter::create("/nonexistent-dir/x.lst", &TraceHeader::default()).unwrap_err();
    let m = e.to_string();
    assert!(m.contains("/nonexistent-dir/x.lst: creating the file in /nonexistent-dir:"), "{m}");
}

/// Writing to /dev/full: the header cannot be written, and the error says so.
#[test]
fn a_device_that_is_full_refuses_the_header() {
    if !Path::new("/dev/full").exists() {
        println!("SKIPPED a_device_that_is_full_refuses_the_header: no /dev/full");
        return;
    }
    let e = TraceWriter::create("/dev/full", &sample_header()).unwrap_err();
    assert!(e.to_string().contains("writing the header"), "{e}");
}

/// A file system that fills up mid-recording (a 1 MiB tmpfs): the writer reports the error
/// naming the file, refuses further blocks, and every block written before reads back intact.
#[test]
fn full_disk_keeps_the_file_readable() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        assert!(std::env::var("CI").as_deref() != Ok("true"), "full_disk_keeps_the_file_readable: needs root under CI");
        println!("SKIPPED full_disk_keeps_the_file_readable: mounting a small tmpfs needs root");
        return;
    }
    let dir = tmpdir("full-disk");
    let mnt = dir.join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let ok = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "latscope-full"])
        .arg(&mnt)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "cannot mount a tmpfs on {}", mnt.display());
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }
    let _u = Unmount(mnt.clone());
    let path = mnt.join("t.lst");
    let opts = latscope_trace::WriterOptions { compression: latscope_trace::Compression::None, ..Default::default() };
    let mut w = TraceWriter::create_with(&path, &sample_header(), opts).unwrap();
    let mut rng = Rng::new(5);
    let mut written = Vec::new();
    let err = loop {
        let b = random_batch(&mut rng, 500);
        match w.write_batch(&b, 0) {
            Ok(()) => written.push(b),
            Err(e) => break e,
        }
        assert!(written.len() < 100_000, "the 1 MiB file system never filled up");
    };
    assert!(err.to_string().contains(path.to_str().unwrap()), "the error names the file: {err}");
    assert!(err.to_string().contains("No space left"), "{err}");
    assert!(!written.is_empty(), "no block fit before the disk was full");
    // Further blocks are refused, not half-written.
    assert!(w.write_batch(&random_batch(&mut rng, 3), 0).is_err());
    drop(w);
    // Every block written before the disk filled up reads back; the cut is reported.
    let out = read(&path, true).unwrap();
    assert_eq!(out.batches, written, "the blocks before the full disk");
    assert!(!out.summary, "no summary on a file cut by a full disk");
    assert!(
        out.warnings.iter().any(|w| matches!(w, WarningKind::Truncated { .. } | WarningKind::NotClosed { .. })),
        "the cut is reported: {:?}",
        out.messages
    );
}

/// The schema's column names and types were outside every checksum: a bit flip renaming
/// `fault_off` to `fault_kff` made the column read as absent (-1 everywhere), silently. Every byte
/// of the schema message flipped: an error naming the header, or a read identical to the
/// original (a flip in padding), never a silent misread.
#[test]
fn a_bit_flip_in_the_schema_is_an_error_naming_the_header_never_a_silent_misread() {
    let dir = tmpdir("schemaflip");
    let path = dir.join("t.lst");
    let (batches, bounds, _) = small_trace(&path);
    let full = std::fs::read(&path).unwrap();
    let bad = dir.join("bad.lst");

    // The column renamed by one bit ('o' 0x6f -> 'k' 0x6b).
    let at = full.windows(9).position(|w| w == b"fault_off").unwrap();
    assert!((at as u64) < bounds[0]);
    let mut data = full.clone();
    data[at + 6] ^= 0x04;
    assert_eq!(&data[at..at + 9], b"fault_kff");
    std::fs::write(&bad, &data).unwrap();
    let e = open_err(&bad);
    assert!(e.contains("bad trace header at byte 0: schema checksum mismatch"), "{e}");
    assert!(e.contains("column names, types"), "{e}");

    // Every byte of the schema message (its header JSON excepted: its own checksum covers it,
    // see header_damage_is_detected), each bit in turn.
    let header_json = serde_json::to_string(&sample_header()).unwrap();
    let json_at = full.windows(16).position(|w| w == &header_json.as_bytes()[..16]).unwrap();
    let json_end = json_at + header_json.len();
    let want = concat(&batches);
    let good = TraceReader::open(&path).unwrap().header().clone();
    for pos in (0..bounds[0] as usize).filter(|p| !(json_at..json_end).contains(p)) {
        for bit in [pos % 8, (pos + 3) % 8] {
            let mut data = full.clone();
            data[pos] ^= 1 << bit;
            std::fs::write(&bad, &data).unwrap();
            let Ok(mut r) = TraceReader::open(&bad) else { continue };
            assert_eq!(r.header(), &good, "flip at {pos} bit {bit}");
            // Read on: the same events, or an error or warning that says what is wrong.
            let res = r.read_all();
            let silent = matches!(&res, Ok(b) if *b != want) && r.warnings().is_empty();
            assert!(!silent, "flip at {pos} bit {bit} read silently wrong");
        }
    }

    // A file written before the schema checksum existed is read as before (unchecked).
    let mut rng = Rng::new(15);
    let b = random_batch(&mut rng, 10);
    let p = dir.join("older.lst");
    foreign_trace(&p, "1", &header_json, &b);
    assert_eq!(TraceReader::open(&p).unwrap().read_all().unwrap(), b);
}
