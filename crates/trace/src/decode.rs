//! Decoding a block's Arrow buffers straight into an [`EventBatch`].
//!
//! The trace's columns are flat (fixed-width numbers and `Utf8`), so the buffers of a record
//! batch message can be located from the schema alone: field `i` owns the next field node and
//! two buffers (validity, values) or three (validity, offsets, data). Decoding them here rather
//! than through arrow-ipc's `RecordBatchDecoder` lets the reader
//!
//! * decompress each projected buffer straight into the `Vec` of the returned batch (no
//!   intermediate Arrow array, no second copy, no zero-initialised output buffer);
//! * keep one zstd decompression context for the whole file;
//! * leave the buffers of the columns that were not asked for alone (those columns are only
//!   zero-filled, or found still zero in a recycled batch);
//! * reuse the caller's allocations ([`crate::TraceReader::next_batch_into`]).
//!
//! The checks are the ones the Arrow decoder makes for these types (buffer sizes, declared
//! decompressed sizes, string offsets within their data, UTF-8 on character boundaries), so
//! that a damaged block without checksum is still an error, never a panic or a wrong batch.

use std::marker::PhantomData;
use std::mem::size_of;

use arrow_ipc::CompressionType;
use arrow_schema::{DataType, Schema};
use latscope_event::{EventBatch, StrCol};

use crate::column::with_prim_columns;
use crate::column::COLUMN_COUNT;
use crate::Column;

/// Where the buffers of each trace column are in the file's record batch messages.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    /// Per [`Column`]: its field node and its first buffer (validity).
    node: [usize; COLUMN_COUNT],
    buffer: [usize; COLUMN_COUNT],
    /// Per [`Column`]: whether the file declares the field nullable (nulls are then allowed,
    /// their slots keep whatever the values buffer holds).
    nullable: [bool; COLUMN_COUNT],
    /// Per [`Column`]: whether the file has it (optional columns may be missing).
    present: [bool; COLUMN_COUNT],
}

impl Layout {
    /// The layout of `schema`, whose field `file_index[c]` is column `c` (`None`: the file lacks
    /// it); `None` when the file has other columns of types whose buffers are not simply
    /// counted (then the Arrow decoder is used).
    pub(crate) fn new(schema: &Schema, file_index: &[Option<usize>; COLUMN_COUNT]) -> Option<Layout> {
        let mut first_buffer = Vec::with_capacity(schema.fields().len());
        let mut buffers = 0usize;
        for f in schema.fields() {
            first_buffer.push(buffers);
            buffers += match f.data_type() {
                DataType::Null => 0,
                DataType::Utf8 | DataType::Binary | DataType::LargeUtf8 | DataType::LargeBinary => 3,
                DataType::Boolean | DataType::FixedSizeBinary(_) => 2,
                t if t.primitive_width().is_some() => 2,
                _ => return None,
            };
        }
        let mut l = Layout {
            node: [0; COLUMN_COUNT],
            buffer: [0; COLUMN_COUNT],
            nullable: [false; COLUMN_COUNT],
            present: [false; COLUMN_COUNT],
        };
        for c in Column::ALL {
            let Some(i) = file_index[c.index()] else { continue };
            l.present[c.index()] = true;
            l.node[c.index()] = i;
            l.buffer[c.index()] = first_buffer[i];
            l.nullable[c.index()] = schema.field(i).is_nullable();
        }
        Some(l)
    }

    /// The buffers the decoder reads for column `c` (by [`Column::index`]): the values of a
    /// numeric column, the offsets and data of a string column (never the validity bitmap);
    /// none for a column the file lacks.
    pub(crate) fn buffers_of(&self, c: usize) -> std::ops::Range<usize> {
        if !self.present[c] {
            return 0..0;
        }
        let first = self.buffer[c] + 1;
        match Column::ALL[c].data_type() {
            DataType::Utf8 => first..first + 2,
            _ => first..first + 1,
        }
    }
}

