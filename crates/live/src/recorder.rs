//! The recorder: ring buffer -> filter -> trace writer, with its counters, bounded in time and
//! memory whatever the event rate.

use crate::session::LiveSession;
use latscope_event::{EventBatch, EventKind};
use latscope_probe::{ProbeError, ProbeStats};
use latscope_trace::{Summary, ThreadedTraceWriter, TraceError};
use std::time::{Duration, Instant};

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
        RecorderOptions { flush_every: Duration::from_secs(1), block_events: 65_536, duration: None }
    }
}

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
    /// The summary written at the end of the file.
    pub summary: Summary,
}

/// Records a [`LiveSession`] into a trace file (see the crate documentation).
///
/// Syscalls and the other kinds (block requests, process events) go to separate blocks, flushed
/// together, so that readers after one kind skip the other's blocks whole. Each poll consumes a
/// bounded number of ring-buffer records, so blocks are flushed on time and stop requests are
/// seen within one poll even when producers keep the ring buffer full.
pub struct Recorder {
    session: LiveSession,
    writer: ThreadedTraceWriter,
    opts: RecorderOptions,
    syscalls: EventBatch,
    other: EventBatch,
    scratch: EventBatch,
    written: u64,
    started: Instant,
    last_flush: Instant,
}

impl Recorder {
    /// Start recording `session` into `writer` (created with the session's header), releasing
    /// the session's command.
    pub fn new(mut session: LiveSession, writer: ThreadedTraceWriter, opts: RecorderOptions) -> Recorder {
        session.release_command();
        let now = Instant::now();
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
        self.poll(Duration::from_millis(50))?;
        let pending = self.syscalls.len() + self.other.len();
        if pending >= self.opts.block_events || self.last_flush.elapsed() >= self.opts.flush_every {
            self.flush()?;
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

    fn poll(&mut self, wait: Duration) -> Result<(), ProbeError> {
        let s = &mut self.session;
        if s.filter.is_match_all() {
            return s.probe.poll_into_split(&mut self.syscalls, &mut self.other, wait);
        }
        self.scratch.clear();
        s.probe.poll_into(&mut self.scratch, wait)?;
        keep_matching(s, &self.scratch, &mut self.syscalls, &mut self.other);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), TraceError> {
        let lost = self.session.stats().lost;
        for p in [&mut self.other, &mut self.syscalls] {
            if p.is_empty() {
                continue;
            }
            self.written += p.len() as u64;
            let full = std::mem::replace(p, self.writer.spare_batch());
            self.writer.write_batch(full, lost)?;
        }
        self.last_flush = Instant::now();
        Ok(())
    }

    /// Write what is still in the ring buffer and the pending blocks, and close the file with
    /// its summary. A command still running is stopped first (unless detached).
    pub fn finish(mut self, reason: StopReason) -> Result<Recording, RecordError> {
        // A command still running is told first, so that its last events are recorded too.
        let mut command_status = self.session.command_status();
        if command_status.is_none() {
            command_status = self.session.end_command();
        }
        // Whatever is still in the ring buffer belongs to the recording (bounded: producers
        // may never let it empty).
        for _ in 0..8 {
            let before = self.syscalls.len() + self.other.len();
            self.poll(Duration::ZERO)?;
            if self.syscalls.len() + self.other.len() == before {
                break;
            }
            if self.syscalls.len() + self.other.len() >= self.opts.block_events {
                self.flush()?;
            }
        }
        let stats = self.session.stats();
        let malformed = self.session.malformed();
        self.flush()?;
        let duration = self.started.elapsed();
        let summary = self.writer.finish(Summary {
            events: self.written,
            lost: stats.lost,
            duration_ns: duration.as_nanos() as u64,
            end_ns: latscope_probe::snapshot::monotonic_ns(),
            ..Default::default()
        })?;
        Ok(Recording { reason, events: self.written, stats, malformed, duration, command_status, summary })
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
