//! Filtered scans of recorded events: the part every command that reads a recording shares.
//!
//! A [`Scan`] opens a latscope trace file (or `perf script` block I/O text), applies a
//! [`Filter`], and hands out [`Chunk`]s: a batch and the rows of it that matched. It reads only
//! what the consumer needs:
//!
//! - **projection**: only the columns named in [`ScanOptions::columns`] (plus whatever the filter
//!   reads) are fetched, verified and decompressed;
//! - **zone maps**: with no filter, a [`ZonePlan`] says what the consumer counts (a kind, maybe a
//!   time bucketing); each block's metadata is checked against it before the block is decoded, and
//!   the chunk's [`Zone`] says when a block holds only that kind (`kind` not decoded), lies in one
//!   time bucket (`ts` not decoded) or holds none of it (nothing decoded);
//! - corrupt blocks are skipped and counted, never returned; a file cut short reads up to its last
//!   complete block. [`Scan::report`] says what was skipped and why, for the caller to print.
//!
//! ```no_run
//! use latscope_scan::{InputFormat, Scan, ScanOptions};
//! use latscope_filter::Filter;
//! use latscope_trace::Column;
//!
//! let opts = ScanOptions {
//!     filter: Filter::parse("evt.type = pread64")?,
//!     columns: Some(vec![Column::Kind, Column::Lat]),
//!     ..ScanOptions::default()
//! };
//! let mut scan = Scan::open("trace.lst".as_ref(), InputFormat::Trace, opts)?;
//! let mut n = 0;
//! scan.for_each(|c| {
//!     n += c.rows.len();
//!     Ok::<(), latscope_scan::ScanError>(())
//! })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A `Scan` is also an [`EventSource`], so views written against sources (the spectrogram)
//! read files and the live probes alike.

#![warn(missing_docs)]

mod disks;
mod perf;
mod zone;

pub use latscope_event::source::{Chunk, EventSource, Zone, ZonePlan};
pub use perf::{parse_perf_script, PerfStats};

use latscope_event::{EventBatch, EventKind, InputError, Span, TraceHeader};
use latscope_filter::{EvalContext, Filter};
pub use latscope_trace::BlockZone;
use latscope_trace::{Column, ReadOptions, Summary, TraceError, TraceReader};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What a scan reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InputFormat {
    /// A latscope trace file (`latscope record`).
    #[default]
    Trace,
    /// `perf script` output of `block:block_rq_issue` / `block_rq_complete` (and `block_rq_insert`).
    Perf,
}

/// How to scan.
#[derive(Debug, Clone, Default)]
pub struct ScanOptions {
    /// Which events to hand out (the default takes every event).
    pub filter: Filter,
    /// The columns the consumer reads (`None`: all). With a filter, every column is decoded.
    pub columns: Option<Vec<Column>>,
    /// What the consumer counts, for zone-map pruning (only used with no filter).
    pub zone: Option<ZonePlan>,
}

/// Why a scan failed.
#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    /// The trace could not be opened or read past a damaged place (the error names the file).
    #[error("cannot read {source}")]
    Trace {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: TraceError,
    },
    /// The input could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file (`-` for standard input).
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: std::io::Error,
    },
    /// A line of a text input could not be read.
    #[error(transparent)]
    Text(#[from] InputError),
    /// The consumer stopped the scan with its own error.
    #[error("{0}")]
    Consumer(String),
    /// A text input (`--input perf` or `--input text`) is a latscope trace.
    #[error("{}: this is a latscope trace, not text: drop --input (traces are the default input)", path.display())]
    TraceNotText {
        /// The file.
        path: PathBuf,
    },
}

/// What a scan met besides events: for the caller to print after (or instead of) its output.
#[derive(Debug, Clone, Default)]
pub struct ScanReport {
    /// Corrupt blocks that were skipped, one message each (block number and byte offset).
    pub corrupt: Vec<String>,
    /// Warnings about the file (cut short, not closed cleanly, blocks without checksums).
    pub warnings: Vec<String>,
    /// Notes about how the input was read (perf script pairing, device names resolved locally).
    pub notes: Vec<String>,
    /// The recording's summary, for a cleanly closed trace.
    pub summary: Option<Summary>,
    /// Blocks read.
    pub blocks: u64,
    /// Events the probes lost, as far as the file says.
    pub lost: u64,
}

impl ScanReport {
    /// The recording's span, when the file says (a cleanly closed trace): from the moment the
    /// probes attached (the header's `start_ns`) to the moment it stopped (the summary's
    /// `end_ns`). The duration of a trace, in `info` and under every rate.
    pub fn recording_span(&self, header: &TraceHeader) -> Option<Span> {
        self.summary.filter(|s| s.end_ns > header.start_ns).map(|s| Span::recording(header.start_ns, s.end_ns))
    }

