//! The files: packets of one sequence, its interning and track descriptors, cut into parts.
//!
//! Every file is a complete Perfetto trace by itself: a clock snapshot (latscope's timestamps
//! are CLOCK_MONOTONIC, made the trace's clock, with CLOCK_REALTIME beside it so that the UI can
//! show the time of day), a packet that starts the sequence (`SEQ_INCREMENTAL_STATE_CLEARED`,
//! the packet defaults: timestamps in CLOCK_MONOTONIC, and in a file after the first, the
//! interning entries written so far, which slices encoded before the cut may use), and each
//! track's descriptor before the first event on it. All packets are of one sequence
//! (`trusted_packet_sequence_id` 1): one writer. Slices are encoded as they arrive, their names
//! and strings interned then, and written later in the same order, with their flows.

use std::io::Write;
use std::path::{Path, PathBuf};

use latscope_trace::AtomicFile;
use serde::Serialize;

use super::intern::Interner;
use super::proto::{self, annotation, clock, event, packet};
use super::slices::{name_of, Cat, Held, Slice, Val};
use super::tracks::Tracks;
use crate::ExportError;

/// The sequence id of every packet (one writer).
const SEQUENCE: u64 = 1;
/// Packets are gathered in memory and written to the file this many bytes at a time.
const FLUSH_BYTES: usize = 1 << 17;

/// A file written.
#[derive(Debug, Clone, Serialize)]
pub struct WrittenPart {
    /// Where.
    pub path: PathBuf,
    /// Its size.
    pub bytes: u64,
    /// Slices in it: events, and the parts of calls inside theirs.
    pub slices: u64,
    /// CLOCK_MONOTONIC ns of the first and last event start in it (0 when none).
    pub first_ns: u64,
    /// The latest event start in it.
    pub last_ns: u64,
}

struct Part {
    file: AtomicFile,
    path: PathBuf,
    bytes: u64,
    /// Track descriptors written to this file, by uuid: the version written + 1 (0: none).
    declared: Vec<u32>,
    slices: u64,
    first_ns: u64,
    last_ns: u64,
}

/// Most bytes of a slice's packets besides its arguments, strings, flows and interned entries:
/// three packets' heads and fields of at most ten bytes each (256 leaves room to spare).
const SLICE_ROOM: usize = 256;
/// Most bytes of an argument besides its string: a nested message's key and length (with the
/// length's extra bytes for a long one), its name's key and iid, its value's key and varint or
/// its string's length.
const ARG_ROOM: usize = 40;
/// Most bytes of a flow id: its key and 8 bytes.
const FLOW_ROOM: usize = 9;
/// Most bytes of a `bytes` field's key and length.
const BYTES_HEAD: usize = 12;

/// A cursor at `at` in `buf` with room for `n` bytes: the buffer is grown (and zeroed) only when
/// shorter, which once the first packets are written is only for a slice of long strings.
#[inline(always)]
fn cursor(buf: &mut Vec<u8>, at: usize, n: usize) -> proto::Cursor<'_> {
    if buf.len() < at + n {
        buf.resize(at + n, 0);
    }
    proto::Cursor::new(buf, at)
}

/// Begins a packet of the sequence at `ts` (ended with `Cursor::end`).
#[inline(always)]
fn begin_timed(c: &mut proto::Cursor, ts: u64) -> proto::Mark {
    let pm = c.begin(proto::TRACE_PACKET);
    c.uint(packet::TIMESTAMP, ts);
    c.uint(packet::TRUSTED_PACKET_SEQUENCE_ID, SEQUENCE);
    c.uint(packet::SEQUENCE_FLAGS, packet::SEQ_NEEDS_INCREMENTAL_STATE);
    pm
}

/// Appends the packet that ends the slice open on `track` at `ts`, and the flows that end there.
#[inline(always)]
fn slice_end(c: &mut proto::Cursor, ts: u64, track: u64, flows_in: &[u64]) {
    let pm = begin_timed(c, ts);
    let m = c.begin(packet::TRACK_EVENT);
    c.uint(event::TYPE, event::TYPE_SLICE_END);
    c.uint(event::TRACK_UUID, track);
    for &f in flows_in {
        c.fixed64(event::TERMINATING_FLOW_IDS, f);
    }
    c.end(m);
    c.end(pm);
}

