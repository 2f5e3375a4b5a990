//! The events table's column chunks, encoded directly from the converted record batches.
//!
//! The generic Arrow writer spends most of an export interning every value of every column (its
//! dictionary encoder hashes and compares each string and integer) and building levels for
//! columns that have none. The events table's shape is fixed: every column is required,
//! low-cardinality strings arrive as dictionary keys already, times increase. So each column
//! chunk is encoded here in one pass with the encoding measured best for it:
//!
//! | columns | encoding |
//! |---|---|
//! | `time`, `time_ns`, `lat`, `off` | `DELTA_BINARY_PACKED` |
//! | `flags`, `mode`, `addr`, `qtime` (almost always 0) | `PLAIN` |
//! | other integers | dictionary, `PLAIN` when the dictionary would pass 1 MiB |
//! | any column holding one value in the whole chunk | a one-entry dictionary, one RLE run per page |
//! | `host`, `kind`, `op`, `fd_type`, `disk` | dictionary of the values used, from the keys |
//! | `comm`, `path`, `path2` | dictionary, `PLAIN` when the dictionary would pass 1 MiB |
//!
//! The parquet crate's page writer writes the page headers, and `append_column` splices each
//! chunk into the row group and writes the footer, so the file is standard Parquet (version 1
//! data pages, zstd): what the Arrow writer would write, with the same schema and the Arrow schema
//! in its metadata, minus page indexes. Integer columns carry min/max statistics per chunk.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::io::Write;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int16Type, Int32Type, Int64Type, Int8Type, TimestampMicrosecondType};
use arrow_array::{Array, ArrayRef, RecordBatch, StringArray};
use arrow_schema::{DataType, SchemaRef};
use bytes::Bytes;
use foldhash::fast::RandomState;
use parquet::arrow::{add_encoded_arrow_schema_to_metadata, ArrowSchemaConverter};
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::column::page::{CompressedPage, Page, PageWriter};
use parquet::column::writer::ColumnCloseResult;
use parquet::data_type::ByteArray;
use parquet::errors::{ParquetError, Result};
use parquet::file::metadata::ColumnChunkMetaData;
use parquet::file::properties::WriterProperties;
use parquet::file::statistics::Statistics;
use parquet::file::writer::{SerializedFileWriter, SerializedPageWriter, TrackedWrite};
use parquet::schema::types::ColumnDescPtr;

/// Values per data page: pages of at most 512 KiB of integers before compression.
const PAGE_ROWS: usize = 1 << 16;
/// Largest dictionary kept, in bytes of its page; beyond it the column chunk is written plain
/// (the Arrow writer's default limit).
const DICT_LIMIT: usize = 1 << 20;
/// Integer columns spanning fewer values than this build their dictionary through a table
/// indexed by value (256 KiB of slots), not a hash map.
const DIRECT_RANGE: u64 = 1 << 16;
/// Values looked at to decide whether an integer column chunk is worth a dictionary.
const SAMPLE: usize = 8192;
/// A data page of strings is cut when its values pass this many bytes.
const PAGE_BYTES: usize = 1 << 20;
/// Groups of 8 values per bit-packed run header: 63 keeps the header one byte, as the reference
/// implementation writes it.
const MAX_GROUPS: usize = 63;

/// How a column is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Enc {
    Delta,
    Plain,
    IntDict,
    KeyDict,
    Strings,
}

fn encoding_of(name: &str, t: &DataType) -> Enc {
    match t {
        DataType::Dictionary(_, _) => Enc::KeyDict,
        DataType::Utf8 => Enc::Strings,
        DataType::Int64 | DataType::Timestamp(_, _) if matches!(name, "time" | "time_ns" | "lat" | "off") => Enc::Delta,
        _ if matches!(name, "flags" | "mode" | "addr" | "qtime") => Enc::Plain,
        _ => Enc::IntDict,
    }
}

/// A Parquet file of events, written one row group at a time.
pub(crate) struct DirectWriter<W: Write + Send> {
    file: SerializedFileWriter<W>,
    columns: Vec<(ColumnDescPtr, Enc)>,
    pending: VecDeque<RecordBatch>,
    pending_rows: usize,
    row_group_rows: usize,
    level: ZstdLevel,
    zstd: zstd::bulk::Compressor<'static>,
    scratch: Scratch,
}

/// Buffers reused from one column chunk to the next.
#[derive(Default)]
struct Scratch {
    ints: Vec<i64>,
    idx: Vec<u32>,
    raw: Vec<u8>,
}

