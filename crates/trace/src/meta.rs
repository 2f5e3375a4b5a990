//! Metadata keys, per-block metadata, the summary, and Arrow IPC message framing.

use arrow_ipc::Message;
use serde::{Deserialize, Serialize};

/// Schema metadata key: the trace format version (decimal).
pub const KEY_FORMAT_VERSION: &str = "latscope.format_version";
/// Schema metadata key: the [`latscope_event::TraceHeader`] as JSON.
pub const KEY_HEADER: &str = "latscope.header";
/// Schema metadata key: CRC-32C of the header JSON (8 lower-case hex digits).
pub const KEY_HEADER_CRC: &str = "latscope.header_crc32c";
/// Schema metadata key: CRC-32C of the schema itself, [`schema_digest`] (8 lower-case hex
/// digits): the columns' names, types and order, and the other `latscope.*` schema metadata.
/// Absent in files written before it existed (their schema is read unchecked).
pub const KEY_SCHEMA_CRC: &str = "latscope.schema_crc32c";
/// Block metadata key: block number, from 0 (decimal).
pub const KEY_SEQ: &str = "latscope.seq";
/// Block metadata key: CRC-32C of the message body (8 lower-case hex digits).
pub const KEY_CRC: &str = "latscope.crc32c";
/// Block metadata key: events in this and all earlier blocks (decimal).
pub const KEY_EVENTS_TOTAL: &str = "latscope.events_total";
/// Block metadata key: events the probes had lost when this block was written (decimal).
pub const KEY_LOST_TOTAL: &str = "latscope.lost_total";
/// Block metadata key: smallest `ts` in the block (decimal; absent in empty blocks).
pub const KEY_TS_MIN: &str = "latscope.ts_min";
/// Block metadata key: largest `ts` in the block (decimal; absent in empty blocks).
pub const KEY_TS_MAX: &str = "latscope.ts_max";
/// Block metadata key: events per kind in the block, `SYSCALL,BLOCK,PROC` (three decimal counts,
/// comma-separated; absent in empty blocks and when an event has another kind code).
pub const KEY_KINDS: &str = "latscope.kinds";
/// Block metadata key: smallest `lat` in the block (decimal; absent in empty blocks).
pub const KEY_LAT_MIN: &str = "latscope.lat_min";
/// Block metadata key: largest `lat` in the block (decimal; absent in empty blocks).
pub const KEY_LAT_MAX: &str = "latscope.lat_max";
/// Block metadata key: smallest end time `ts + lat` (saturating) in the block (decimal; absent in
/// empty blocks).
pub const KEY_END_MIN: &str = "latscope.end_min";
/// Block metadata key: largest end time `ts + lat` (saturating) in the block (decimal; absent in
/// empty blocks).
pub const KEY_END_MAX: &str = "latscope.end_max";
/// Block metadata key: CRC-32C of each buffer's stored bytes (as in the body: compressed, with
/// their length prefix), in the order of the record batch's buffers, as lower-case hex without
/// leading zeros, comma-separated. Lets a reader that decodes only some columns read and verify
/// only their buffers.
pub const KEY_BUFFER_CRCS: &str = "latscope.buffer_crc32c";
/// Block metadata key: CRC-32C of the block's layout and latscope metadata (8 lower-case hex
/// digits), see [`meta_digest`].
pub const KEY_META_CRC: &str = "latscope.meta_crc32c";
/// Block metadata key: entries of the stack table first used by the block's events (`kstack`,
/// `ustack` columns), one JSON object per line (see [`latscope_event::StackEntry`]).
pub const KEY_STACKS: &str = "latscope.stacks";
/// Block metadata key: cgroups first met during the recording (a container started after it
/// began), one [`latscope_event::CgroupInfo`] JSON object per line; readers add them to the
/// header's `cgroups`. In the block of the first events in them, or an earlier one.
pub const KEY_CGROUPS: &str = "latscope.cgroups";
/// Metadata key of the last (0-row) block of a cleanly closed trace: the [`Summary`] as JSON.
pub const KEY_SUMMARY: &str = "latscope.summary";

/// The Arrow IPC continuation marker that starts every message.
pub(crate) const CONTINUATION: [u8; 4] = [0xff; 4];

