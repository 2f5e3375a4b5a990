//! Reading trace files.

use std::collections::HashMap;
use std::fs::File;
use std::io::{IsTerminal, Read};
use std::os::fd::FromRawFd;
use std::os::unix::fs::FileTypeExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_buffer::Buffer;
use arrow_ipc::reader::RecordBatchDecoder;
use arrow_ipc::{Message, MessageHeader};
use arrow_schema::Schema;
use latscope_event::{EventBatch, StrCol, TraceHeader, TRACE_FORMAT_VERSION};

use crate::column::{fill_missing, from_record_batch, COLUMN_COUNT};
use crate::decode::{Decoder, Layout};
use crate::meta::{
    meta_digest, schema_digest, BlockMeta, Summary, CONTINUATION, KEY_FORMAT_VERSION, KEY_HEADER, KEY_HEADER_CRC,
    KEY_SCHEMA_CRC, KEY_SEQ,
};
use crate::source::Source;
use crate::{Column, TraceError, Warning, WarningKind};

/// Most rows a block may declare: larger declarations are refused as corruption, before
/// anything is allocated for them (the writer never writes more).
pub const MAX_BLOCK_ROWS: i64 = 1 << 20;
/// Most bytes a block may decode to: its rows times the bytes a row of the fixed-width columns
/// and string offsets takes, plus the declared sizes of its string data. Larger declarations are
/// refused before anything is allocated for them; the writer splits blocks to stay below.
pub const MAX_BLOCK_BYTES: u64 = 256 << 20;
/// Largest body (the stored buffers) of a block message: [`MAX_BLOCK_BYTES`] and room for
/// length prefixes and padding.
const MAX_BODY: u64 = MAX_BLOCK_BYTES + (1 << 20);
/// Largest metadata of a block message.
const MAX_BLOCK_METADATA: u64 = 1 << 20;
/// Largest metadata of the header (schema) message: it holds the machine description (every
/// process, open file and mount), which can take megabytes.
pub const MAX_HEADER_BYTES: u64 = 64 << 20;
/// Chunk size of the resynchronisation scan.
const SCAN_CHUNK: usize = 1 << 20;

/// Where a block lies in time, from its zone map ([`BlockZone::of`] its metadata).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockZone {
    /// The block's number.
    pub seq: Option<u64>,
    /// Its smallest start time (`None`: no events, or a file written before zone maps).
    pub ts_min: Option<u64>,
    /// Its smallest end time.
    pub end_min: Option<u64>,
    /// Its largest end time.
    pub end_max: Option<u64>,
    /// Events up to and including this block.
    pub events_total: Option<u64>,
}

impl BlockZone {
    /// The zone of the block whose metadata is `m`.
    pub fn of(m: &BlockMeta) -> BlockZone {
        BlockZone { seq: m.seq, ts_min: m.ts_min, end_min: m.end_min, end_max: m.end_max, events_total: m.events_total }
    }
}

/// Options of [`TraceReader::open_with`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// Read only these columns (`None`: all). The others come back zero-filled (numbers)
    /// or as empty strings, with the right length, so that every [`EventBatch`] invariant
    /// holds; their data is not decompressed.
    pub projection: Option<Vec<Column>>,
    /// Continue after a corrupt block: the block is returned as an `Err` item and reading
    /// goes on with the next intact block. Without it, the first corrupt block ends the
    /// iteration.
    pub skip_corrupt: bool,
}

/// What a [`TraceReader`] has read so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// Data blocks returned.
    pub blocks: u64,
    /// Events returned.
    pub events: u64,
    /// File bytes consumed (the offset of the next message).
    pub bytes: u64,
    /// Size of the file (of a stream: the bytes read so far).
    pub file_size: u64,
    /// Corrupt blocks met (returned as errors).
    pub corrupt_blocks: u64,
    /// Blocks that carried no checksum (written by another tool), read unchecked.
    pub unchecked_blocks: u64,
    /// Events the probes had lost, as of the last block read.
    pub lost_total: u64,
    /// Events recorded up to the last block read, from the block's metadata
    /// (greater than `events` when blocks were skipped).
    pub events_total: u64,
}

/// Reads a trace file block by block, checking the checksum of every byte it decodes.
///
/// Iterate with [`TraceReader::next_batch`] (or as an [`Iterator`]). The end of the
/// iteration is not an error even when the file is incomplete: afterwards,
/// [`TraceReader::warnings`] says what was missing (a file cut short, no summary) and
/// [`TraceReader::summary`] is `Some` only for a cleanly closed recording.
///
/// A pipe, a FIFO, a character device or standard input (`-`) is read as a stream, front to
/// back: a projection then reads every block's whole body (it cannot skip bytes it does not
/// decode), and nothing after the end-of-stream marker is read.
///
/// No input makes the reader panic or allocate more than the body of one block (at most the
/// file's size, and [`MAX_BLOCK_BYTES`] plus 1 MiB) plus one decoded block (at most
/// [`MAX_BLOCK_BYTES`]) plus the header (at most [`MAX_HEADER_BYTES`]): larger declarations
/// are refused before anything is allocated for them.
pub struct TraceReader {
    path: PathBuf,
    src: Source,
    pos: u64,
    header: TraceHeader,
    format_version: u32,
    schema: Arc<Schema>,
    /// File-schema indices of the columns to decode, ascending.
    projection: Vec<usize>,
    /// Position of each [`Column`] in a batch decoded by arrow-ipc.
    index: [Option<usize>; COLUMN_COUNT],
    /// Whether each [`Column`] is read.
    wanted: [bool; COLUMN_COUNT],
    /// The columns read that the file lacks (added to the format after it was written): they
    /// get their "not recorded" value instead of being decoded.
    missing: [bool; COLUMN_COUNT],
    /// Where the columns' buffers are; `None`: decode with arrow-ipc (a file with extra
    /// columns of nested types).
    layout: Option<Layout>,
    decoder: Decoder,
    /// The body of the current block (reused).
    body: Vec<u8>,
    skip_corrupt: bool,
    warnings: Vec<Warning>,
    summary: Option<Summary>,
    stats: ReadStats,
    next_seq: u64,
    done: bool,
    /// Where to search for the next block if the current one turns out corrupt
    /// (`None`: its framing lengths are verified).
    resync_from: Option<u64>,
    /// Where the block being read starts once its metadata checksum matched (its framing is
    /// trusted); `None` before.
    trusted_at: Option<u64>,
    last_meta: Option<BlockMeta>,
    dicts: HashMap<i64, ArrayRef>,
    /// A small allocation kept above the first batch on the heap (see [`steady_heap_before`]).
    heap_pin: Option<Vec<u8>>,
    /// The ids in `header.cgroups` (cgroups met during the recording join it as blocks are read).
    cgroup_ids: std::collections::HashSet<u64>,
    /// Cgroup table entries of blocks left out: past [`latscope_event::bounds::MAX_CGROUPS`].
    cgroups_left_out: u64,
    /// The reader as it was before the block returned last ([`TraceReader::reread_last_block`]).
    before_last: Option<Before>,
}

/// What reading a block changes that [`TraceReader::reread_last_block`] sets back.
#[derive(Debug, Clone, Copy)]
struct Before {
    pos: u64,
    next_seq: u64,
    stats: ReadStats,
    warnings: usize,
    had_summary: bool,
}