/// A fixed-width column type: any bit pattern is a value, stored little-endian.
pub(crate) trait Plain: Copy + Default + PartialEq + 'static {
    fn le_to_native(self) -> Self;
    /// `vec![0; n]`: a zeroed allocation (`calloc`; for large columns the kernel's zero pages,
    /// no memset).
    fn zeroed_vec(n: usize) -> Vec<Self>;
    /// Whether every element is 0 (vectorised: no early exit inside a chunk).
    fn all_zero(v: &[Self]) -> bool;
}

macro_rules! plain {
    ($($t:ty),*) => { $(
        impl Plain for $t {
            #[inline]
            fn le_to_native(self) -> Self {
                <$t>::from_le(self)
            }
            #[inline]
            fn zeroed_vec(n: usize) -> Vec<Self> {
                vec![0; n]
            }
            #[inline]
            fn all_zero(v: &[Self]) -> bool {
                v.chunks(256).all(|c| c.iter().fold(0, |a, &x| a | x) == 0)
            }
        }
    )* };
}
plain!(u8, u16, u32, u64, i32, i64);

/// The uninitialised spare capacity of a `Vec`, as a zstd output buffer.
struct Spare<'a> {
    ptr: *mut u8,
    cap: usize,
    filled: usize,
    _vec: PhantomData<&'a mut [u8]>,
}

impl<'a> Spare<'a> {
    /// The spare capacity of `v` (which has length 0), as bytes.
    fn of<T: Plain>(v: &'a mut Vec<T>) -> Spare<'a> {
        debug_assert!(v.is_empty());
        let s = v.spare_capacity_mut();
        Spare { ptr: s.as_mut_ptr().cast::<u8>(), cap: std::mem::size_of_val(s), filled: 0, _vec: PhantomData }
    }
}

// SAFETY: `ptr` is valid for writes of `cap` bytes (the spare capacity of a `Vec` borrowed for
// 'a); `as_slice` covers only the `filled` bytes zstd reported as written.
unsafe impl zstd::zstd_safe::WriteBuf for Spare<'_> {
    fn as_slice(&self) -> &[u8] {
        // SAFETY: the first `filled` bytes were written (`filled_until`).
        unsafe { std::slice::from_raw_parts(self.ptr, self.filled) }
    }
    fn capacity(&self) -> usize {
        self.cap
    }
    fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr
    }
    unsafe fn filled_until(&mut self, n: usize) {
        self.filled = n;
    }
}

/// How the buffers of a block are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Codec {
    None,
    Zstd,
}

/// Decodes blocks; holds what is reused from one block to the next.
#[derive(Default)]
pub(crate) struct Decoder {
    zstd: Option<zstd::bulk::Decompressor<'static>>,
    /// Decompressed buffers that are larger than what the batch takes from them.
    scratch: Vec<u8>,
    /// A second vector of each column, for blocks of the other size ([`any_len_of_two`],
    /// [`zero_of_two`]).
    spare: EventBatch,
}

impl std::fmt::Debug for Decoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decoder").finish_non_exhaustive()
    }
}

/// Make `v` `n` zeros: the value of a column that was not read.
///
/// A column without room for them gets a zeroed allocation ([`Plain::zeroed_vec`]). A recycled
/// column (see [`crate::TraceReader::next_batch_into`]) usually holds zeros already, from the
/// previous block: checking that (a read) costs about half of writing them again.
#[inline]
fn zero<T: Plain>(v: &mut Vec<T>, n: usize) {
    if v.capacity() < n {
        *v = T::zeroed_vec(n);
        return;
    }
    v.truncate(n);
    if !T::all_zero(v) {
        v.clear();
    }
    v.resize(n, T::default());
}

/// [`zero`] with a second column to choose from, as [`any_len_of_two`]: a column of zeros in
/// blocks of both sizes (a field no call had) then finds zeros of about its length in one of
/// the two, instead of writing the difference again at every larger block (measured: 12 % of
/// `hist`'s instructions on a busy server's trace, 4 % on a `--why` recording).
#[inline]
fn zero_of_two<T: Plain>(v: &mut Vec<T>, spare: &mut Vec<T>, n: usize) {
    nearer_of_two(v, spare, n);
    zero(v, n);
}

