//! The protobuf wire format, as much of it as a Perfetto trace needs, and the field numbers used.
//!
//! Hand-written rather than generated (prost): the exporter writes one event as two packets
//! without building a message struct per event (no allocation per event), appends the flow ids
//! of a slice after its body was encoded (fields may come in any order), and must write
//! `repeated` scalars unpacked, as Perfetto's `.proto` files (proto2) declare them and its
//! protozero decoder expects. The field numbers below are those of Perfetto's
//! `protos/perfetto/trace/**.proto` (Apache-2.0); the tests parse every trace they export with
//! the official schema (`perfetto_trace_pb2` of the `perfetto` Python package).

/// `Trace.packet`.
pub const TRACE_PACKET: u32 = 1;

/// `TracePacket` fields.
pub mod packet {
    pub const CLOCK_SNAPSHOT: u32 = 6;
    pub const TIMESTAMP: u32 = 8;
    pub const TRUSTED_PACKET_SEQUENCE_ID: u32 = 10;
    pub const TRACK_EVENT: u32 = 11;
    pub const INTERNED_DATA: u32 = 12;
    pub const SEQUENCE_FLAGS: u32 = 13;
    pub const TIMESTAMP_CLOCK_ID: u32 = 58;
    pub const TRACE_PACKET_DEFAULTS: u32 = 59;
    pub const TRACK_DESCRIPTOR: u32 = 60;
    pub const FIRST_PACKET_ON_SEQUENCE: u32 = 87;
    /// `SequenceFlags.SEQ_INCREMENTAL_STATE_CLEARED`.
    pub const SEQ_INCREMENTAL_STATE_CLEARED: u64 = 1;
    /// `SequenceFlags.SEQ_NEEDS_INCREMENTAL_STATE`.
    pub const SEQ_NEEDS_INCREMENTAL_STATE: u64 = 2;
}

/// `TracePacketDefaults.timestamp_clock_id`.
pub const DEFAULTS_TIMESTAMP_CLOCK_ID: u32 = 58;

/// `ClockSnapshot` and `ClockSnapshot.Clock` fields, and the builtin clocks.
pub mod clock {
    pub const CLOCKS: u32 = 1;
    pub const PRIMARY_TRACE_CLOCK: u32 = 2;
    pub const CLOCK_ID: u32 = 1;
    pub const TIMESTAMP: u32 = 2;
    /// `BUILTIN_CLOCK_REALTIME`.
    pub const REALTIME: u64 = 1;
    /// `BUILTIN_CLOCK_MONOTONIC`: what latscope's timestamps are.
    pub const MONOTONIC: u64 = 3;
}

/// `TrackEvent` fields and types.
pub mod event {
    pub const CATEGORY_IIDS: u32 = 3;
    pub const CATEGORIES: u32 = 22;
    pub const NAME: u32 = 23;
    pub const DEBUG_ANNOTATIONS: u32 = 4;
    pub const TYPE: u32 = 9;
    pub const NAME_IID: u32 = 10;
    pub const TRACK_UUID: u32 = 11;
    pub const DOUBLE_COUNTER_VALUE: u32 = 44;
    pub const FLOW_IDS: u32 = 47;
    pub const TERMINATING_FLOW_IDS: u32 = 48;
    pub const TYPE_SLICE_BEGIN: u64 = 1;
    pub const TYPE_SLICE_END: u64 = 2;
    pub const TYPE_INSTANT: u64 = 3;
    pub const TYPE_COUNTER: u64 = 4;
}

/// `DebugAnnotation` fields.
pub mod annotation {
    pub const NAME_IID: u32 = 1;
    pub const UINT_VALUE: u32 = 3;
    pub const INT_VALUE: u32 = 4;
    pub const STRING_VALUE: u32 = 6;
    pub const STRING_VALUE_IID: u32 = 17;
}