/// One framed message, or why there is none.
enum Frame {
    /// At the end of the file.
    End,
    /// The end-of-stream marker.
    Eos,
    /// The file ends inside this message.
    Truncated,
    /// No readable message here; `skip_to` is the next intact message, if one was found.
    Bad { detail: String, skip_to: Option<u64> },
    /// A message: its metadata flatbuffer, and its body's place.
    Msg { meta: Vec<u8>, body_start: u64, body_len: u64 },
}

impl TraceReader {
    /// Open a trace and read its header, reading all columns and stopping at the first corrupt block.
    pub fn open(path: impl AsRef<Path>) -> Result<TraceReader, TraceError> {
        Self::open_with(path, ReadOptions::default())
    }

    /// Open a trace reading only `columns` (see [`ReadOptions::projection`]).
    pub fn open_projected(path: impl AsRef<Path>, columns: &[Column]) -> Result<TraceReader, TraceError> {
        Self::open_with(path, ReadOptions { projection: Some(columns.to_vec()), skip_corrupt: false })
    }

    /// Open a trace with options.
    ///
    /// Errors: the file cannot be opened, is empty, is not an Arrow IPC stream, is an Arrow
    /// stream without latscope metadata, has a newer format version, or a damaged header.
    ///
    /// `-` is standard input. A FIFO, a character device or standard input that is not a
    /// file is read as a stream; a directory, a socket or a terminal is refused for what it is.
    pub fn open_with(path: impl AsRef<Path>, opts: ReadOptions) -> Result<TraceReader, TraceError> {
        let path = path.as_ref().to_path_buf();
        let (src, what) = open_source(&path)?;
        Self::with_source(path, src, what, opts)
    }

    /// Read a trace from a stream (an SSH connection, a child's output, ...) front to back;
    /// `name` names it in messages. As [`TraceReader::open_with`] for a pipe.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use latscope_trace::{ReadOptions, TraceReader};
    /// let mut child = std::process::Command::new("ssh")
    ///     .args(["db1", "latscope", "record", "-w", "-", "--duration", "10s"])
    ///     .stdout(std::process::Stdio::piped())
    ///     .spawn()?;
    /// let stdout = child.stdout.take().unwrap();
    /// let mut r = TraceReader::from_reader("db1", stdout, ReadOptions::default())?;
    /// println!("{} events", r.read_all()?.len());
    /// # Ok(())
    /// # }
    /// ```
    pub fn from_reader(
        name: impl Into<PathBuf>,
        stream: impl Read + Send + Sync + 'static,
        opts: ReadOptions,
    ) -> Result<TraceReader, TraceError> {
        Self::with_source(name.into(), Source::stream(Box::new(stream)), "the stream", opts)
    }

    fn with_source(path: PathBuf, src: Source, what: &str, opts: ReadOptions) -> Result<TraceReader, TraceError> {
        let mut r = TraceReader {
            path,
            src,
            pos: 0,
            header: TraceHeader::default(),
            format_version: 0,
            schema: Arc::new(Schema::empty()),
            projection: Vec::new(),
            index: [None; COLUMN_COUNT],
            wanted: [false; COLUMN_COUNT],
            missing: [false; COLUMN_COUNT],
            layout: None,
            decoder: Decoder::default(),
            body: Vec::new(),
            skip_corrupt: opts.skip_corrupt,
            warnings: Vec::new(),
            summary: None,
            stats: ReadStats::default(),
            next_seq: 0,
            done: false,
            resync_from: None,
            trusted_at: None,
            last_meta: None,
            dicts: HashMap::new(),
            heap_pin: None,
            cgroup_ids: Default::default(),
            cgroups_left_out: 0,
            before_last: None,
        };
        r.read_header(opts.projection.as_deref(), what)?;
        Ok(r)
    }

    /// The recorded machine and recording settings.
    pub fn header(&self) -> &TraceHeader {
        &self.header
    }

    /// The format version of the file.
    pub fn format_version(&self) -> u32 {
        self.format_version
    }

    /// The file's Arrow schema (with the latscope metadata).
    pub fn arrow_schema(&self) -> &Arc<Schema> {
        &self.schema
    }