/// Of `v` and `spare`, makes the one whose length is nearer `n` `v`.
#[inline]
fn nearer_of_two<T>(v: &mut Vec<T>, spare: &mut Vec<T>, n: usize) {
    if v.len().abs_diff(n) > spare.len().abs_diff(n) {
        std::mem::swap(v, spare);
    }
}

/// Make `v` `n` long, whatever it holds: the value of a pruned column (unspecified). Only growth
/// is written (zeros). A column without room gets a fresh zeroed allocation with a quarter to
/// spare instead of a reallocation: its old values need not be copied, and pages nobody reads
/// are never touched (blocks of a recording vary in size, so this happens more than once).
#[inline]
fn any_len<T: Plain>(v: &mut Vec<T>, n: usize) {
    if v.len() >= n {
        v.truncate(n);
    } else if v.capacity() < n {
        *v = T::zeroed_vec(n + n / 4);
        v.truncate(n);
    } else {
        v.resize(n, T::default());
    }
}

/// [`any_len`] with a second column to choose from: of `v` and `spare`, the one whose length is
/// nearer `n` becomes `v`, the other is kept for a later block. A recording writes blocks of two
/// sizes in turn (syscalls, then the fewer block requests of the same stretch of time): each
/// size then finds a column of about its length, instead of writing the difference in zeros at
/// every larger block (measured: 15 to 30 % of reading a trace's columns).
#[inline]
fn any_len_of_two<T: Plain>(v: &mut Vec<T>, spare: &mut Vec<T>, n: usize) {
    nearer_of_two(v, spare, n);
    any_len(v, n);
}

impl Decoder {
    /// Decode the record batch `rb` of `body` into `out`: the columns with `wanted[c]` from
    /// their buffers, the numeric columns with `pruned[c]` only set to the right length (their
    /// values unspecified), the others zero-filled (empty strings). The caller has checked that
    /// the buffers lie within `body` and bounded their declared decompressed sizes. On error the
    /// columns of `out` are left in an unspecified state (of inconsistent lengths).
    pub(crate) fn decode_into(
        &mut self,
        rb: &arrow_ipc::RecordBatch<'_>,
        body: &[u8],
        layout: &Layout,
        wanted: &[bool; COLUMN_COUNT],
        pruned: &[bool; COLUMN_COUNT],
        out: &mut EventBatch,
    ) -> Result<(), String> {
        let rows = rb.length();
        let n = usize::try_from(rows).map_err(|_| format!("invalid row count {rows}"))?;
        let codec = match rb.compression() {
            None => Codec::None,
            Some(c) if c.codec() == CompressionType::ZSTD => Codec::Zstd,
            Some(c) => {
                let name = c.codec().variant_name().unwrap_or("unknown");
                return Err(format!("undecodable data: {name} compression is not supported (only zstd)"));
            }
        };
        let nodes = rb.nodes().ok_or("the record batch has no field nodes")?;
        let buffers = rb.buffers().ok_or("the record batch has no buffers")?;
        // Each column's second vector (see `any_len_of_two`), out of the decoder while it is
        // lent; lost (and made again) only if the block is undecodable.
        let mut spare = std::mem::take(&mut self.spare);
        let mut cx = Cx { dec: self, body, buffers, codec, n };
        macro_rules! decode_columns {
            ($([$(($var:ident, $field:ident, $aty:ty, $dt:ident, $miss:expr)),*])*) => {
                $($(
                    let i = Column::$var.index();
                    if wanted[i] {
                        check_node(&nodes, layout, i, n)?;
                        cx.array(layout.buffer[i] + 1, n, &mut out.$field, Some(&mut spare.$field), Column::$var)?;
                    } else if pruned[i] {
                        any_len_of_two(&mut out.$field, &mut spare.$field, n);
                    } else {
                        zero_of_two(&mut out.$field, &mut spare.$field, n);
                    }
                )*)*
            };
        }
        with_prim_columns!(decode_columns);
        for (c, col, spare) in [
            (Column::Comm, &mut out.comm, &mut spare.comm),
            (Column::Path, &mut out.path, &mut spare.path),
            (Column::Path2, &mut out.path2, &mut spare.path2),
            (Column::FaultPath, &mut out.fault_path, &mut spare.fault_path),
        ] {
            let i = c.index();
            if wanted[i] {
                check_node(&nodes, layout, i, n)?;
                cx.strings(layout.buffer[i] + 1, col, c)?;
            } else if col.data.is_empty() && col.offsets.last() == Some(&0) && spare.data.is_empty() {
                // Offsets never decrease, so these are all zeros already (a recycled batch's
                // column, usually, and the spare, which holds only such): only the length
                // changes.
                any_len_of_two(&mut col.offsets, &mut spare.offsets, n + 1);
            } else {
                zero(&mut col.offsets, n + 1);
                col.data.clear();
            }
        }
        cx.dec.spare = spare;
        Ok(())
    }
}

