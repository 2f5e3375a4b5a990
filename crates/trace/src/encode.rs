//! Encoding an [`EventBatch`] straight into a block message: Arrow IPC record batch metadata
//! and body, without building Arrow arrays.
//!
//! The mirror of [`crate::decode`]: the trace's columns are flat, so the body is each column's
//! validity buffer (always empty: no nulls), values buffer (and for strings an offsets buffer
//! before the data), each compressed on its own and padded to 8 bytes, exactly as arrow-ipc lays
//! it out. Writing it here rather than through arrow-ipc's encoder saves a copy of every column
//! into Arrow arrays, a fresh allocation per buffer per block (page faults on every block), and
//! re-building the message to add the block's metadata.
//!
//! Per buffer the encoder picks the cheapest stored form that every Arrow reader decodes:
//!
//! * a buffer whose values are all equal (common: most columns of a block from one busy
//!   process are) is written as a zstd frame built here ([`constant_frame`]): per 128 KiB zstd
//!   block, one value as literals and one match repeating it, ~20 bytes, without looking at the
//!   data again; zstd level 1's match finder spends 10 to 15 times longer than that on a column
//!   of equal small numbers (their zero bytes match at distance 1 first);
//! * anything else goes through zstd at the chosen level;
//! * a buffer that does not shrink is stored raw (length prefix `-1`), as arrow-ipc does.

use std::io::Cursor;
use std::ops::Range;

use arrow_ipc::{BodyCompressionMethod, CompressionType, MetadataVersion};
use flatbuffers::FlatBufferBuilder;
use latscope_event::{EventBatch, StrCol};

use crate::column::with_prim_columns;
use crate::decode::Plain;
use crate::meta::{body_checksums, frame_metadata, meta_digest_parts, BlockMeta, KEY_META_CRC};
use crate::{Column, Compression};

/// One encoded block: the framed metadata message and the body, ready to be written.
#[derive(Debug, Default)]
pub(crate) struct EncodedBlock {
    /// Continuation marker, metadata length, `Message` flatbuffer, padding.
    pub frame: Vec<u8>,
    /// The message body (compressed buffers, padded).
    pub body: Vec<u8>,
    /// Events in the block.
    pub events: usize,
}

/// What is reused from one block to the next: zstd contexts, the remembered frames of constant
/// buffers, scratch space, the flatbuffer builder.
pub(crate) struct Encoder {
    compression: Compression,
    zstd: Option<zstd::zstd_safe::CCtx<'static>>,
    /// `(offset, length)` of each buffer in the body.
    buffers: Vec<(i64, i64)>,
    /// Rebased string offsets of a slice.
    offsets: Vec<u32>,
    fbb: FlatBufferBuilder<'static>,
}

impl std::fmt::Debug for Encoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Encoder").field("compression", &self.compression).finish_non_exhaustive()
    }
}

/// The bytes of a slice of fixed-width values, little-endian.
fn le_bytes<'a, T: Plain>(v: &'a [T], scratch: &'a mut Vec<u8>) -> &'a [u8] {
    if cfg!(target_endian = "little") {
        // SAFETY: `T` is a primitive integer (no padding, every byte initialised); the slice
        // covers exactly the values' memory.
        unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
    } else {
        scratch.clear();
        for x in v {
            let le = x.le_to_native();
            // SAFETY: as above, for one value.
            scratch.extend_from_slice(unsafe {
                std::slice::from_raw_parts((&le as *const T).cast::<u8>(), std::mem::size_of::<T>())
            });
        }
        scratch
    }
}

/// Whether every value of `v` equals the first (no early exit inside a chunk: vectorised).
fn all_equal<T: Plain + PartialEq>(v: &[T]) -> bool {
    let Some(&first) = v.first() else { return false };
    v.chunks(256).all(|c| c.iter().fold(true, |a, &x| a & (x == first)))
}