/// The packet writer (see the module documentation).
pub struct Out {
    dest: PathBuf,
    split: bool,
    part: Option<Part>,
    index: u32,
    done: Vec<WrittenPart>,
    start_ns: u64,
    realtime_offset_ns: i64,
    /// Packets not yet written to the file (written out past [`FLUSH_BYTES`]): the first `fill`
    /// bytes. Its length is the room made so far (kept: packets are written into it with a
    /// [`proto::Cursor`], without a `Vec`'s length kept at every byte).
    buf: Vec<u8>,
    fill: usize,
    pkt: Vec<u8>,
    /// The interning tables, used as slices are encoded ([`Out::encode`]): slices are written
    /// in the order they are encoded, so these are the tables the file has as each is written.
    interner: Interner,
    /// The entries of the tables' generation written so far, as the body of an `InternedData`
    /// (kept when split): a new file starts with them, for the slices encoded before it.
    emitted: Vec<u8>,
    /// Where a slice is encoded before its bytes are copied to it.
    scratch: Vec<u8>,
    /// Times the interning tables were cleared, all files.
    pub interning_resets: u64,
    /// Slices of calls' parts written, all files.
    pub part_slices: u64,
    /// Calls whose parts were written as slices, all files.
    pub part_calls: u64,
}

impl Out {
    /// Writes to `dest`, or with `split` to `STEM.partN.EXT` beside it (N from 1), parts of
    /// at most `max_bytes`.
    pub fn new(dest: &Path, split: bool, max_bytes: u64, start_ns: u64, realtime_offset_ns: i64) -> Out {
        Out {
            dest: dest.to_path_buf(),
            split,
            part: None,
            index: 0,
            done: Vec::new(),
            start_ns,
            realtime_offset_ns,
            buf: vec![0; FLUSH_BYTES + (64 << 10)],
            fill: 0,
            pkt: Vec::with_capacity(4096),
            interner: {
                let mut it = Interner::default();
                // The first file's first packet starts the sequence.
                it.take_cleared();
                if split {
                    // A part begins with the interning entries of the generation so far: an
                    // eighth of a part at most, so that each holds mostly slices.
                    it.limit_entries(usize::try_from(max_bytes / 8).unwrap_or(usize::MAX));
                }
                it
            },
            emitted: Vec::new(),
            scratch: Vec::new(),
            interning_resets: 0,
            part_slices: 0,
            part_calls: 0,
        }
    }

    /// The name of part `n` of `dest` when split: `trace.part2.pftrace`.
    pub fn part_path(dest: &Path, n: u32) -> PathBuf {
        let stem = dest.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let name = match dest.extension() {
            Some(e) => format!("{stem}.part{n}.{}", e.to_string_lossy()),
            None => format!("{stem}.part{n}"),
        };
        dest.with_file_name(name)
    }

    /// Bytes of the file being written.
    pub fn bytes(&self) -> u64 {
        self.part.as_ref().map_or(0, |p| p.bytes)
    }

    /// Files finished so far and the current one's number (from 1; 0 before the first).
    pub fn part_number(&self) -> u32 {
        self.index
    }

    /// Appends the packet in `pkt` (a rare one: clock, sequence start, descriptor).
    fn write_packet(&mut self) -> Result<(), ExportError> {
        let start = self.fill;
        let mut c = cursor(&mut self.buf, start, self.pkt.len() + BYTES_HEAD);
        c.bytes(proto::TRACE_PACKET, &self.pkt);
        self.fill = c.pos();
        self.wrote(start)
    }

    /// Counts the packets appended since `start` and writes the gathered ones out when enough.
    fn wrote(&mut self, start: usize) -> Result<(), ExportError> {
        let p = self.part.as_mut().expect("a part is open");
        p.bytes += (self.fill - start) as u64;
        if self.fill >= FLUSH_BYTES {
            p.file.write_all(&self.buf[..self.fill]).map_err(|e| ExportError::io("write", p.path.clone(), e))?;
            self.fill = 0;
        }
        Ok(())
    }