    /// The file being read.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Warnings so far; complete once [`TraceReader::next_batch`] returned `None`.
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }

    /// The summary written at a clean close: `Some` once it has been read, which is after the
    /// last block (when [`TraceReader::next_batch`] returned `None`); `None` for an
    /// incompletely written file.
    pub fn summary(&self) -> Option<&Summary> {
        self.summary.as_ref()
    }

    /// What has been read so far.
    pub fn stats(&self) -> ReadStats {
        ReadStats { bytes: self.pos, file_size: self.src.len().unwrap_or(self.pos), ..self.stats }
    }

    /// The latscope metadata of the last block read.
    pub fn last_block_meta(&self) -> Option<&BlockMeta> {
        self.last_meta.as_ref()
    }

    /// Goes back to the start of the block returned last, as if it had not been read: the next
    /// call reads it again (with other columns pruned, say: a caller that pruned columns a
    /// block turned out to need). The statistics, warnings and summary are those from before
    /// it. False when no block was returned since the last call (nothing is changed then).
    pub fn reread_last_block(&mut self) -> bool {
        let Some(b) = self.before_last.take() else { return false };
        self.pos = b.pos;
        self.next_seq = b.next_seq;
        self.stats = b.stats;
        self.warnings.truncate(b.warnings);
        if !b.had_summary {
            self.summary = None;
        }
        self.done = false;
        self.resync_from = None;
        self.trusted_at = None;
        true
    }

    /// The stack table of the trace (`record --why` with stacks): the entries of every
    /// remaining block's metadata, read without decoding any column. An unreadable entry is a
    /// corrupt block naming it; corrupt blocks are otherwise handled as by
    /// [`TraceReader::next_batch_pruned`] (their entries are missing).
    pub fn read_stack_table(&mut self) -> Result<latscope_event::StackTable, TraceError> {
        let mut table = latscope_event::StackTable::default();
        let mut bad: Option<String> = None;
        let mut b = EventBatch::default();
        while let Some(r) = self.next_batch_pruned(&mut b, |m| {
            if let Some(s) = &m.stacks {
                if let Err(e) = table.add_lines(s) {
                    bad.get_or_insert(format!("block {}: {e}", m.seq.unwrap_or(0)));
                }
            }
            Column::ALL
        }) {
            match r {
                Ok(()) => {}
                Err(e) if self.skip_corrupt && e.is_corrupt_block() => continue,
                Err(e) => return Err(e),
            }
        }
        if let Some(detail) = bad {
            return Err(TraceError::CorruptBlock { path: self.path.clone(), block: 0, offset: 0, detail });
        }
        Ok(table)
    }

    /// Read every remaining block into one batch (corrupt blocks are skipped when the reader
    /// skips corrupt blocks, otherwise the first one is the error).
    pub fn read_all(&mut self) -> Result<EventBatch, TraceError> {
        let mut all = EventBatch::with_capacity(0);
        let mut b = EventBatch::default();
        while let Some(r) = self.next_batch_into(&mut b) {
            match r {
                Ok(()) => {
                    if !append(&mut all, &b) {
                        return Err(TraceError::TooLarge {
                            path: self.path.clone(),
                            detail: "the strings of the trace exceed the 4 GiB one batch can hold".into(),
                        });
                    }
                }
                Err(e) if self.skip_corrupt && e.is_corrupt_block() => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(all)
    }

    /// The next block's events; `None` at the end of the trace (see [`TraceReader::warnings`]).
    ///
    /// A corrupt block is an `Err` item: without [`ReadOptions::skip_corrupt`] it ends the
    /// iteration, with it the next call continues after the block. I/O errors end it.
    pub fn next_batch(&mut self) -> Option<Result<EventBatch, TraceError>> {
        let mut b = EventBatch::default();
        self.next_batch_into(&mut b).map(|r| r.map(|()| b))
    }

    /// Like [`TraceReader::next_batch`], but into `batch`, reusing its allocations: `Some(Ok(()))`
    /// when `batch` holds the next block's events (replacing what it held), `None` at the end.
    ///
    /// Reading a whole trace into one recycled batch saves allocating (and the kernel zeroing
    /// fresh pages for) every column of every block. The result is the same as with
    /// `next_batch`: the columns outside the projection have the block's length and hold zeros
    /// (empty strings). After an `Err` item `batch` is empty.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), latscope_trace::TraceError> {
    /// use latscope_event::EventBatch;
    /// use latscope_trace::{Column, TraceReader};
    ///
    /// let mut r = TraceReader::open_projected("trace.lst", &[Column::Ts, Column::Lat])?;
    /// let mut batch = EventBatch::default();
    /// while let Some(res) = r.next_batch_into(&mut batch) {
    ///     res?;
    ///     println!("{} events, the first at {:?}", batch.len(), batch.ts.first());
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn next_batch_into(&mut self, batch: &mut EventBatch) -> Option<Result<(), TraceError>> {
        self.next_inner(batch, &mut |_, _| {}, false)
    }

    /// Like [`TraceReader::next_batch_into`], but `prune` sees each block's [`BlockMeta`] (its
    /// zone map: time and latency ranges, events per kind) before the block is decoded, and
    /// returns the columns of the projection not to decode for this block.
    ///
    /// A block whose every column `prune` returns (e.g. [`Column::ALL`]) is passed over: it is
    /// not returned and `batch` is left as it was. The columns `prune` returns hold unspecified values for that block (the batch still has
    /// the block's length in every column), and so do the numeric columns outside the
    /// projection: they are not zero-filled for every block, only grown with zeros (so they hold
    /// zeros unless the caller wrote to them or read other columns into this batch). A caller skips a column only when the metadata tells
    /// it what the column would say, for example `ts` when `ts_min` and `ts_max` fall in one
    /// interval of a time axis, or `kind` when [`BlockMeta::only_kind`] holds. Everything else is
    /// as with `next_batch_into`: the metadata checksum of every block and the checksums of what
    /// is decoded are verified (with per-buffer checksums, only the buffers of the columns
    /// decoded are read; a block with every column pruned is not read at all), corrupt and
    /// truncated blocks are reported the same way, and `prune` is called only for blocks whose
    /// metadata checksum matched (or that have none). Files written before a metadata key
    /// existed have `None` in its field: prune nothing then.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), latscope_trace::TraceError> {
    /// use latscope_event::EventBatch;
    /// use latscope_trace::{Column, TraceReader};
    ///
    /// let mut r = TraceReader::open_projected("trace.lst", &[Column::Kind, Column::Lat])?;
    /// let mut batch = EventBatch::default();
    /// let mut only_syscalls = false;
    /// let mut syscalls = 0u64;
    /// while let Some(res) = r.next_batch_pruned(&mut batch, |m| {
    ///     only_syscalls = m.only_kind(0);
    ///     if only_syscalls { &[Column::Kind][..] } else { &[][..] }
    /// }) {
    ///     res?;
    ///     syscalls += if only_syscalls { batch.len() } else { batch.kind.iter().filter(|&&k| k == 0).count() } as u64;
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn next_batch_pruned<S: AsRef<[Column]>>(
        &mut self,
        batch: &mut EventBatch,
        mut prune: impl FnMut(&BlockMeta) -> S,
    ) -> Option<Result<(), TraceError>> {
        self.next_inner(
            batch,
            &mut |m, wanted| {
                for c in prune(m).as_ref() {
                    wanted[c.index()] = false;
                }
            },
            true,
        )
    }

    /// `lazy`: the numeric columns outside the projection are only given the right length.
    fn next_inner(
        &mut self,
        batch: &mut EventBatch,
        prune: &mut dyn FnMut(&BlockMeta, &mut [bool; COLUMN_COUNT]),
        lazy: bool,
    ) -> Option<Result<(), TraceError>> {
        self.before_last = None;
        while !self.done {
            let before = Before {
                pos: self.pos,
                next_seq: self.next_seq,
                stats: self.stats,
                warnings: self.warnings.len(),
                had_summary: self.summary.is_some(),
            };
            match self.step(batch, prune, lazy) {
                Ok(true) => {
                    self.before_last = Some(before);
                    return Some(Ok(()));
                }
                Ok(false) => continue,
                Err(e) => {
                    batch.clear();
                    if e.is_corrupt_block() {
                        self.stats.corrupt_blocks += 1;
                        if !self.skip_corrupt {
                            self.done = true;
                        } else {
                            // A body that fails its checksums after its framing was trusted
                            // (the metadata checksum matched) may have been framed by a damaged
                            // metadata length, which no checksum covers: unless a message or the
                            // end of the stream follows, search for the next block from there.
                            let mut from = self.resync_from.take();
                            if let (None, Some(start)) = (from, self.trusted_at.take()) {
                                match self.next_is_message() {
                                    Ok(false) => from = Some(start + 1),
                                    Ok(true) => {}
                                    Err(io) => {
                                        self.done = true;
                                        return Some(Err(io));
                                    }
                                }
                            }
                            if let Some(from) = from {
                                match self.resync(from) {
                                    Ok(Some(next)) => self.pos = next,
                                    Ok(None) => {
                                        self.done = true;
                                        let start = from - 1;
                                        let bytes = self.bytes_from(start);
                                        self.warn(WarningKind::Unreadable { offset: start, bytes });
                                    }
                                    Err(io) => {
                                        self.done = true;
                                        return Some(Err(io));
                                    }
                                }
                            }
                        }
                    } else {
                        self.done = true;
                    }
                    return Some(Err(e));
                }
            }
        }
        None
    }

    fn io_err(&self, op: String, source: std::io::Error) -> TraceError {
        TraceError::Io { path: self.path.clone(), op, source }
    }

    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<(), TraceError> {
        match self.src.read_at(buf, offset) {
            Ok(()) => Ok(()),
            Err(e) => Err(self.io_err(format!("reading at byte {offset}"), e)),
        }
    }

    /// How many of `want` bytes from `offset` there are.
    fn avail(&mut self, offset: u64, want: u64) -> Result<u64, TraceError> {
        match self.src.avail(offset, want) {
            Ok(n) => Ok(n),
            Err(e) => Err(self.io_err(format!("reading at byte {offset}"), e)),
        }
    }

    /// Bytes from `offset` to the end (of a stream: to what was read).
    fn bytes_from(&self, offset: u64) -> u64 {
        let end = match &self.src {
            Source::Stream { buf, base, .. } => base + buf.len() as u64,
            Source::File { len, .. } => *len,
        };
        end.saturating_sub(offset)
    }

    fn warn(&mut self, kind: WarningKind) {
        self.warnings.push(Warning { path: self.path.clone(), kind });
    }

    fn corrupt(&self, block: u64, offset: u64, detail: String) -> TraceError {
        TraceError::CorruptBlock { path: self.path.clone(), block, offset, detail }
    }

    /// Frame the message at `self.pos`. `resync`: look for the next intact block when
    /// this one is unreadable (not while opening: a non-trace file would be scanned).
    fn read_frame(&mut self, resync: bool) -> Result<Frame, TraceError> {
        let start = self.pos;
        let have = self.avail(start, 8)? as usize;
        if have == 0 {
            return Ok(Frame::End);
        }
        let mut pre = [0u8; 8];
        self.read_at(&mut pre[..have], start)?;
        let marker = have.min(4);
        if pre[..marker] != CONTINUATION[..marker] {
            let detail = format!(
                "no message starts here (expected the continuation marker ff ff ff ff, found {})",
                hex(&pre[..marker])
            );
            return self.bad(detail, resync, start);
        }
        if have < 8 {
            return Ok(Frame::Truncated);
        }
        let len = i32::from_le_bytes([pre[4], pre[5], pre[6], pre[7]]);
        if len == 0 {
            return Ok(Frame::Eos);
        }
        if len < 0 || len % 8 != 0 {
            return self.bad(format!("invalid metadata length {len}"), resync, start);
        }
        let len = len as u64;
        let (max, what) = if start == 0 { (MAX_HEADER_BYTES, "the header") } else { (MAX_BLOCK_METADATA, "a block") };
        if len > max {
            return self.bad(
                format!("metadata length {len} is more than the {max} bytes {what} may have"),
                resync,
                start,
            );
        }
        if self.avail(start + 8, len)? < len {
            return self.truncated_or_bad(
                format!("its metadata length {len} runs past the end of the file, yet an intact block follows"),
                resync,
                start,
            );
        }
        let mut meta = vec![0u8; len as usize];
        self.read_at(&mut meta, start + 8)?;
        let body_len = match arrow_ipc::root_as_message(&meta) {
            Ok(m) => m.bodyLength(),
            Err(e) => return self.bad(format!("unreadable message metadata: {e}"), resync, start),
        };
        if body_len < 0 {
            return self.bad(format!("negative body length {body_len}"), resync, start);
        }
        let body_len = body_len as u64;
        if body_len > MAX_BODY {
            return self.bad(
                format!("body length {body_len} is more than the {MAX_BODY} bytes a block may have"),
                resync,
                start,
            );
        }
        if self.avail(start + 8 + len, body_len)? < body_len {
            return self.truncated_or_bad(
                format!("its body length {body_len} runs past the end of the file, yet an intact block follows"),
                resync,
                start,
            );
        }
        Ok(Frame::Msg { meta, body_start: start + 8 + len, body_len })
    }

    fn bad(&mut self, detail: String, resync: bool, start: u64) -> Result<Frame, TraceError> {
        let skip_to = if resync { self.resync(start + 1)? } else { None };
        Ok(Frame::Bad { detail, skip_to })
    }

    /// Lengths that run past the end of the file: a file cut short, unless an intact block
    /// follows (then the lengths are damaged).
    fn truncated_or_bad(&mut self, detail: String, resync: bool, start: u64) -> Result<Frame, TraceError> {
        match if resync { self.resync(start + 1)? } else { None } {
            Some(next) => Ok(Frame::Bad { detail, skip_to: Some(next) }),
            None => Ok(Frame::Truncated),
        }
    }

    /// The offset of the first intact latscope block message at or after `from`.
    fn resync(&mut self, from: u64) -> Result<Option<u64>, TraceError> {
        let mut chunk = Vec::new();
        let mut base = from;
        loop {
            let n = self.avail(base, SCAN_CHUNK as u64)? as usize;
            chunk.resize(n, 0);
            self.read_at(&mut chunk[..n], base)?;
            let mut i = 0;
            while i + 4 <= n {
                if chunk[i..i + 4] == CONTINUATION && self.is_block_at(base + i as u64)? {
                    return Ok(Some(base + i as u64));
                }
                i += 1;
            }
            if n < SCAN_CHUNK {
                return Ok(None);
            }
            // Overlap by 3 bytes so that a marker across chunks is found.
            base += (n as u64).saturating_sub(3).max(1);
        }
    }

    /// Whether a block, the end-of-stream marker or the end of the file is at `self.pos`.
    fn next_is_message(&mut self) -> Result<bool, TraceError> {
        let p = self.pos;
        let n = self.avail(p, 8)?;
        if n == 0 {
            return Ok(true);
        }
        if n == 8 {
            let mut pre = [0u8; 8];
            self.read_at(&mut pre, p)?;
            if pre == [0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0] {
                return Ok(true);
            }
        }
        self.is_block_at(p)
    }

    fn is_block_at(&mut self, p: u64) -> Result<bool, TraceError> {
        if self.avail(p, 8)? < 8 {
            return Ok(false);
        }
        let mut pre = [0u8; 8];
        self.read_at(&mut pre, p)?;
        let len = i32::from_le_bytes([pre[4], pre[5], pre[6], pre[7]]);
        if len <= 0 || len % 8 != 0 || len as u64 > MAX_BLOCK_METADATA || self.avail(p + 8, len as u64)? < len as u64 {
            return Ok(false);
        }
        let mut meta = vec![0u8; len as usize];
        self.read_at(&mut meta, p + 8)?;
        let Ok(msg) = arrow_ipc::root_as_message(&meta) else { return Ok(false) };
        let has_seq = msg
            .custom_metadata()
            .is_some_and(|kv| kv.iter().any(|kv| kv.key() == Some(KEY_SEQ) && kv.value().is_some()));
        let body = msg.bodyLength();
        Ok(msg.header_type() == MessageHeader::RecordBatch
            && has_seq
            && (0..=MAX_BODY as i64).contains(&body)
            && self.avail(p + 8 + len as u64, body as u64)? == body as u64)
    }

    fn read_header(&mut self, projection: Option<&[Column]>, what: &str) -> Result<(), TraceError> {
        let path = self.path.clone();
        let not_trace = |detail: String| TraceError::NotATrace { path: path.clone(), detail };
        let bad_header = |detail: String| TraceError::BadHeader { path: path.clone(), offset: 0, detail };
        let mut first = [0u8; 8];
        let n = self.avail(0, 8)? as usize;
        self.read_at(&mut first[..n], 0)?;
        let (meta, body_start, body_len) = match self.read_frame(false)? {
            Frame::Msg { meta, body_start, body_len } => (meta, body_start, body_len),
            Frame::End if self.src.is_stream() => return Err(TraceError::EmptyStream { path, what: what.to_string() }),
            Frame::End => return Err(TraceError::Empty { path }),
            Frame::Eos => return Err(not_trace("an empty Arrow IPC stream (no schema)".into())),
            Frame::Truncated => {
                let len = i32::from_le_bytes([first[4], first[5], first[6], first[7]]);
                let needed = if n == 8 && len > 0 { 8 + len as u64 } else { 8 };
                let offset = self.src.len().unwrap_or(n as u64);
                return Err(TraceError::HeaderTruncated { path, offset, needed });
            }
            Frame::Bad { detail, .. } => {
                return Err(if first[..4] == CONTINUATION {
                    bad_header(detail)
                } else {
                    not_trace(describe_foreign(&first[..n]))
                })
            }
        };
        let msg = arrow_ipc::root_as_message(&meta).map_err(|e| bad_header(e.to_string()))?;
        if body_len != 0 && msg.header_as_schema().is_some() {
            return Err(bad_header(format!("the schema message declares a body of {body_len} bytes; it has none")));
        }
        let Some(fb_schema) = msg.header_as_schema() else {
            return Err(not_trace(format!(
                "an Arrow IPC stream that starts with a {} message instead of a schema",
                msg.header_type().variant_name().unwrap_or("unknown")
            )));
        };
        let schema = arrow_ipc::convert::try_fb_to_schema(fb_schema).map_err(|e| bad_header(e.to_string()))?;
        let md = schema.metadata();
        let Some(version) = md.get(KEY_FORMAT_VERSION) else {
            let cols: Vec<&str> = schema.fields().iter().take(8).map(|f| f.name().as_str()).collect();
            return Err(not_trace(format!(
                "an Arrow IPC stream without latscope metadata (columns: {}{})",
                cols.join(", "),
                if schema.fields().len() > 8 { ", ..." } else { "" }
            )));
        };
        let version: u32 =
            version.parse().map_err(|_| bad_header(format!("format version {version:?} is not a number")))?;
        if version > TRACE_FORMAT_VERSION {
            return Err(TraceError::UnsupportedVersion { path, found: version, supported: TRACE_FORMAT_VERSION });
        }
        if version == 0 {
            return Err(bad_header("format version 0 does not exist".into()));
        }
        let header_json =
            md.get(KEY_HEADER).ok_or_else(|| bad_header(format!("the {KEY_HEADER} metadata is missing")))?;
        // Every writer of the format stores the header's checksum: a header without one has been
        // altered (a renamed key must not make a changed host name or command line read as valid).
        let computed = crc32c::crc32c(header_json.as_bytes());
        let Some(crc) = md.get(KEY_HEADER_CRC) else {
            return Err(bad_header(format!(
                "the {KEY_HEADER_CRC} metadata is missing (computed {computed:08x}): the header was altered; a tool \
                 that rewrites the header must store its checksum too"
            )));
        };
        if u32::from_str_radix(crc, 16).ok() != Some(computed) {
            return Err(bad_header(format!(
                "header checksum mismatch (stored {crc}, computed {computed:08x}): the header is damaged"
            )));
        }
        // The columns' names and types (a flipped bit could rename `fault_off`, which would then
        // read as absent): checked where the writer stored their checksum, which every latscope
        // since it existed does; older files are read unchecked.
        if let Some(stored) = md.get(KEY_SCHEMA_CRC) {
            let computed = schema_digest(&schema);
            if u32::from_str_radix(stored, 16).ok() != Some(computed) {
                return Err(bad_header(format!(
                    "schema checksum mismatch (stored {stored}, computed {computed:08x}): the column names, types or \
                     format metadata of the schema message are damaged"
                )));
            }
        }
        self.header =
            serde_json::from_str(header_json).map_err(|e| bad_header(format!("unreadable header JSON: {e}")))?;
        // Values past their bounds (a header not written by a latscope that bounds them) are cut.
        let cut = self.header.bound_fields();
        if !cut.is_empty() {
            self.warn(WarningKind::Bounded {
                detail: format!(
                    "the header holds values past their bounds: {} (marked …[cut N bytes])",
                    cut.describe()
                ),
            });
        }
        self.cgroup_ids = self.header.cgroups.iter().map(|c| c.id).collect();
        let mut file_index = [None; COLUMN_COUNT];
        for c in Column::ALL {
            let Some((i, f)) = schema.fields().find(c.name()) else {
                if c.optional() {
                    continue; // written before the column existed
                }
                return Err(bad_header(format!("column {c} is missing")));
            };
            if f.data_type() != &c.data_type() {
                return Err(bad_header(format!("column {c} is {}, expected {}", f.data_type(), c.data_type())));
            }
            file_index[c.index()] = Some(i);
        }
        let mut wanted: Vec<Column> = projection.map(|p| p.to_vec()).unwrap_or_else(|| Column::ALL.to_vec());
        wanted.sort_by_key(|c| file_index[c.index()]);
        wanted.dedup();
        for c in &wanted {
            self.wanted[c.index()] = true;
            self.missing[c.index()] = file_index[c.index()].is_none();
        }
        wanted.retain(|c| file_index[c.index()].is_some());
        self.projection = wanted.iter().filter_map(|c| file_index[c.index()]).collect();
        for (pos, c) in wanted.iter().enumerate() {
            self.index[c.index()] = Some(pos);
        }
        self.layout = Layout::new(&schema, &file_index);
        self.format_version = version;
        self.schema = Arc::new(schema);
        self.pos = body_start + body_len;
        Ok(())
    }

    /// Read one message: `Ok(true)` a data block (in `out`), `Ok(false)` nothing to return
    /// (summary, end), `Err` a corrupt block or an I/O error.
    fn step(
        &mut self,
        out: &mut EventBatch,
        prune: &mut dyn FnMut(&BlockMeta, &mut [bool; COLUMN_COUNT]),
        lazy: bool,
    ) -> Result<bool, TraceError> {
        let start = self.pos;
        self.trusted_at = None;
        self.resync_from = None;
        // Nothing before this block is looked at again.
        self.src.release(start);
        let (meta, body_start, body_len) = match self.read_frame(self.skip_corrupt)? {
            Frame::Msg { meta, body_start, body_len } => (meta, body_start, body_len),
            Frame::End => {
                self.done = true;
                if self.summary.is_some() {
                    self.warn(WarningKind::NoEndMarker { offset: start });
                } else {
                    let (blocks_read, events_read) = (self.stats.blocks, self.stats.events);
                    self.warn(WarningKind::NotClosed { offset: start, blocks_read, events_read });
                }
                return Ok(false);
            }
            Frame::Eos => {
                self.done = true;
                self.pos = start + 8;
                // A stream is read up to here: what may follow is not the trace's.
                if let Source::File { len, .. } = self.src {
                    if self.pos < len {
                        self.warn(WarningKind::TrailingData { offset: self.pos, bytes: len - self.pos });
                    }
                }
                if self.summary.is_none() {
                    let (blocks_read, events_read) = (self.stats.blocks, self.stats.events);
                    self.warn(WarningKind::NotClosed { offset: start, blocks_read, events_read });
                }
                return Ok(false);
            }
            Frame::Truncated if self.summary.is_some() => {
                // Only the end-of-stream marker after the summary is cut.
                self.done = true;
                self.warn(WarningKind::NoEndMarker { offset: start });
                return Ok(false);
            }
            Frame::Bad { .. } if self.summary.is_some() => {
                self.done = true;
                let bytes = self.bytes_from(start);
                self.warn(WarningKind::TrailingData { offset: start, bytes });
                return Ok(false);
            }
            Frame::Truncated => {
                self.done = true;
                let kind = WarningKind::Truncated {
                    block: self.next_seq,
                    offset: start,
                    ignored_bytes: self.bytes_from(start),
                    blocks_read: self.stats.blocks,
                    events_read: self.stats.events,
                };
                self.warn(kind);
                return Ok(false);
            }
            Frame::Bad { detail, skip_to } => {
                let err = self.corrupt(self.next_seq, start, detail);
                self.next_seq += 1;
                match skip_to {
                    Some(next) => self.pos = next,
                    None => {
                        self.done = true;
                        if self.skip_corrupt {
                            let bytes = self.bytes_from(start);
                            self.warn(WarningKind::Unreadable { offset: start, bytes });
                        }
                    }
                }
                return Err(err);
            }
        };
        // The lengths that frame this message are only trusted once the metadata checksum
        // matches; until then a corrupt block is skipped by searching for the next block.
        self.pos = body_start + body_len;
        self.resync_from = Some(start + 1);
        let expected = self.next_seq;
        // Until the block's own number is trusted, errors name the expected number.
        self.next_seq += 1;
        let msg = match arrow_ipc::root_as_message(&meta) {
            Ok(m) => m,
            Err(e) => return Err(self.corrupt(expected, start, format!("unreadable message metadata: {e}"))),
        };
        let bm = BlockMeta::from_message(&msg).map_err(|d| self.corrupt(expected, start, d))?;
        if let (Some(stored), Some(rb)) = (bm.meta_crc32c, msg.header_as_record_batch()) {
            let pairs = msg.custom_metadata().into_iter().flatten().filter_map(|kv| Some((kv.key()?, kv.value()?)));
            let computed = meta_digest(msg.bodyLength(), &rb, pairs);
            if computed != stored {
                return Err(self.corrupt(
                    expected,
                    start,
                    format!("metadata checksum mismatch (stored {stored:08x}, computed {computed:08x})"),
                ));
            }
        }
        if bm.meta_crc32c.is_some() {
            self.resync_from = None;
            self.trusted_at = Some(start);
        }
        let block = bm.seq.unwrap_or(expected);
        if block > expected {
            self.warn(WarningKind::MissingBlocks { expected, found: block, offset: start });
        }
        self.next_seq = block + 1;
        if msg.header_type() != MessageHeader::RecordBatch {
            let t = msg.header_type().variant_name().unwrap_or("unknown");
            return Err(self.corrupt(
                block,
                start,
                format!("unexpected {t} message (only record batches follow the header)"),
            ));
        }
        // Cgroups met during the recording join the header before any event in them is read
        // (also from blocks the caller skips).
        if let Some(lines) = &bm.cgroups {
            self.add_cgroups(lines, block, start)?;
        }
        let mut wanted = self.wanted;
        prune(&bm, &mut wanted);
        // Every column pruned: nothing to return. The block is passed over without touching
        // `out` (shrinking it would make the next block re-grow its pruned columns).
        let skip = lazy && wanted.iter().all(|w| !w);
        let declared = msg.header_as_record_batch().map_or(0, |rb| rb.length());
        if !(0..=MAX_BLOCK_ROWS).contains(&declared) {
            let d = format!("it declares {declared} rows; a block has at most {MAX_BLOCK_ROWS}");
            return Err(self.corrupt(block, start, d));
        }
        let rows = declared as u64;
        let pruned: [bool; COLUMN_COUNT] = std::array::from_fn(|c| (lazy || self.wanted[c]) && !wanted[c]);
        // Columns the file lacks are filled after decoding, not decoded.
        let fill: [bool; COLUMN_COUNT] = std::array::from_fn(|c| wanted[c] && self.missing[c]);
        for (w, f) in wanted.iter_mut().zip(&fill) {
            *w &= !f;
        }
        // With per-buffer checksums only the buffers decoded are read and verified (none for a
        // skipped block); without, the whole body is read and verified.
        let n = body_len as usize;
        let partial = self.buffers_to_read(&msg, &bm, &wanted, skip);
        if self.heap_pin.is_none() {
            steady_heap_before(n, msg.header_as_record_batch().map_or(0, |rb| rb.length()));
        }
        // The body buffer is reused: only growth is zero-initialised; the bytes decoded are
        // overwritten by the reads.
        if self.body.len() < n {
            self.body.resize(n, 0);
        }
        match &partial {
            Some(needed) => self.read_buffers(&msg, &bm, needed, (block, start), (body_start, body_len))?,
            None => {
                let mut body = std::mem::take(&mut self.body);
                let read = self.read_at(&mut body[..n], body_start);
                self.body = body;
                read?;
                match bm.crc32c {
                    Some(stored) => {
                        let computed = crc32c::crc32c(&self.body[..n]);
                        if computed != stored {
                            return Err(TraceError::Checksum {
                                path: self.path.clone(),
                                block,
                                offset: start,
                                stored,
                                computed,
                                body_len,
                            });
                        }
                    }
                    None => self.stats.unchecked_blocks += 1,
                }
            }
        }
        if !skip {
            if let Err(d) = self.decode(&msg, n, &wanted, &pruned, partial.as_deref(), out) {
                return Err(self.corrupt(block, start, d));
            }
            for c in Column::ALL.into_iter().filter(|c| fill[c.index()]) {
                fill_missing(out, c, out.len());
            }
            out.stacks.clear();
            if let Some(st) = &bm.stacks {
                out.stacks.push_str(st);
            }
        }
        if self.heap_pin.is_none() && !out.is_empty() {
            self.heap_pin = Some(Vec::with_capacity(HEAP_PIN));
        }
        if let Some(l) = bm.lost_total {
            self.stats.lost_total = self.stats.lost_total.max(l);
        }
        if let Some(t) = bm.events_total {
            self.stats.events_total = self.stats.events_total.max(t);
        }
        if let Some(s) = &bm.summary {
            let s: Summary = serde_json::from_str(s)
                .map_err(|e| self.corrupt(block, start, format!("unreadable summary JSON: {e}")))?;
            self.stats.lost_total = self.stats.lost_total.max(s.lost);
            self.summary = Some(s);
            self.last_meta = Some(bm);
            if skip {
                self.stats.events += rows;
                return Ok(false);
            }
            if out.is_empty() {
                return Ok(false);
            }
            self.stats.events += out.len() as u64;
            return Ok(true);
        }
        self.last_meta = Some(bm);
        self.stats.blocks += 1;
        if skip {
            self.stats.events += rows;
            return Ok(false);
        }
        self.stats.events += out.len() as u64;
        Ok(true)
    }

    /// Add the cgroup table entries of block `block` (at `start`) to the header's: each within its
    /// bounds, new ids only, at most [`latscope_event::bounds::MAX_CGROUPS`] in all (the rest
    /// left out, with a warning).
    fn add_cgroups(&mut self, lines: &str, block: u64, start: u64) -> Result<(), TraceError> {
        use latscope_event::bounds::{MAX_CGROUPS, MAX_PATH};
        let mut t = latscope_event::Truncation::default();
        let mut left_out = 0u64;
        for l in lines.lines().filter(|l| !l.trim().is_empty()) {
            let mut c: latscope_event::CgroupInfo = serde_json::from_str(l)
                .map_err(|e| self.corrupt(block, start, format!("unreadable cgroup table entry: {e}")))?;
            if self.cgroup_ids.contains(&c.id) {
                continue;
            }
            if self.header.cgroups.len() >= MAX_CGROUPS {
                left_out += 1;
                continue;
            }
            c.bound(MAX_PATH, &mut t);
            self.cgroup_ids.insert(c.id);
            self.header.cgroups.push(c);
        }
        if !t.is_empty() {
            self.header.truncated.add(&t);
        }
        if left_out > 0 {
            if self.cgroups_left_out == 0 {
                self.warn(WarningKind::Bounded {
                    detail: format!(
                        "block {block} at byte {start}: the trace names more than {MAX_CGROUPS} cgroups; the others \
                         are left out (their events show as <cgroup ID>)"
                    ),
                });
            }
            self.cgroups_left_out += left_out;
            self.header.truncated.entries += left_out;
        }
        Ok(())
    }

    /// Which buffers of the block to read, when it has per-buffer checksums and the columns
    /// decoded (none if `skip`) leave some of its bytes unread; `None`: read the whole body.
    fn buffers_to_read(
        &self,
        msg: &Message<'_>,
        bm: &BlockMeta,
        wanted: &[bool; COLUMN_COUNT],
        skip: bool,
    ) -> Option<Vec<bool>> {
        if self.src.is_stream() {
            // A stream cannot skip bytes: it reads them anyway.
            return None;
        }
        let crcs = bm.buffer_crc32c.as_ref()?;
        let layout = self.layout.as_ref()?;
        let buffers = msg.header_as_record_batch()?.buffers()?;
        if crcs.len() != buffers.len() {
            return None;
        }
        let mut need = vec![false; buffers.len()];
        if !skip {
            for c in (0..COLUMN_COUNT).filter(|&c| wanted[c]) {
                for b in layout.buffers_of(c) {
                    *need.get_mut(b)? = true;
                }
            }
        }
        let unread = buffers.iter().zip(&need).any(|(b, &n)| !n && b.length() > 0);
        unread.then_some(need)
    }

    /// Read the buffers marked in `need` into their places in `self.body` and verify each
    /// against its checksum (the rest of the body is not read). Errors name block `block` at
    /// file offset `start`; the body lies at `body_start` and is `body_len` bytes.
    fn read_buffers(
        &mut self,
        msg: &Message<'_>,
        bm: &BlockMeta,
        need: &[bool],
        (block, start): (u64, u64),
        (body_start, body_len): (u64, u64),
    ) -> Result<(), TraceError> {
        let crcs = bm.buffer_crc32c.as_deref().unwrap_or_default();
        let buffers = msg.header_as_record_batch().and_then(|rb| rb.buffers());
        let mut ranges: Vec<(usize, std::ops::Range<usize>)> = Vec::new();
        for (i, b) in buffers.iter().flatten().enumerate().filter(|(i, _)| need[*i]) {
            let (off, len) = (b.offset(), b.length());
            if off < 0 || len < 0 || (off as u64).checked_add(len as u64).is_none_or(|end| end > body_len) {
                let d = format!("buffer {i} (offset {off}, length {len}) lies outside the {body_len}-byte body");
                return Err(self.corrupt(block, start, d));
            }
            ranges.push((i, off as usize..(off + len) as usize));
        }
        ranges.sort_by_key(|(_, r)| r.start);
        // One read per run of buffers less than a page apart.
        let mut i = 0;
        while i < ranges.len() {
            let (lo, mut hi) = (ranges[i].1.start, ranges[i].1.end);
            let mut j = i + 1;
            while j < ranges.len() && ranges[j].1.start <= hi + 4096 {
                hi = hi.max(ranges[j].1.end);
                j += 1;
            }
            if hi > lo {
                let mut body = std::mem::take(&mut self.body);
                let read = self.read_at(&mut body[lo..hi], body_start + lo as u64);
                self.body = body;
                read?;
            }
            i = j;
        }
        for (i, r) in ranges {
            let computed = crc32c::crc32c(&self.body[r]);
            if computed != crcs[i] {
                let col = self
                    .layout
                    .as_ref()
                    .and_then(|l| (0..COLUMN_COUNT).find(|&c| l.buffers_of(c).contains(&i)))
                    .map_or("?", |c| Column::ALL[c].name());
                let d = format!(
                    "checksum mismatch in column {col} (buffer {i}: stored {:08x}, computed {computed:08x}): the block's data is damaged",
                    crcs[i]
                );
                return Err(self.corrupt(block, start, d));
            }
        }
        Ok(())
    }

    /// Decode the record batch message `msg` whose body is `self.body[..body_len]` into
    /// `out`, after checking the buffer extents within the body and the declared
    /// decompressed sizes.
    fn decode(
        &mut self,
        msg: &Message<'_>,
        body_len: usize,
        wanted: &[bool; COLUMN_COUNT],
        pruned: &[bool; COLUMN_COUNT],
        read: Option<&[bool]>,
        out: &mut EventBatch,
    ) -> Result<(), String> {
        let rb = msg.header_as_record_batch().ok_or("the message has no record batch header")?;
        let rows = rb.length();
        if !(0..=MAX_BLOCK_ROWS).contains(&rows) {
            return Err(format!("invalid row count {rows}"));
        }
        let body = &self.body[..body_len];
        let body_len = body_len as u64;
        let compressed = rb.compression().is_some();
        // What the buffers decompress to, as declared, before anything is allocated for them.
        let mut declared = 0u64;
        for (i, b) in rb.buffers().into_iter().flatten().enumerate() {
            let (off, len) = (b.offset(), b.length());
            if off < 0 || len < 0 || (off as u64).checked_add(len as u64).is_none_or(|end| end > body_len) {
                return Err(format!("buffer {i} (offset {off}, length {len}) lies outside the {body_len}-byte body"));
            }
            // Only buffers that were read hold their bytes.
            if len == 0 || read.is_some_and(|r| !r.get(i).copied().unwrap_or(false)) {
                continue;
            }
            if !compressed {
                declared += len as u64;
                continue;
            }
            let raw = body
                .get(off as usize..off as usize + 8)
                .filter(|_| len >= 8)
                .ok_or_else(|| format!("compressed buffer {i} is {len} bytes, too short for its length prefix"))?;
            match i64::from_le_bytes(raw.try_into().unwrap_or([0; 8])) {
                -1 => declared = declared.saturating_add(len as u64 - 8),
                n if n < 0 => {
                    return Err(format!("compressed buffer {i} declares an impossible decompressed size {n}"))
                }
                n => declared = declared.saturating_add(n as u64),
            }
        }
        if declared > MAX_BLOCK_BYTES {
            return Err(format!(
                "its buffers declare {declared} bytes decompressed; a block decodes to at most {MAX_BLOCK_BYTES}"
            ));
        }
        if let Some(layout) = &self.layout {
            return self.decoder.decode_into(&rb, body, layout, wanted, pruned, out);
        }
        // A file with other columns of types the direct decoder does not locate: arrow-ipc
        // (which decodes the whole projection: pruned columns then hold their values).
        let body = Buffer::from(body);
        let version = msg.version();
        let decode = || {
            RecordBatchDecoder::try_new(&body, rb, self.schema.clone(), &self.dicts, &version)?
                .with_projection(Some(&self.projection))
                .with_require_alignment(false)
                .read_record_batch()
        };
        let rb: RecordBatch = match catch_unwind(AssertUnwindSafe(decode)) {
            Ok(Ok(rb)) => rb,
            Ok(Err(e)) => return Err(format!("undecodable data: {e}")),
            Err(_) => return Err("undecodable data (the Arrow decoder failed)".into()),
        };
        *out = from_record_batch(&rb, &self.index)?;
        Ok(())
    }
}

impl Iterator for TraceReader {
    type Item = Result<EventBatch, TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_batch()
    }
}