impl<W: Write + Send> DirectWriter<W> {
    /// A writer of `schema` (the events schema: required integers, timestamps, strings and
    /// string dictionaries) to `w`, with `props`' row group size and zstd level.
    pub(crate) fn try_new(w: W, schema: &SchemaRef, props: &WriterProperties) -> Result<Self> {
        let level = match props.compression(&"time".into()) {
            Compression::ZSTD(l) => l,
            c => return Err(ParquetError::General(format!("the events table is written with zstd, not {c}"))),
        };
        let mut props = props.clone();
        add_encoded_arrow_schema_to_metadata(schema, &mut props);
        let descr = ArrowSchemaConverter::new().convert(schema)?;
        let file = SerializedFileWriter::new(w, descr.root_schema_ptr(), Arc::new(props.clone()))?;
        let columns = schema
            .fields()
            .iter()
            .enumerate()
            .map(|(i, f)| {
                if f.is_nullable() {
                    return Err(ParquetError::General(format!("column {} may hold NULL", f.name())));
                }
                Ok((file.schema_descr().column(i), encoding_of(f.name(), f.data_type())))
            })
            .collect::<Result<Vec<_>>>()?;
        let zstd = zstd::bulk::Compressor::new(level.compression_level())
            .map_err(|e| ParquetError::General(format!("zstd: {e}")))?;
        Ok(DirectWriter {
            file,
            columns,
            pending: VecDeque::new(),
            pending_rows: 0,
            row_group_rows: props.max_row_group_row_count().unwrap_or(1 << 20).max(1),
            level,
            zstd,
            scratch: Scratch::default(),
        })
    }

    /// Appends rows; full row groups are encoded and written.
    pub(crate) fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        self.pending_rows += batch.num_rows();
        self.pending.push_back(batch.clone());
        while self.pending_rows >= self.row_group_rows {
            self.flush_row_group(self.row_group_rows)?;
        }
        Ok(())
    }

    /// Bytes of the rows buffered for the row group in progress.
    pub(crate) fn memory_size(&self) -> usize {
        self.pending.iter().map(|b| b.get_array_memory_size()).sum()
    }

    /// Writes the last row group and the footer, and gives the sink back.
    pub(crate) fn into_inner(mut self) -> Result<W> {
        if self.pending_rows > 0 {
            self.flush_row_group(self.pending_rows)?;
        }
        self.file.into_inner()
    }

    /// Encodes the first `rows` buffered rows as one row group.
    fn flush_row_group(&mut self, rows: usize) -> Result<()> {
        let mut take = Vec::new();
        let mut left = rows;
        while left > 0 {
            let Some(b) = self.pending.pop_front() else { break };
            if b.num_rows() <= left {
                left -= b.num_rows();
                take.push(b);
            } else {
                take.push(b.slice(0, left));
                self.pending.push_front(b.slice(left, b.num_rows() - left));
                left = 0;
            }
        }
        self.pending_rows -= rows;
        let mut chunks = Vec::with_capacity(self.columns.len());
        for (i, (descr, enc)) in self.columns.iter().enumerate() {
            let arrays: Vec<&ArrayRef> = take.iter().map(|b| b.column(i)).collect();
            let mut out = Chunk::new(descr.clone(), &mut self.zstd, self.level);
            encode_column(&mut out, *enc, &arrays, &mut self.scratch)?;
            chunks.push(out.finish(rows)?);
        }
        let mut rg = self.file.next_row_group()?;
        for (bytes, close) in chunks {
            rg.append_column(&bytes, close)?;
        }
        rg.close()?;
        Ok(())
    }
}

/// One column chunk being encoded into memory.
struct Chunk<'a> {
    descr: ColumnDescPtr,
    zstd: &'a mut zstd::bulk::Compressor<'static>,
    level: ZstdLevel,
    sink: TrackedWrite<Vec<u8>>,
    dict_offset: Option<i64>,
    data_offset: Option<i64>,
    uncompressed: i64,
    encodings: Vec<Encoding>,
    stats: Option<Statistics>,
}

impl<'a> Chunk<'a> {
    fn new(descr: ColumnDescPtr, zstd: &'a mut zstd::bulk::Compressor<'static>, level: ZstdLevel) -> Self {
        Chunk {
            descr,
            zstd,
            level,
            sink: TrackedWrite::new(Vec::new()),
            dict_offset: None,
            data_offset: None,
            uncompressed: 0,
            encodings: vec![Encoding::RLE],
            stats: None,
        }
    }

    /// Compresses `raw` and writes it as a dictionary page (`dict`) or a data page.
    fn page(&mut self, raw: &[u8], num_values: usize, encoding: Encoding, dict: bool) -> Result<()> {
        let compressed = self.zstd.compress(raw).map_err(|e| ParquetError::General(format!("zstd: {e}")))?;
        let buf = Bytes::from(compressed);
        let num_values = u32::try_from(num_values).map_err(|_| ParquetError::General("page too large".into()))?;
        let page = if dict {
            Page::DictionaryPage { buf, num_values, encoding, is_sorted: false }
        } else {
            Page::DataPage {
                buf,
                num_values,
                encoding,
                def_level_encoding: Encoding::RLE,
                rep_level_encoding: Encoding::RLE,
                statistics: None,
            }
        };
        let spec = SerializedPageWriter::new(&mut self.sink).write_page(CompressedPage::new(page, raw.len()))?;
        let offset = spec.offset as i64;
        if dict {
            self.dict_offset = Some(offset);
        } else if self.data_offset.is_none() {
            self.data_offset = Some(offset);
        }
        self.uncompressed += spec.uncompressed_size as i64;
        if !self.encodings.contains(&encoding) {
            self.encodings.push(encoding);
        }
        Ok(())
    }