/// What a cleanly closed recording wrote last.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// Events in the file.
    pub events: u64,
    /// Events the probes lost (not in the file).
    pub lost: u64,
    /// Data blocks in the file (the summary block not counted).
    pub blocks: u64,
    /// File bytes before the summary block (header and data blocks).
    pub bytes: u64,
    /// Duration of the recording in ns.
    pub duration_ns: u64,
    /// CLOCK_MONOTONIC ns when the recording ended.
    pub end_ns: u64,
    /// Block completions the probes saw without the request's issue: not losses (a request
    /// issued before the probes were attached, or completed twice, as some flushes are). Absent
    /// (0) in traces written before the field existed.
    #[serde(default)]
    pub block_completions_without_issue: u64,
    /// With attribution (`--why`): blocked intervals whose wake-up the probes did not see,
    /// attributed from the call alone. Absent (0) in traces written before the field existed.
    #[serde(default)]
    pub wakeups_unseen: u64,
    /// Runs of the probes' programs the kernel skipped (it does not re-enter a program on a
    /// CPU): its `recursion_misses`. Absent where the kernel does not count them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program_runs_skipped: Option<u64>,
    /// What the writer cut to keep blocks within what readers accept: stack and cgroup table
    /// entries cut short or left out (the recorder's stack table full, an entry larger than its
    /// bound). Absent when nothing was.
    #[serde(default, skip_serializing_if = "latscope_event::Truncation::is_empty")]
    pub truncated: latscope_event::Truncation,
    /// With stacks (`--why --stacks`): events' stack references that are missing (the entry
    /// they refer to says why), by reason. Absent when none is, and in traces written before
    /// the field existed.
    #[serde(default, skip_serializing_if = "StacksMissing::is_none")]
    pub stacks_missing: StacksMissing,
}

/// Stack references of a recording's events that are missing, by reason (kernel and user
/// stacks together); see docs/WHY.md.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StacksMissing {
    /// The stack map held another stack under the stack's hash.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub hash_collision: u64,
    /// The stack map was full.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub map_full: u64,
    /// The stack's user had stored more new stacks than its share of the stack map since the
    /// recorder last read it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub user_quota: u64,
    /// The stack could not be read (no user stack, or its memory was not mapped).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unreadable: u64,
    /// The capture failed otherwise.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub capture_failed: u64,
    /// The stack's frames were no longer held when its event was read.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub not_held: u64,
    /// The process had exited before its user stack was read.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub process_exited: u64,
    /// The trace's stack table was full (in all, or the user's share of it).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub table_full: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl StacksMissing {
    /// No stack is missing.
    pub fn is_none(&self) -> bool {
        self.total() == 0
    }

    /// Missing stack references, all reasons.
    pub fn total(&self) -> u64 {
        self.reasons().iter().map(|(_, n)| n).sum()
    }

    /// `3 stacks missing (user_quota 2, hash_collision 1)`: the reasons that count, most
    /// first.
    pub fn describe(&self) -> String {
        let mut r: Vec<(&str, u64)> = self.reasons().into_iter().filter(|(_, n)| *n > 0).collect();
        r.sort_by_key(|b| std::cmp::Reverse(b.1));
        let parts: Vec<String> = r.iter().map(|(k, n)| format!("{k} {n}")).collect();
        format!("{} stacks missing ({})", self.total(), parts.join(", "))
    }

    /// (reason, count) of each reason, in a fixed order (the JSON names).
    pub fn reasons(&self) -> [(&'static str, u64); 8] {
        [
            ("hash_collision", self.hash_collision),
            ("map_full", self.map_full),
            ("user_quota", self.user_quota),
            ("unreadable", self.unreadable),
            ("capture_failed", self.capture_failed),
            ("not_held", self.not_held),
            ("process_exited", self.process_exited),
            ("table_full", self.table_full),
        ]
    }
}