    /// Opens the next file and starts its sequence.
    pub fn open_part(&mut self) -> Result<(), ExportError> {
        self.index += 1;
        let path = if self.split { Self::part_path(&self.dest, self.index) } else { self.dest.clone() };
        let file = AtomicFile::create(&path)?;
        self.part = Some(Part { file, path, bytes: 0, declared: Vec::new(), slices: 0, first_ns: 0, last_ns: 0 });
        // The clock: latscope's timestamps are CLOCK_MONOTONIC; the wall clock beside it.
        self.pkt.clear();
        proto::uint(&mut self.pkt, packet::TIMESTAMP, self.start_ns);
        proto::uint(&mut self.pkt, packet::TIMESTAMP_CLOCK_ID, clock::MONOTONIC);
        proto::uint(&mut self.pkt, packet::TRUSTED_PACKET_SEQUENCE_ID, SEQUENCE);
        let m = proto::begin(&mut self.pkt, packet::CLOCK_SNAPSHOT);
        let c = proto::begin(&mut self.pkt, clock::CLOCKS);
        proto::uint(&mut self.pkt, clock::CLOCK_ID, clock::MONOTONIC);
        proto::uint(&mut self.pkt, clock::TIMESTAMP, self.start_ns);
        proto::end(&mut self.pkt, c);
        if self.realtime_offset_ns != 0 {
            let c = proto::begin(&mut self.pkt, clock::CLOCKS);
            proto::uint(&mut self.pkt, clock::CLOCK_ID, clock::REALTIME);
            proto::uint(
                &mut self.pkt,
                clock::TIMESTAMP,
                (self.start_ns as i64).saturating_add(self.realtime_offset_ns).max(0) as u64,
            );
            proto::end(&mut self.pkt, c);
        }
        proto::uint(&mut self.pkt, clock::PRIMARY_TRACE_CLOCK, clock::MONOTONIC);
        proto::end(&mut self.pkt, m);
        self.write_packet()?;
        self.start_sequence(true)
    }

    /// A packet clearing the sequence's incremental state and setting the packet defaults (with
    /// the interning entries written so far in this generation, for a new file).
    fn start_sequence(&mut self, first: bool) -> Result<(), ExportError> {
        self.pkt.clear();
        proto::uint(&mut self.pkt, packet::TRUSTED_PACKET_SEQUENCE_ID, SEQUENCE);
        proto::uint(&mut self.pkt, packet::SEQUENCE_FLAGS, packet::SEQ_INCREMENTAL_STATE_CLEARED);
        let d = proto::begin(&mut self.pkt, packet::TRACE_PACKET_DEFAULTS);
        proto::uint(&mut self.pkt, proto::DEFAULTS_TIMESTAMP_CLOCK_ID, clock::MONOTONIC);
        proto::end(&mut self.pkt, d);
        if first {
            proto::uint(&mut self.pkt, packet::FIRST_PACKET_ON_SEQUENCE, 1);
            if !self.emitted.is_empty() {
                proto::bytes(&mut self.pkt, packet::INTERNED_DATA, &self.emitted);
            }
        }
        self.write_packet()
    }

    /// Writes the descriptor of `uuid` (and its parents first) unless this file has it.
    #[inline]
    fn declare(&mut self, tracks: &Tracks, uuid: u64) -> Result<(), ExportError> {
        // Once per slice: the track is declared already, told inline.
        let (_, version) = tracks.parent_and_version(uuid);
        if self.part.as_ref().is_some_and(|p| p.declared.get(uuid as usize) == Some(&(version + 1))) {
            return Ok(());
        }
        self.declare_new(tracks, uuid)
    }

    #[inline(never)]
    fn declare_new(&mut self, tracks: &Tracks, uuid: u64) -> Result<(), ExportError> {
        let (parent, version) = tracks.parent_and_version(uuid);
        let p = self.part.as_ref().expect("a part is open");
        if p.declared.get(uuid as usize) == Some(&(version + 1)) {
            return Ok(());
        }
        if parent != 0 {
            self.declare(tracks, parent)?;
        }
        self.pkt.clear();
        proto::uint(&mut self.pkt, packet::TRUSTED_PACKET_SEQUENCE_ID, SEQUENCE);
        tracks.encode(uuid, &mut self.pkt);
        self.write_packet()?;
        let d = &mut self.part.as_mut().expect("a part is open").declared;
        if d.len() <= uuid as usize {
            d.resize(uuid as usize + 1, 0);
        }
        d[uuid as usize] = version + 1;
        Ok(())
    }

    /// Starts a timestamped packet of the sequence.
    fn timed(&mut self, ts: u64) {
        self.pkt.clear();
        proto::uint(&mut self.pkt, packet::TIMESTAMP, ts);
        proto::uint(&mut self.pkt, packet::TRUSTED_PACKET_SEQUENCE_ID, SEQUENCE);
        proto::uint(&mut self.pkt, packet::SEQUENCE_FLAGS, packet::SEQ_NEEDS_INCREMENTAL_STATE);
    }

