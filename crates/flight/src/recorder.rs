//! The flight recorder: a [`BlockSink`] that keeps the recording in the ring, tests the
//! triggers, and has the dumper write windows.

use crate::dump::{DumpMsg, DumpOptions, Dumper, FlightEvent, FlightStats, Manual, Outcome, Shared, State};
use crate::ring::{Ring, RingSize};
use crate::tables::Tables;
use crate::trigger::{Trigger, TriggerKind};
use crate::watch::{Fire, Watch};
use crate::worker::{Consumer, Worker};
use latscope_event::{EventBatch, TraceHeader};
use latscope_live::BlockSink;
use latscope_trace::{SealedBlock, Summary, TraceError};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What a flight recorder keeps and when it writes.
#[derive(Debug, Clone)]
pub struct FlightOptions {
    /// The directory dumps are written to (it must exist).
    pub dir: PathBuf,
    /// How much the ring keeps.
    pub ring: RingSize,
    /// The window before a trigger (`None`: everything the ring holds).
    pub before: Option<Duration>,
    /// The window after it.
    pub after: Duration,
    /// The triggers (at least one; names unique).
    pub triggers: Vec<Trigger>,
    /// Minimum time between the starts of two dumps.
    pub min_gap: Duration,
    /// At most this many dumps in the directory; the oldest are deleted.
    pub keep: Option<usize>,
    /// At most this many bytes of dumps in the directory; the oldest are deleted to make room.
    pub disk_budget: Option<u64>,
    /// The recorder's flush interval: blocks are sealed at most this late after their events.
    pub flush_every: Duration,
}

/// Defaults of [`FlightOptions::new`].
pub const DEFAULT_AFTER: Duration = Duration::from_secs(5);
/// See [`DEFAULT_AFTER`].
pub const DEFAULT_MIN_GAP: Duration = Duration::from_secs(10);
/// See [`DEFAULT_AFTER`].
pub const DEFAULT_KEEP: usize = 20;

impl FlightOptions {
    /// Dumps into `dir` from a ring of `ring`, 5 s after each trigger, at most one dump every
    /// 10 s, 20 kept; no triggers yet.
    pub fn new(dir: impl Into<PathBuf>, ring: RingSize) -> FlightOptions {
        FlightOptions {
            dir: dir.into(),
            ring,
            before: None,
            after: DEFAULT_AFTER,
            triggers: Vec::new(),
            min_gap: DEFAULT_MIN_GAP,
            keep: Some(DEFAULT_KEEP),
            disk_budget: None,
            flush_every: Duration::from_secs(1),
        }
    }

    /// Whether the options make a working recorder; the error says what to change.
    pub fn check(&self) -> Result<(), String> {
        if self.triggers.is_empty() {
            return Err("a flight recorder needs at least one trigger (--trigger 'NAME: CONDITION'); \
                        without one it would never write anything"
                .into());
        }
        for (i, t) in self.triggers.iter().enumerate() {
            if self.triggers[..i].iter().any(|u| u.name == t.name) {
                return Err(format!("two triggers are named '{}': give each its own name ('NAME: CONDITION')", t.name));
            }
        }
        if let (Some(b), Some(span)) = (self.before, self.ring.span_ns) {
            if b.as_nanos() as u64 > span {
                return Err(format!(
                    "--before {} is longer than the ring keeps ({}): make the ring longer",
                    latscope_event::units::fmt_ns(b.as_nanos() as u64),
                    latscope_event::units::fmt_ns(span)
                ));
            }
        }
        if self.keep == Some(0) {
            return Err("--keep 0 would delete every dump: keep at least 1".into());
        }
        match std::fs::metadata(&self.dir) {
            Ok(m) if m.is_dir() => Ok(()),
            Ok(_) => Err(format!(
                "{} is not a directory: a flight recorder writes its dumps into a directory",
                self.dir.display()
            )),
            Err(e) => Err(format!("{}: {e} (create the directory for the dumps first)", self.dir.display())),
        }
    }
}