/// The latscope metadata of one block, as stored in its message's `custom_metadata`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlockMeta {
    /// Block number ([`KEY_SEQ`]).
    pub seq: Option<u64>,
    /// CRC-32C of the body ([`KEY_CRC`]).
    pub crc32c: Option<u32>,
    /// CRC-32C of each buffer ([`KEY_BUFFER_CRCS`]); `None` in files written before the key
    /// existed.
    pub buffer_crc32c: Option<Vec<u32>>,
    /// Events up to and including this block ([`KEY_EVENTS_TOTAL`]).
    pub events_total: Option<u64>,
    /// Events lost so far ([`KEY_LOST_TOTAL`]).
    pub lost_total: Option<u64>,
    /// Smallest `ts` ([`KEY_TS_MIN`]).
    pub ts_min: Option<u64>,
    /// Largest `ts` ([`KEY_TS_MAX`]).
    pub ts_max: Option<u64>,
    /// Events per kind code 0 (syscall), 1 (block request), 2 (process event) ([`KEY_KINDS`]);
    /// `None` in files written before the key existed.
    pub kinds: Option<[u64; 3]>,
    /// Smallest `lat` ([`KEY_LAT_MIN`]).
    pub lat_min: Option<u64>,
    /// Largest `lat` ([`KEY_LAT_MAX`]).
    pub lat_max: Option<u64>,
    /// Smallest end time, `ts + lat` saturating ([`KEY_END_MIN`]).
    pub end_min: Option<u64>,
    /// Largest end time, `ts + lat` saturating ([`KEY_END_MAX`]).
    pub end_max: Option<u64>,
    /// The summary JSON ([`KEY_SUMMARY`]), only in the last block of a cleanly closed trace.
    pub summary: Option<String>,
    /// Stack table entries ([`KEY_STACKS`]), in blocks whose events use new stacks.
    pub stacks: Option<String>,
    /// Cgroup table entries ([`KEY_CGROUPS`]), in blocks written after new cgroups were met.
    pub cgroups: Option<String>,
    /// CRC-32C of the layout and metadata ([`KEY_META_CRC`]).
    pub meta_crc32c: Option<u32>,
}

impl BlockMeta {
    /// Read the latscope keys of a message; unknown keys are ignored, malformed values are errors.
    pub(crate) fn from_message(msg: &Message<'_>) -> Result<BlockMeta, String> {
        let mut m = BlockMeta::default();
        let Some(kvs) = msg.custom_metadata() else { return Ok(m) };
        for kv in kvs.iter() {
            let (Some(k), Some(v)) = (kv.key(), kv.value()) else { continue };
            let num = || v.parse::<u64>().map_err(|_| format!("metadata {k}={v:?} is not a number"));
            let crc = || u32::from_str_radix(v, 16).map_err(|_| format!("metadata {k}={v:?} is not a hex checksum"));
            match k {
                KEY_SEQ => m.seq = Some(num()?),
                KEY_CRC => m.crc32c = Some(crc()?),
                KEY_META_CRC => m.meta_crc32c = Some(crc()?),
                KEY_EVENTS_TOTAL => m.events_total = Some(num()?),
                KEY_LOST_TOTAL => m.lost_total = Some(num()?),
                KEY_TS_MIN => m.ts_min = Some(num()?),
                KEY_TS_MAX => m.ts_max = Some(num()?),
                KEY_LAT_MIN => m.lat_min = Some(num()?),
                KEY_LAT_MAX => m.lat_max = Some(num()?),
                KEY_END_MIN => m.end_min = Some(num()?),
                KEY_END_MAX => m.end_max = Some(num()?),
                KEY_KINDS => {
                    m.kinds = Some(parse_kinds(v).ok_or_else(|| format!("metadata {k}={v:?} is not three counts"))?)
                }
                KEY_BUFFER_CRCS => {
                    let crcs: Option<Vec<u32>> = if v.is_empty() {
                        Some(Vec::new())
                    } else {
                        v.split(',').map(|x| u32::from_str_radix(x, 16).ok()).collect()
                    };
                    m.buffer_crc32c = Some(
                        crcs.ok_or_else(|| format!("metadata {k} is not a comma-separated list of hex checksums"))?,
                    )
                }
                KEY_SUMMARY => m.summary = Some(v.to_string()),
                KEY_STACKS => m.stacks = Some(v.to_string()),
                KEY_CGROUPS => m.cgroups = Some(v.to_string()),
                _ => {}
            }
        }
        Ok(m)
    }