    /// Encodes slice `s` into `h` (its track, name key and kind set): its begin event's name,
    /// category and arguments, the interning entries they make, and the slices inside it. Names
    /// and strings are interned now, as it arrives: slices are written in the order they are
    /// encoded, so these are the tables the file has when it is written.
    pub fn encode(&mut self, s: &Slice, h: &mut Held) {
        let it = &mut self.interner;
        it.maybe_reset();
        h.reset = it.take_cleared();
        self.interning_resets += u64::from(h.reset);
        let parts = if h.instant { &[][..] } else { &s.parts[..] };
        let room = SLICE_ROOM * (1 + parts.len()) + s.args.len() * ARG_ROOM + s.strs.len();
        let mut c = cursor(&mut self.scratch, 0, room);
        let key = h.name_key;
        c.uint(event::NAME_IID, it.name(key, || name_of(key)));
        c.uint(event::CATEGORY_IIDS, it.category(s.cat as usize));
        for &(arg, val) in &s.args {
            let m = c.begin(event::DEBUG_ANNOTATIONS);
            c.uint(annotation::NAME_IID, it.arg(arg));
            match val {
                Val::U(v) => c.uint(annotation::UINT_VALUE, v),
                Val::I(v) => c.int(annotation::INT_VALUE, v),
                Val::Interned(o, l) => {
                    c.uint(annotation::STRING_VALUE_IID, it.string(&s.strs[o as usize..(o + l) as usize]))
                }
                Val::Plain(o, l) => c.bytes(annotation::STRING_VALUE, &s.strs[o as usize..(o + l) as usize]),
            }
            c.end(m);
        }
        let body = c.pos();
        // The call's parts, inside it one after another (written after the call's begin and
        // before its end, so they nest when they share a timestamp).
        for &(from, to, key) in parts {
            let pm = begin_timed(&mut c, from);
            let m = c.begin(packet::TRACK_EVENT);
            c.uint(event::TYPE, event::TYPE_SLICE_BEGIN);
            c.uint(event::TRACK_UUID, h.track);
            c.uint(event::NAME_IID, it.name(key, || name_of(key)));
            c.uint(event::CATEGORY_IIDS, it.category(Cat::Latscope as usize));
            c.end(m);
            c.end(pm);
            slice_end(&mut c, to, h.track, &[]);
        }
        let end = c.pos();
        if !parts.is_empty() {
            self.part_calls += 1;
            self.part_slices += parts.len() as u64;
        }
        h.parts = u16::try_from(parts.len()).unwrap_or(u16::MAX);
        // Its bytes: the begin event's fields and the slices inside it as encoded, then the
        // entries interned (written in its begin packet, before the slices that may use them).
        let new = it.new_entries();
        h.enc.set(&self.scratch[..end], new);
        h.body = body as u32;
        h.interned = new.len() as u32;
        it.clear_new();
    }

    /// Writes a slice encoded by [`Out::encode`] (its begin packet, with its flows out, the
    /// slices inside it, and its end packet, with its flows in) or an instant. `flows_out` and
    /// `flows_in`: the flows to keep (those whose other end is in this file).
    pub fn slice(&mut self, tracks: &Tracks, h: &Held, flows_out: &[u64], flows_in: &[u64]) -> Result<(), ExportError> {
        if self.part.is_none() {
            self.open_part()?;
        }
        self.declare(tracks, h.track)?;
        if h.reset {
            self.emitted.clear();
            self.start_sequence(false)?;
        }
        let p = self.part.as_mut().expect("a part is open");
        p.slices += 1 + u64::from(h.parts);
        if p.first_ns == 0 || h.ts < p.first_ns {
            p.first_ns = h.ts;
        }
        p.last_ns = p.last_ns.max(h.ts);
        let (body, interned) = (h.body as usize, h.interned as usize);
        let enc = h.enc.bytes();
        let (rest, entries) = enc.split_at(enc.len() - interned);
        let (fields, inside) = rest.split_at(body);
        let start = self.fill;
        let room = SLICE_ROOM + enc.len() + (flows_out.len() + 2 * flows_in.len()) * FLOW_ROOM;
        let mut c = cursor(&mut self.buf, start, room);
        // The packet is written in place: its length and the event's in a fixed number of bytes
        // (nothing moves), the entries the event interned after it (field order is free).
        let pm = c.begin_fixed(proto::TRACE_PACKET, 3);
        c.uint(packet::TIMESTAMP, h.ts);
        c.uint(packet::TRUSTED_PACKET_SEQUENCE_ID, SEQUENCE);
        c.uint(packet::SEQUENCE_FLAGS, packet::SEQ_NEEDS_INCREMENTAL_STATE);
        let em = c.begin_fixed(packet::TRACK_EVENT, 3);
        c.uint(event::TYPE, if h.instant { event::TYPE_INSTANT } else { event::TYPE_SLICE_BEGIN });
        c.uint(event::TRACK_UUID, h.track);
        c.raw(fields);
        for &f in flows_out {
            c.fixed64(event::FLOW_IDS, f);
        }
        if h.instant {
            for &f in flows_in {
                c.fixed64(event::TERMINATING_FLOW_IDS, f);
            }
        }
        c.end_fixed(em, 3);
        if !entries.is_empty() {
            c.bytes(packet::INTERNED_DATA, entries);
            if self.split {
                self.emitted.extend_from_slice(entries);
            }
        }
        c.end_fixed(pm, 3);
        c.raw(inside);
        if !h.instant {
            slice_end(&mut c, h.end, h.track, flows_in);
        }
        self.fill = c.pos();
        self.wrote(start)
    }