    fn finish(self, rows: usize) -> Result<(Bytes, ColumnCloseResult)> {
        let bytes = Bytes::from(self.sink.into_inner()?);
        let mut b = ColumnChunkMetaData::builder(self.descr)
            .set_encodings(self.encodings)
            .set_num_values(rows as i64)
            .set_compression(Compression::ZSTD(self.level))
            .set_total_compressed_size(bytes.len() as i64)
            .set_total_uncompressed_size(self.uncompressed)
            .set_data_page_offset(self.data_offset.unwrap_or(0))
            .set_dictionary_page_offset(self.dict_offset);
        if let Some(s) = self.stats {
            b = b.set_statistics(s);
        }
        let close = ColumnCloseResult {
            bytes_written: bytes.len() as u64,
            rows_written: rows as u64,
            metadata: b.build()?,
            bloom_filter: None,
            column_index: None,
            offset_index: None,
        };
        Ok((bytes, close))
    }
}

fn encode_column(out: &mut Chunk<'_>, enc: Enc, arrays: &[&ArrayRef], s: &mut Scratch) -> Result<()> {
    let rows: usize = arrays.iter().map(|a| a.len()).sum();
    match enc {
        Enc::KeyDict => match one_key(arrays) {
            Some(v) => {
                let ba = Some(ByteArray::from(v.as_bytes().to_vec()));
                out.stats = Some(Statistics::byte_array(ba.clone(), ba, None, Some(0), false));
                s.raw.clear();
                put_bytes(v.as_bytes(), &mut s.raw);
                out.page(&s.raw, 1, Encoding::PLAIN_DICTIONARY, true)?;
                one_value_pages(out, rows, &mut s.raw)
            }
            None => key_dict(out, arrays, s),
        },
        Enc::Strings => {
            let strs: Vec<&StringArray> = arrays.iter().map(|a| a.as_string::<i32>()).collect();
            strings(out, &strs, s)
        }
        _ => {
            if let Some((v, wide)) = one_int(arrays) {
                // Columns most events leave at 0 (flags, qtime, path-less calls' inode, ...): a
                // one-entry dictionary, without copying or hashing the values.
                out.stats = Some(int_stats(v, v, wide));
                s.raw.clear();
                put_plain(&[v], wide, &mut s.raw);
                out.page(&s.raw, 1, Encoding::PLAIN_DICTIONARY, true)?;
                return one_value_pages(out, rows, &mut s.raw);
            }
            let wide = gather_ints(arrays, &mut s.ints)?;
            let Some(&first) = s.ints.first() else { return Ok(()) };
            // Plain loops: the compiler vectorizes them (an iterator fold over Options it does not).
            let (mut min, mut max) = (first, first);
            for &v in &s.ints {
                min = min.min(v);
                max = max.max(v);
            }
            out.stats = Some(int_stats(min, max, wide));
            let ints = std::mem::take(&mut s.ints);
            let r = match enc {
                Enc::Delta if wide => pages(out, &ints, Encoding::DELTA_BINARY_PACKED, &mut s.raw, delta),
                Enc::IntDict => int_dict(out, &ints, wide, (min, max), s),
                _ => plain_ints(out, &ints, wide, &mut s.raw),
            };
            s.ints = ints;
            r
        }
    }
}

fn int_stats(min: i64, max: i64, wide: bool) -> Statistics {
    if wide {
        Statistics::int64(Some(min), Some(max), None, Some(0), false)
    } else {
        Statistics::int32(Some(min as i32), Some(max as i32), None, Some(0), false)
    }
}

/// The value of integer `arrays` when every row holds the same one, and whether it is 64-bit.
fn one_int(arrays: &[&ArrayRef]) -> Option<(i64, bool)> {
    let mut one = None;
    let mut wide = true;
    for a in arrays {
        let v = match a.data_type() {
            DataType::Int64 => same(a.as_primitive::<Int64Type>().values())?,
            DataType::Timestamp(_, _) => same(a.as_primitive::<TimestampMicrosecondType>().values())?,
            DataType::Int32 => {
                wide = false;
                i64::from(same(a.as_primitive::<Int32Type>().values())?)
            }
            _ => return None,
        };
        match one {
            Some(o) if o != v => return None,
            _ => one = Some(v),
        }
    }
    one.map(|v| (v, wide))
}

/// The value of every element of `v`, if they are all the same.
fn same<T: Copy + PartialEq>(v: &[T]) -> Option<T> {
    let &first = v.first()?;
    // Blocks of 64 compared without an early exit (the compiler vectorizes them); a column that
    // varies stops at its first block.
    let mut blocks = v.chunks_exact(64);
    for b in &mut blocks {
        if !b.iter().fold(true, |all, &x| all & (x == first)) {
            return None;
        }
    }
    blocks.remainder().iter().all(|&x| x == first).then_some(first)
}