    /// The key/value pairs to store.
    pub(crate) fn to_pairs(&self) -> Vec<(&'static str, String)> {
        let mut v = Vec::with_capacity(12);
        let mut num = |k, x: Option<u64>| {
            if let Some(x) = x {
                v.push((k, x.to_string()))
            }
        };
        num(KEY_SEQ, self.seq);
        num(KEY_EVENTS_TOTAL, self.events_total);
        num(KEY_LOST_TOTAL, self.lost_total);
        num(KEY_TS_MIN, self.ts_min);
        num(KEY_TS_MAX, self.ts_max);
        num(KEY_LAT_MIN, self.lat_min);
        num(KEY_LAT_MAX, self.lat_max);
        num(KEY_END_MIN, self.end_min);
        num(KEY_END_MAX, self.end_max);
        if let Some([s, b, p]) = self.kinds {
            v.push((KEY_KINDS, format!("{s},{b},{p}")));
        }
        if let Some(c) = self.crc32c {
            v.push((KEY_CRC, format!("{c:08x}")));
        }
        if let Some(crcs) = &self.buffer_crc32c {
            let mut s = String::with_capacity(crcs.len() * 9);
            for (i, c) in crcs.iter().enumerate() {
                use std::fmt::Write;
                let _ = write!(s, "{}{c:x}", if i > 0 { "," } else { "" });
            }
            v.push((KEY_BUFFER_CRCS, s));
        }
        if let Some(s) = &self.summary {
            v.push((KEY_SUMMARY, s.clone()));
        }
        if let Some(s) = &self.stacks {
            v.push((KEY_STACKS, s.clone()));
        }
        if let Some(s) = &self.cgroups {
            v.push((KEY_CGROUPS, s.clone()));
        }
        v
    }

    /// Whether every event of the block has kind code `kind` (and there is at least one); false
    /// when the block does not say ([`KEY_KINDS`] absent: a file from an older latscope).
    pub fn only_kind(&self, kind: u8) -> bool {
        match self.kinds {
            Some(k) => (0..3).all(|i| (i == kind as usize) == (k[i] > 0)),
            None => false,
        }
    }

    /// The zone map of `kind`, `ts`, `lat` of a block of events (`None`s for an empty one):
    /// fills [`BlockMeta::ts_min`] to [`BlockMeta::end_max`] and [`BlockMeta::kinds`].
    pub(crate) fn set_zone(&mut self, kind: &[u8], ts: &[u64], lat: &[u64]) {
        let n = ts.len().min(lat.len());
        if n == 0 {
            return;
        }
        let (mut t0, mut t1, mut l0, mut l1, mut e0, mut e1) = (u64::MAX, 0, u64::MAX, 0, u64::MAX, 0);
        for (&t, &l) in ts[..n].iter().zip(&lat[..n]) {
            let e = t.saturating_add(l);
            t0 = t0.min(t);
            t1 = t1.max(t);
            l0 = l0.min(l);
            l1 = l1.max(l);
            e0 = e0.min(e);
            e1 = e1.max(e);
        }
        (self.ts_min, self.ts_max) = (Some(t0), Some(t1));
        (self.lat_min, self.lat_max) = (Some(l0), Some(l1));
        (self.end_min, self.end_max) = (Some(e0), Some(e1));
        let mut k = [0u64; 4];
        for &x in kind {
            k[(x as usize).min(3)] += 1;
        }
        self.kinds = (k[3] == 0 && kind.len() == n).then_some([k[0], k[1], k[2]]);
    }
}

/// The CRC-32C of `body` and of each of its buffers, given as `(offset, length)`.
///
/// The body is checksummed in a second pass rather than by combining the buffers' checksums:
/// a block's compressed body is small and stays in the cache, and combining (a matrix power
/// per buffer, some 90 buffers a block) cost more than reading it again.
pub(crate) fn body_checksums(body: &[u8], buffers: impl IntoIterator<Item = (i64, i64)>) -> (u32, Vec<u32>) {
    let crcs = buffers
        .into_iter()
        .map(|(off, len)| {
            let range = usize::try_from(off).ok().zip(usize::try_from(len).ok()).and_then(|(o, l)| {
                let end = o.checked_add(l)?;
                (end <= body.len()).then_some(o..end)
            });
            // Out of the body: a checksum no reader can match (the reader rejects the layout anyway).
            range.map_or(0, |r| crc32c::crc32c(&body[r]))
        })
        .collect();
    (crc32c::crc32c(body), crcs)
}

/// `"S,B,P"`: three decimal counts.
fn parse_kinds(v: &str) -> Option<[u64; 3]> {
    let mut it = v.split(',').map(|x| x.parse::<u64>().ok());
    let k = [it.next()??, it.next()??, it.next()??];
    it.next().is_none().then_some(k)
}

