//! Writing trace files.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use arrow_ipc::writer::{DictionaryTracker, IpcDataGenerator, IpcWriteOptions};
use arrow_ipc::MetadataVersion;
use latscope_event::{EventBatch, TraceHeader, TRACE_FORMAT_VERSION};

use crate::column::{arrow_schema, decoded_row_bytes};
use crate::encode::{validate_batch, EncodedBlock, Encoder};
use crate::meta::{
    frame_metadata, schema_digest, BlockMeta, Summary, CONTINUATION, KEY_FORMAT_VERSION, KEY_HEADER, KEY_HEADER_CRC,
    KEY_SCHEMA_CRC,
};
use crate::output::{Existing, Staged, StagedOptions};
use crate::sealed::SealedBlock;
use crate::TraceError;

/// How block buffers are compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// Uncompressed Arrow buffers (large files; for measurements and debugging).
    None,
    /// Zstandard at the given level (1 is fastest; 3 is zstd's default).
    Zstd(i32),
}

/// Options of [`TraceWriter::create_with`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriterOptions {
    /// Buffer compression (default: zstd level 1).
    pub compression: Compression,
    /// Largest block written: bigger batches given to [`TraceWriter::write_batch`] are split
    /// (default [`DEFAULT_MAX_BLOCK_EVENTS`], at most [`crate::MAX_BLOCK_ROWS`]).
    pub max_block_events: usize,
    /// Call `fsync` when the trace is finished (default true).
    pub sync_on_finish: bool,
    /// Store each block's zone map (events per kind, `lat` and end-time ranges) and per-buffer
    /// checksums (default true). Off, blocks carry only the keys latscope wrote before these
    /// existed (`ts_min` and `ts_max` included): for testing that readers still handle such files.
    pub zone_maps: bool,
    /// What happens to a file already at the path (default: kept as `FILE.old`).
    pub existing: Existing,
    /// Write the new trace under a temporary name (or none) until [`TraceWriter::commit`]
    /// (default false: committed when created, the header is at the path from the start).
    /// Lets a caller give up before committing (say, when the probes fail to start) without
    /// touching the file at the path.
    pub staged: bool,
    /// Threads that encode and compress blocks in a [`crate::ThreadedTraceWriter`] (its writer
    /// thread and helpers; blocks are still written in order): 0 (the default) for one per CPU
    /// this process may run on, at most [`MAX_ENCODE_THREADS`]. [`TraceWriter`] itself always
    /// encodes on the caller's thread.
    pub threads: usize,
}

/// Most encoding threads [`WriterOptions::threads`] chooses on its own.
pub const MAX_ENCODE_THREADS: usize = 4;

/// Default [`WriterOptions::max_block_events`].
pub const DEFAULT_MAX_BLOCK_EVENTS: usize = 1 << 20;

impl Default for WriterOptions {
    fn default() -> Self {
        Self {
            compression: Compression::Zstd(1),
            max_block_events: DEFAULT_MAX_BLOCK_EVENTS,
            sync_on_finish: true,
            zone_maps: true,
            threads: 0,
            existing: Existing::Backup,
            staged: false,
        }
    }
}

/// Writes a trace file: the header at [`TraceWriter::create`], then one self-contained,
/// checksummed, compressed block per [`TraceWriter::write_batch`], then a summary at
/// [`TraceWriter::finish`].
///
/// Every block is handed to the kernel as soon as it is encoded, so a process killed
/// with `kill -9` loses at most the block being written; a reader returns every block
/// before it. After a failed write (disk full) the writer cuts the file back to the
/// last complete block, when it can, and refuses further blocks.
///
/// Dropping a writer without calling [`TraceWriter::finish`] leaves a readable file
/// without summary (readers warn that it was not closed cleanly).
pub struct TraceWriter {
    path: PathBuf,
    out: Staged,
    max_block_events: usize,
    sync_on_finish: bool,
    zone_maps: bool,
    compression: Compression,
    encoder: Encoder,
    block: EncodedBlock,
    /// Next block number to write.
    seq: u64,
    /// Next block number to plan (ahead of `seq` while blocks are being encoded elsewhere).
    planned: u64,
    events: u64,
    lost: u64,
    /// Bytes written (the offset of the next block).
    offset: u64,
    started: Instant,
    failed: Option<String>,
    /// What the writer cut from blocks' stack and cgroup tables (added to the summary's).
    truncated: latscope_event::Truncation,
}