/// The string of dictionary `arrays` when every row holds the same one.
fn one_key<'a>(arrays: &[&'a ArrayRef]) -> Option<&'a str> {
    let mut one: Option<&str> = None;
    for a in arrays {
        let (k, values) = match a.data_type() {
            DataType::Dictionary(k, _) if **k == DataType::Int16 => {
                let d = a.as_dictionary::<Int16Type>();
                (same(d.keys().values())? as usize, d.values().as_string::<i32>())
            }
            DataType::Dictionary(k, _) if **k == DataType::Int8 => {
                let d = a.as_dictionary::<Int8Type>();
                (same(d.keys().values())? as usize, d.values().as_string::<i32>())
            }
            _ => return None,
        };
        if k >= values.len() {
            return None; // key_dict reports it
        }
        let v = values.value(k);
        match one {
            Some(o) if o != v => return None,
            _ => one = Some(v),
        }
    }
    one
}

/// Data pages of `rows` indices into a one-entry dictionary: one RLE run each.
fn one_value_pages(out: &mut Chunk<'_>, rows: usize, raw: &mut Vec<u8>) -> Result<()> {
    let mut left = rows;
    while left > 0 {
        let n = left.min(PAGE_ROWS);
        raw.clear();
        raw.push(1); // bit width, as index_pages writes it for a dictionary of one
        uleb((n as u64) << 1, raw);
        raw.push(0);
        out.page(raw, n, Encoding::PLAIN_DICTIONARY, false)?;
        left -= n;
    }
    Ok(())
}

/// The integer values of `arrays` (widened to i64) into `into`; whether they are 64-bit.
fn gather_ints(arrays: &[&ArrayRef], into: &mut Vec<i64>) -> Result<bool> {
    into.clear();
    let mut wide = true;
    for a in arrays {
        match a.data_type() {
            DataType::Int64 => into.extend_from_slice(a.as_primitive::<Int64Type>().values()),
            DataType::Timestamp(_, _) => into.extend_from_slice(a.as_primitive::<TimestampMicrosecondType>().values()),
            DataType::Int32 => {
                wide = false;
                into.extend(a.as_primitive::<Int32Type>().values().iter().map(|&v| i64::from(v)));
            }
            t => return Err(ParquetError::General(format!("no direct encoding for {t}"))),
        }
    }
    Ok(wide)
}

/// Data pages of `PAGE_ROWS` values each, encoded by `f`.
fn pages(
    out: &mut Chunk<'_>,
    v: &[i64],
    encoding: Encoding,
    raw: &mut Vec<u8>,
    mut f: impl FnMut(&[i64], &mut Vec<u8>),
) -> Result<()> {
    for page in v.chunks(PAGE_ROWS) {
        raw.clear();
        f(page, raw);
        out.page(raw, page.len(), encoding, false)?;
    }
    Ok(())
}

fn put_plain(v: &[i64], wide: bool, raw: &mut Vec<u8>) {
    let width = if wide { 8 } else { 4 };
    let start = raw.len();
    raw.resize(start + v.len() * width, 0);
    let dst = &mut raw[start..];
    if wide {
        for (d, x) in dst.chunks_exact_mut(8).zip(v) {
            d.copy_from_slice(&x.to_le_bytes());
        }
    } else {
        for (d, &x) in dst.chunks_exact_mut(4).zip(v) {
            d.copy_from_slice(&(x as i32).to_le_bytes());
        }
    }
}

fn plain_ints(out: &mut Chunk<'_>, v: &[i64], wide: bool, raw: &mut Vec<u8>) -> Result<()> {
    pages(out, v, Encoding::PLAIN, raw, |p, raw| put_plain(p, wide, raw))
}

/// Dictionary indices of `values` (the dictionary in first-seen order), or `None` when the
/// dictionary would hold more than `max` entries.
fn dictionary<K: Copy + Eq + Hash>(values: impl Iterator<Item = K>, max: usize, idx: &mut Vec<u32>) -> Option<Vec<K>> {
    idx.clear();
    let mut map: HashMap<K, u32, RandomState> = HashMap::default();
    let mut dict = Vec::new();
    let mut last: Option<(K, u32)> = None;
    for v in values {
        let i = match last {
            // Runs of one value are common (a thread's pid, tid, fd): skip the hash.
            Some((k, i)) if k == v => i,
            _ => {
                let i = *map.entry(v).or_insert_with(|| {
                    dict.push(v);
                    (dict.len() - 1) as u32
                });
                if dict.len() > max {
                    return None;
                }
                last = Some((v, i));
                i
            }
        };
        idx.push(i);
    }
    Some(dict)
}

fn int_dict(out: &mut Chunk<'_>, v: &[i64], wide: bool, (min, max): (i64, i64), s: &mut Scratch) -> Result<()> {
    let width = if wide { 8 } else { 4 };
    // A first sample with more than one distinct value in eight (inode numbers, sizes, return
    // values of reads) says the dictionary would not pay: plain, without hashing the rest.
    let sample = &v[..v.len().min(SAMPLE)];
    if dictionary(sample.iter().copied(), sample.len() / 8, &mut s.idx).is_none() {
        return plain_ints(out, v, wide, &mut s.raw);
    }
    let range = (max as u64).wrapping_sub(min as u64);
    let dict = if range < DIRECT_RANGE {
        direct_dictionary(v, min, range as usize, DICT_LIMIT / width, &mut s.idx)
    } else {
        dictionary(v.iter().copied(), DICT_LIMIT / width, &mut s.idx)
    };
    let Some(dict) = dict else {
        return plain_ints(out, v, wide, &mut s.raw);
    };
    s.raw.clear();
    put_plain(&dict, wide, &mut s.raw);
    out.page(&s.raw, dict.len(), Encoding::PLAIN_DICTIONARY, true)?;
    index_pages(out, &s.idx, dict.len(), &mut s.raw)
}