impl std::fmt::Debug for TraceReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceReader")
            .field("path", &self.path)
            .field("pos", &self.pos)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

/// Size of [`TraceReader::heap_pin`].
const HEAP_PIN: usize = 64 << 10;

/// Keep the memory of the batches [`TraceReader::next_batch`] returns recycled by the allocator
/// instead of going back to the kernel after every block (glibc malloc).
///
/// A batch is ~140 bytes per event in columns of up to 8 bytes per event. glibc maps columns
/// larger than its mmap threshold (128 KiB at first) one by one, and raises the threshold when a
/// larger mapping is freed; columns below it come from the heap. When the caller drops a batch,
/// its memory returns to the top of the heap and, being larger than the trim threshold, to the
/// kernel: the next block then takes page faults on fresh zeroed pages for all of it (measured:
/// `latscope hist` 2.5x slower). So, before the first block, free one mapping larger than a
/// column (the reader before the direct decoder did the same implicitly, with a fresh body
/// buffer per block), and after the first block keep a small allocation
/// ([`TraceReader::heap_pin`]) above its batch, so that the heap below is reused instead of
/// trimmed. [`TraceReader::next_batch_into`] does not depend on any of this: it allocates
/// nothing per block.
fn steady_heap_before(body_len: usize, rows: i64) {
    let rows = usize::try_from(rows).unwrap_or(0).min(MAX_BLOCK_ROWS as usize);
    let big = body_len.max(rows * 8).saturating_add(HEAP_PIN).min(32 << 20);
    drop(std::hint::black_box(Vec::<u8>::with_capacity(big)));
}

