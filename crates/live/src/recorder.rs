//! The recorder: ring buffer -> filter -> trace writer, with its counters, bounded in time and
//! memory whatever the event rate.

use crate::session::LiveSession;
use latscope_event::{EventBatch, EventKind};
use latscope_probe::{ProbeError, ProbeStats};
use latscope_trace::{Summary, ThreadedTraceWriter, TraceError};
use std::time::{Duration, Instant};

/// Where a [`Recorder`]'s blocks go: a trace file ([`ThreadedTraceWriter`]), or a stage of its
/// own beside it (a flight recorder's ring, rotating files) that takes the same batches.
///
/// Batches are moved in and handed back cleared for reuse through
/// [`BlockSink::spare_batch`]; a sink that cannot keep up hands a batch back from
/// [`BlockSink::try_write_batch`] (the recorder then stops reading the ring buffer and the
/// kernel counts what it drops), so memory stays bounded whatever the event rate.
pub trait BlockSink {
    /// A cleared batch to fill, recycled when there is one.
    fn spare_batch(&self) -> EventBatch;
    /// Take `batch` (one or more blocks) unless the sink is full: then it is handed back.
    /// `lost_total`: events the probes have lost since the recording started.
    fn try_write_batch(&mut self, batch: EventBatch, lost_total: u64) -> Result<Option<EventBatch>, TraceError>;
    /// Take `batch`, waiting for room.
    fn write_batch(&mut self, batch: EventBatch, lost_total: u64) -> Result<(), TraceError>;
    /// End: everything taken is dealt with; `summary` holds the recording's counters.
    fn finish(self, summary: Summary) -> Result<Summary, TraceError>;
}

impl BlockSink for ThreadedTraceWriter {
    fn spare_batch(&self) -> EventBatch {
        ThreadedTraceWriter::spare_batch(self)
    }
    fn try_write_batch(&mut self, batch: EventBatch, lost_total: u64) -> Result<Option<EventBatch>, TraceError> {
        ThreadedTraceWriter::try_write_batch(self, batch, lost_total)
    }
    fn write_batch(&mut self, batch: EventBatch, lost_total: u64) -> Result<(), TraceError> {
        ThreadedTraceWriter::write_batch(self, batch, lost_total)
    }
    fn finish(self, summary: Summary) -> Result<Summary, TraceError> {
        ThreadedTraceWriter::finish(self, summary)
    }
}

/// How a recording is cut into blocks and when it ends.
#[derive(Debug, Clone, Copy)]
pub struct RecorderOptions {
    /// A block is written at least this often: after `kill -9` or a power loss, at most this
    /// much of the recording is lost.
    pub flush_every: Duration,
    /// Events per block: large enough to compress well. With the writer's queue this bounds the
    /// memory between the ring buffer and the file.
    pub block_events: usize,
    /// Stop after this long.
    pub duration: Option<Duration>,
}

impl Default for RecorderOptions {
    fn default() -> Self {
        RecorderOptions { flush_every: Duration::from_secs(1), block_events: BLOCK_EVENTS, duration: None }
    }
}

/// Events per block by default: a block's rows take about 9 MiB in memory (some 520 bytes a row
/// with the attribution columns), and the blocks on their way to the file stay within
/// [`MEMORY_BOUND_BYTES`] when the writer is the bottleneck (it is, since the decoder writes rows
/// without attribution at a fraction of the cost). The price: zstd works per column buffer
/// (128 KiB for a 64-bit column); against blocks of 32 Ki events, traces of one CPU's events
/// came out 0-3 % larger, of two CPUs' interleaved 10-15 % (bench/record.sh).
pub const BLOCK_EVENTS: usize = 16_384;

/// Blocks queued for the writer thread: with one being filled and one being written, what a crash
/// can lose stays within a flush interval, and the memory between the ring buffer and the file
/// within [`MEMORY_BOUND_BYTES`]. When the writer falls behind, the recorder stops reading the
/// ring buffer and the kernel counts the events it drops.
pub const WRITER_QUEUE_BLOCKS: usize = 2;

/// The memory the recorder holds beyond the ring buffer, at most (blocks being filled, queued,
/// written and recycled: up to nine blocks of [`BLOCK_EVENTS`] rows).
pub const MEMORY_BOUND_BYTES: u64 = 128 << 20;

/// A block's metadata (the stack table entries and cgroups its events met first) is kept
/// under this many bytes, plus one event's: a block is cut early rather than made larger than
/// readers take (1 MiB), however many new stacks arrive at once.
const BLOCK_META_BUDGET: usize = 256 << 10;