/// [`dictionary`] of values within `min..=min + range`, indexed by value instead of hashed (pids,
/// tids, fds, syscall numbers): the same dictionary, in the same order.
fn direct_dictionary(v: &[i64], min: i64, range: usize, max: usize, idx: &mut Vec<u32>) -> Option<Vec<i64>> {
    idx.clear();
    idx.reserve(v.len());
    let mut slots = vec![u32::MAX; range + 1];
    let mut dict = Vec::new();
    for &x in v {
        let slot = slots.get_mut(x.wrapping_sub(min) as u64 as usize)?;
        if *slot == u32::MAX {
            if dict.len() == max {
                return None;
            }
            *slot = dict.len() as u32;
            dict.push(x);
        }
        idx.push(*slot);
    }
    Some(dict)
}

/// Data pages of dictionary indices.
fn index_pages(out: &mut Chunk<'_>, idx: &[u32], dict_len: usize, raw: &mut Vec<u8>) -> Result<()> {
    let width = bit_width(dict_len.saturating_sub(1) as u64).max(1);
    for page in idx.chunks(PAGE_ROWS) {
        raw.clear();
        raw.push(width);
        rle_hybrid(page, width, raw);
        out.page(raw, page.len(), Encoding::PLAIN_DICTIONARY, false)?;
    }
    Ok(())
}

/// Strings: a dictionary, or plain when the dictionary would pass `DICT_LIMIT`.
fn strings(out: &mut Chunk<'_>, arrays: &[&StringArray], s: &mut Scratch) -> Result<()> {
    // No NULLs in the events table: values by index, without the iterator's null checks.
    let all = || arrays.iter().flat_map(|a| (0..a.len()).map(move |i| a.value(i).as_bytes()));
    let max_entries = DICT_LIMIT / 8;
    if let Some(dict) = dictionary(all(), max_entries, &mut s.idx) {
        if dict.iter().map(|d| d.len() + 4).sum::<usize>() <= DICT_LIMIT {
            s.raw.clear();
            for d in &dict {
                put_bytes(d, &mut s.raw);
            }
            out.page(&s.raw, dict.len(), Encoding::PLAIN_DICTIONARY, true)?;
            return index_pages(out, &s.idx, dict.len(), &mut s.raw);
        }
    }
    s.raw.clear();
    let mut n = 0;
    for v in all() {
        put_bytes(v, &mut s.raw);
        n += 1;
        if n == PAGE_ROWS || s.raw.len() >= PAGE_BYTES {
            out.page(&s.raw, n, Encoding::PLAIN, false)?;
            s.raw.clear();
            n = 0;
        }
    }
    if n > 0 {
        out.page(&s.raw, n, Encoding::PLAIN, false)?;
    }
    Ok(())
}

fn put_bytes(v: &[u8], raw: &mut Vec<u8>) {
    raw.extend_from_slice(&(v.len() as u32).to_le_bytes());
    raw.extend_from_slice(v);
}

/// String dictionary arrays: the chunk's dictionary is the values its keys use, in first-use
/// order; each array's keys are mapped through a table as long as its dictionary.
fn key_dict(out: &mut Chunk<'_>, arrays: &[&ArrayRef], s: &mut Scratch) -> Result<()> {
    let mut map: HashMap<&str, u32, RandomState> = HashMap::default();
    let mut dict: Vec<&str> = Vec::new();
    s.idx.clear();
    for a in arrays {
        match a.data_type() {
            DataType::Dictionary(k, _) if **k == DataType::Int16 => {
                let d = a.as_dictionary::<Int16Type>();
                let keys = d.keys().values().iter().map(|&k| k as usize);
                remap_keys(keys, d.values().as_string::<i32>(), &mut map, &mut dict, &mut s.idx)?;
            }
            DataType::Dictionary(k, _) if **k == DataType::Int8 => {
                let d = a.as_dictionary::<Int8Type>();
                let keys = d.keys().values().iter().map(|&k| k as usize);
                remap_keys(keys, d.values().as_string::<i32>(), &mut map, &mut dict, &mut s.idx)?;
            }
            t => return Err(ParquetError::General(format!("no direct encoding for {t}"))),
        }
    }
    if let (Some(min), Some(max)) = (dict.iter().min(), dict.iter().max()) {
        let ba = |v: &str| Some(ByteArray::from(v.as_bytes().to_vec()));
        out.stats = Some(Statistics::byte_array(ba(min), ba(max), None, Some(0), false));
    }
    s.raw.clear();
    for d in &dict {
        put_bytes(d.as_bytes(), &mut s.raw);
    }
    out.page(&s.raw, dict.len(), Encoding::PLAIN_DICTIONARY, true)?;
    index_pages(out, &s.idx, dict.len(), &mut s.raw)
}

