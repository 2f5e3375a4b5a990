//! Captures that run for days: `record -w DIR --rotate 1GiB|10m --keep N` (sysdig's
//! `-C`/`-G`/`-W`). Each file is a complete trace (header, summary; the cgroups, processes and
//! stack table entries learned in earlier files), named by the time of its first event.

use crate::files::{self, ROTATE_PREFIX};
use crate::ring::Amount;
use crate::tables::Tables;
use crate::worker::{Consumer, Worker};
use latscope_event::{EventBatch, TraceHeader};
use latscope_live::BlockSink;
use latscope_trace::{Existing, SealedBlock, Summary, TraceError, TraceWriter, WriterOptions};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// When a file is closed and the next begun.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RotateEvery {
    /// Once it holds this many bytes.
    pub bytes: Option<u64>,
    /// Once it has been written to this long.
    pub time: Option<Duration>,
}

/// The smallest rotation size and time: a file holds a few blocks at least.
pub const MIN_ROTATE_BYTES: u64 = 1 << 20;
/// See [`MIN_ROTATE_BYTES`].
pub const MIN_ROTATE_TIME: Duration = Duration::from_secs(1);

impl RotateEvery {
    /// `1GiB`, `10m` (minutes), or both (`10m,1GiB`: whichever comes first).
    pub fn parse(s: &str) -> Result<RotateEvery, String> {
        let mut r = RotateEvery { bytes: None, time: None };
        for part in s.split(',').map(str::trim) {
            match crate::ring::time_or_size(part)? {
                Amount::Time(ns) => {
                    let d = Duration::from_nanos(ns);
                    if d < MIN_ROTATE_TIME {
                        return Err(format!("--rotate {part}: a file spans at least 1s"));
                    }
                    if r.time.replace(d).is_some() {
                        return Err(format!("--rotate {s}: two times"));
                    }
                }
                Amount::Size(b) => {
                    if b < MIN_ROTATE_BYTES {
                        return Err(format!("--rotate {part}: a file holds at least 1MiB"));
                    }
                    if r.bytes.replace(b).is_some() {
                        return Err(format!("--rotate {s}: two sizes"));
                    }
                }
            }
        }
        Ok(r)
    }
}

/// A file closed, or an old one deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RotateEvent {
    /// A file is complete.
    Closed {
        /// The file.
        path: PathBuf,
        /// Events in it.
        events: u64,
        /// Its size.
        bytes: u64,
    },
    /// An old file was deleted (`--keep`).
    Deleted {
        /// The file.
        path: PathBuf,
    },
}

/// Rotating trace files, a [`BlockSink`] for a [`latscope_live::Recorder`].
pub struct Rotator {
    worker: Option<Worker>,
}

impl Rotator {
    /// Write the recording with `header` into `dir` (which must exist), a new file every
    /// `every`, keeping the newest `keep`; `on_event` hears of each file closed or deleted.
    pub fn start(
        header: &TraceHeader,
        dir: PathBuf,
        every: RotateEvery,
        keep: Option<usize>,
        on_event: impl FnMut(&RotateEvent) + Send + 'static,
    ) -> Result<Rotator, String> {
        match std::fs::metadata(&dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(format!("{} is not a directory: --rotate writes its files into a directory", dir.display()))
            }
            Err(e) => return Err(format!("{}: {e} (create the directory first)", dir.display())),
        }
        if keep == Some(0) {
            return Err("--keep 0 would delete every file: keep at least 1".into());
        }
        let c = Rotating {
            dir: dir.clone(),
            every,
            keep,
            start: header.clone(),
            tables: Tables::new(header),
            stacks: String::new(),
            open: None,
            events: 0,
            last_lost: 0,
            last_end_ns: 0,
            on_event: Box::new(on_event),
        };
        let worker = Worker::start(c, dir, latscope_live::WRITER_QUEUE_BLOCKS, latscope_live::WRITER_QUEUE_BLOCKS + 1)
            .map_err(|e| e.to_string())?;
        Ok(Rotator { worker: Some(worker) })
    }

    fn worker(&mut self) -> Result<&mut Worker, TraceError> {
        self.worker.as_mut().ok_or_else(|| TraceError::WriterFailed {
            path: PathBuf::from("(rotation)"),
            first: "finished".into(),
            blocks: 0,
        })
    }
}

impl BlockSink for Rotator {
    fn spare_batch(&self) -> EventBatch {
        self.worker.as_ref().map_or_else(|| EventBatch::with_capacity(0), |w| w.spare_batch())
    }
    fn try_write_batch(&mut self, batch: EventBatch, lost_total: u64) -> Result<Option<EventBatch>, TraceError> {
        self.worker()?.try_write_batch(batch, lost_total)
    }
    fn write_batch(&mut self, batch: EventBatch, lost_total: u64) -> Result<(), TraceError> {
        self.worker()?.write_batch(batch, lost_total)
    }
    fn finish(mut self, summary: Summary) -> Result<Summary, TraceError> {
        match self.worker.take() {
            Some(w) => w.finish(summary),
            None => Ok(summary),
        }
    }
}

