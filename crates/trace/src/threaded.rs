//! A trace writer that encodes and compresses on its own thread.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::thread::JoinHandle;

use latscope_event::{EventBatch, TraceHeader};

use crate::{Summary, TraceError, TraceWriter, WriterOptions};

// Batches are the common message; the few hundred bytes per queue slot do not matter.
#[allow(clippy::large_enum_variant)]
enum Cmd {
    Batch(EventBatch, u64),
    Flush(SyncSender<Result<(), TraceError>>),
    Finish(Summary),
}

/// A [`TraceWriter`] running on a background thread behind a bounded queue, so that the
/// caller (the ring-buffer reader) does not wait for compression.
///
/// Batches are moved into the queue; the writer thread returns them, cleared, for reuse
/// through [`ThreadedTraceWriter::spare_batch`], so a steady recording allocates nothing.
/// When the queue is full, [`ThreadedTraceWriter::write_batch`] waits for room and
/// [`ThreadedTraceWriter::try_write_batch`] hands the batch back.
///
/// An error on the writer thread stops it; the next call reports that error. Dropping
/// the writer without [`ThreadedTraceWriter::finish`] waits for the queued blocks to be
/// written and leaves the file without summary.
pub struct ThreadedTraceWriter {
    path: PathBuf,
    tx: Option<SyncSender<Cmd>>,
    spare: Receiver<EventBatch>,
    handle: Option<JoinHandle<Result<Option<Summary>, TraceError>>>,
}

/// Default queue length of [`ThreadedTraceWriter::create`], in batches.
pub const DEFAULT_QUEUE_BATCHES: usize = 8;

impl ThreadedTraceWriter {
    /// Create the file and write the header (on the caller's thread, so that errors such as a
    /// missing directory are reported here), then start the writer thread with a queue of
    /// [`DEFAULT_QUEUE_BATCHES`] batches and default [`WriterOptions`].
    pub fn create(path: impl AsRef<Path>, header: &TraceHeader) -> Result<ThreadedTraceWriter, TraceError> {
        Self::create_with(path, header, WriterOptions::default(), DEFAULT_QUEUE_BATCHES)
    }

    /// Like [`ThreadedTraceWriter::create`], with options and a queue of `queue_batches` batches
    /// (at least 1).
    pub fn create_with(
        path: impl AsRef<Path>,
        header: &TraceHeader,
        opts: WriterOptions,
        queue_batches: usize,
    ) -> Result<ThreadedTraceWriter, TraceError> {
        let writer = TraceWriter::create_with(path.as_ref(), header, opts)?;
        let path = writer.path().to_path_buf();
        let depth = queue_batches.max(1);
        let (tx, rx) = mpsc::sync_channel::<Cmd>(depth);
        let (spare_tx, spare) = mpsc::sync_channel::<EventBatch>(depth + 1);
        let handle = std::thread::Builder::new()
            .name("latscope-trace".into())
            .spawn(move || run(writer, rx, spare_tx))
            .map_err(|e| TraceError::Io { path: path.clone(), op: "starting the writer thread".into(), source: e })?;
        Ok(ThreadedTraceWriter { path, tx: Some(tx), spare, handle: Some(handle) })
    }

    /// The file being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A cleared batch to fill, recycled from written blocks when there is one.
    pub fn spare_batch(&self) -> EventBatch {
        self.spare.try_recv().unwrap_or_else(|_| EventBatch::with_capacity(0))
    }

    /// Queue `batch` to be written as one block (see [`TraceWriter::write_batch`]); waits while
    /// the queue is full.
    pub fn write_batch(&mut self, batch: EventBatch, lost_total: u64) -> Result<(), TraceError> {
        let tx = self.sender()?;
        if tx.send(Cmd::Batch(batch, lost_total)).is_err() {
            return Err(self.thread_error());
        }
        Ok(())
    }

    /// Queue `batch` unless the queue is full: then it is handed back as `Ok(Some(batch))`
    /// (the caller can keep filling it, or drop it and count the events as lost).
    pub fn try_write_batch(&mut self, batch: EventBatch, lost_total: u64) -> Result<Option<EventBatch>, TraceError> {
        let tx = self.sender()?;
        match tx.try_send(Cmd::Batch(batch, lost_total)) {
            Ok(()) => Ok(None),
            Err(TrySendError::Full(Cmd::Batch(b, _))) => Ok(Some(b)),
            Err(_) => Err(self.thread_error()),
        }
    }

    /// Wait until every queued batch is written.
    pub fn flush(&mut self) -> Result<(), TraceError> {
        let tx = self.sender()?;
        let (rtx, rrx) = mpsc::sync_channel(1);
        if tx.send(Cmd::Flush(rtx)).is_err() {
            return Err(self.thread_error());
        }
        match rrx.recv() {
            Ok(r) => r,
            Err(_) => Err(self.thread_error()),
        }
    }

    /// Write the queued batches and the summary, and close the file (see [`TraceWriter::finish`]).
    pub fn finish(mut self, summary: Summary) -> Result<Summary, TraceError> {
        let tx = self.sender()?;
        if tx.send(Cmd::Finish(summary)).is_err() {
            return Err(self.thread_error());
        }
        self.tx = None;
        match self.join() {
            Ok(Some(s)) => Ok(s),
            Ok(None) => Err(self.stopped("the writer thread ended without writing the summary")),
            Err(e) => Err(e),
        }
    }

    fn sender(&self) -> Result<SyncSender<Cmd>, TraceError> {
        self.tx.clone().ok_or_else(|| self.stopped("the writer was already closed"))
    }

    fn stopped(&self, why: &str) -> TraceError {
        TraceError::WriterFailed { path: self.path.clone(), first: why.to_string(), blocks: 0 }
    }

    fn join(&mut self) -> Result<Option<Summary>, TraceError> {
        match self.handle.take() {
            Some(h) => h.join().unwrap_or_else(|_| Err(self.stopped("the writer thread panicked"))),
            None => Err(self.stopped("the writer thread already stopped")),
        }
    }

    /// The error that stopped the writer thread.
    fn thread_error(&mut self) -> TraceError {
        self.tx = None;
        match self.join() {
            Err(e) => e,
            Ok(_) => self.stopped("the writer thread stopped"),
        }
    }
}

impl Drop for ThreadedTraceWriter {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl std::fmt::Debug for ThreadedTraceWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadedTraceWriter").field("path", &self.path).finish_non_exhaustive()
    }
}

fn run(mut w: TraceWriter, rx: Receiver<Cmd>, spare: SyncSender<EventBatch>) -> Result<Option<Summary>, TraceError> {
    while let Ok(cmd) = rx.recv() {
        match cmd {
            Cmd::Batch(mut b, lost) => {
                w.write_batch(&b, lost)?;
                b.clear();
                let _ = spare.try_send(b);
            }
            Cmd::Flush(reply) => {
                let r = w.flush();
                let failed = r.is_err();
                let _ = reply.send(r);
                if failed {
                    return w.flush().map(|()| None);
                }
            }
            Cmd::Finish(s) => return w.finish(s).map(Some),
        }
    }
    Ok(None)
}