/// Appends to `idx` the chunk dictionary's index of each key's value, adding values to `dict`
/// on first use.
fn remap_keys<'a>(
    keys: impl Iterator<Item = usize>,
    values: &'a StringArray,
    map: &mut HashMap<&'a str, u32, RandomState>,
    dict: &mut Vec<&'a str>,
    idx: &mut Vec<u32>,
) -> Result<()> {
    let mut remap = vec![u32::MAX; values.len()];
    for k in keys {
        let slot = remap.get_mut(k).ok_or_else(|| ParquetError::General(format!("dictionary key {k} out of range")))?;
        if *slot == u32::MAX {
            let v = values.value(k);
            *slot = *map.entry(v).or_insert_with(|| {
                dict.push(v);
                (dict.len() - 1) as u32
            });
        }
        idx.push(*slot);
    }
    Ok(())
}

/// Bits needed for `v`.
fn bit_width(v: u64) -> u8 {
    (64 - v.leading_zeros()) as u8
}

fn uleb(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Packs `values` (each below 2^width) little-endian, least significant bit first, as Parquet's
/// bit-packing does; `values.len() * width` must be a multiple of 8.
fn bitpack(values: impl Iterator<Item = u64>, width: u8, out: &mut Vec<u8>) {
    let w = u32::from(width);
    if w == 0 {
        return;
    }
    if w <= 32 {
        // Narrow values (dictionary indices, most deltas): a 64-bit accumulator, 32 bits out at
        // a time.
        let mut acc = 0u64;
        let mut bits = 0u32;
        for v in values {
            acc |= v << bits;
            bits += w;
            if bits >= 32 {
                out.extend_from_slice(&(acc as u32).to_le_bytes());
                acc >>= 32;
                bits -= 32;
            }
        }
        out.extend_from_slice(&acc.to_le_bytes()[..bits.div_ceil(8) as usize]);
        return;
    }
    let mut acc: u128 = 0;
    let mut bits = 0u32;
    for v in values {
        acc |= u128::from(v) << bits;
        bits += w;
        if bits >= 64 {
            out.extend_from_slice(&(acc as u64).to_le_bytes());
            acc >>= 64;
            bits -= 64;
        }
    }
    let tail = bits.div_ceil(8) as usize;
    out.extend_from_slice(&(acc as u64).to_le_bytes()[..tail]);
}

/// Parquet's RLE / bit-packing hybrid of `v` (without the length prefix): runs of 16 or more
/// equal values as RLE runs, the rest bit-packed in groups of 8 (the last one padded).
fn rle_hybrid(v: &[u32], width: u8, out: &mut Vec<u8>) {
    let value_bytes = usize::from(width).div_ceil(8);
    let packed = |lits: &[u32], out: &mut Vec<u8>| {
        for part in lits.chunks(MAX_GROUPS * 8) {
            let groups = part.len().div_ceil(8);
            uleb(((groups as u64) << 1) | 1, out);
            let pad = groups * 8 - part.len();
            bitpack(part.iter().map(|&x| u64::from(x)).chain(std::iter::repeat_n(0, pad)), width, out);
        }
    };
    let (mut lit_start, mut i) = (0, 0);
    while i < v.len() {
        let x = v[i];
        let mut j = i + 1;
        while j < v.len() && v[j] == x {
            j += 1;
        }
        if j - i >= 16 {
            // The literals before the run must fill whole groups of 8: lend them the run's first
            // values.
            let lend = (8 - (i - lit_start) % 8) % 8;
            if i + lend > lit_start {
                packed(&v[lit_start..i + lend], out);
            }
            uleb(((j - i - lend) as u64) << 1, out);
            out.extend_from_slice(&x.to_le_bytes()[..value_bytes]);
            lit_start = j;
        }
        i = j;
    }
    if lit_start < v.len() {
        packed(&v[lit_start..], out);
    }
}

/// `DELTA_BINARY_PACKED` of `v`: blocks of 128 deltas in 4 miniblocks of 32.
fn delta(v: &[i64], out: &mut Vec<u8>) {
    const BLOCK: usize = 128;
    const MINI: usize = 32;
    uleb(BLOCK as u64, out);
    uleb((BLOCK / MINI) as u64, out);
    uleb(v.len() as u64, out);
    uleb(zigzag(v.first().copied().unwrap_or(0)), out);
    let mut deltas = [0i64; BLOCK];
    let mut rest = v;
    while rest.len() > 1 {
        let n = (rest.len() - 1).min(BLOCK);
        for k in 0..n {
            deltas[k] = rest[k + 1].wrapping_sub(rest[k]);
        }
        let min = deltas[..n].iter().copied().min().unwrap_or(0);
        uleb(zigzag(min), out);
        let mut widths = [0u8; BLOCK / MINI];
        for (m, w) in widths.iter_mut().enumerate() {
            let part = &deltas[(m * MINI).min(n)..((m + 1) * MINI).min(n)];
            let max = part.iter().map(|&d| d.wrapping_sub(min) as u64).max().unwrap_or(0);
            *w = bit_width(max);
        }
        out.extend_from_slice(&widths);
        for (m, &w) in widths.iter().enumerate() {
            let (a, b) = (m * MINI, ((m + 1) * MINI).min(n));
            if a >= n {
                break; // miniblocks past the last value have no body
            }
            let vals = deltas[a..b].iter().map(|&d| d.wrapping_sub(min) as u64);
            bitpack(vals.chain(std::iter::repeat_n(0, MINI - (b - a))), w, out);
        }
        rest = &rest[n..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::types::Int16Type;
    use arrow_array::{DictionaryArray, Int16Array, Int32Array, Int64Array, TimestampMicrosecondArray};
    use arrow_schema::{Field, Schema, TimeUnit};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use parquet::file::reader::{FileReader, SerializedFileReader};

    /// xorshift64*: deterministic.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
    }

    fn schema() -> SchemaRef {
        let dict = DataType::Dictionary(Box::new(DataType::Int16), Box::new(DataType::Utf8));
        Arc::new(Schema::new(vec![
            Field::new("time", DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())), false),
            Field::new("lat", DataType::Int64, false),
            Field::new("op", dict, false),
            Field::new("pid", DataType::Int32, false),
            Field::new("ino", DataType::Int64, false),
            Field::new("flags", DataType::Int64, false),
            Field::new("fd", DataType::Int32, false),
            Field::new("path", DataType::Utf8, false),
            Field::new("qtime", DataType::Int64, false),
            Field::new("dev", DataType::Int64, false),
            Field::new("host", DataType::Dictionary(Box::new(DataType::Int16), Box::new(DataType::Utf8)), false),
            Field::new("nr", DataType::Int32, false),
        ]))
    }

    /// Batches with every shape the encoders meet: increasing and wrapping times, extreme
    /// integers, runs and alternations, dictionaries that differ between batches, many distinct
    /// strings (forcing the plain fallback) and empty ones, columns of one value (in a chunk, or
    /// only in each batch), integers spanning just below and just above the range indexed by
    /// value.
    fn batches(rows: &[usize], distinct_paths: u64) -> Vec<RecordBatch> {
        let mut r = Rng(42);
        let mut t = -5i64;
        let ops: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(vec!["read", "write", "unknown", "openat"])),
            Arc::new(StringArray::from(vec!["openat", "fsync"])),
        ];
        rows.iter()
            .enumerate()
            .map(|(bi, &n)| {
                let time: Vec<i64> = (0..n)
                    .map(|i| {
                        t = if i == 7 { t.wrapping_add(i64::MAX) } else { t + (r.next() % 3000) as i64 };
                        t
                    })
                    .collect();
                let lat: Vec<i64> = (0..n)
                    .map(|i| if i % 1000 == 3 { i64::MIN } else { (r.next() >> (r.next() % 60)) as i64 })
                    .collect();
                let dict = &ops[bi % 2];
                let keys: Vec<i16> =
                    (0..n).map(|i| if i % 100 < 40 { 0 } else { (r.next() % dict.len() as u64) as i16 }).collect();
                let pid: Vec<i32> = (0..n).map(|i| if i % 50 < 30 { 100 } else { (r.next() % 7) as i32 - 3 }).collect();
                let ino: Vec<i64> = (0..n).map(|_| r.next() as i64).collect();
                let flags: Vec<i64> = (0..n).map(|i| if i % 9 == 0 { 0o101 } else { 0 }).collect();
                let fd: Vec<i32> = (0..n).map(|i| [i32::MIN, -1, 0, 3, i32::MAX][i % 5]).collect();
                let path: Vec<String> = (0..n)
                    .map(|i| if i % 4 == 0 { String::new() } else { format!("/data/f{}", r.next() % distinct_paths) })
                    .collect();
                let dev = vec![bi as i64; n];
                let hosts: ArrayRef = Arc::new(StringArray::from(vec!["h0", "h1"]));
                let host = DictionaryArray::<Int16Type>::new(Int16Array::from(vec![1i16; n]), hosts);
                let top = DIRECT_RANGE as i32 - 1 + (bi % 2) as i32;
                let nr: Vec<i32> = (0..n).map(|i| [0, 1, top][i % 3]).collect();
                RecordBatch::try_new(
                    schema(),
                    vec![
                        Arc::new(TimestampMicrosecondArray::from(time).with_timezone("UTC")),
                        Arc::new(Int64Array::from(lat)),
                        Arc::new(DictionaryArray::<Int16Type>::new(Int16Array::from(keys), dict.clone())),
                        Arc::new(Int32Array::from(pid)),
                        Arc::new(Int64Array::from(ino)),
                        Arc::new(Int64Array::from(flags)),
                        Arc::new(Int32Array::from(fd)),
                        Arc::new(StringArray::from(path)),
                        Arc::new(Int64Array::from(vec![0i64; n])),
                        Arc::new(Int64Array::from(dev)),
                        Arc::new(host),
                        Arc::new(Int32Array::from(nr)),
                    ],
                )
                .unwrap()
            })
            .collect()
    }

    fn write(batches: &[RecordBatch], row_group: usize) -> Bytes {
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::try_new(1).unwrap()))
            .set_max_row_group_row_count(Some(row_group))
            .build();
        let mut w = DirectWriter::try_new(Vec::new(), &schema(), &props).unwrap();
        for b in batches {
            w.write(b).unwrap();
        }
        Bytes::from(w.into_inner().unwrap())
    }

    /// Every value read back by the parquet crate's own reader, with the schema's types.
    fn round_trip(rows: &[usize], row_group: usize, distinct_paths: u64) {
        let input = batches(rows, distinct_paths);
        let file = write(&input, row_group);
        let reader =
            ParquetRecordBatchReaderBuilder::try_new(file.clone()).unwrap().with_batch_size(1 << 20).build().unwrap();
        let got: Vec<RecordBatch> = reader.map(|b| b.unwrap()).collect();
        let total: usize = rows.iter().sum();
        assert_eq!(got.iter().map(|b| b.num_rows()).sum::<usize>(), total);
        let expect = arrow_select::concat::concat_batches(&schema(), &input).unwrap();
        let got = arrow_select::concat::concat_batches(&got[0].schema(), &got).unwrap();
        for (i, f) in schema().fields().iter().enumerate() {
            let (e, g) = (expect.column(i), got.column(i));
            if let DataType::Dictionary(_, _) = f.data_type() {
                let e = arrow_cast_strings(e);
                let g = arrow_cast_strings(g);
                assert_eq!(e, g, "column {}", f.name());
            } else {
                assert_eq!(e.to_data(), g.to_data(), "column {}", f.name());
            }
        }
        let meta = SerializedFileReader::new(file).unwrap().metadata().clone();
        assert_eq!(meta.num_row_groups(), total.div_ceil(row_group));
        for rg in meta.row_groups() {
            let s = rg.column(1).statistics().expect("integer columns have statistics");
            assert!(s.min_bytes_opt().is_some() && s.max_bytes_opt().is_some());
            // A column of one value: its statistics, and a dictionary of one entry.
            let q = rg.column(8);
            assert_eq!(q.statistics().unwrap().min_bytes_opt(), Some(&0i64.to_le_bytes()[..]));
            assert_eq!(q.statistics().unwrap().max_bytes_opt(), Some(&0i64.to_le_bytes()[..]));
            assert!(q.dictionary_page_offset().is_some());
            assert_eq!(rg.column(10).statistics().unwrap().min_bytes_opt(), Some(&b"h1"[..]));
        }
    }

    fn arrow_cast_strings(a: &ArrayRef) -> Vec<String> {
        let d = a.as_dictionary::<Int16Type>();
        let v = d.values().as_string::<i32>();
        d.keys().values().iter().map(|&k| v.value(k as usize).to_string()).collect()
    }

    #[test]
    fn every_encoding_reads_back_exactly() {
        round_trip(&[1, 2, 129, 1000, 70_000, 33], 50_000, 40);
    }

    #[test]
    fn many_distinct_strings_fall_back_to_plain_and_read_back() {
        round_trip(&[200_000], 300_000, 1 << 40);
    }

    #[test]
    fn one_row_and_empty_batches() {
        round_trip(&[1], 10, 3);
        round_trip(&[0, 5, 0], 2, 3);
    }

    #[test]
    fn hybrid_runs_and_groups() {
        // Long run after 3 literals, a run too short for RLE, a run at the end.
        let mut v = vec![1, 2, 3];
        v.extend(std::iter::repeat_n(5, 40));
        v.extend([6, 6, 6, 7]);
        v.extend(std::iter::repeat_n(2, 20));
        let mut out = Vec::new();
        rle_hybrid(&v, 3, &mut out);
        assert_eq!(decode_hybrid(&out, 3, v.len()), v);
        let many: Vec<u32> = (0..5000).map(|i| (i * 7 % 13) as u32).collect();
        let mut out = Vec::new();
        rle_hybrid(&many, 4, &mut out);
        assert_eq!(decode_hybrid(&out, 4, many.len()), many);
    }

    /// A reference decoder written from the format's description.
    fn decode_hybrid(mut b: &[u8], width: u8, n: usize) -> Vec<u32> {
        let mut out = Vec::new();
        let read_uleb = |b: &mut &[u8]| {
            let (mut v, mut shift) = (0u64, 0);
            loop {
                let x = b[0];
                *b = &b[1..];
                v |= u64::from(x & 0x7f) << shift;
                shift += 7;
                if x < 0x80 {
                    return v;
                }
            }
        };
        while out.len() < n {
            let h = read_uleb(&mut b);
            if h & 1 == 0 {
                let nb = usize::from(width).div_ceil(8);
                let mut x = [0u8; 4];
                x[..nb].copy_from_slice(&b[..nb]);
                b = &b[nb..];
                out.extend(std::iter::repeat_n(u32::from_le_bytes(x), (h >> 1) as usize));
            } else {
                let count = (h >> 1) as usize * 8;
                let bytes = count * usize::from(width) / 8;
                for k in 0..count {
                    let mut v = 0u32;
                    for bit in 0..usize::from(width) {
                        let pos = k * usize::from(width) + bit;
                        v |= u32::from((b[pos / 8] >> (pos % 8)) & 1) << bit;
                    }
                    out.push(v);
                }
                b = &b[bytes..];
            }
        }
        out.truncate(n);
        out
    }
}