/// Why a recording ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// A stop signal (Ctrl-C, SIGTERM).
    Interrupted,
    /// The duration was reached.
    Duration,
    /// The recorded command exited.
    CommandExited,
}

impl StopReason {
    /// Words for the summary line.
    pub fn describe(self) -> &'static str {
        match self {
            StopReason::Interrupted => "interrupted",
            StopReason::Duration => "duration reached",
            StopReason::CommandExited => "command exited",
        }
    }
}

/// Why recording failed.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// Reading the probes failed.
    #[error(transparent)]
    Probe(#[from] ProbeError),
    /// Writing the trace failed (a full disk, ...). The blocks written so far stay readable.
    #[error(transparent)]
    Trace(#[from] TraceError),
}

/// Where a recording stands.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Time since the recording started.
    pub elapsed: Duration,
    /// Events kept so far (written or about to be).
    pub events: u64,
    /// Events the probes lost so far (ring buffer full).
    pub lost: u64,
}

/// What a finished recording did.
#[derive(Debug, Clone)]
pub struct Recording {
    /// Why it ended.
    pub reason: StopReason,
    /// Events written.
    pub events: u64,
    /// The probes' counters at the end.
    pub stats: ProbeStats,
    /// Ring-buffer records the decoder could not read.
    pub malformed: u64,
    /// How long it ran.
    pub duration: Duration,
    /// The recorded command's exit status (the code, or 128 + signal), if it ran to its end.
    pub command_status: Option<i32>,
    /// Runs of the probes' programs the kernel skipped (it does not re-enter a program on a
    /// CPU), read at the end; `None` where the kernel does not count them.
    pub program_runs_skipped: Option<u64>,
    /// The summary written at the end of the file.
    pub summary: Summary,
    /// With stacks: what the stack table did (distinct stacks, the missing ones by reason, the
    /// reads of processes' mappings).
    pub stacks: Option<crate::StackStats>,
}

/// Records a [`LiveSession`] into a trace file, or another [`BlockSink`] (see the crate
/// documentation).
///
/// Syscalls and the other kinds (block requests, process events) go to separate blocks, flushed
/// together, so that readers after one kind skip the other's blocks whole. Each poll consumes a
/// bounded number of ring-buffer records, so blocks are flushed on time and stop requests are
/// seen within one poll even when producers keep the ring buffer full.
pub struct Recorder<W: BlockSink = ThreadedTraceWriter> {
    session: LiveSession,
    writer: W,
    opts: RecorderOptions,
    syscalls: EventBatch,
    other: EventBatch,
    scratch: EventBatch,
    written: u64,
    started: Instant,
    last_flush: Instant,
    /// The writer's queue was full at the last flush: the pending blocks wait, the ring buffer is
    /// not read until they are queued.
    backlog: bool,
    /// The stack table (`--why` with stacks).
    stacks: crate::stacks::StackResolver,
    /// What the session's header had cut when the recording started (the header written); what
    /// it cuts later (cgroups met during the recording) goes in the summary.
    header_cut: latscope_event::Truncation,
}

impl<W: BlockSink> Recorder<W> {
    /// Start recording `session` into `writer` (created with the session's header), releasing
    /// the session's command.
    pub fn new(mut session: LiveSession, writer: W, opts: RecorderOptions) -> Recorder<W> {
        let stacks = crate::stacks::StackResolver::new(session.why_stacks(), session.unwinds_copies());
        session.release_command();
        let now = Instant::now();
        let header_cut = session.header().truncated;
        Recorder {
            session,
            writer,
            opts,
            syscalls: EventBatch::with_capacity(opts.block_events),
            other: EventBatch::default(),
            scratch: EventBatch::default(),
            written: 0,
            started: now,
            last_flush: now,
            backlog: false,
            stacks,
            header_cut,
        }
    }

    /// The session being recorded.
    pub fn session(&self) -> &LiveSession {
        &self.session
    }

    /// Where the recording stands.
    pub fn progress(&self) -> Progress {
        Progress {
            elapsed: self.started.elapsed(),
            events: self.written + (self.syscalls.len() + self.other.len()) as u64,
            lost: self.session.stats().lost,
        }
    }

