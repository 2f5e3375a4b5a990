//! Blocks that declare more rows or bytes than a block may hold are refused before anything is
//! allocated for them; what is allowed stays within the stated bound. Peak heap use is measured
//! with a counting allocator (this test binary's global allocator).

mod common;

use common::*;
use latscope_trace::fuzz_support::CountingAlloc;
use latscope_trace::{Column, ReadOptions, TraceReader, TraceWriter, MAX_BLOCK_BYTES, MAX_BLOCK_ROWS};

#[global_allocator]
static A: CountingAlloc = CountingAlloc;

/// A zstd frame of `len` zero bytes made of RLE blocks (4 bytes per 128 KiB).
fn zeros_frame(len: usize) -> Vec<u8> {
    let mut f = 0xFD2F_B528u32.to_le_bytes().to_vec();
    f.push(0b1110_0000);
    f.extend_from_slice(&(len as u64).to_le_bytes());
    let mut left = len;
    while left > 0 {
        let b = left.min(128 << 10);
        left -= b;
        let h = (left == 0) as u32 | (1 << 1) | ((b as u32) << 3);
        f.extend_from_slice(&h.to_le_bytes()[..3]);
        f.push(0);
    }
    f
}

/// A record batch message of `rows` rows whose every column is zeros (empty strings), each
/// buffer a zstd frame; buffer `lie` (if any) declares `lie_size` decompressed bytes.
fn zero_block(rows: i64, lie: Option<(usize, i64)>) -> Vec<u8> {
    let mut body = Vec::new();
    let mut buffers = Vec::new();
    let push = |body: &mut Vec<u8>, buffers: &mut Vec<arrow_ipc::Buffer>, bytes: usize| {
        let i = buffers.len();
        let start = body.len();
        if bytes > 0 {
            let declared = match lie {
                Some((b, size)) if b == i => size,
                _ => bytes as i64,
            };
            body.extend_from_slice(&declared.to_le_bytes());
            body.extend_from_slice(&zeros_frame(bytes));
        }
        buffers.push(arrow_ipc::Buffer::new(start as i64, (body.len() - start) as i64));
        body.resize(body.len().next_multiple_of(8), 0);
    };
    let n = rows.max(0) as usize;
    for c in Column::ALL {
        push(&mut body, &mut buffers, 0);
        match c.data_type().primitive_width() {
            Some(w) => push(&mut body, &mut buffers, n * w),
            None => {
                push(&mut body, &mut buffers, (n + 1) * 4);
                push(&mut body, &mut buffers, 0);
            }
        }
    }
    message(rows, &buffers, body)
}

fn message(rows: i64, buffers: &[arrow_ipc::Buffer], body: Vec<u8>) -> Vec<u8> {
    let mut fbb = flatbuffers::FlatBufferBuilder::new();
    let nodes: Vec<arrow_ipc::FieldNode> = Column::ALL.iter().map(|_| arrow_ipc::FieldNode::new(rows, 0)).collect();
    let nodes = fbb.create_vector(&nodes);
    let bufs = fbb.create_vector(buffers);
    let mut cb = arrow_ipc::BodyCompressionBuilder::new(&mut fbb);
    cb.add_codec(arrow_ipc::CompressionType::ZSTD);
    let comp = cb.finish();
    let mut b = arrow_ipc::RecordBatchBuilder::new(&mut fbb);
    b.add_length(rows);
    b.add_nodes(nodes);
    b.add_buffers(bufs);
    b.add_compression(comp);
    let rb = b.finish();
    let (k, v) = (fbb.create_string("latscope.seq"), fbb.create_string("0"));
    let mut kb = arrow_ipc::KeyValueBuilder::new(&mut fbb);
    kb.add_key(k);
    kb.add_value(v);
    let kv = kb.finish();
    let kvs = fbb.create_vector(&[kv]);
    let mut m = arrow_ipc::MessageBuilder::new(&mut fbb);
    m.add_version(arrow_ipc::MetadataVersion::V5);
    m.add_header_type(arrow_ipc::MessageHeader::RecordBatch);
    m.add_header(rb.as_union_value());
    m.add_bodyLength(body.len() as i64);
    m.add_custom_metadata(kvs);
    let root = m.finish();
    fbb.finish(root, None);
    let meta = fbb.finished_data();
    let padded = meta.len().next_multiple_of(8);
    let mut out = vec![0xff, 0xff, 0xff, 0xff];
    out.extend_from_slice(&(padded as i32).to_le_bytes());
    out.extend_from_slice(meta);
    out.resize(8 + padded, 0);
    out.extend_from_slice(&body);
    out
}