    /// True when part of the input could not be read (the output is incomplete).
    pub fn incomplete(&self) -> bool {
        !self.corrupt.is_empty()
    }
}

// The trace reader is the common case and is read in the hot loop: it stays inline.
#[allow(clippy::large_enum_variant)]
enum Input {
    Trace(TraceReader),
    /// Events parsed from text, held in memory; `done` once handed out.
    Memory {
        batch: EventBatch,
        header: TraceHeader,
        done: bool,
    },
}

/// A filtered scan over a recorded input (see the crate documentation).
pub struct Scan {
    path: PathBuf,
    input: Input,
    filter: Filter,
    zone: Option<ZonePlan>,
    ctx: EvalContext,
    /// How many of the header's cgroups `ctx` knows.
    cgroups_seen: usize,
    rows: Vec<u32>,
    /// Recycled for every block: no allocation per block on the read path.
    batch: EventBatch,
    report: ScanReport,
    /// Hand out each block's span of end times instead of decoding `ts` ([`Scan::set_spans`]).
    spans: bool,
    /// The span of the block read last, when its `ts` was left undecoded.
    last_span: Option<(u64, u64)>,
    /// Columns not decoded until a block needs them ([`Scan::set_deferred`]).
    deferred: Option<(Vec<Column>, NeedsColumns)>,
}

/// Whether a block, decoded without the deferred columns, needs them ([`Scan::set_deferred`]).
pub type NeedsColumns = fn(&EventBatch) -> bool;

/// Reads the whole of `path` (`-` is standard input).
pub fn read_input(path: &Path) -> Result<Vec<u8>, ScanError> {
    let io = |source| ScanError::Io { path: path.to_path_buf(), source };
    if path == Path::new("-") {
        let mut v = Vec::new();
        std::io::stdin().read_to_end(&mut v).map_err(io)?;
        Ok(v)
    } else {
        std::fs::read(path).map_err(io)
    }
    .and_then(|data| {
        // An Arrow IPC stream starts with the continuation marker and the length of its schema
        // message; a latscope trace's schema message names its format version (anywhere in it:
        // the header it carries grows with the machine's processes and disks).
        let is_trace = data.starts_with(&[0xff; 4]) && data.len() >= 8 && {
            let len = u32::from_le_bytes([data[4], data[5], data[6], data[7]]) as usize;
            let schema = &data[8..data.len().min(8 + len)];
            schema.windows(23).any(|w| w == b"latscope.format_version")
        };
        if is_trace {
            Err(ScanError::TraceNotText { path: path.to_path_buf() })
        } else {
            Ok(data)
        }
    })
}

impl Scan {
    /// Opens `path` in `format`.
    pub fn open(path: &Path, format: InputFormat, opts: ScanOptions) -> Result<Scan, ScanError> {
        let mut report = ScanReport::default();
        let input = match format {
            InputFormat::Trace => {
                let projection = opts.columns.clone().filter(|_| opts.filter.is_match_all());
                let ro = ReadOptions { projection, skip_corrupt: true };
                let r = TraceReader::open_with(path, ro)
                    .map_err(|source| ScanError::Trace { path: path.to_path_buf(), source })?;
                Input::Trace(r)
            }
            InputFormat::Perf => {
                let data = read_input(path)?;
                let (batch, mut header, st) = parse_perf_script(&data, &path.display().to_string())?;
                report.notes.push(format!("perf script: {}", st.summary()));
                if let Some(note) = disks::name_local(&mut header, &batch) {
                    report.notes.push(note);
                }
                Input::Memory { batch, header, done: false }
            }
        };
        let header = match &input {
            Input::Trace(r) => r.header(),
            Input::Memory { header, .. } => header,
        };
        let ctx = EvalContext::new(header);
        let cgroups_seen = header.cgroups.len();
        Ok(Scan {
            cgroups_seen,
            path: path.to_path_buf(),
            input,
            filter: opts.filter,
            zone: opts.zone,
            ctx,
            rows: Vec::new(),
            batch: EventBatch::default(),
            report,
            spans: false,
            last_span: None,
            deferred: None,
        })
    }

    /// The header (for `perf script` input, a synthetic one naming the file).
    pub fn header(&self) -> &TraceHeader {
        match &self.input {
            Input::Trace(r) => r.header(),
            Input::Memory { header, .. } => header,
        }
    }

