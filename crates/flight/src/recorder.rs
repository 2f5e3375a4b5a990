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

/// The kernel's ring buffer of a flight recorder not given one: half the ring (a power of two,
/// as the kernel takes), at least 8 MiB to absorb bursts of tens of thousands of events, at most
/// record's 64 MiB.
pub fn default_kernel_buffer(ring: &RingSize) -> u64 {
    (ring.max_bytes / 2).next_power_of_two().clamp(MIN_KERNEL_BUFFER, MAX_KERNEL_BUFFER)
}
/// See [`default_kernel_buffer`].
pub const MIN_KERNEL_BUFFER: u64 = 8 << 20;
/// See [`default_kernel_buffer`].
pub const MAX_KERNEL_BUFFER: u64 = 64 << 20;

/// Events per batch (and block) of a flight recorder: half of record's, as a batch takes about
/// 450 bytes an event before it is sealed (the ring's blocks about 7); blocks of 16 Ki events
/// compress almost as well.
pub const RING_BLOCK_EVENTS: usize = 16_384;
/// Batches a flight recorder's events are in between the kernel's buffer and the ring: at most
/// two being filled (syscalls, the other kinds), two queued, one being sealed, one cleared for
/// reuse.
const BATCHES_IN_FLIGHT: u64 = 6;
/// Batches queued for the sealing thread: as record's, so that a moment's delay of that thread
/// does not stop the reading of the kernel's buffer.
const RING_QUEUE_BATCHES: usize = latscope_live::WRITER_QUEUE_BLOCKS;
/// Cleared batches kept for reuse.
const RING_SPARE_BATCHES: usize = 1;
/// Bytes of an event in a batch, strings included: the fixed columns, the command name and a
/// path of a few tens of bytes (long paths at a high rate take more).
const BATCH_EVENT_BYTES: u64 = EventBatch::FIXED_EVENT_BYTES as u64 + 16 + 48;
/// latscope's process beside its buffers, about: its code, the probes' tables, the processes
/// and open files it names (15 MiB on an idle machine).
pub const PROCESS_BYTES: u64 = 24 << 20;

/// The memory a flight recorder's process takes at most, by part, as its RSS counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryBound {
    /// The ring's blocks.
    pub ring: u64,
    /// The kernel's ring buffer (counted twice in RSS: it is mapped twice, so that records
    /// wrapping around its end read as one).
    pub kernel_buffer: u64,
    /// The batches between the kernel's buffer and the ring.
    pub batches: u64,
    /// The rest of the process ([`PROCESS_BYTES`], about).
    pub process: u64,
}

impl MemoryBound {
    /// The bound of a ring of `ring` behind a kernel buffer of `kernel_buffer` bytes.
    pub fn new(ring: &RingSize, kernel_buffer: u64) -> MemoryBound {
        // A batch is handed over once a poll of the kernel's buffer (at most
        // MAX_RECORDS_PER_POLL records) has filled it to a block.
        let per_batch = (RING_BLOCK_EVENTS + latscope_probe::MAX_RECORDS_PER_POLL) as u64 * BATCH_EVENT_BYTES;
        MemoryBound {
            ring: ring.max_bytes,
            kernel_buffer: kernel_buffer.max(1 << 20).next_power_of_two(),
            batches: BATCHES_IN_FLIGHT * per_batch,
            process: PROCESS_BYTES,
        }
    }

    /// The whole process, bytes of RSS.
    pub fn total(&self) -> u64 {
        self.ring + 2 * self.kernel_buffer + self.batches + self.process
    }

    /// `at most about 128MiB: the ring 4.00MiB, the kernel's buffer 8.00MiB (twice in RSS: it
    /// is mapped twice), events being sealed 84.0MiB, the rest of latscope 24.0MiB`.
    pub fn describe(&self) -> String {
        use latscope_event::units::fmt_bytes;
        format!(
            "at most about {}: the ring {}, the kernel's buffer {} (twice in RSS: it is mapped twice), \
             events being sealed {}, the rest of latscope {}",
            fmt_bytes(self.total()),
            fmt_bytes(self.ring),
            fmt_bytes(self.kernel_buffer),
            fmt_bytes(self.batches),
            fmt_bytes(self.process)
        )
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
        let worker = Worker::start(consumer, opts.dir.join("(ring)"), RING_QUEUE_BATCHES, RING_SPARE_BATCHES)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_buffer_follows_the_ring_within_its_bounds() {
        let mib = 1 << 20;
        let buf = |r: &str| default_kernel_buffer(&RingSize::parse(r).unwrap()) / mib;
        assert_eq!(buf("4MiB"), 8, "at least 8 MiB");
        assert_eq!(buf("64MiB"), 32, "half the ring");
        assert_eq!(buf("100MiB"), 64, "a power of two");
        assert_eq!(buf("30s"), 64, "a time alone: its 256 MiB");
        assert_eq!(buf("2GiB"), 64, "at most record's");
    }

    #[test]
    fn the_memory_bound_adds_the_ring_the_kernel_buffer_twice_and_the_batches() {
        let m = MemoryBound::new(&RingSize::parse("4MiB").unwrap(), 8 << 20);
        assert_eq!(m.total(), (4 << 20) + 2 * (8 << 20) + m.batches + PROCESS_BYTES);
        // The batches: a few blocks' worth, less than record's 64 MiB kernel buffer twice.
        assert!(m.batches > 16 << 20 && m.batches < 128 << 20, "{}", m.batches);
        // The kernel rounds its buffer up to a power of two; the bound does too.
        assert_eq!(MemoryBound::new(&RingSize::parse("4MiB").unwrap(), 5 << 20).kernel_buffer, 8 << 20);
        let d = m.describe();
        assert!(d.contains("the ring 4.00MiB") && d.contains("mapped twice"), "{d}");
    }
}