/// A trace's header message (from a trace without blocks).
fn header_bytes(dir: &std::path::Path) -> Vec<u8> {
    let p = dir.join("h.lst");
    drop(TraceWriter::create(&p, &sample_header()).unwrap());
    std::fs::read(&p).unwrap()
}

/// Read every block (every column) of `bytes` as a file and as a stream; the peak heap use above
/// what was in use before, and the first error or the events read.
fn read_peak(dir: &std::path::Path, bytes: &[u8], stream: bool) -> (usize, Result<u64, String>) {
    let p = dir.join("x.lst");
    std::fs::write(&p, bytes).unwrap();
    let data = bytes.to_vec();
    let base = CountingAlloc::in_use() + if stream { data.len() } else { 0 };
    CountingAlloc::reset_peak();
    let r = if stream {
        TraceReader::from_reader("x", std::io::Cursor::new(data), ReadOptions::default())
    } else {
        TraceReader::open(&p)
    };
    let res = r.map_err(|e| e.to_string()).and_then(|mut r| {
        let mut b = latscope_event::EventBatch::default();
        let mut n = 0;
        while let Some(x) = r.next_batch_into(&mut b) {
            x.map_err(|e| e.to_string())?;
            n += b.len() as u64;
        }
        Ok(n)
    });
    (CountingAlloc::peak().saturating_sub(base), res)
}

const MIB: usize = 1 << 20;

#[test]
fn blocks_beyond_the_bounds_are_refused_before_allocation() {
    let dir = tmpdir("bounds");
    let header = header_bytes(&dir);
    let with = |block: Vec<u8>| [header.clone(), block].concat();

    // 16 Mi rows of zeros: a few hundred KB that decode to 2 GB. Refused at the row count.
    let huge = with(zero_block(1 << 24, None));
    assert!(huge.len() < 600 << 10, "{}", huge.len());
    for stream in [false, true] {
        let (peak, res) = read_peak(&dir, &huge, stream);
        let e = res.unwrap_err();
        assert!(e.contains("declares 16777216 rows; a block has at most 1048576"), "{e}");
        assert!(peak < huge.len() + 16 * MIB, "stream {stream}: peak {peak} bytes");
    }

    // Allowed rows, but a buffer declaring more than a block decodes to: refused before
    // decompressing.
    let lie = with(zero_block(1000, Some((3, 300 << 20))));
    for stream in [false, true] {
        let (peak, res) = read_peak(&dir, &lie, stream);
        let e = res.unwrap_err();
        assert!(e.contains("a block decodes to at most 268435456"), "{e}");
        assert!(peak < lie.len() + 16 * MIB, "peak {peak}");
    }

    // A body or metadata length beyond the bounds, declared on a stream: refused before reading.
    let mut big_body = zero_block(10, None);
    let meta_len = i32::from_le_bytes(big_body[4..8].try_into().unwrap()) as usize;
    let msg = arrow_ipc::root_as_message(&big_body[8..8 + meta_len]).unwrap();
    assert_eq!(msg.bodyLength() as usize, big_body.len() - 8 - meta_len);
    // Patch bodyLength in place: find its little-endian bytes in the flatbuffer.
    let old = msg.bodyLength().to_le_bytes();
    let at = big_body[8..8 + meta_len].windows(8).position(|w| w == old).unwrap() + 8;
    big_body[at..at + 8].copy_from_slice(&(1i64 << 40).to_le_bytes());
    let mut big_meta = vec![0xff, 0xff, 0xff, 0xff];
    big_meta.extend_from_slice(&(i32::MAX - 7).to_le_bytes());
    for (block, want) in
        [(big_body, "body length 1099511627776 is more than"), (big_meta, "metadata length 2147483640")]
    {
        let (peak, res) = read_peak(&dir, &with(block), true);
        let e = res.unwrap_err();
        assert!(e.contains(want), "{e}");
        assert!(peak < 16 * MIB, "peak {peak}");
    }

    // The largest block allowed: 1 Mi rows, or fewer when that many rows of every column
    // would decode to more than MAX_BLOCK_BYTES (the writer splits there). Decoded within
    // MAX_BLOCK_BYTES (plus what the reader reuses), every event read.
    let row: u64 = Column::ALL.iter().map(|c| c.data_type().primitive_width().unwrap_or(4) as u64).sum();
    let rows = (MAX_BLOCK_ROWS as u64).min(MAX_BLOCK_BYTES / row);
    let max = with(zero_block(rows as i64, None));
    for stream in [false, true] {
        let (peak, res) = read_peak(&dir, &max, stream);
        assert_eq!(res.unwrap(), rows);
        assert!(peak < MAX_BLOCK_BYTES as usize + max.len() + 48 * MIB, "peak {} MiB", peak / MIB);
    }
}