    /// Sets what the consumer counts, for zone-map pruning from the next block on (a consumer
    /// whose plan depends on the header sets it after opening).
    pub fn set_zone(&mut self, zone: Option<ZonePlan>) {
        self.zone = zone;
    }

    /// With `on` and no filter, the `ts` of the blocks whose zone map gives their earliest and
    /// latest end time is not decoded: [`Scan::for_each_with_span`] hands out that span instead
    /// (for a consumer that places events in time only block by block), nor the `dev` of
    /// blocks without block requests (such a consumer reads the device of block requests
    /// only). The zone plan, if any, is then not applied.
    pub fn set_spans(&mut self, on: bool) {
        self.spans = on;
    }

    /// Without a filter or a zone plan, `columns` are not decoded (they hold unspecified values)
    /// until a block decoded without them is one that `needed` says needs them: that block is
    /// read again with them, and so is every block after it. For columns most traces leave
    /// empty that a consumer reads only in some blocks, which the other columns tell: the
    /// breakdown of a call's latency, read to classify waits only where wake-ups were recorded
    /// (`latscope_view::waits::BatchRule`). `needed` is asked of each block's batch as decoded
    /// without them.
    pub fn set_deferred(&mut self, columns: Vec<Column>, needed: NeedsColumns) {
        self.deferred = (!columns.is_empty()).then_some((columns, needed));
    }

    /// The filter.
    pub fn filter(&self) -> &Filter {
        &self.filter
    }

    /// The input's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The number of the trace block read last (`None` for text input or unnumbered blocks).
    pub fn last_block(&self) -> Option<u64> {
        match &self.input {
            Input::Trace(r) => r.last_block_meta().and_then(|m| m.seq),
            Input::Memory { .. } => None,
        }
    }

    /// A second reader of the same trace, decoding only `columns` and passing over corrupt
    /// blocks, for reading ahead (block zone maps: [`latscope_trace::BlockZone`]): only for a
    /// trace in a regular file (a stream can be read once) whose blocks have per-buffer checksums
    /// (call it once a block has been read: a look-ahead then reads the columns asked for alone;
    /// in older files it would read every body twice), `None` otherwise or when it cannot be
    /// opened again.
    pub fn reread(&self, columns: &[Column]) -> Option<TraceReader> {
        let Input::Trace(r) = &self.input else { return None };
        if self.path == Path::new("-") || r.last_block_meta()?.buffer_crc32c.is_none() {
            return None;
        }
        if !std::fs::metadata(&self.path).ok()?.is_file() {
            return None;
        }
        let ro = ReadOptions { projection: Some(columns.to_vec()), skip_corrupt: true };
        TraceReader::open_with(&self.path, ro).ok()
    }