impl TraceWriter {
    /// Create (or truncate) `path` and write the header, with default [`WriterOptions`].
    pub fn create(path: impl AsRef<Path>, header: &TraceHeader) -> Result<TraceWriter, TraceError> {
        Self::create_with(path, header, WriterOptions::default())
    }

    /// Create (or truncate) `path` and write the header.
    ///
    /// The header's `format_version` is set to the version this build writes
    /// ([`TRACE_FORMAT_VERSION`]) whatever the caller put there.
    pub fn create_with(
        path: impl AsRef<Path>,
        header: &TraceHeader,
        opts: WriterOptions,
    ) -> Result<TraceWriter, TraceError> {
        let path = path.as_ref().to_path_buf();
        let io = |op: &str, source| TraceError::Io { path: path.clone(), op: op.to_string(), source };
        let bad = |detail: String| TraceError::Encode { path: path.clone(), block: 0, detail };

        let mut header = header.clone();
        header.format_version = TRACE_FORMAT_VERSION;
        // Whatever the recorded machine's users made of it, the header stays within what every
        // reader accepts (values cut are marked, and counted in the header).
        header.bound();
        let header_json = serde_json::to_string(&header).map_err(|e| bad(format!("header to JSON: {e}")))?;
        let metadata = HashMap::from([
            (KEY_FORMAT_VERSION.to_string(), TRACE_FORMAT_VERSION.to_string()),
            (KEY_HEADER_CRC.to_string(), format!("{:08x}", crc32c::crc32c(header_json.as_bytes()))),
            (KEY_HEADER.to_string(), header_json),
        ]);
        let mut schema = arrow_schema().with_metadata(metadata);
        let schema_crc = format!("{:08x}", schema_digest(&schema));
        schema.metadata.insert(KEY_SCHEMA_CRC.to_string(), schema_crc);
        let schema = Arc::new(schema);
        let encoder = Encoder::new(opts.compression).map_err(bad)?;

        // The schema message is arrow-ipc's (once per file); the blocks are encoded directly.
        let options = IpcWriteOptions::try_new(8, false, MetadataVersion::V5).map_err(|e| bad(e.to_string()))?;
        let encoded = IpcDataGenerator::default().schema_to_bytes_with_dictionary_tracker(
            &schema,
            &mut DictionaryTracker::new(false),
            &options,
        );
        if encoded.ipc_message.len() as u64 > crate::MAX_HEADER_BYTES {
            return Err(bad(format!(
                "the header takes {} bytes, more than the {} a reader accepts",
                encoded.ipc_message.len(),
                crate::MAX_HEADER_BYTES
            )));
        }
        let mut frame = Vec::with_capacity(encoded.ipc_message.len() + 16);
        frame_metadata(&mut frame, &encoded.ipc_message);

        let mut out = Staged::create(&path, StagedOptions::trace(opts.existing))?;
        out.write_all(&frame).map_err(|e| io("writing the header", e))?;
        if !opts.staged {
            out.commit()?;
        }
        Ok(TraceWriter {
            offset: frame.len() as u64,
            path: out.path().to_path_buf(),
            out,
            max_block_events: opts.max_block_events.clamp(1, crate::MAX_BLOCK_ROWS as usize),
            zone_maps: opts.zone_maps,
            sync_on_finish: opts.sync_on_finish,
            compression: opts.compression,
            encoder,
            block: EncodedBlock::default(),
            seq: 0,
            planned: 0,
            events: 0,
            lost: 0,
            started: Instant::now(),
            failed: None,
            truncated: Default::default(),
        })
    }

    /// The file being written (`-` for standard output).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Put a trace created with [`WriterOptions::staged`] at its path: the file there (if any)
    /// becomes `FILE.old` or is replaced, as [`WriterOptions::existing`] says; returns the
    /// backup's path, if one was made. Until then nothing at the path has changed, and dropping
    /// the writer leaves it so. Already committed (the default) or a stream: does nothing.
    ///
    /// The header is synced to disk before the rename and the directory after it, so that a
    /// crash or a power cut after the commit leaves a readable trace at the path, with the
    /// blocks the kernel had written back (see [`TraceWriter::finish`] for the rest).
    pub fn commit(&mut self) -> Result<Option<PathBuf>, TraceError> {
        Ok(self.out.commit()?)
    }

    /// Blocks written so far.
    pub fn blocks(&self) -> u64 {
        self.seq
    }

    /// Events written so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Bytes written so far.
    pub fn bytes(&self) -> u64 {
        self.offset
    }