/// Whether `frame` is exactly one zstd frame whose content is `len` zero bytes in RLE blocks (as
/// the writer stores a column of zeros), without dictionary or checksum. Anything else, damaged
/// frames included, is left to zstd.
pub(crate) fn zero_frame(frame: &[u8], len: usize) -> bool {
    const BLOCK_MAX: usize = 128 << 10;
    let Some((&[m0, m1, m2, m3, fhd], mut rest)) = frame.split_first_chunk::<5>() else { return false };
    if u32::from_le_bytes([m0, m1, m2, m3]) != 0xFD2F_B528 {
        return false;
    }
    let (fcs_flag, single, reserved, checksum, dict) = (fhd >> 6, fhd & 0x20 != 0, fhd & 0x08, fhd & 0x04, fhd & 3);
    if reserved != 0 || checksum != 0 || dict != 0 {
        return false;
    }
    if !single {
        // The window descriptor.
        let Some((_, r)) = rest.split_first() else { return false };
        rest = r;
    }
    let fcs_len = match (fcs_flag, single) {
        (0, false) => 0,
        (0, true) => 1,
        (1, _) => 2,
        (2, _) => 4,
        _ => 8,
    };
    if fcs_len == 0 || rest.len() < fcs_len {
        return false;
    }
    let mut size = [0u8; 8];
    size[..fcs_len].copy_from_slice(&rest[..fcs_len]);
    let content = u64::from_le_bytes(size) + if fcs_len == 2 { 256 } else { 0 };
    if content != len as u64 {
        return false;
    }
    rest = &rest[fcs_len..];
    let mut total = 0usize;
    loop {
        // Block header (3 bytes: last, type, size), then an RLE block's one byte.
        let Some((&[h0, h1, h2, byte], r)) = rest.split_first_chunk::<4>() else { return false };
        let h = u32::from_le_bytes([h0, h1, h2, 0]);
        let (last, kind, block) = (h & 1 != 0, (h >> 1) & 3, (h >> 3) as usize);
        if kind != 1 || byte != 0 || block > BLOCK_MAX {
            return false;
        }
        total += block;
        rest = r;
        if last {
            return rest.is_empty() && total == len;
        }
    }
}

fn check_node(
    nodes: &flatbuffers::Vector<'_, arrow_ipc::FieldNode>,
    layout: &Layout,
    c: usize,
    n: usize,
) -> Result<(), String> {
    let name = Column::ALL[c].name();
    let i = layout.node[c];
    if i >= nodes.len() {
        return Err(format!("undecodable data: no field node for column {name}"));
    }
    let node = nodes.get(i);
    if node.length() != n as i64 {
        return Err(format!("undecodable data: column {name} has {} rows, the block {n}", node.length()));
    }
    if node.null_count() != 0 && !layout.nullable[c] {
        return Err(format!("undecodable data: column {name} is declared non-nullable but contains nulls"));
    }
    Ok(())
}