    /// The next chunk of matching events, or `None` at the end. Corrupt blocks are skipped and
    /// recorded in the report.
    pub fn next_batch(&mut self) -> Option<Result<Chunk<'_>, ScanError>> {
        Some(self.advance()?.map(|zone| Chunk { batch: &self.batch, rows: &self.rows, zone }))
    }

    /// [`Scan::next_batch`], with the header as it is after reading the block: cgroups the
    /// recording met after it started (containers started since) are in it.
    pub fn next_batch_and_header(&mut self) -> Option<Result<(Chunk<'_>, &TraceHeader), ScanError>> {
        let zone = match self.advance()? {
            Ok(z) => z,
            Err(e) => return Some(Err(e)),
        };
        let header = match &self.input {
            Input::Trace(r) => r.header(),
            Input::Memory { header, .. } => header,
        };
        Some(Ok((Chunk { batch: &self.batch, rows: &self.rows, zone }, header)))
    }

    /// [`Scan::for_each`], with the header as [`Scan::next_batch_and_header`] gives it.
    pub fn for_each_with_header<E: From<ScanError>>(
        &mut self,
        mut f: impl FnMut(Chunk<'_>, &TraceHeader) -> Result<(), E>,
    ) -> Result<(), E> {
        while let Some(r) = self.next_batch_and_header() {
            let (c, h) = r?;
            f(c, h)?;
        }
        Ok(())
    }

    /// [`Scan::for_each_with_header`], with the span of end times of each block whose `ts` was
    /// not decoded ([`Scan::set_spans`]): `Some((earliest, latest))` for such a block (its `ts`
    /// column then holds no times), `None` for a block decoded whole.
    pub fn for_each_with_span<E: From<ScanError>>(
        &mut self,
        mut f: impl FnMut(Chunk<'_>, &TraceHeader, Option<(u64, u64)>) -> Result<(), E>,
    ) -> Result<(), E> {
        while let Some(r) = self.advance() {
            let zone = r?;
            let header = match &self.input {
                Input::Trace(r) => r.header(),
                Input::Memory { header, .. } => header,
            };
            f(Chunk { batch: &self.batch, rows: &self.rows, zone }, header, self.last_span)?;
        }
        Ok(())
    }

    /// Reads the next block and selects its matching rows; the zone decision.
    fn advance(&mut self) -> Option<Result<Zone, ScanError>> {
        let all = self.filter.is_match_all();
        self.last_span = None;
        let zone = match &mut self.input {
            Input::Memory { batch, done, .. } => {
                if *done {
                    return None;
                }
                *done = true;
                std::mem::swap(&mut self.batch, batch);
                Zone::default()
            }
            Input::Trace(reader) => loop {
                let mut decision = Zone::default();
                let plan = self.zone.as_ref().filter(|_| all);
                let spans = self.spans && all;
                let deferred = self.deferred.as_ref().filter(|_| all && self.zone.is_none());
                let mut span = None;
                let r = reader.next_batch_pruned(&mut self.batch, |m| {
                    let skip = match plan {
                        _ if spans => match (m.end_min, m.end_max) {
                            (Some(lo), Some(hi)) => {
                                span = Some((lo, hi));
                                // A block without block requests: their device is not read either.
                                if m.kinds.is_some_and(|k| k[EventKind::Block as usize] == 0) {
                                    &[Column::Ts, Column::Dev][..]
                                } else {
                                    &[Column::Ts][..]
                                }
                            }
                            _ => &[][..],
                        },
                        Some(p) => {
                            let (z, skip) = zone::of(m, p);
                            decision = z;
                            skip
                        }
                        None => &[][..],
                    };
                    match deferred {
                        Some((cols, _)) => std::borrow::Cow::Owned([skip, &cols[..]].concat()),
                        None => std::borrow::Cow::Borrowed(skip),
                    }
                });
                match r? {
                    Ok(()) => {
                        // A block that needs the deferred columns: read again with them, and
                        // every block after it.
                        if let Some((_, needed)) = deferred {
                            if needed(&self.batch) && reader.reread_last_block() {
                                self.deferred = None;
                                continue;
                            }
                        }
                        self.last_span = span;
                        break decision;
                    }
                    Err(e) if e.is_corrupt_block() => {
                        self.report.corrupt.push(e.to_string());
                        continue;
                    }
                    Err(source) => return Some(Err(ScanError::Trace { path: self.path.clone(), source })),
                }
            },
        };
        // Cgroups the trace met during the recording, read with this block's metadata.
        if let Input::Trace(r) = &self.input {
            let known = &r.header().cgroups;
            if known.len() > self.cgroups_seen {
                self.ctx.add_cgroups(&known[self.cgroups_seen..]);
                self.cgroups_seen = known.len();
            }
        }
        let b = &self.batch;
        let n = b.len();
        if all {
            // Every row: 0..n, kept from block to block (no per-event work).
            if self.rows.len() != n {
                self.rows.clear();
                self.rows.extend(0..n as u32);
            }
        } else {
            self.ctx.observe(b);
            self.rows.clear();
            for i in 0..n {
                if self.filter.matches(b, i, &self.ctx) {
                    self.rows.push(i as u32);
                }
            }
        }
        Some(Ok(zone))
    }

    /// Exchanges the batch of the last chunk with `other`; the next block is decoded into what
    /// `other` held (its allocations are reused, its contents overwritten). A consumer that hands
    /// batches to another thread takes them over this way instead of copying them.
    pub fn swap_batch(&mut self, other: &mut EventBatch) {
        std::mem::swap(&mut self.batch, other);
    }

    /// Calls `f` with every chunk; stops at the first error (`f`'s, or a read error).
    pub fn for_each<E: From<ScanError>>(&mut self, mut f: impl FnMut(Chunk<'_>) -> Result<(), E>) -> Result<(), E> {
        while let Some(c) = self.next_batch() {
            f(c?)?;
        }
        Ok(())
    }

    /// What the scan met so far besides events.
    pub fn report(&self) -> ScanReport {
        let mut r = self.report.clone();
        if let Input::Trace(reader) = &self.input {
            r.warnings = reader.warnings().iter().map(|w| w.to_string()).collect();
            r.summary = reader.summary().copied();
            let st = reader.stats();
            r.blocks = st.blocks;
            r.lost = r.summary.map(|s| s.lost).unwrap_or(st.lost_total);
        }
        r
    }

    /// The time the events a view counted from this scan cover, for its rates (the rule of
    /// [`latscope_event::span`]): the recording's span ([`ScanReport::recording_span`], known
    /// once the scan has read the file's end), or for an input that does not say (a file cut
    /// short, `perf script` text) `events`, the span of the events the view counted; cut to the
    /// filter's window of start times (`evt.time >= ... and evt.time < ...`). `None` when neither
    /// is known.
    pub fn covered(&self, events: Option<Span>) -> Option<Span> {
        let h = self.header();
        let whole = self.report().recording_span(h).or(events)?;
        Some(match self.filter.time_window().monotonic(h.realtime_offset_ns, h.start_ns) {
            Some((lo, hi)) => whole.within(lo, hi),
            None => whole,
        })
    }

    /// The trace reader, for commands that show the file itself (`info`); `None` for text input.
    pub fn reader(&self) -> Option<&TraceReader> {
        match &self.input {
            Input::Trace(r) => Some(r),
            Input::Memory { .. } => None,
        }
    }
}

impl EventSource for Scan {
    fn header(&self) -> &TraceHeader {
        Scan::header(self)
    }

    fn next_chunk(&mut self, _wait: Duration) -> Result<Option<Chunk<'_>>, latscope_event::source::SourceError> {
        match self.next_batch() {
            None => Ok(None),
            Some(Ok(c)) => Ok(Some(c)),
            Some(Err(e)) => Err(Box::new(e)),
        }
    }

    fn next_chunk_and_header(
        &mut self,
        _wait: Duration,
    ) -> Result<Option<(Chunk<'_>, Option<&TraceHeader>)>, latscope_event::source::SourceError> {
        match Scan::next_batch_and_header(self) {
            None => Ok(None),
            Some(Ok((c, h))) => Ok(Some((c, Some(h)))),
            Some(Err(e)) => Err(Box::new(e)),
        }
    }

    fn lost(&self) -> u64 {
        match &self.input {
            Input::Trace(r) => r.stats().lost_total,
            Input::Memory { .. } => 0,
        }
    }

    fn describe(&self) -> String {
        self.path.display().to_string()
    }

    fn damage(&self) -> latscope_event::source::SourceDamage {
        let r = self.report();
        latscope_event::source::SourceDamage { skipped: r.corrupt, warnings: r.warnings }
    }
}

/// The kind a view takes: block requests when asked (or for `perf script` input, which has only
/// those), syscalls otherwise.
pub fn view_kind(block: bool, format: InputFormat) -> EventKind {
    if block || format == InputFormat::Perf {
        EventKind::Block
    } else {
        EventKind::Syscall
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use latscope_event::{wake_flags, Event};
    use latscope_trace::TraceWriter;

    /// Deferred columns: not decoded in the blocks that do not need them, decoded from the first
    /// one that does (read again) on; every block handed out once, and counted once.
    #[test]
    fn deferred_columns_are_decoded_from_the_first_block_that_needs_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.lst");
        let header = latscope_trace::synth::BusyServer::default().header();
        let mut w = TraceWriter::create(&path, &header).unwrap();
        // Block 0 and 2 without wake-ups (2 with a breakdown all the same), block 1 with.
        for (k, flags) in [0, wake_flags::KNOWN, 0].into_iter().enumerate() {
            let mut b = EventBatch::default();
            for i in 0..100u64 {
                let ts = header.start_ns + (k as u64 * 100 + i) * 1000;
                b.push(&Event { ts, lat: 500 + i, why_cpu: 7 + k as u64, wake_flags: flags, ..Default::default() });
            }
            w.write_batch(&b, 0).unwrap();
        }
        w.finish(latscope_trace::Summary::default()).unwrap();
        let columns = Some(vec![Column::Kind, Column::Lat, Column::WakeFlags, Column::WhyCpu]);
        let mut scan = Scan::open(&path, InputFormat::Trace, ScanOptions { columns, ..Default::default() }).unwrap();
        scan.set_deferred(vec![Column::WhyCpu], |b| b.wake_flags.iter().any(|f| f & wake_flags::KNOWN != 0));
        let mut got = Vec::new();
        scan.for_each(|c| {
            got.push((c.batch.len(), c.batch.lat[0], c.batch.why_cpu[0]));
            Ok::<(), ScanError>(())
        })
        .unwrap();
        // Block 0's breakdown was left undecoded (a new batch's column holds zeros).
        assert_eq!(got, [(100, 500, 0), (100, 500, 8), (100, 500, 9)]);
        let report = scan.report();
        assert_eq!(report.blocks, 3);
        assert!(report.warnings.is_empty() && report.corrupt.is_empty(), "{report:?}");
    }
}