    /// Write `batch` as one block (or several if it has more than
    /// [`WriterOptions::max_block_events`] events), recording `lost_total`, the number of
    /// events the probes have lost since the recording started.
    ///
    /// The block is in the kernel's hands when this returns. An empty batch writes an
    /// empty block (which records `lost_total`).
    pub fn write_batch(&mut self, batch: &EventBatch, lost_total: u64) -> Result<(), TraceError> {
        self.check_failed()?;
        validate_batch(batch).map_err(|detail| TraceError::InvalidBatch {
            path: self.path.clone(),
            block: self.seq,
            detail,
        })?;
        let mut block = std::mem::take(&mut self.block);
        let mut r = Ok(());
        for (range, meta) in self.plan(batch, lost_total) {
            r = self.encode(batch, range, meta, &mut block).and_then(|()| self.write_encoded(&block));
            if r.is_err() {
                break;
            }
        }
        self.block = block;
        r
    }

    /// The blocks of `batch` (validated) written with `lost_total`: each one's events and
    /// metadata (number, running counts). Counts them as written. A block has at most
    /// [`WriterOptions::max_block_events`] events and decodes to at most
    /// [`crate::MAX_BLOCK_BYTES`].
    ///
    /// The batch's new stack and cgroup table entries go with its first block, each entry within
    /// its bounds; when they take more than a block's metadata may hold, the first ones go in
    /// blocks of 0 events before it (no later than the events that use them).
    pub(crate) fn plan(&mut self, batch: &EventBatch, lost_total: u64) -> Vec<(std::ops::Range<usize>, BlockMeta)> {
        self.lost = self.lost.max(lost_total);
        let n = batch.len();
        let mut parts = Vec::with_capacity(n / self.max_block_events + 1);
        let mut tables = crate::tables::split(&batch.stacks, &batch.cgroups, &mut self.truncated);
        let last_tables = tables.pop();
        for (stacks, cgroups) in tables {
            parts.push((
                0..0,
                BlockMeta {
                    seq: Some(self.planned),
                    events_total: Some(self.events),
                    lost_total: Some(self.lost),
                    stacks: (!stacks.is_empty()).then_some(stacks),
                    cgroups: (!cgroups.is_empty()).then_some(cgroups),
                    ..Default::default()
                },
            ));
            self.planned += 1;
        }
        let (mut first_stacks, mut first_cgroups) = match last_tables {
            Some((s, c)) => ((!s.is_empty()).then_some(s), (!c.is_empty()).then_some(c)),
            None => (None, None),
        };
        let mut start = 0;
        loop {
            let mut len = (n - start).min(self.max_block_events);
            while len > 1 && decoded_bytes(batch, start..start + len) > crate::MAX_BLOCK_BYTES {
                len /= 2;
            }
            self.events += len as u64;
            let meta = BlockMeta {
                seq: Some(self.planned),
                events_total: Some(self.events),
                lost_total: Some(self.lost),
                // New stack table entries go with the first block: no later than their events.
                stacks: first_stacks.take(),
                cgroups: first_cgroups.take(),
                ..Default::default()
            };
            parts.push((start..start + len, meta));
            self.planned += 1;
            start += len;
            if start >= n {
                return parts;
            }
        }
    }

    /// A new encoder for blocks like this writer's, and whether blocks carry zone maps (for
    /// encoding on other threads).
    pub(crate) fn new_encoder(&self) -> Result<(Encoder, bool), TraceError> {
        let e = Encoder::new(self.compression).map_err(|detail| TraceError::Encode {
            path: self.path.clone(),
            block: self.seq,
            detail,
        })?;
        Ok((e, self.zone_maps))
    }

    /// The writer's encoder, whether blocks carry zone maps, and the file (to encode blocks
    /// planned with [`TraceWriter::plan`] for [`TraceWriter::write_encoded`]).
    pub(crate) fn encoder(&mut self) -> (&mut Encoder, bool, &Path) {
        (&mut self.encoder, self.zone_maps, &self.path)
    }

    fn encode(
        &mut self,
        batch: &EventBatch,
        range: std::ops::Range<usize>,
        meta: BlockMeta,
        out: &mut EncodedBlock,
    ) -> Result<(), TraceError> {
        let block = meta.seq.unwrap_or(self.seq);
        self.encoder.encode(batch, range, meta, self.zone_maps, out).map_err(|detail| TraceError::Encode {
            path: self.path.clone(),
            block,
            detail,
        })
    }

    /// Make sure everything written is in the kernel's hands. Blocks are handed over as they
    /// are written, so this only reports an earlier failure; it does not `fsync`.
    pub fn flush(&mut self) -> Result<(), TraceError> {
        self.check_failed()?;
        self.out.file().flush().map_err(|e| self.fail("flushing", e))
    }