impl Encoder {
    /// An encoder for `compression`; errors: an invalid zstd level.
    pub(crate) fn new(compression: Compression) -> Result<Encoder, String> {
        use zstd::zstd_safe::{CCtx, CParameter};
        let zstd = match compression {
            Compression::None => None,
            Compression::Zstd(level) => {
                let (min, max) = (zstd::zstd_safe::min_c_level(), zstd::zstd_safe::max_c_level());
                if !(min..=max).contains(&level) {
                    return Err(format!("zstd level {level} is out of range ({min} to {max})"));
                }
                let mut c = CCtx::try_create().ok_or("cannot create a zstd context")?;
                c.set_parameter(CParameter::CompressionLevel(level))
                    .map_err(|e| format!("zstd level {level}: {}", zstd::zstd_safe::get_error_name(e)))?;
                Some(c)
            }
        };
        Ok(Encoder { compression, zstd, buffers: Vec::new(), offsets: Vec::new(), fbb: FlatBufferBuilder::new() })
    }

    /// Encode events `range` of `batch` (which the caller has validated with
    /// [`validate_batch`]) as one block with metadata `meta` (its checksums, and its zone map
    /// when `zone_maps`, are filled in here) into `out`.
    ///
    /// With `zone_maps` off the block carries only the keys latscope wrote before zone maps and
    /// per-buffer checksums existed.
    pub(crate) fn encode(
        &mut self,
        batch: &EventBatch,
        range: Range<usize>,
        mut meta: BlockMeta,
        zone_maps: bool,
        out: &mut EncodedBlock,
    ) -> Result<(), String> {
        let n = range.len();
        if let (Some(k), Some(t), Some(l)) =
            (batch.kind.get(range.clone()), batch.ts.get(range.clone()), batch.lat.get(range.clone()))
        {
            meta.set_zone(k, t, l);
            if !zone_maps {
                meta.kinds = None;
                (meta.lat_min, meta.lat_max, meta.end_min, meta.end_max) = (None, None, None, None);
            }
        }
        out.body.clear();
        out.events = n;
        self.buffers.clear();
        let mut scratch = Vec::new();
        let mut buf = 0usize;
        for c in Column::ALL {
            // The validity buffer: empty (no nulls).
            self.buffers.push((out.body.len() as i64, 0));
            buf += 1;
            macro_rules! prim {
                ($([$(($var:ident, $field:ident, $aty:ty, $dt:ident, $miss:expr)),*])*) => {
                    match c {
                        $($(Column::$var => {
                            let v = &batch.$field[range.clone()];
                            let width = all_equal(v).then(|| std::mem::size_of_val(&v[0]));
                            self.push_buffer(&mut out.body, le_bytes(v, &mut scratch), width)?;
                            buf += 1;
                            continue;
                        })*)*
                        _ => {}
                    }
                };
            }
            with_prim_columns!(prim);
            let col = match c {
                Column::Comm => &batch.comm,
                Column::Path => &batch.path,
                Column::Path2 => &batch.path2,
                Column::FaultPath => &batch.fault_path,
                _ => return Err(format!("column {c} has no encoder")),
            };
            buf = self.push_strings(&mut out.body, buf, col, range.clone(), &mut scratch)?;
        }

        if zone_maps {
            let (body, per_buffer) = body_checksums(&out.body, self.buffers.iter().copied());
            meta.crc32c = Some(body);
            meta.buffer_crc32c = Some(per_buffer);
        } else {
            meta.crc32c = Some(crc32c::crc32c(&out.body));
        }
        let compressed = self.compression != Compression::None;
        let message = self.message(out.body.len(), n, compressed, &meta.to_pairs());
        out.frame.clear();
        frame_metadata(&mut out.frame, message);
        Ok(())
    }