    /// One poll of the ring buffer (waiting at most 50 ms), then a flush when one is due.
    /// Returns why the recording should end, once it should.
    pub fn step(&mut self) -> Result<Option<StopReason>, RecordError> {
        if self.backlog {
            // The writer is behind: hand it the pending blocks before reading more. Meanwhile
            // the ring buffer fills and the kernel counts what it drops; memory stays bounded.
            self.backlog = !self.flush()?;
            if self.backlog {
                std::thread::sleep(Duration::from_millis(2));
            }
        } else {
            self.poll(Duration::from_millis(50))?;
            let pending = self.syscalls.len() + self.other.len();
            if pending >= self.opts.block_events || self.last_flush.elapsed() >= self.opts.flush_every {
                self.backlog = !self.flush()?;
            }
        }
        if self.session.stop_requested() {
            return Ok(Some(StopReason::Interrupted));
        }
        if self.opts.duration.is_some_and(|d| self.started.elapsed() >= d) {
            return Ok(Some(StopReason::Duration));
        }
        if self.session.command_status().is_some() {
            return Ok(Some(StopReason::CommandExited));
        }
        Ok(None)
    }

    /// Record until a stop reason, calling `progress` about once a second, then finish.
    pub fn run(mut self, mut progress: impl FnMut(&Progress)) -> Result<Recording, RecordError> {
        let mut last = Instant::now();
        let reason = loop {
            if let Some(r) = self.step()? {
                break r;
            }
            if last.elapsed() >= Duration::from_secs(1) {
                progress(&self.progress());
                last = Instant::now();
            }
        };
        self.finish(reason)
    }

    fn poll(&mut self, wait: Duration) -> Result<(), RecordError> {
        let s = &mut self.session;
        let from = self.syscalls.len();
        let from_other = self.other.len();
        // Cgroups first met now (a container started since the start) are named before the
        // filter sees their events, and their entries travel in the next block written.
        let mut found = Vec::new();
        if s.filter.is_match_all() {
            s.probe.poll_into_split(&mut self.syscalls, &mut self.other, wait)?;
            found.extend(s.learn_cgroups(&self.syscalls.cgroup[from..]));
            found.extend(s.learn_cgroups(&self.other.cgroup[from_other..]));
        } else {
            self.scratch.clear();
            s.probe.poll_into(&mut self.scratch, wait)?;
            found = s.learn_cgroups(&self.scratch.cgroup);
            keep_matching(s, &self.scratch, &mut self.syscalls, &mut self.other);
        }
        if !found.is_empty() {
            // `other` is flushed first when it has events.
            let to = if self.other.is_empty() { &mut self.syscalls } else { &mut self.other };
            for c in &found {
                if let Ok(j) = serde_json::to_string(c) {
                    to.cgroups.push_str(&j);
                    to.cgroups.push('\n');
                }
            }
        }
        // Stack references become ids of the trace's stack table, whose new entries travel in
        // the block of the events that first use them: a block whose entries reach the budget
        // is written, and the rest of the events go to the next one.
        // On-CPU samples' stacks first: their block (`other`) is written before the calls'.
        if self.session.why_stacks() && from_other < self.other.len() {
            self.stacks.resolve(&self.session.probe, &mut self.other, from_other);
        }
        let mut at = from;
        while self.session.why_stacks() {
            at = self.stacks.resolve_within(&self.session.probe, &mut self.syscalls, at, BLOCK_META_BUDGET);
            if at >= self.syscalls.len() {
                break;
            }
            let mut head = self.writer.spare_batch();
            head.append_range(&self.syscalls, 0..at);
            let mut tail = self.writer.spare_batch();
            tail.append_range(&self.syscalls, at..self.syscalls.len());
            head.stacks = std::mem::take(&mut self.syscalls.stacks);
            head.cgroups = std::mem::take(&mut self.syscalls.cgroups);
            self.syscalls = head;
            self.flush_wait()?;
            self.syscalls = tail;
            at = 0;
        }
        Ok(())
    }

    /// Queue the pending blocks for the writer; `false` when its queue is full (what could not be
    /// queued stays pending).
    fn flush(&mut self) -> Result<bool, TraceError> {
        let lost = self.session.stats().lost;
        for p in [&mut self.other, &mut self.syscalls] {
            if p.is_empty() {
                continue;
            }
            let n = p.len() as u64;
            let full = std::mem::replace(p, self.writer.spare_batch());
            if let Some(back) = self.writer.try_write_batch(full, lost)? {
                *p = back;
                return Ok(false);
            }
            self.written += n;
        }
        self.last_flush = Instant::now();
        Ok(true)
    }