    /// Write the summary and the end-of-stream marker, `fsync` (unless disabled), and close.
    ///
    /// `events`, `blocks` and `bytes` of the returned summary are the writer's own counts
    /// (the caller's values are ignored); `lost` is the larger of the caller's value and
    /// the last `lost_total`; `duration_ns` is the time since [`TraceWriter::create`] when
    /// the caller passes 0; `end_ns` is the caller's.
    pub fn finish(mut self, summary: Summary) -> Result<Summary, TraceError> {
        self.check_failed()?;
        let summary = Summary {
            events: self.events,
            lost: summary.lost.max(self.lost),
            blocks: self.seq,
            bytes: self.offset,
            duration_ns: if summary.duration_ns == 0 {
                self.started.elapsed().as_nanos() as u64
            } else {
                summary.duration_ns
            },
            end_ns: summary.end_ns,
            block_completions_without_issue: summary.block_completions_without_issue,
            wakeups_unseen: summary.wakeups_unseen,
            program_runs_skipped: summary.program_runs_skipped,
            truncated: {
                let mut t = summary.truncated;
                t.add(&self.truncated);
                t
            },
            stacks_missing: summary.stacks_missing,
        };
        let json = serde_json::to_string(&summary).map_err(|e| TraceError::Encode {
            path: self.path.clone(),
            block: self.seq,
            detail: format!("summary to JSON: {e}"),
        })?;
        self.planned += 1;
        let meta = BlockMeta {
            seq: Some(self.seq),
            events_total: Some(self.events),
            lost_total: Some(summary.lost),
            summary: Some(json),
            ..Default::default()
        };
        let mut block = std::mem::take(&mut self.block);
        self.encode(&EventBatch::default(), 0..0, meta, &mut block)?;
        self.write_encoded(&block)?;
        let mut eos = [0u8; 8];
        eos[..4].copy_from_slice(&CONTINUATION);
        self.out.write_all(&eos).map_err(|e| self.fail("writing the end-of-stream marker", e))?;
        if self.sync_on_finish && self.out.is_file() {
            self.out.file().sync_all().map_err(|e| self.fail("syncing the trace file to disk", e))?;
        }
        self.out.commit()?;
        Ok(summary)
    }

    fn check_failed(&self) -> Result<(), TraceError> {
        match &self.failed {
            Some(first) => {
                Err(TraceError::WriterFailed { path: self.path.clone(), first: first.clone(), blocks: self.seq })
            }
            None => Ok(()),
        }
    }

    /// Record a write failure: cut the file back to the last complete block so that
    /// it stays readable, and refuse further writes.
    fn fail(&mut self, op: &str, source: std::io::Error) -> TraceError {
        let op = format!("{op} at byte {}", self.offset);
        self.failed = Some(format!("{op}: {source}"));
        if self.out.is_file() {
            let offset = self.offset;
            let _ = self.out.file().set_len(offset);
        }
        TraceError::Io { path: self.path.clone(), op, source }
    }

    /// Write an encoded block (the next one: blocks are numbered in the order they are planned).
    pub(crate) fn write_encoded(&mut self, block: &EncodedBlock) -> Result<(), TraceError> {
        self.write_parts(&block.frame, &block.body)
    }

    fn write_parts(&mut self, frame: &[u8], body: &[u8]) -> Result<(), TraceError> {
        self.check_failed()?;
        let f = &mut self.out;
        let res = f.write_all(frame).and_then(|()| f.write_all(body));
        if let Err(e) = res {
            return Err(self.fail(&format!("writing block {}", self.seq), e));
        }
        self.offset += (frame.len() + body.len()) as u64;
        self.seq += 1;
        Ok(())
    }