    /// Append the offsets and data buffers of events `range` of a string column; returns the
    /// next buffer index.
    fn push_strings(
        &mut self,
        body: &mut Vec<u8>,
        mut buf: usize,
        col: &StrCol,
        range: Range<usize>,
        scratch: &mut Vec<u8>,
    ) -> Result<usize, String> {
        let n = range.len();
        // A default (never pushed to) StrCol has no offsets at all: that is an empty column.
        let all: &[u32] = if col.offsets.is_empty() { &[0] } else { &col.offsets };
        let offs = &all[range.start..range.end + 1];
        let (first, last) = (offs[0], offs[n]);
        let mut rebased = std::mem::take(&mut self.offsets);
        let offs: &[u32] = if first == 0 {
            offs
        } else {
            rebased.clear();
            rebased.extend(offs.iter().map(|&o| o - first));
            &rebased
        };
        let width = all_equal(offs).then_some(4);
        // Offsets are stored as int32: the validation bounded them to i32::MAX.
        let r = self.push_buffer(body, le_bytes(offs, scratch), width);
        self.offsets = rebased;
        r?;
        buf += 1;
        let data = &col.data[first as usize..last as usize];
        self.push_buffer(body, data, None)?;
        Ok(buf + 1)
    }

    /// Append a buffer holding `raw`, stored as the compression says, padded to 8 bytes.
    /// `constant`: the width of its values, when they are all equal.
    fn push_buffer(&mut self, body: &mut Vec<u8>, raw: &[u8], constant: Option<usize>) -> Result<(), String> {
        let start = body.len();
        if !raw.is_empty() {
            match self.compression {
                Compression::None => body.extend_from_slice(raw),
                Compression::Zstd(_) => self.compress(body, raw, constant)?,
            }
        }
        self.buffers.push((start as i64, (body.len() - start) as i64));
        body.resize(body.len().next_multiple_of(8), 0);
        Ok(())
    }

    /// Append `raw` compressed: its length and a zstd frame, or `-1` and `raw` when that is not
    /// smaller (arrow-ipc's rule). `constant`: the width of its values, when they are all equal.
    fn compress(&mut self, body: &mut Vec<u8>, raw: &[u8], constant: Option<usize>) -> Result<(), String> {
        let start = body.len();
        body.extend_from_slice(&(raw.len() as i64).to_le_bytes());
        match constant {
            Some(w) if w <= raw.len() => constant_frame(body, &raw[..w], raw.len()),
            _ => {
                body.reserve(zstd::zstd_safe::compress_bound(raw.len()));
                let cctx = self.zstd.as_mut().ok_or("no zstd context")?;
                let mut cursor = Cursor::new(&mut *body);
                cursor.set_position((start + 8) as u64);
                cctx.compress2(&mut cursor, raw)
                    .map_err(|e| format!("zstd: {}", zstd::zstd_safe::get_error_name(e)))?;
            }
        }
        if body.len() - start > raw.len() {
            body.truncate(start);
            body.extend_from_slice(&(-1i64).to_le_bytes());
            body.extend_from_slice(raw);
        }
        Ok(())
    }

    /// The latscope metadata of a block this encoder framed (`frame`: marker, length, message).
    pub(crate) fn frame_meta(&self, frame: &[u8]) -> Result<BlockMeta, String> {
        let msg = frame.get(8..).ok_or("frame shorter than its prefix")?;
        let msg = arrow_ipc::root_as_message(msg).map_err(|e| format!("unreadable message: {e}"))?;
        BlockMeta::from_message(&msg)
    }