/// CRC-32C protecting what the body checksum does not: the record batch layout (row count,
/// field nodes, buffer offsets and lengths, compression) and the message's `latscope.*`
/// metadata other than [`KEY_META_CRC`] itself.
///
/// Digested in order: the message's `bodyLength` and the batch's `length` as i64 LE; per field node `length`, `null_count` as i64 LE;
/// per buffer `offset`, `length` as i64 LE; the compression codec and method as one byte
/// each (`ff ff` without compression); then the `latscope.*` pairs sorted by key, each as
/// key bytes, a 0 byte, value bytes, a 0 byte.
pub fn meta_digest<'a>(
    body_length: i64,
    rb: &arrow_ipc::RecordBatch<'_>,
    pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> u32 {
    let comp = rb.compression().map(|x| [x.codec().0 as u8, x.method().0 as u8]).unwrap_or([0xff, 0xff]);
    meta_digest_parts(
        body_length,
        rb.length(),
        rb.nodes().into_iter().flatten().map(|n| (n.length(), n.null_count())),
        rb.buffers().into_iter().flatten().map(|b| (b.offset(), b.length())),
        comp,
        pairs,
    )
}

/// [`meta_digest`] of a message given by its parts: field nodes as `(length, null_count)`,
/// buffers as `(offset, length)`, the compression as codec and method bytes.
pub(crate) fn meta_digest_parts<'a>(
    body_length: i64,
    length: i64,
    nodes: impl IntoIterator<Item = (i64, i64)>,
    buffers: impl IntoIterator<Item = (i64, i64)>,
    comp: [u8; 2],
    pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> u32 {
    let mut c = crc32c::crc32c(&body_length.to_le_bytes());
    c = crc32c::crc32c_append(c, &length.to_le_bytes());
    for (len, nulls) in nodes {
        c = crc32c::crc32c_append(c, &len.to_le_bytes());
        c = crc32c::crc32c_append(c, &nulls.to_le_bytes());
    }
    for (off, len) in buffers {
        c = crc32c::crc32c_append(c, &off.to_le_bytes());
        c = crc32c::crc32c_append(c, &len.to_le_bytes());
    }
    c = crc32c::crc32c_append(c, &comp);
    let mut pairs: Vec<(&str, &str)> =
        pairs.into_iter().filter(|(k, _)| k.starts_with("latscope.") && *k != KEY_META_CRC).collect();
    pairs.sort_unstable();
    for (k, v) in pairs {
        c = crc32c::crc32c_append(c, k.as_bytes());
        c = crc32c::crc32c_append(c, &[0]);
        c = crc32c::crc32c_append(c, v.as_bytes());
        c = crc32c::crc32c_append(c, &[0]);
    }
    c
}

/// CRC-32C of a schema as latscope reads it: for each field in order its name, a 0 byte, its type
/// (a stable name: `uint64`, `utf8`, ...), a 0 byte, `1` or `0` for nullable, a 0 byte, and its
/// metadata pairs sorted by key (key, 0, value, 0); then a 0xff byte and the schema's `latscope.*`
/// metadata pairs sorted by key, except [`KEY_HEADER`] (which [`KEY_HEADER_CRC`] covers) and
/// [`KEY_SCHEMA_CRC`] itself, as key, 0, value, 0.
pub fn schema_digest(schema: &arrow_schema::Schema) -> u32 {
    let mut c = 0u32;
    let mut put = |b: &[u8]| {
        c = crc32c::crc32c_append(c, b);
        c = crc32c::crc32c_append(c, &[0]);
    };
    for f in schema.fields() {
        put(f.name().as_bytes());
        put(type_name(f.data_type()).as_bytes());
        put(if f.is_nullable() { b"1" } else { b"0" });
        let mut md: Vec<(&String, &String)> = f.metadata().iter().collect();
        md.sort_unstable();
        for (k, v) in md {
            put(k.as_bytes());
            put(v.as_bytes());
        }
    }
    put(&[0xff]);
    let mut md: Vec<(&String, &String)> = schema
        .metadata()
        .iter()
        .filter(|(k, _)| k.starts_with("latscope.") && *k != KEY_HEADER && *k != KEY_SCHEMA_CRC)
        .collect();
    md.sort_unstable();
    for (k, v) in md {
        put(k.as_bytes());
        put(v.as_bytes());
    }
    c
}