struct Open {
    writer: TraceWriter,
    path: PathBuf,
    opened: Instant,
    base_lost: u64,
    last_lost: u64,
    first_ns: u64,
    last_end_ns: u64,
    /// Stack table entries of earlier files, for this file's first block of syscalls.
    carry: String,
}

struct Rotating {
    dir: PathBuf,
    every: RotateEvery,
    keep: Option<usize>,
    start: TraceHeader,
    tables: Tables,
    /// Every stack table entry so far.
    stacks: String,
    open: Option<Open>,
    events: u64,
    /// Losses counted when the last block was sealed.
    last_lost: u64,
    /// Where the last closed file ended: a later file's start when its first block holds no
    /// event times.
    last_end_ns: u64,
    on_event: Box<dyn FnMut(&RotateEvent) + Send>,
}

impl Rotating {
    fn begin(&mut self, b: &SealedBlock, lost_before: u64) -> Result<(), TraceError> {
        let fallback = if self.events == 0 { self.start.start_ns } else { self.last_end_ns };
        let first_ns = b.ts_range().map_or(fallback, |r| r.0);
        // The first file is the recording's start as it is; later ones start mid-recording.
        let header = if self.events == 0 { self.start.clone() } else { self.tables.header_at(first_ns, None) };
        // Named by the time it is begun: names sort as the files follow one another (a file's
        // first block may hold a call that began before the last file's end).
        let path = files::new_name(&self.dir, ROTATE_PREFIX, wall_now(), "");
        let opts = WriterOptions { existing: Existing::Refuse, threads: 1, ..Default::default() };
        let writer = TraceWriter::create_with(&path, &header, opts)?;
        self.open = Some(Open {
            writer,
            path,
            opened: Instant::now(),
            base_lost: lost_before,
            last_lost: lost_before,
            first_ns,
            last_end_ns: first_ns,
            carry: self.stacks.clone(),
        });
        Ok(())
    }

    fn close(&mut self, summary: Summary) -> Result<(), TraceError> {
        let Some(o) = self.open.take() else { return Ok(()) };
        self.last_end_ns = self.last_end_ns.max(o.last_end_ns);
        let s = Summary {
            lost: o.last_lost.saturating_sub(o.base_lost).max(summary.lost.saturating_sub(o.base_lost)),
            duration_ns: o.last_end_ns.saturating_sub(o.first_ns),
            end_ns: o.last_end_ns,
            block_completions_without_issue: summary.block_completions_without_issue,
            wakeups_unseen: summary.wakeups_unseen,
            program_runs_skipped: summary.program_runs_skipped,
            ..Default::default()
        };
        let done = o.writer.finish(s)?;
        let bytes = std::fs::metadata(&o.path).map_or(done.bytes, |m| m.len());
        (self.on_event)(&RotateEvent::Closed { path: o.path, events: done.events, bytes });
        if let Some(keep) = self.keep {
            let have = files::list(&self.dir, ROTATE_PREFIX);
            let excess = have.len().saturating_sub(keep);
            for old in have.into_iter().take(excess) {
                if std::fs::remove_file(&old.path).is_ok() {
                    (self.on_event)(&RotateEvent::Deleted { path: old.path });
                }
            }
        }
        Ok(())
    }

    fn due(&self) -> bool {
        let Some(o) = &self.open else { return false };
        self.every.bytes.is_some_and(|b| o.writer.bytes() >= b)
            || self.every.time.is_some_and(|t| o.opened.elapsed() >= t)
    }
}

impl Consumer for Rotating {
    fn take(&mut self, batch: &EventBatch, blocks: Vec<Arc<SealedBlock>>, lost_total: u64) -> Result<(), TraceError> {
        self.tables.observe(batch);
        for b in blocks {
            if self.open.is_none() {
                self.begin(&b, self.last_lost)?;
            }
            let o = self.open.as_mut().expect("a file is open");
            let carry = if b.kinds()[0] > 0 { std::mem::take(&mut o.carry) } else { String::new() };
            o.writer.write_sealed(&b, b.lost_total().saturating_sub(o.base_lost), &carry)?;
            o.last_lost = b.lost_total();
            self.last_lost = b.lost_total();
            o.last_end_ns = o.last_end_ns.max(b.end_max().unwrap_or(0));
            self.events += b.events() as u64;
            self.stacks.push_str(b.stacks());
        }
        if self.due() {
            self.close(Summary { lost: lost_total, ..Default::default() })?;
        }
        Ok(())
    }

    fn finish(&mut self, summary: Summary) -> Result<Summary, TraceError> {
        if self.open.is_none() && self.events == 0 {
            // Nothing recorded: one empty file, so the capture is not silently absent.
            let header = self.start.clone();
            let path = files::new_name(&self.dir, ROTATE_PREFIX, wall_now(), "");
            let opts = WriterOptions { existing: Existing::Refuse, threads: 1, ..Default::default() };
            let w = TraceWriter::create_with(&path, &header, opts)?;
            w.finish(summary)?;
            return Ok(Summary { events: 0, ..summary });
        }
        self.close(summary)?;
        Ok(Summary { events: self.events, ..summary })
    }
}

/// Wall-clock ns since the epoch, now.
fn wall_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i64)
}