    /// Frame again a block framed earlier (`frame`, with a body of `body_len` bytes) with its
    /// metadata changed by `edit` (its checksum recomputed), into `out`. The body is unchanged:
    /// buffers, compression and row count are taken from the old message.
    pub(crate) fn reframe(
        &mut self,
        frame: &[u8],
        body_len: usize,
        edit: impl FnOnce(&mut BlockMeta),
        out: &mut Vec<u8>,
    ) -> Result<(), String> {
        let msg = frame.get(8..).ok_or("frame shorter than its prefix")?;
        let msg = arrow_ipc::root_as_message(msg).map_err(|e| format!("unreadable message: {e}"))?;
        let rb = msg.header_as_record_batch().ok_or("not a record batch")?;
        self.buffers.clear();
        self.buffers.extend(rb.buffers().into_iter().flatten().map(|b| (b.offset(), b.length())));
        let rows = usize::try_from(rb.length()).map_err(|_| "negative row count")?;
        let compressed = rb.compression().is_some();
        let mut meta = BlockMeta::from_message(&msg)?;
        edit(&mut meta);
        let message = self.message(body_len, rows, compressed, &meta.to_pairs());
        out.clear();
        frame_metadata(out, message);
        Ok(())
    }

    /// The block's `Message` flatbuffer: a record batch of `rows` rows with the body's buffers,
    /// `pairs` as custom metadata, and their [`KEY_META_CRC`].
    fn message(&mut self, body_len: usize, rows: usize, compressed: bool, pairs: &[(&str, String)]) -> &[u8] {
        let comp_bytes = if compressed {
            [CompressionType::ZSTD.0 as u8, BodyCompressionMethod::BUFFER.0 as u8]
        } else {
            [0xff, 0xff]
        };
        let columns = Column::ALL.len();
        let digest = meta_digest_parts(
            body_len as i64,
            rows as i64,
            (0..columns).map(|_| (rows as i64, 0)),
            self.buffers.iter().copied(),
            comp_bytes,
            pairs.iter().map(|(k, v)| (*k, v.as_str())),
        );
        let digest = format!("{digest:08x}");
        let fbb = &mut self.fbb;
        fbb.reset();
        let nodes: Vec<arrow_ipc::FieldNode> =
            (0..columns).map(|_| arrow_ipc::FieldNode::new(rows as i64, 0)).collect();
        let buffers: Vec<arrow_ipc::Buffer> = self.buffers.iter().map(|&(o, l)| arrow_ipc::Buffer::new(o, l)).collect();
        let nodes = fbb.create_vector(&nodes);
        let buffers = fbb.create_vector(&buffers);
        let compression = compressed.then(|| {
            let mut b = arrow_ipc::BodyCompressionBuilder::new(fbb);
            b.add_codec(CompressionType::ZSTD);
            b.add_method(BodyCompressionMethod::BUFFER);
            b.finish()
        });
        let mut b = arrow_ipc::RecordBatchBuilder::new(fbb);
        b.add_length(rows as i64);
        b.add_nodes(nodes);
        b.add_buffers(buffers);
        if let Some(c) = compression {
            b.add_compression(c);
        }
        let header = b.finish();
        let kvs: Vec<_> = pairs
            .iter()
            .map(|(k, v)| (*k, v.as_str()))
            .chain(std::iter::once((KEY_META_CRC, digest.as_str())))
            .map(|(k, v)| {
                let k = fbb.create_string(k);
                let v = fbb.create_string(v);
                let mut b = arrow_ipc::KeyValueBuilder::new(fbb);
                b.add_key(k);
                b.add_value(v);
                b.finish()
            })
            .collect();
        let kvs = fbb.create_vector(&kvs);
        let mut m = arrow_ipc::MessageBuilder::new(fbb);
        m.add_version(MetadataVersion::V5);
        m.add_header_type(arrow_ipc::MessageHeader::RecordBatch);
        m.add_header(header.as_union_value());
        m.add_bodyLength(body_len as i64);
        m.add_custom_metadata(kvs);
        let root = m.finish();
        fbb.finish(root, None);
        fbb.finished_data()
    }
}

/// Largest content of one zstd block (RFC 8878, `Block_Maximum_Size`).
const ZSTD_BLOCK: usize = 128 << 10;

