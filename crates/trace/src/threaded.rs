//! A trace writer that encodes and compresses on its own thread.

use std::collections::VecDeque;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender, TryRecvError, TrySendError};
use std::thread::JoinHandle;

use latscope_event::{EventBatch, TraceHeader};

use crate::encode::{validate_batch, EncodedBlock, Encoder};
use crate::meta::BlockMeta;
use crate::{Summary, TraceError, TraceWriter, WriterOptions, MAX_ENCODE_THREADS};

// Batches are the common message; the few hundred bytes per queue slot do not matter.
#[allow(clippy::large_enum_variant)]
enum Cmd {
    Batch(EventBatch, u64),
    Flush(SyncSender<Result<(), TraceError>>),
    Commit(SyncSender<Result<Option<PathBuf>, TraceError>>),
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
/// With more than one encoding thread ([`WriterOptions::threads`]; by default one per CPU the
/// process may run on, so none on a single CPU) consecutive batches are encoded and
/// compressed at the same time, by the writer thread and helper threads, and written in order.
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
        let threads = match opts.threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()).min(MAX_ENCODE_THREADS),
            n => n,
        };
        let io = |e| TraceError::Io { path: path.clone(), op: "starting the writer thread".into(), source: e };
        let mut helpers = Vec::new();
        for i in 1..threads {
            helpers.push(Helper::start(&writer, i).map_err(|e| match e {
                HelperError::Io(e) => io(e),
                HelperError::Trace(e) => e,
            })?);
        }
        let (tx, rx) = mpsc::sync_channel::<Cmd>(depth);
        let (spare_tx, spare) = mpsc::sync_channel::<EventBatch>(depth + threads);
        let handle = std::thread::Builder::new()
            .name("latscope-trace".into())
            .spawn(move || Pipeline::new(writer, helpers, spare_tx).run(rx))
            .map_err(io)?;
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

    /// Put a trace created with [`WriterOptions::staged`] at its path; see [`TraceWriter::commit`].
    pub fn commit(&mut self) -> Result<Option<PathBuf>, TraceError> {
        let tx = self.sender()?;
        let (rtx, rrx) = mpsc::sync_channel(1);
        if tx.send(Cmd::Commit(rtx)).is_err() {
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

/// A batch to encode: its blocks' event ranges and metadata, and, once encoded, the blocks.
struct Job {
    batch: EventBatch,
    parts: Vec<(Range<usize>, BlockMeta)>,
    blocks: Vec<EncodedBlock>,
    error: Option<TraceError>,
}

impl Job {
    fn encode(&mut self, enc: &mut Encoder, zone_maps: bool, path: &Path) {
        self.blocks.resize_with(self.parts.len(), EncodedBlock::default);
        for ((range, meta), out) in self.parts.iter().zip(&mut self.blocks) {
            let block = meta.seq.unwrap_or(0);
            if let Err(detail) = enc.encode(&self.batch, range.clone(), meta.clone(), zone_maps, out) {
                self.error = Some(TraceError::Encode { path: path.to_path_buf(), block, detail });
                return;
            }
        }
    }
}

/// A thread that encodes the jobs it is sent, in order, and sends them back.
struct Helper {
    jobs: Sender<Job>,
    done: Receiver<Job>,
    handle: JoinHandle<()>,
}

enum HelperError {
    Io(std::io::Error),
    Trace(TraceError),
}

impl Helper {
    fn start(w: &TraceWriter, i: usize) -> Result<Helper, HelperError> {
        let (mut enc, zone_maps) = w.new_encoder().map_err(HelperError::Trace)?;
        let path = w.path().to_path_buf();
        let (jobs, rx) = mpsc::channel::<Job>();
        let (tx, done) = mpsc::channel::<Job>();
        let handle = std::thread::Builder::new()
            .name(format!("latscope-enc{i}"))
            .spawn(move || {
                while let Ok(mut job) = rx.recv() {
                    job.encode(&mut enc, zone_maps, &path);
                    if tx.send(job).is_err() {
                        return;
                    }
                }
            })
            .map_err(HelperError::Io)?;
        Ok(Helper { jobs, done, handle })
    }
}

/// A job being encoded, oldest first.
enum InFlight {
    /// By helper `i`.
    Helper(usize),
    /// Encoded by the writer thread, waiting for older jobs to be written.
    Done(Box<Job>),
}

/// The writer thread: takes batches in order, has them encoded (by itself and by the helpers,
/// in turn), and writes the blocks in order.
struct Pipeline {
    w: TraceWriter,
    helpers: Vec<Helper>,
    inflight: VecDeque<InFlight>,
    /// Jobs started (chooses whose turn it is).
    started: usize,
    spare: SyncSender<EventBatch>,
    spare_blocks: Vec<Vec<EncodedBlock>>,
}

impl Pipeline {
    fn new(w: TraceWriter, helpers: Vec<Helper>, spare: SyncSender<EventBatch>) -> Pipeline {
        Pipeline { w, helpers, inflight: VecDeque::new(), started: 0, spare, spare_blocks: Vec::new() }
    }

    fn run(mut self, rx: Receiver<Cmd>) -> Result<Option<Summary>, TraceError> {
        let r = self.serve(rx);
        // Stop the helpers (their job channels close).
        for h in std::mem::take(&mut self.helpers) {
            drop(h.jobs);
            let _ = h.handle.join();
        }
        match r? {
            Some(s) => self.w.finish(s).map(Some),
            None => Ok(None),
        }
    }

    /// Serve commands until the caller is gone (`None`) or asks to finish with a summary
    /// (`Some`, every block written).
    fn serve(&mut self, rx: Receiver<Cmd>) -> Result<Option<Summary>, TraceError> {
        loop {
            self.write_ready()?;
            // Work in flight: take the next command if there is one, otherwise finish the oldest
            // job (so that nothing encoded waits for the next batch to be written).
            let cmd = if self.inflight.is_empty() {
                rx.recv().ok()
            } else {
                match rx.try_recv() {
                    Ok(c) => Some(c),
                    Err(TryRecvError::Empty) => {
                        self.write_oldest()?;
                        continue;
                    }
                    Err(TryRecvError::Disconnected) => None,
                }
            };
            match cmd {
                None => {
                    self.drain()?;
                    return Ok(None);
                }
                Some(Cmd::Batch(b, lost)) => self.start(b, lost)?,
                Some(Cmd::Flush(reply)) => {
                    let r = self.drain().and_then(|()| self.w.flush());
                    let failed = r.is_err();
                    let _ = reply.send(r);
                    if failed {
                        self.w.flush()?;
                    }
                }
                Some(Cmd::Commit(reply)) => {
                    let _ = reply.send(self.w.commit());
                }
                Some(Cmd::Finish(s)) => {
                    self.drain()?;
                    return Ok(Some(s));
                }
            }
        }
    }

    /// Plan the blocks of `b` and encode them: on a helper when it is one's turn, otherwise here.
    fn start(&mut self, b: EventBatch, lost: u64) -> Result<(), TraceError> {
        if let Err(detail) = validate_batch(&b) {
            // The batches before it are written.
            self.drain()?;
            return Err(TraceError::InvalidBatch { path: self.w.path().to_path_buf(), block: self.w.blocks(), detail });
        }
        let parts = self.w.plan(&b, lost);
        let blocks = self.spare_blocks.pop().unwrap_or_default();
        let mut job = Job { batch: b, parts, blocks, error: None };
        let turn = self.started % (self.helpers.len() + 1);
        self.started += 1;
        if turn < self.helpers.len() {
            if let Err(mpsc::SendError(j)) = self.helpers[turn].jobs.send(job) {
                job = j;
            } else {
                self.inflight.push_back(InFlight::Helper(turn));
                return self.write_while_full();
            }
        }
        let (enc, zone_maps, path) = self.w.encoder();
        job.encode(enc, zone_maps, path);
        self.inflight.push_back(InFlight::Done(Box::new(job)));
        self.write_while_full()
    }

    /// Keep at most one job per encoding thread in flight.
    fn write_while_full(&mut self) -> Result<(), TraceError> {
        while self.inflight.len() > self.helpers.len() {
            self.write_oldest()?;
        }
        Ok(())
    }

    /// Write the oldest jobs that are encoded, without waiting.
    fn write_ready(&mut self) -> Result<(), TraceError> {
        loop {
            let job = match self.inflight.front() {
                Some(InFlight::Done(_)) => match self.inflight.pop_front() {
                    Some(InFlight::Done(j)) => *j,
                    _ => unreachable!("the front was a finished job"),
                },
                Some(&InFlight::Helper(h)) => match self.helpers[h].done.try_recv() {
                    Ok(j) => {
                        self.inflight.pop_front();
                        j
                    }
                    Err(_) => return Ok(()),
                },
                None => return Ok(()),
            };
            self.write(job)?;
        }
    }

    /// Wait for the oldest job and write it.
    fn write_oldest(&mut self) -> Result<(), TraceError> {
        let job = match self.inflight.pop_front() {
            Some(InFlight::Done(j)) => *j,
            Some(InFlight::Helper(h)) => self.helpers[h].done.recv().map_err(|_| TraceError::WriterFailed {
                path: self.w.path().to_path_buf(),
                first: "an encoding thread stopped".into(),
                blocks: self.w.blocks(),
            })?,
            None => return Ok(()),
        };
        self.write(job)
    }

    fn drain(&mut self) -> Result<(), TraceError> {
        while !self.inflight.is_empty() {
            self.write_oldest()?;
        }
        Ok(())
    }

    fn write(&mut self, mut job: Job) -> Result<(), TraceError> {
        if let Some(e) = job.error.take() {
            return Err(e);
        }
        for b in &job.blocks[..job.parts.len()] {
            self.w.write_encoded(b)?;
        }
        job.batch.clear();
        let _ = self.spare.try_send(job.batch);
        self.spare_blocks.push(job.blocks);
        Ok(())
    }
}