/// Why a flight recorder could not start.
#[derive(Debug, thiserror::Error)]
pub enum FlightError {
    /// The options do not make a working recorder.
    #[error("{0}")]
    Invalid(String),
    /// A thread or a signal handler could not be set up.
    #[error(transparent)]
    Trace(#[from] TraceError),
}

/// A handle on a running flight recorder: fire its triggers by name, read its counters (for
/// `latscope trigger`, the agent's metrics). Clone it freely.
#[derive(Clone)]
pub struct FlightHandle {
    name: String,
    triggers: Vec<String>,
    tx: Sender<DumpMsg>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for FlightHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlightHandle").field("name", &self.name).field("triggers", &self.triggers).finish()
    }
}

impl FlightHandle {
    /// The recorder's name (its directory, or the agent's name for it).
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Its triggers' names.
    pub fn triggers(&self) -> &[String] {
        &self.triggers
    }
    /// Fire trigger `name` now, by hand (`reason` says who asked); waits for the outcome.
    pub fn fire(&self, name: &str, reason: &str) -> Result<Outcome, String> {
        if !self.triggers.iter().any(|t| t == name) {
            return Err(format!("no trigger '{name}' (triggers: {})", self.triggers.join(", ")));
        }
        let (rtx, rrx) = mpsc::sync_channel(1);
        let f = Fire { trigger: name.to_string(), at_ns: crate::dump::mono_ns(), reason: reason.to_string() };
        self.tx.send(DumpMsg::Fire(f, Some(rtx))).map_err(|_| "the recorder has stopped".to_string())?;
        rrx.recv_timeout(Duration::from_secs(10)).map_err(|_| "the recorder did not answer within 10 s".to_string())
    }
    /// The counters now.
    pub fn stats(&self) -> FlightStats {
        self.shared.stats.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// The flight recorder (see the crate documentation). Give it to a
/// [`latscope_live::Recorder`] as its sink.
pub struct FlightRecorder {
    worker: Option<Worker>,
    dumper: Option<JoinHandle<()>>,
    handle: FlightHandle,
    signals: Vec<signal_hook::SigId>,
}

impl FlightRecorder {
    /// Start the ring, its sealing thread and its dumper for a recording with `header` (the
    /// session's). `on_event` is called (on the dumper's thread) for each trigger fired, dump
    /// written or failed, and old dump deleted.
    pub fn start(
        header: &TraceHeader,
        opts: FlightOptions,
        name: &str,
        on_event: impl FnMut(&FlightEvent) + Send + 'static,
    ) -> Result<FlightRecorder, FlightError> {
        opts.check().map_err(FlightError::Invalid)?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State { ring: Ring::new(opts.ring), tables: Tables::new(header) }),
            stats: Mutex::new(FlightStats::default()),
        });
        let mut manual = Vec::new();
        let mut signals = Vec::new();
        for t in &opts.triggers {
            match &t.kind {
                TriggerKind::Signal(sig) => {
                    let flag = Arc::new(AtomicBool::new(false));
                    let id = signal_hook::flag::register(*sig, flag.clone()).map_err(|e| {
                        FlightError::Invalid(format!("cannot watch {}: {e}", crate::trigger::signal_name(*sig)))
                    })?;
                    signals.push(id);
                    manual.push(Manual::Signal { name: t.name.clone(), sig: *sig, flag });
                }
                TriggerKind::File(p) => {
                    // A file already there does not fire: it must appear (or be touched).
                    let seen = std::fs::metadata(p).ok().and_then(|m| m.modified().ok());
                    manual.push(Manual::File { name: t.name.clone(), path: p.clone(), seen, next: Instant::now() });
                }
                _ => {}
            }
        }
        let conditions = opts.triggers.iter().map(|t| (t.name.clone(), t.condition.clone())).collect();
        let dopts = DumpOptions {
            dir: opts.dir.clone(),
            before_ns: opts.before.map(|d| d.as_nanos() as u64),
            after_ns: opts.after.as_nanos() as u64,
            min_gap: opts.min_gap,
            keep: opts.keep,
            disk_budget: opts.disk_budget,
            grace: opts.flush_every + Duration::from_millis(300),
        };
        let (tx, rx) = mpsc::channel();
        let dumper = Dumper::new(dopts, shared.clone(), conditions, manual, opts.ring.span_ns, Box::new(on_event));
        let io = |e| TraceError::Io { path: opts.dir.clone(), op: "starting the dumper thread".into(), source: e };
        let dumper =
            std::thread::Builder::new().name("latscope-dump".into()).spawn(move || dumper.run(rx)).map_err(io)?;
        let consumer = RingConsumer {
            shared: shared.clone(),
            watch: Watch::new(&opts.triggers, header, opts.flush_every.as_nanos() as u64),
            dumper: tx.clone(),
        };
        let worker = Worker::start(consumer, opts.dir.join("(ring)"), latscope_live::WRITER_QUEUE_BLOCKS)?;
        let handle = FlightHandle {
            name: name.to_string(),
            triggers: opts.triggers.iter().map(|t| t.name.clone()).collect(),
            tx,
            shared,
        };
        Ok(FlightRecorder { worker: Some(worker), dumper: Some(dumper), handle, signals })
    }

    /// A handle to fire triggers and read counters from other threads.
    pub fn handle(&self) -> FlightHandle {
        self.handle.clone()
    }

    /// The counters now.
    pub fn stats(&self) -> FlightStats {
        self.handle.stats()
    }

    fn worker(&mut self) -> Result<&mut Worker, TraceError> {
        self.worker.as_mut().ok_or_else(|| TraceError::WriterFailed {
            path: PathBuf::from("(ring)"),
            first: "the flight recorder was finished".into(),
            blocks: 0,
        })
    }
}