/// Append a zstd frame (RFC 8878) whose content is `value` repeated to `len` bytes (`len` a
/// multiple of `value.len()`, which is 1 to 8).
///
/// Single-segment frame with the content size; per block of up to 128 KiB: an RLE block when
/// every byte of the value is the same, otherwise a compressed block holding the value as raw
/// literals and one sequence (literal length = the value's width, a match at offset = the width
/// for the rest of the block), its three codes in RLE mode, so that the bitstream holds only
/// the extra bits of the match length and offset. Tiny blocks that cannot hold a match (3 bytes
/// at least) are raw blocks.
pub(crate) fn constant_frame(out: &mut Vec<u8>, value: &[u8], len: usize) {
    let w = value.len();
    debug_assert!((1..=8).contains(&w) && len.is_multiple_of(w));
    out.extend_from_slice(&0xFD2F_B528u32.to_le_bytes());
    // Frame header descriptor: 8-byte content size, single segment, no checksum, no dictionary.
    out.push(0b1110_0000);
    out.extend_from_slice(&(len as u64).to_le_bytes());
    let rle = value.iter().all(|&b| b == value[0]);
    let mut left = len;
    while left > 0 {
        // Block sizes are multiples of 128 KiB until the last: every block starts with a whole value.
        let size = left.min(ZSTD_BLOCK);
        left -= size;
        let last = (left == 0) as u32;
        let header = |out: &mut Vec<u8>, kind: u32, size: usize| {
            let h = last | (kind << 1) | ((size as u32) << 3);
            out.extend_from_slice(&h.to_le_bytes()[..3]);
        };
        let ml = size.saturating_sub(w);
        let ml_base = ml.wrapping_sub(3);
        let (ml_code, ml_bits) =
            if ml_base < 32 { (ml_base as u32, 0) } else { (ml_base.ilog2() + 36, ml_base.ilog2()) };
        let off_base = w as u32 + 3;
        let (of_code, of_bits) = (off_base.ilog2(), off_base.ilog2());
        let nbytes = (ml_bits + of_bits) as usize / 8 + 1;
        // Literals header (raw, 5-bit size) + literals + sequence count + modes + 3 RLE codes +
        // bitstream.
        let compressed = 1 + w + 1 + 1 + 3 + nbytes;
        if rle {
            header(out, 1, size);
            out.push(value[0]);
        } else if ml < 3 || (32..128).contains(&ml_base) || compressed >= size {
            // No room for a match, a match length whose code needs the table below 128, or a
            // block no larger raw (a compressed block may not be larger than the frame's
            // window, its content size): at most 138 bytes, raw.
            header(out, 0, size);
            for _ in 0..size / w {
                out.extend_from_slice(value);
            }
        } else {
            // Bitstream, read backwards by the decoder: the match length's extra bits, then the
            // offset's (the literal length, at most 8, has none; the RLE states have no bits),
            // then the end marker.
            let bits = (ml_base as u64 & ((1 << ml_bits) - 1))
                | ((off_base as u64 & ((1 << of_bits) - 1)) << ml_bits)
                | (1 << (ml_bits + of_bits));
            header(out, 2, compressed);
            out.push((w as u8) << 3);
            out.extend_from_slice(value);
            out.push(1);
            out.push(0b0101_0100);
            out.extend_from_slice(&[w as u8, of_code as u8, ml_code as u8]);
            out.extend_from_slice(&bits.to_le_bytes()[..nbytes]);
        }
    }
}