/// `InternedData` fields (each entry: `iid` = 1, the string = 2).
pub mod interned {
    pub const EVENT_CATEGORIES: u32 = 1;
    pub const EVENT_NAMES: u32 = 2;
    pub const DEBUG_ANNOTATION_NAMES: u32 = 3;
    pub const DEBUG_ANNOTATION_STRING_VALUES: u32 = 29;
    pub const IID: u32 = 1;
    pub const NAME: u32 = 2;
}

/// `TrackDescriptor`, `ProcessDescriptor`, `ThreadDescriptor`, `CounterDescriptor` fields.
pub mod track {
    pub const UUID: u32 = 1;
    pub const NAME: u32 = 2;
    pub const PROCESS: u32 = 3;
    pub const THREAD: u32 = 4;
    pub const PARENT_UUID: u32 = 5;
    pub const COUNTER: u32 = 8;
    pub const DESCRIPTION: u32 = 14;
    pub const PROCESS_PID: u32 = 1;
    pub const PROCESS_CMDLINE: u32 = 2;
    pub const PROCESS_NAME: u32 = 6;
    pub const PROCESS_LABELS: u32 = 8;
    pub const THREAD_PID: u32 = 1;
    pub const THREAD_TID: u32 = 2;
    pub const THREAD_NAME: u32 = 5;
    pub const COUNTER_UNIT: u32 = 3;
    pub const COUNTER_UNIT_NAME: u32 = 6;
    /// `CounterDescriptor.Unit.UNIT_TIME_NS`.
    pub const UNIT_TIME_NS: u64 = 1;
    /// `CounterDescriptor.Unit.UNIT_COUNT`.
    pub const UNIT_COUNT: u64 = 2;
    /// `CounterDescriptor.Unit.UNIT_SIZE_BYTES`.
    pub const UNIT_SIZE_BYTES: u64 = 3;
}

const VARINT: u32 = 0;
const FIXED64: u32 = 1;
const LEN: u32 = 2;

/// Bytes of `v` as a varint.
#[inline]
pub fn varint_len(v: u64) -> usize {
    // 1 + floor(bits / 7), with 0 taking one byte.
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// Appends `v` as a varint.
#[inline]
pub fn put_varint(b: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        b.push(v as u8 | 0x80);
        v >>= 7;
    }
    b.push(v as u8);
}

#[inline]
fn key(b: &mut Vec<u8>, field: u32, wire: u32) {
    put_varint(b, u64::from(field << 3 | wire));
}

/// An unsigned varint field (`uint32`, `uint64`, `bool`, an enum).
#[inline]
pub fn uint(b: &mut Vec<u8>, field: u32, v: u64) {
    key(b, field, VARINT);
    put_varint(b, v);
}

/// A signed `int32`/`int64` field: negative values take ten bytes, as the format says.
#[inline]
pub fn int(b: &mut Vec<u8>, field: u32, v: i64) {
    uint(b, field, v as u64);
}

/// A `fixed64` field.
#[inline]
pub fn fixed64(b: &mut Vec<u8>, field: u32, v: u64) {
    key(b, field, FIXED64);
    b.extend_from_slice(&v.to_le_bytes());
}

/// A `double` field.
#[inline]
pub fn double(b: &mut Vec<u8>, field: u32, v: f64) {
    fixed64(b, field, v.to_bits());
}

/// A `string` or `bytes` field.
#[inline]
pub fn bytes(b: &mut Vec<u8>, field: u32, v: &[u8]) {
    key(b, field, LEN);
    put_varint(b, v.len() as u64);
    b.extend_from_slice(v);
}

/// A `string` field.
#[inline]
pub fn string(b: &mut Vec<u8>, field: u32, v: &str) {
    bytes(b, field, v.as_bytes());
}

/// Where a nested message started ([`begin`]); [`end`] writes its length.
#[derive(Debug, Clone, Copy)]
#[must_use]
pub struct Mark(usize);

/// Starts a nested message: its key and a one-byte length, fixed by [`end`].
#[inline]
pub fn begin(b: &mut Vec<u8>, field: u32) -> Mark {
    key(b, field, LEN);
    b.push(0);
    Mark(b.len())
}