    /// Write a block sealed earlier ([`SealedBlock`]) as the next block: its body as it is,
    /// its metadata given this file's block number and running counts, with `lost_total` (the
    /// events lost so far, as this file counts them) and `stacks_before` (stack table entries,
    /// one JSON object per line, that its events use but earlier blocks of the recording
    /// brought: a file that starts mid-recording needs them) put before its own entries.
    ///
    /// The block is in the kernel's hands when this returns.
    pub fn write_sealed(&mut self, b: &SealedBlock, lost_total: u64, stacks_before: &str) -> Result<(), TraceError> {
        self.check_failed()?;
        self.lost = self.lost.max(lost_total);
        let (seq, events, lost) = (self.planned, self.events + b.events() as u64, self.lost);
        let mut block = std::mem::take(&mut self.block);
        let edit = |m: &mut BlockMeta| {
            m.seq = Some(seq);
            m.events_total = Some(events);
            m.lost_total = Some(lost);
            if !stacks_before.is_empty() {
                let mut s = stacks_before.to_string();
                if !s.ends_with('\n') {
                    s.push('\n');
                }
                s.push_str(m.stacks.as_deref().unwrap_or(""));
                m.stacks = Some(s);
            }
        };
        let r = self
            .encoder
            .reframe(&b.frame, b.body.len(), edit, &mut block.frame)
            .map_err(|detail| TraceError::Encode { path: self.path.clone(), block: seq, detail });
        let r = r.and_then(|()| {
            self.planned += 1;
            self.events = events;
            self.write_parts(&block.frame, &b.body)
        });
        self.block = block;
        r
    }
}

/// What events `r` of `b` take decoded: [`decoded_row_bytes`] per event, the final string
/// offsets, and the strings.
pub(crate) fn decoded_bytes(b: &EventBatch, r: std::ops::Range<usize>) -> u64 {
    let strings: u64 = [&b.comm, &b.path, &b.path2, &b.fault_path]
        .iter()
        .map(|c| match (c.offsets.get(r.start), c.offsets.get(r.end)) {
            (Some(&a), Some(&z)) => u64::from(z.saturating_sub(a)) + 4,
            _ => 4,
        })
        .sum();
    r.len() as u64 * decoded_row_bytes() + strings
}

impl std::fmt::Debug for TraceWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceWriter")
            .field("path", &self.path)
            .field("blocks", &self.seq)
            .field("events", &self.events)
            .field("bytes", &self.offset)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TraceReader;

    /// Blocks are split so that each decodes to at most MAX_BLOCK_BYTES (here: strings of
    /// 100 MB per event, never touched).
    #[test]
    fn plan_splits_blocks_beyond_the_decoded_bound() {
        let dir = std::env::temp_dir().join(format!("latscope-trace-plan-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut w = TraceWriter::create(dir.join("p.lst"), &TraceHeader::default()).unwrap();
        let mut b = EventBatch::with_capacity(5);
        for _ in 0..5 {
            b.push(&latscope_event::Event::default());
        }
        b.path.offsets = (0..=5u32).map(|i| i * 100_000_000).collect();
        b.path.data = vec![0; 500_000_000];
        let parts = w.plan(&b, 0);
        let ranges: Vec<_> = parts.iter().map(|(r, _)| r.clone()).collect();
        assert!(ranges.len() >= 3, "{ranges:?}");
        assert!(ranges.iter().all(|r| decoded_bytes(&b, r.clone()) <= crate::MAX_BLOCK_BYTES), "{ranges:?}");
        assert!(ranges.windows(2).all(|w| w[0].end == w[1].start) && ranges[0].start == 0, "{ranges:?}");
        assert_eq!(ranges.last().unwrap().end, 5);
        let seqs: Vec<u64> = parts.iter().map(|(_, m)| m.seq.unwrap()).collect();
        assert_eq!(seqs, (0..ranges.len() as u64).collect::<Vec<_>>());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A write failure (here: the file handle replaced by a read-only one) stops the writer;
    /// the file keeps the blocks written before and stays readable.
    #[test]
    fn write_failure_stops_the_writer_and_keeps_the_file_readable() {
        let dir = std::env::temp_dir().join(format!("latscope-trace-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("fail.lst");
        let mut b = EventBatch::with_capacity(1);
        b.push(&latscope_event::Event { ts: 1, comm: "x".into(), ..Default::default() });
        let mut w = TraceWriter::create(&path, &TraceHeader::default()).unwrap();
        w.write_batch(&b, 0).unwrap();
        *w.out.file() = std::fs::File::open(&path).unwrap();
        let e = w.write_batch(&b, 0).unwrap_err();
        assert!(matches!(e, TraceError::Io { .. }), "{e}");
        assert!(e.to_string().contains("writing block 1 at byte"), "{e}");
        let e = w.write_batch(&b, 0).unwrap_err();
        assert!(matches!(e, TraceError::WriterFailed { blocks: 1, .. }), "{e}");
        assert!(e.to_string().contains("can be read up to there"), "{e}");
        assert!(w.flush().is_err());
        assert!(w.finish(Summary::default()).is_err());
        let mut r = TraceReader::open(&path).unwrap();
        assert_eq!(r.read_all().unwrap(), b);
        assert!(r.summary().is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