impl Drop for FlightRecorder {
    fn drop(&mut self) {
        drop(self.worker.take());
        let _ = self.handle.tx.send(DumpMsg::Stop);
        if let Some(h) = self.dumper.take() {
            let _ = h.join();
        }
        for id in self.signals.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}

impl BlockSink for FlightRecorder {
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
        let w = self.worker.take().ok_or_else(|| TraceError::WriterFailed {
            path: PathBuf::from("(ring)"),
            first: "the flight recorder was finished".into(),
            blocks: 0,
        })?;
        let s = w.finish(summary);
        // The sealing thread told the dumper to stop: the dump in progress ends with what the
        // ring holds.
        if let Some(h) = self.dumper.take() {
            let _ = h.join();
        }
        s
    }
}

struct RingConsumer {
    shared: Arc<Shared>,
    watch: Watch,
    dumper: Sender<DumpMsg>,
}

impl Consumer for RingConsumer {
    fn take(&mut self, batch: &EventBatch, blocks: Vec<Arc<SealedBlock>>, _lost: u64) -> Result<(), TraceError> {
        let now = crate::dump::mono_ns();
        {
            let mut st = self.shared.state.lock().unwrap_or_else(|p| p.into_inner());
            st.tables.observe(batch);
            st.ring.push(blocks, now);
            let (bytes, blocks, span, events) =
                (st.ring.bytes(), st.ring.len() as u64, st.ring.span_ns(), st.ring.events_in);
            drop(st);
            let mut s = self.shared.stats.lock().unwrap_or_else(|p| p.into_inner());
            (s.ring_bytes, s.ring_blocks, s.ring_span_ns, s.events) = (bytes, blocks, span, events);
        }
        // The blocks are in the ring before the dumper hears of what they fired.
        for f in self.watch.observe(batch) {
            let _ = self.dumper.send(DumpMsg::Fire(f, None));
        }
        Ok(())
    }

    fn finish(&mut self, summary: Summary) -> Result<Summary, TraceError> {
        let _ = self.dumper.send(DumpMsg::Stop);
        let events = self.shared.state.lock().unwrap_or_else(|p| p.into_inner()).ring.events_in;
        Ok(Summary { events, ..summary })
    }
}