/// Check that `batch` can be written: columns of one length, string offsets non-decreasing,
/// within their data and below 2^31 (Arrow's `int32` offsets), strings valid UTF-8 on
/// character boundaries.
pub(crate) fn validate_batch(b: &EventBatch) -> Result<(), String> {
    b.check_lengths()?;
    let n = b.len();
    for c in [Column::Comm, Column::Path, Column::Path2, Column::FaultPath] {
        let col = match c {
            Column::Comm => &b.comm,
            Column::Path => &b.path,
            Column::Path2 => &b.path2,
            _ => &b.fault_path,
        };
        let offsets: &[u32] = if col.offsets.is_empty() { &[0] } else { &col.offsets };
        if offsets.len() != n + 1 {
            return Err(format!("column {c} has {} strings, expected {n}", offsets.len() - 1));
        }
        let decreasing = offsets.windows(2).fold(false, |a, w| a | (w[1] < w[0]));
        if decreasing {
            return Err(format!("column {c} has decreasing string offsets"));
        }
        let (first, last) = (offsets[0] as usize, offsets[n] as usize);
        if last > col.data.len() {
            return Err(format!("column {c} has offsets past its {} data bytes", col.data.len()));
        }
        if last - first > i32::MAX as usize || last > u32::MAX as usize {
            return Err(format!(
                "column {c} holds {} bytes of strings, at most {} fit in one block",
                last - first,
                i32::MAX
            ));
        }
        let data = &col.data[first..last];
        // Blocks are split to decode to at most MAX_BLOCK_BYTES; one event must fit.
        let room = crate::MAX_BLOCK_BYTES - crate::column::decoded_row_bytes() - 12;
        if (last - first) as u64 > room {
            if let Some(i) = offsets.windows(2).position(|w| u64::from(w[1] - w[0]) > room) {
                return Err(format!(
                    "column {c}: event {i} holds {} bytes, more than a block holds",
                    offsets[i + 1] - offsets[i]
                ));
            }
        }
        let s = std::str::from_utf8(data).map_err(|e| format!("column {c}: invalid UTF-8: {e}"))?;
        if !s.is_ascii() && offsets.iter().any(|&o| !s.is_char_boundary(o as usize - first)) {
            return Err(format!("column {c}: a string offset is not on a UTF-8 character boundary"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_ipc::writer::{DictionaryTracker, IpcDataGenerator, IpcWriteContext, IpcWriteOptions};
    use latscope_event::Event;

    use super::*;
    use crate::column::{arrow_schema, to_record_batch};

    fn batch(n: usize) -> EventBatch {
        let mut b = EventBatch::with_capacity(n);
        for i in 0..n as u64 {
            b.push(&Event {
                ts: 1000 + i * 7,
                lat: i % 13,
                pid: 42,
                ret: -(i as i64 % 3),
                off: -1,
                comm: if i % 5 == 0 { "ü-name".into() } else { "x".into() },
                path: if i % 3 == 0 { format!("/p/{i}") } else { String::new() },
                ..Default::default()
            });
        }
        b
    }

    /// Without compression, the body and its buffers are byte for byte what arrow-ipc writes
    /// for the same columns, for whole batches and slices.
    #[test]
    fn uncompressed_body_is_arrow_ipcs() {
        let b = batch(1000);
        let schema = Arc::new(arrow_schema());
        for range in [0..1000, 0..0, 3..17, 999..1000, 500..1000] {
            let mut enc = Encoder::new(Compression::None).unwrap();
            let mut out = EncodedBlock::default();
            enc.encode(&b, range.clone(), BlockMeta::default(), true, &mut out).unwrap();
            let rb = to_record_batch(&b, &schema).unwrap().slice(range.start, range.len());
            let opts = IpcWriteOptions::try_new(8, false, MetadataVersion::V5).unwrap();
            let (_, want) = IpcDataGenerator::default()
                .encode(&rb, &mut DictionaryTracker::new(false), &opts, &mut IpcWriteContext::default())
                .unwrap();
            assert_eq!(out.body, want.arrow_data, "{range:?}");
            let msg = arrow_ipc::root_as_message(&want.ipc_message).unwrap();
            let want_bufs: Vec<(i64, i64)> = msg
                .header_as_record_batch()
                .unwrap()
                .buffers()
                .unwrap()
                .iter()
                .map(|b| (b.offset(), b.length()))
                .collect();
            assert_eq!(enc.buffers, want_bufs, "{range:?}");
        }
    }

    /// The hand-made frames of constant buffers decode to the buffer, for every width, value
    /// shape and length around the block and match-length boundaries.
    #[test]
    fn constant_frames_decode_to_their_content() {
        // Match lengths from 3 to 130 (around the codes' table) and block boundaries.
        let mut lens: Vec<usize> = (1..160).collect();
        for b in [ZSTD_BLOCK, 3 * ZSTD_BLOCK] {
            lens.extend(b - 20..b + 20);
        }
        let values: [&[u8]; 8] = [
            &[7],
            &[0, 0],
            &[1, 0],
            &[0xff; 4],
            &[1, 0, 0, 0],
            &[9; 8],
            &[1, 2, 3, 4, 5, 6, 7, 8],
            &[0, 0, 0, 0, 0, 0, 0, 0x80],
        ];
        let mut dctx = zstd::bulk::Decompressor::new().unwrap();
        for v in values {
            for &l in &lens {
                let len = l.next_multiple_of(v.len());
                let mut frame = Vec::new();
                constant_frame(&mut frame, v, len);
                let got = dctx.decompress(&frame, len).unwrap_or_else(|e| panic!("{v:?} x {len}: {e}"));
                assert_eq!(got.len(), len);
                assert!(got.chunks(v.len()).all(|c| c == v), "{v:?} x {len}");
                // Recognised as zeros (not decompressed) exactly when it is, and not when damaged.
                let zeros = v.iter().all(|&b| b == 0);
                assert_eq!(crate::decode::zero_frame(&frame, len), zeros, "{v:?} x {len}");
                assert!(!crate::decode::zero_frame(&frame, len + 1));
                assert!(!crate::decode::zero_frame(&frame[..frame.len() - 1], len));
                let mut longer = frame.clone();
                longer.push(0);
                assert!(!crate::decode::zero_frame(&longer, len));
                assert!(
                    frame.len() <= 16 + len.min(140) + len / ZSTD_BLOCK * 30,
                    "{v:?} x {len}: {} bytes",
                    frame.len()
                );
            }
        }
    }

    /// Zeros as zstd itself compresses them: recognised only where they decompress to zeros of
    /// the length (whatever blocks zstd chose).
    #[test]
    fn zstd_frames_of_zeros_are_recognised_only_when_they_are() {
        let mut dctx = zstd::bulk::Decompressor::new().unwrap();
        for len in [1, 100, ZSTD_BLOCK, 5 * ZSTD_BLOCK + 3] {
            for data in [vec![0u8; len], (0..len).map(|k| u8::from(k == len / 2)).collect()] {
                for level in [1, 3] {
                    let frame = zstd::bulk::compress(&data, level).unwrap();
                    if crate::decode::zero_frame(&frame, len) {
                        assert_eq!(dctx.decompress(&frame, len).unwrap(), vec![0u8; len]);
                    }
                }
            }
        }
    }

    #[test]
    fn invalid_batches_are_refused() {
        let mut b = batch(3);
        assert!(validate_batch(&b).is_ok());
        b.path.data.push(0xff);
        let last = b.path.offsets.len() - 1;
        b.path.offsets[last] += 1;
        assert!(validate_batch(&b).unwrap_err().contains("UTF-8"));
        let mut b = batch(3);
        b.comm.offsets[1..].fill(100);
        assert!(validate_batch(&b).unwrap_err().contains("past"));
        let mut b = batch(3);
        b.comm.offsets[1] = 5;
        b.comm.offsets[2] = 4;
        assert!(validate_batch(&b).unwrap_err().contains("decreasing"));
        let mut b = batch(3);
        // "ü" is two bytes: an offset between them.
        b.comm.offsets[1] = 1;
        assert!(validate_batch(&b).unwrap_err().contains("boundary"));
    }
}