/// One block being decoded.
struct Cx<'a, 'b> {
    dec: &'a mut Decoder,
    body: &'b [u8],
    buffers: flatbuffers::Vector<'b, arrow_ipc::Buffer>,
    codec: Codec,
    n: usize,
}

/// A buffer's stored bytes: raw (uncompressed file or `-1` prefix), or a zstd frame with the
/// decompressed length.
enum Stored<'b> {
    Raw(&'b [u8]),
    Zstd(&'b [u8], usize),
}

impl<'b> Cx<'_, 'b> {
    fn stored(&self, b: usize, c: Column) -> Result<Stored<'b>, String> {
        if b >= self.buffers.len() {
            return Err(format!("undecodable data: buffer count mismatched with metadata (column {c})"));
        }
        let buf = self.buffers.get(b);
        // The reader checked every buffer's extent against the body.
        let raw = usize::try_from(buf.offset())
            .ok()
            .zip(usize::try_from(buf.length()).ok())
            .and_then(|(o, l)| self.body.get(o..o.checked_add(l)?))
            .ok_or_else(|| format!("buffer {b} lies outside the body"))?;
        if self.codec == Codec::None || raw.is_empty() {
            return Ok(Stored::Raw(raw));
        }
        let (prefix, rest) = raw.split_at_checked(8).ok_or_else(|| {
            format!("undecodable data: compressed buffer {b} (column {c}) is too short for its length prefix")
        })?;
        match i64::from_le_bytes(prefix.try_into().unwrap_or([0; 8])) {
            -1 => Ok(Stored::Raw(rest)),
            0 => Ok(Stored::Raw(&[])),
            // The reader bounded the declared sizes.
            l => usize::try_from(l)
                .map(|l| Stored::Zstd(rest, l))
                .map_err(|_| format!("undecodable data: invalid uncompressed length {l} of buffer {b}")),
        }
    }

    fn zstd(&mut self) -> Result<&mut zstd::bulk::Decompressor<'static>, String> {
        if self.dec.zstd.is_none() {
            self.dec.zstd =
                Some(zstd::bulk::Decompressor::new().map_err(|e| format!("cannot create a zstd context: {e}"))?);
        }
        self.dec.zstd.as_mut().ok_or_else(|| "no zstd context".to_string())
    }

    /// Decompress a zstd frame that must yield exactly `len` bytes into `dst`.
    fn unzstd<W: zstd::zstd_safe::WriteBuf + ?Sized>(
        &mut self,
        frame: &[u8],
        len: usize,
        dst: &mut W,
        c: Column,
    ) -> Result<(), String> {
        let got = self
            .zstd()?
            .decompress_to_buffer(frame, dst)
            .map_err(|e| format!("undecodable data: column {c}: zstd: {e}"))?;
        if got != len {
            return Err(format!("undecodable data: column {c}: expected decompressed length {len}, got {got}"));
        }
        Ok(())
    }

    /// Buffer `b`, which must hold at least `count` elements, into `v` (`count` of them); with
    /// the column's second vector, which may take `v`'s place when the buffer holds zeros (see
    /// [`zero_of_two`]).
    fn array<T: Plain>(
        &mut self,
        b: usize,
        count: usize,
        v: &mut Vec<T>,
        spare: Option<&mut Vec<T>>,
        c: Column,
    ) -> Result<(), String> {
        let need = count * size_of::<T>();
        let stored = self.stored(b, c)?;
        if let Stored::Zstd(frame, len) = stored {
            if len == need && zero_frame(frame, len) {
                // A column of zeros (a field the calls did not have): found still zero in a
                // recycled column, usually, rather than written again by zstd.
                match spare {
                    Some(spare) => zero_of_two(v, spare, count),
                    None => zero(v, count),
                }
                return Ok(());
            }
        }
        v.clear();
        let too_small =
            |have: usize| format!("undecodable data: column {c}: buffer of {have} bytes, too small for {count} values");
        match stored {
            Stored::Raw(raw) => {
                let src = raw.get(..need).ok_or_else(|| too_small(raw.len()))?;
                v.reserve(count);
                // SAFETY: `v` has room for `count` elements, `src` is `count * size_of::<T>()`
                // bytes, and every bit pattern is a `T`; the regions are distinct allocations.
                unsafe {
                    std::ptr::copy_nonoverlapping(src.as_ptr(), v.as_mut_ptr().cast::<u8>(), need);
                    v.set_len(count);
                }
            }
            Stored::Zstd(_, len) if len < need => return Err(too_small(len)),
            Stored::Zstd(frame, len) if len == need => {
                v.reserve(count);
                let mut dst = Spare::of(v);
                self.unzstd(frame, len, &mut dst, c)?;
                let filled = dst.filled;
                debug_assert_eq!(filled, need);
                // SAFETY: zstd wrote exactly `need` = `count * size_of::<T>()` bytes into the
                // spare capacity, and every bit pattern is a `T`.
                unsafe { v.set_len(count) };
            }
            Stored::Zstd(frame, len) => {
                // Larger than needed (allowed by Arrow): through the scratch buffer.
                let mut scratch = std::mem::take(&mut self.dec.scratch);
                scratch.clear();
                scratch.reserve(len);
                let r = self.unzstd(frame, len, &mut scratch, c);
                if r.is_ok() {
                    v.reserve(count);
                    // SAFETY: as in the raw case; `scratch` holds `len` >= `need` bytes.
                    unsafe {
                        std::ptr::copy_nonoverlapping(scratch.as_ptr(), v.as_mut_ptr().cast::<u8>(), need);
                        v.set_len(count);
                    }
                }
                self.dec.scratch = scratch;
                r?;
            }
        }
        if cfg!(target_endian = "big") {
            v.iter_mut().for_each(|x| *x = x.le_to_native());
        }
        Ok(())
    }

    /// A `Utf8` column whose offsets buffer is `b` and data buffer `b + 1`.
    fn strings(&mut self, b: usize, col: &mut StrCol, c: Column) -> Result<(), String> {
        let n = self.n;
        if n == 0 {
            // Arrow allows an empty offsets buffer for an empty array.
            col.offsets.clear();
            col.offsets.push(0);
            col.data.clear();
            return Ok(());
        }
        self.array::<u32>(b, n + 1, &mut col.offsets, None, c)?;
        let data = &mut col.data;
        data.clear();
        match self.stored(b + 1, c)? {
            Stored::Raw(raw) => {
                // Only the bytes the offsets cover are copied (checked below).
                let end = (col.offsets[n] as i32).max(0) as usize;
                data.extend_from_slice(raw.get(..end.min(raw.len())).unwrap_or(raw));
            }
            Stored::Zstd(frame, len) => {
                data.reserve(len);
                self.unzstd(frame, len, data, c)?;
            }
        }
        // Offsets: non-negative as i32, non-decreasing, within the data; strings valid UTF-8.
        let offs = &mut col.offsets;
        let first = offs[0];
        let mut prev = first;
        for &o in offs.iter() {
            if (o as i32) < (prev as i32) {
                return Err(format!("undecodable data: column {c} has decreasing string offsets"));
            }
            prev = o;
        }
        if (first as i32) < 0 {
            return Err(format!("undecodable data: column {c} has a negative string offset"));
        }
        let (first, last) = (first as usize, prev as usize);
        if last > data.len() {
            return Err(format!("undecodable data: column {c} has offsets past its {} data bytes", data.len()));
        }
        data.truncate(last);
        if first > 0 {
            data.drain(..first);
            offs.iter_mut().for_each(|o| *o -= first as u32);
        }
        let s = std::str::from_utf8(data).map_err(|e| format!("undecodable data: column {c}: invalid UTF-8: {e}"))?;
        if !s.is_ascii() && offs.iter().any(|&o| !s.is_char_boundary(o as usize)) {
            return Err(format!("undecodable data: column {c}: a string offset is not on a UTF-8 character boundary"));
        }
        Ok(())
    }
}