/// A type's name for [`schema_digest`], the same in every Arrow version for the types latscope
/// writes (others, which only other tools write, by their debug form).
fn type_name(t: &arrow_schema::DataType) -> String {
    use arrow_schema::DataType as T;
    match t {
        T::Boolean => "bool".into(),
        T::Int8 => "int8".into(),
        T::Int16 => "int16".into(),
        T::Int32 => "int32".into(),
        T::Int64 => "int64".into(),
        T::UInt8 => "uint8".into(),
        T::UInt16 => "uint16".into(),
        T::UInt32 => "uint32".into(),
        T::UInt64 => "uint64".into(),
        T::Float32 => "float32".into(),
        T::Float64 => "float64".into(),
        T::Utf8 => "utf8".into(),
        T::LargeUtf8 => "large_utf8".into(),
        T::Binary => "binary".into(),
        T::LargeBinary => "large_binary".into(),
        other => format!("{other:?}"),
    }
}

/// Append the encapsulation prefix (continuation marker, padded metadata length) and the
/// metadata flatbuffer padded to a multiple of 8 bytes to `out`.
pub(crate) fn frame_metadata(out: &mut Vec<u8>, metadata: &[u8]) {
    let padded = metadata.len().next_multiple_of(8);
    out.extend_from_slice(&CONTINUATION);
    out.extend_from_slice(&(padded as i32).to_le_bytes());
    out.extend_from_slice(metadata);
    out.resize(out.len() + padded - metadata.len(), 0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_pads_to_8() {
        let mut v = Vec::new();
        frame_metadata(&mut v, &[1, 2, 3]);
        assert_eq!(v.len(), 16);
        assert_eq!(&v[..4], &CONTINUATION);
        assert_eq!(i32::from_le_bytes(v[4..8].try_into().unwrap()), 8);
        assert_eq!(&v[8..11], &[1, 2, 3]);
    }

    #[test]
    fn body_checksums_are_the_body_and_buffer_crcs() {
        let body: Vec<u8> = (0..1000u32).map(|i| (i * 7 + i / 13) as u8).collect();
        let bufs = [(0i64, 0i64), (0, 100), (104, 0), (104, 396), (512, 488)];
        let (crc, crcs) = body_checksums(&body, bufs);
        assert_eq!(crc, crc32c::crc32c(&body));
        let want: Vec<u32> = bufs.iter().map(|&(o, l)| crc32c::crc32c(&body[o as usize..(o + l) as usize])).collect();
        assert_eq!(crcs, want);
        // Out of order.
        let (crc, crcs) = body_checksums(&body, [(512, 488), (0, 100)]);
        assert_eq!(crc, crc32c::crc32c(&body));
        assert_eq!(crcs[1], crc32c::crc32c(&body[..100]));
        // Outside the body.
        let (crc, crcs) = body_checksums(&body, [(990, 20)]);
        assert_eq!((crc, crcs), (crc32c::crc32c(&body), vec![0]));
    }

    #[test]
    fn buffer_checksums_round_trip_through_metadata() {
        let m = BlockMeta { buffer_crc32c: Some(vec![0, 0xdeadbeef, 1]), ..Default::default() };
        let pairs = m.to_pairs();
        let v = &pairs.iter().find(|(k, _)| *k == KEY_BUFFER_CRCS).unwrap().1;
        assert_eq!(v, "0,deadbeef,1");
    }

    #[test]
    fn summary_json() {
        let s = Summary { events: 1, lost: 2, blocks: 3, bytes: 4, duration_ns: 5, end_ns: 6, ..Default::default() };
        let j = serde_json::to_string(&s).unwrap();
        assert_eq!(
            j,
            r#"{"events":1,"lost":2,"blocks":3,"bytes":4,"duration_ns":5,"end_ns":6,"block_completions_without_issue":0,"wakeups_unseen":0}"#
        );
        assert_eq!(serde_json::from_str::<Summary>(&j).unwrap(), s);
        let skipped = Summary { program_runs_skipped: Some(7), ..s };
        let j = serde_json::to_string(&skipped).unwrap();
        assert!(j.ends_with(r#","program_runs_skipped":7}"#), "{j}");
        assert_eq!(serde_json::from_str::<Summary>(&j).unwrap(), skipped);
        let missing = Summary { stacks_missing: StacksMissing { user_quota: 3, ..Default::default() }, ..s };
        let j = serde_json::to_string(&missing).unwrap();
        assert!(j.ends_with(r#","stacks_missing":{"user_quota":3}}"#), "{j}");
        assert_eq!(serde_json::from_str::<Summary>(&j).unwrap(), missing);
    }
}