/// Ends a nested message begun at `m`: the length is written minimally (a body of 128 bytes or
/// more moves by the extra length bytes).
#[inline(always)]
pub fn end(b: &mut Vec<u8>, m: Mark) {
    let len = b.len() - m.0;
    if len < 0x80 {
        b[m.0 - 1] = len as u8;
        return;
    }
    end_long(b, m, len);
}

/// [`end`] of a body of 128 bytes or more.
#[cold]
#[inline(never)]
fn end_long(b: &mut Vec<u8>, m: Mark, len: usize) {
    let n = varint_len(len as u64);
    let body = m.0;
    b.resize(b.len() + n - 1, 0);
    b.copy_within(body..body + len, body + n - 1);
    let mut at = body - 1;
    let mut v = len as u64;
    while v >= 0x80 {
        b[at] = v as u8 | 0x80;
        v >>= 7;
        at += 1;
    }
    b[at] = v as u8;
}

/// A writer into room made beforehand (part of an initialised buffer), its position held in a
/// register: appending to a `Vec` byte by byte stores its length and reloads its pointer at every
/// byte (a key, a varint, a one-byte length), most of the cost of a slice's packets. The caller
/// makes room for the most the packets can take; a write past it panics (a bounds check).
pub struct Cursor<'a> {
    b: &'a mut [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    /// Writes into `b` from `pos` on.
    #[inline]
    pub fn new(b: &'a mut [u8], pos: usize) -> Cursor<'a> {
        Cursor { b, pos }
    }

    /// Where the next byte goes.
    #[inline]
    pub fn pos(&self) -> usize {
        self.pos
    }

    #[inline(always)]
    fn byte(&mut self, v: u8) {
        self.b[self.pos] = v;
        self.pos += 1;
    }

    /// Appends `v` as a varint.
    #[inline(always)]
    pub fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.byte(v as u8 | 0x80);
            v >>= 7;
        }
        self.byte(v as u8);
    }

    #[inline(always)]
    fn key(&mut self, field: u32, wire: u32) {
        self.varint(u64::from(field << 3 | wire));
    }

    /// [`uint`].
    #[inline(always)]
    pub fn uint(&mut self, field: u32, v: u64) {
        self.key(field, VARINT);
        self.varint(v);
    }

    /// [`int`].
    #[inline(always)]
    pub fn int(&mut self, field: u32, v: i64) {
        self.uint(field, v as u64);
    }

    /// [`fixed64`].
    #[inline(always)]
    pub fn fixed64(&mut self, field: u32, v: u64) {
        self.key(field, FIXED64);
        self.b[self.pos..self.pos + 8].copy_from_slice(&v.to_le_bytes());
        self.pos += 8;
    }

    /// [`bytes`].
    #[inline(always)]
    pub fn bytes(&mut self, field: u32, v: &[u8]) {
        self.key(field, LEN);
        self.varint(v.len() as u64);
        self.b[self.pos..self.pos + v.len()].copy_from_slice(v);
        self.pos += v.len();
    }

    /// Appends bytes already encoded (fields of the message being written, whole packets).
    #[inline(always)]
    pub fn raw(&mut self, v: &[u8]) {
        self.b[self.pos..self.pos + v.len()].copy_from_slice(v);
        self.pos += v.len();
    }

    /// [`begin`]: a one-byte length, fixed by [`Cursor::end`] (which needs room for the extra
    /// length bytes of a body of 128 bytes or more).
    #[inline(always)]
    pub fn begin(&mut self, field: u32) -> Mark {
        self.key(field, LEN);
        self.byte(0);
        Mark(self.pos)
    }

    /// [`end`].
    #[inline(always)]
    pub fn end(&mut self, m: Mark) {
        let len = self.pos - m.0;
        if len < 0x80 {
            self.b[m.0 - 1] = len as u8;
            return;
        }
        self.end_long(m, len);
    }

    #[cold]
    #[inline(never)]
    fn end_long(&mut self, m: Mark, len: usize) {
        let n = varint_len(len as u64);
        let body = m.0;
        self.b.copy_within(body..body + len, body + n - 1);
        self.pos += n - 1;
        let mut at = body - 1;
        let mut v = len as u64;
        while v >= 0x80 {
            self.b[at] = v as u8 | 0x80;
            v >>= 7;
            at += 1;
        }
        self.b[at] = v as u8;
    }

    /// Starts a nested message whose length is written in exactly `n` bytes
    /// ([`Cursor::end_fixed`]): a redundant varint when shorter, as Perfetto's own protozero
    /// writer writes the lengths of nested messages, so that the body is never moved.
    #[inline(always)]
    pub fn begin_fixed(&mut self, field: u32, n: usize) -> Mark {
        self.key(field, LEN);
        self.pos += n;
        Mark(self.pos)
    }

    /// Ends a nested message begun with [`Cursor::begin_fixed`]`(.., n)`; its body must be
    /// shorter than `2^(7n)` bytes.
    #[inline(always)]
    pub fn end_fixed(&mut self, m: Mark, n: usize) {
        let len = self.pos - m.0;
        debug_assert!(len < 1 << (7 * n), "a body of {len} bytes in a {n}-byte length");
        let at = m.0 - n;
        for k in 0..n {
            let byte = (len >> (7 * k)) as u8 & 0x7f;
            self.b[at + k] = if k + 1 < n { byte | 0x80 } else { byte };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_take_the_bytes_the_format_says() {
        for (v, n) in [(0u64, 1), (1, 1), (127, 1), (128, 2), (16383, 2), (16384, 3), (u64::MAX, 10)] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            assert_eq!((b.len(), varint_len(v)), (n, n), "{v}");
        }
    }

    /// A length in a fixed number of bytes reads back as the same varint.
    #[test]
    fn fixed_lengths_are_redundant_varints_of_the_body_length() {
        for (len, n) in [(0usize, 2), (5, 2), (127, 2), (128, 2), (16383, 2), (70000, 3)] {
            let mut b = vec![7; 1 + n + len];
            let mut c = Cursor::new(&mut b, 0);
            let m = c.begin_fixed(1, n);
            c.pos += len;
            c.end_fixed(m, n);
            let (mut v, mut shift, mut i) = (0usize, 0, 1);
            loop {
                v |= ((b[i] & 0x7f) as usize) << shift;
                shift += 7;
                i += 1;
                if b[i - 1] & 0x80 == 0 {
                    break;
                }
            }
            assert_eq!((v, i - 1), (len, n));
        }
    }

    /// A nested message of every length around the one-byte boundary keeps its body intact and
    /// its length minimal.
    #[test]
    fn nested_lengths_are_minimal_and_bodies_intact() {
        for len in [0usize, 1, 127, 128, 129, 300, 16383, 16384, 70000] {
            let mut b = vec![0xAA];
            let m = begin(&mut b, 11);
            let body: Vec<u8> = (0..len).map(|i| i as u8).collect();
            b.extend_from_slice(&body);
            end(&mut b, m);
            b.push(0xBB);
            let mut want = vec![0xAA, (11 << 3 | 2) as u8];
            put_varint(&mut want, len as u64);
            want.extend_from_slice(&body);
            want.push(0xBB);
            assert_eq!(b, want, "length {len}");
        }
    }

    /// The cursor writes the bytes the `Vec` functions write, long nested bodies included.
    #[test]
    fn a_cursor_writes_what_the_vec_writers_write() {
        for len in [0usize, 5, 127, 128, 300, 16384] {
            let body: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let mut want = Vec::new();
            uint(&mut want, 8, 1 << 40);
            int(&mut want, 4, -3);
            fixed64(&mut want, 47, 99);
            let m = begin(&mut want, 4);
            bytes(&mut want, 6, &body);
            end(&mut want, m);
            let mut room = vec![0xEE; want.len() + 16];
            let mut c = Cursor::new(&mut room, 0);
            c.uint(8, 1 << 40);
            c.int(4, -3);
            c.fixed64(47, 99);
            let m = c.begin(4);
            c.bytes(6, &body);
            c.end(m);
            let n = c.pos();
            assert_eq!(&room[..n], &want[..], "body of {len}");
        }
    }
}