    /// Queue the pending blocks, waiting for room (at the end of a recording).
    fn flush_wait(&mut self) -> Result<(), TraceError> {
        let lost = self.session.stats().lost;
        for p in [&mut self.other, &mut self.syscalls] {
            if p.is_empty() {
                continue;
            }
            self.written += p.len() as u64;
            let full = std::mem::replace(p, self.writer.spare_batch());
            self.writer.write_batch(full, lost)?;
        }
        Ok(())
    }

    /// Write what is still in the ring buffer and the pending blocks, and close the file with
    /// its summary. A command still running is stopped first (unless detached).
    pub fn finish(mut self, reason: StopReason) -> Result<Recording, RecordError> {
        // The recording ends now; reading out what is still buffered is not part of its length.
        // Its duration is from the probes attaching (the header's start) to now: the one
        // definition `info` prints and every rate divides by.
        let end_ns = latscope_probe::snapshot::monotonic_ns();
        let start_ns = self.session.header().start_ns;
        let duration = if start_ns > 0 && end_ns > start_ns {
            Duration::from_nanos(end_ns - start_ns)
        } else {
            self.started.elapsed()
        };
        // From here a trace's reader that takes nothing for a while is given up, not waited for.
        latscope_trace::set_stopping();
        // A command still running is told first, so that its last events are recorded too.
        let mut command_status = self.session.command_status();
        if command_status.is_none() {
            command_status = self.session.end_command();
        }
        // Whatever is still in the ring buffer belongs to the recording. The probes are detached
        // first, so that the buffer has an end: read to it, every event is either in the file or
        // counted as lost by the kernel. (Reading a fixed number of polls instead left the rest
        // of a large backlog neither read nor counted.)
        // Each thread's times at the end (with attribution): its whole time is accounted for.
        if let Err(e) = self.session.probe.read_thread_times(latscope_probe::ThreadTimesAt::End) {
            eprintln!("latscope: {e}: each thread's time outside its calls is not accounted for");
        }
        self.session.probe.detach();
        self.flush_wait()?;
        // A program still running on another CPU when it was detached may commit a record
        // just after: the buffer is taken as empty after two reads that find nothing, 5 ms
        // apart.
        let mut empty = 0;
        while empty < 2 {
            let before = self.session.probe.records_consumed();
            self.poll(Duration::ZERO)?;
            if self.session.probe.records_consumed() == before {
                empty += 1;
                std::thread::sleep(Duration::from_millis(5));
            } else {
                empty = 0;
            }
            if self.syscalls.len() + self.other.len() >= self.opts.block_events {
                self.flush_wait()?;
            }
        }
        let stats = self.session.stats();
        let malformed = self.session.malformed();
        let program_runs_skipped = self.session.probe.recursion_misses();
        self.flush_wait()?;
        // Cut since the start: cgroup entries (in the header the session keeps) and stacks.
        let now_cut = self.session.header().truncated;
        let mut truncated = latscope_event::Truncation {
            values: now_cut.values.saturating_sub(self.header_cut.values),
            bytes: now_cut.bytes.saturating_sub(self.header_cut.bytes),
            entries: now_cut.entries.saturating_sub(self.header_cut.entries),
        };
        truncated.add(&self.stacks.truncation());
        let stacks = self.session.why_stacks().then(|| self.stacks.stats(&self.session.probe));
        let summary = self.writer.finish(Summary {
            events: self.written,
            lost: stats.lost,
            duration_ns: duration.as_nanos() as u64,
            end_ns,
            block_completions_without_issue: stats.blk_unpaired,
            wakeups_unseen: stats.wakeups_unseen,
            program_runs_skipped,
            truncated,
            stacks_missing: stacks.as_ref().map(|s| s.missing).unwrap_or_default(),
            ..Default::default()
        })?;
        Ok(Recording {
            reason,
            events: self.written,
            stats,
            malformed,
            duration,
            command_status,
            program_runs_skipped,
            summary,
            stacks,
        })
    }
}

/// Append the events of `b` that the session's filter keeps: syscalls to `syscalls`, other kinds
/// to `other`.
fn keep_matching(s: &mut LiveSession, b: &EventBatch, syscalls: &mut EventBatch, other: &mut EventBatch) {
    s.ctx.observe(b);
    for i in 0..b.len() {
        if s.filter.matches(b, i, &s.ctx) {
            let to = if b.kind[i] == EventKind::Syscall as u8 { &mut *syscalls } else { &mut *other };
            to.push_from(b, i);
        }
    }
}