/// Open `path` (`-`: standard input) as a file or a stream, by what it is; also says what it
/// is, for messages.
fn open_source(path: &Path) -> Result<(Source, &'static str), TraceError> {
    let refuse = |what: &str| TraceError::NotReadable { path: path.to_path_buf(), what: what.to_string() };
    let io = |op: &str, e| TraceError::Io { path: path.to_path_buf(), op: op.to_string(), source: e };
    if path.as_os_str() == "-" {
        if std::io::stdin().is_terminal() {
            return Err(refuse(
                "standard input, a terminal: pipe a trace into it (latscope record -w - ... | latscope hist -r -) \
                 or give a file",
            ));
        }
        // A duplicate of fd 0, so that dropping the reader leaves standard input open.
        // SAFETY: fcntl on fd 0; the new descriptor is owned by the File.
        let fd = unsafe { libc::fcntl(0, libc::F_DUPFD_CLOEXEC, 3) };
        if fd < 0 {
            return Err(io("opening standard input", std::io::Error::last_os_error()));
        }
        let file = unsafe { File::from_raw_fd(fd) };
        let meta = file.metadata().map_err(|e| io("reading standard input", e))?;
        return Ok(if meta.is_file() {
            (Source::File { len: meta.len(), file }, "standard input")
        } else {
            (Source::stream(Box::new(file)), "standard input")
        });
    }
    let meta = std::fs::metadata(path).map_err(|e| io("opening", e))?;
    let t = meta.file_type();
    if t.is_dir() {
        return Err(refuse("a directory"));
    }
    if t.is_socket() {
        return Err(refuse("a socket (connect to it and pipe what it sends into -r -)"));
    }
    // A FIFO's open waits for a writer, as a reader of a FIFO should.
    let file = File::open(path).map_err(|e| io("opening", e))?;
    if t.is_file() {
        return Ok((Source::File { len: meta.len(), file }, "the file"));
    }
    if t.is_block_device() {
        use std::io::{Seek, SeekFrom};
        let mut f = file;
        let len = f.seek(SeekFrom::End(0)).map_err(|e| io("reading the device size", e))?;
        return Ok((Source::File { len, file: f }, "the block device"));
    }
    if t.is_char_device() && file.is_terminal() {
        return Err(refuse("a terminal"));
    }
    let what = if t.is_fifo() { "the FIFO" } else { "the character device" };
    Ok((Source::stream(Box::new(file)), what))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect::<Vec<_>>().join(" ")
}

