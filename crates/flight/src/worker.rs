//! The thread behind a recorder's sink: takes the recorder's batches through a bounded queue,
//! seals them into blocks and hands them to what keeps them (the ring, rotating files).

use latscope_event::EventBatch;
use latscope_trace::{BlockSealer, Compression, SealedBlock, Summary, TraceError};
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;

/// What the worker hands the sealed blocks to, on its thread.
pub(crate) trait Consumer: Send + 'static {
    /// One batch of the recorder (read only) and its blocks, sealed.
    fn take(&mut self, batch: &EventBatch, blocks: Vec<Arc<SealedBlock>>, lost_total: u64) -> Result<(), TraceError>;
    /// The recording ended; `summary` holds its counters.
    fn finish(&mut self, summary: Summary) -> Result<Summary, TraceError>;
}

// Batches are the common message.
#[allow(clippy::large_enum_variant)]
enum Cmd {
    Batch(EventBatch, u64),
    Finish(Summary),
}

/// The queue and the thread (see the module documentation).
pub(crate) struct Worker {
    name: PathBuf,
    tx: Option<SyncSender<Cmd>>,
    spare: Receiver<EventBatch>,
    handle: Option<JoinHandle<Result<Summary, TraceError>>>,
}

impl Worker {
    /// Start the thread, with a queue of `depth` batches and `spares` cleared ones kept for
    /// reuse; `name` says in messages what the blocks are for.
    pub(crate) fn start<C: Consumer>(
        mut c: C,
        name: PathBuf,
        depth: usize,
        spares: usize,
    ) -> Result<Worker, TraceError> {
        let mut sealer = BlockSealer::new(Compression::Zstd(1), &name)?;
        let (tx, rx) = mpsc::sync_channel::<Cmd>(depth.max(1));
        let (spare_tx, spare) = mpsc::sync_channel::<EventBatch>(spares.max(1));
        let io = |e| TraceError::Io { path: name.clone(), op: "starting its thread".into(), source: e };
        let handle = std::thread::Builder::new()
            .name("latscope-flight".into())
            .spawn(move || {
                while let Ok(cmd) = rx.recv() {
                    match cmd {
                        Cmd::Batch(mut b, lost) => {
                            let blocks = sealer.seal(&b, lost)?;
                            c.take(&b, blocks, lost)?;
                            b.clear();
                            let _ = spare_tx.try_send(b);
                        }
                        Cmd::Finish(s) => return c.finish(s),
                    }
                }
                c.finish(Summary::default())
            })
            .map_err(io)?;
        Ok(Worker { name, tx: Some(tx), spare, handle: Some(handle) })
    }

    pub(crate) fn spare_batch(&self) -> EventBatch {
        self.spare.try_recv().unwrap_or_else(|_| EventBatch::with_capacity(0))
    }

    pub(crate) fn try_write_batch(&mut self, batch: EventBatch, lost: u64) -> Result<Option<EventBatch>, TraceError> {
        let tx = self.sender()?;
        match tx.try_send(Cmd::Batch(batch, lost)) {
            Ok(()) => Ok(None),
            Err(TrySendError::Full(Cmd::Batch(b, _))) => Ok(Some(b)),
            Err(_) => Err(self.thread_error()),
        }
    }

    pub(crate) fn write_batch(&mut self, batch: EventBatch, lost: u64) -> Result<(), TraceError> {
        let tx = self.sender()?;
        if tx.send(Cmd::Batch(batch, lost)).is_err() {
            return Err(self.thread_error());
        }
        Ok(())
    }

    pub(crate) fn finish(mut self, summary: Summary) -> Result<Summary, TraceError> {
        let tx = self.sender()?;
        if tx.send(Cmd::Finish(summary)).is_err() {
            return Err(self.thread_error());
        }
        self.tx = None;
        self.join()
    }

    fn sender(&self) -> Result<SyncSender<Cmd>, TraceError> {
        self.tx.clone().ok_or_else(|| self.stopped("already closed"))
    }

    fn stopped(&self, why: &str) -> TraceError {
        TraceError::WriterFailed { path: self.name.clone(), first: why.to_string(), blocks: 0 }
    }

    fn join(&mut self) -> Result<Summary, TraceError> {
        match self.handle.take() {
            Some(h) => h.join().unwrap_or_else(|_| Err(self.stopped("its thread panicked"))),
            None => Err(self.stopped("its thread already stopped")),
        }
    }

    fn thread_error(&mut self) -> TraceError {
        self.tx = None;
        match self.join() {
            Err(e) => e,
            Ok(_) => self.stopped("its thread stopped"),
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