    /// An instant where a flow leaves this file, on the track of its end written here at that
    /// end's start: the flow's end when it began here (`began`), else its start. A file cut at
    /// its size while flows are open closes them so: no flow in a file is left without one of
    /// its ends. Named and categorised in plain strings, not interned: the tables may already
    /// be a generation ahead of this file (a slice encoded after the reset is still held).
    pub fn flow_cut(
        &mut self,
        tracks: &Tracks,
        track: u64,
        ts: u64,
        flow: u64,
        began: bool,
    ) -> Result<(), ExportError> {
        self.declare(tracks, track)?;
        // A flow's start comes before its end in time order: the instant that starts one is put
        // a nanosecond before the call it ends at, which may return at the time it began.
        self.timed(if began { ts } else { ts.saturating_sub(1) });
        let m = proto::begin(&mut self.pkt, packet::TRACK_EVENT);
        proto::uint(&mut self.pkt, event::TYPE, event::TYPE_INSTANT);
        proto::uint(&mut self.pkt, event::TRACK_UUID, track);
        proto::string(&mut self.pkt, event::CATEGORIES, "latscope");
        let (name, field) = if began {
            ("flow continues in the next file", event::TERMINATING_FLOW_IDS)
        } else {
            ("flow comes from the next file", event::FLOW_IDS)
        };
        proto::string(&mut self.pkt, event::NAME, name);
        proto::fixed64(&mut self.pkt, field, flow);
        proto::end(&mut self.pkt, m);
        self.write_packet()
    }

    /// Writes a counter's value from `ts` on.
    pub fn counter(&mut self, tracks: &Tracks, uuid: u64, ts: u64, value: f64) -> Result<(), ExportError> {
        if self.part.is_none() {
            self.open_part()?;
        }
        self.declare(tracks, uuid)?;
        self.timed(ts);
        let m = proto::begin(&mut self.pkt, packet::TRACK_EVENT);
        proto::uint(&mut self.pkt, event::TYPE, event::TYPE_COUNTER);
        proto::uint(&mut self.pkt, event::TRACK_UUID, uuid);
        proto::double(&mut self.pkt, event::DOUBLE_COUNTER_VALUE, value);
        proto::end(&mut self.pkt, m);
        self.write_packet()
    }

    /// Finishes the current file (moved into place under its name).
    pub fn close_part(&mut self) -> Result<(), ExportError> {
        if let Some(mut p) = self.part.take() {
            p.file.write_all(&self.buf[..self.fill]).map_err(|e| ExportError::io("write", p.path.clone(), e))?;
            self.fill = 0;
            p.file.commit()?;
            self.done.push(WrittenPart {
                path: p.path,
                bytes: p.bytes,
                slices: p.slices,
                first_ns: p.first_ns,
                last_ns: p.last_ns,
            });
        }
        Ok(())
    }

    /// Finishes the last file (an empty trace is one file with its clock alone) and returns
    /// every file written.
    pub fn finish(mut self) -> Result<Vec<WrittenPart>, ExportError> {
        if self.part.is_none() && self.done.is_empty() {
            self.open_part()?;
        }
        self.close_part()?;
        Ok(self.done)
    }
}