/// Say what a file that is not an Arrow IPC stream looks like.
fn describe_foreign(first: &[u8]) -> String {
    if first.starts_with(b"ARROW1") {
        "an Arrow IPC file (Feather v2); latscope traces are Arrow IPC streams".into()
    } else if first.starts_with(b"PAR1") {
        "a Parquet file".into()
    } else if first.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        "a zstd-compressed file (decompress it first?)".into()
    } else if first.starts_with(&[0x1f, 0x8b]) {
        "a gzip-compressed file (decompress it first?)".into()
    } else if first.iter().all(|b| b.is_ascii_graphic() || b.is_ascii_whitespace()) {
        format!("a text file (it starts with {:?}), not an Arrow IPC stream", String::from_utf8_lossy(first))
    } else {
        format!("not an Arrow IPC stream (it starts with bytes {})", hex(first))
    }
}

/// Append `src`'s events to `dst`; false (and nothing appended) when a string column would
/// exceed 4 GiB.
fn append(dst: &mut EventBatch, src: &EventBatch) -> bool {
    for (d, s) in
        [(&dst.comm, &src.comm), (&dst.path, &src.path), (&dst.path2, &src.path2), (&dst.fault_path, &src.fault_path)]
    {
        if d.data.len() + s.data.len() > u32::MAX as usize {
            return false;
        }
    }
    macro_rules! ext {
        ($([$(($var:ident, $field:ident, $aty:ty, $dt:ident, $miss:expr)),*])*) => {
            $($( dst.$field.extend_from_slice(&src.$field); )*)*
        };
    }
    crate::column::with_prim_columns!(ext);
    for (d, s) in [
        (&mut dst.comm, &src.comm),
        (&mut dst.path, &src.path),
        (&mut dst.path2, &src.path2),
        (&mut dst.fault_path, &src.fault_path),
    ] {
        append_str(d, s);
    }
    true
}

fn append_str(d: &mut StrCol, s: &StrCol) {
    if d.offsets.is_empty() {
        d.offsets.push(0);
    }
    let base = d.data.len() as u32;
    let first = s.offsets.first().copied().unwrap_or(0);
    d.offsets.extend(s.offsets.iter().skip(1).map(|&o| base + (o - first)));
    d.data.extend_from_slice(&s.data[first as usize..s.offsets.last().copied().unwrap_or(0) as usize]);
}
