//! Writing a window of the ring as a trace file when a trigger fires, under the guards: a
//! minimum gap between dumps, at most N kept, a disk budget, a full disk.
//!
//! One thread (the dumper) takes the fires (from the thread that tests the event triggers, from
//! signals, watched files and `latscope trigger`), and writes one dump at a time: the blocks of
//! the window before the trigger at once (the file is at its name, readable, as soon as they
//! are on disk), then the blocks that arrive until the window after it has passed. A trigger
//! that fires meanwhile extends the dump instead of starting another.

use crate::files::{self, DUMP_PREFIX};
use crate::ring::{Ring, Slot};
use crate::tables::Tables;
use crate::watch::Fire;
use latscope_event::units::{fmt_bytes, fmt_ns};
use latscope_event::FlightInfo;
use latscope_trace::{Existing, Summary, TraceError, TraceWriter, WriterOptions};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What became of a trigger's firing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A dump was begun at this path.
    Dumping(PathBuf),
    /// The dump in progress at this path was extended.
    Extended(PathBuf),
    /// Within the minimum gap between dumps: dumped when the gap ends, with a window reaching
    /// back to the trigger (and why).
    Deferred(String),
    /// Nothing was written, and why (no disk space).
    Suppressed(String),
    /// The dump could not be begun.
    Failed(String),
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Dumping(p) => write!(f, "dumping to {}", p.display()),
            Outcome::Extended(p) => write!(f, "extends the dump in progress, {}", p.display()),
            Outcome::Deferred(why) => write!(f, "deferred: {why}"),
            Outcome::Suppressed(why) => write!(f, "not dumped: {why}"),
            Outcome::Failed(why) => write!(f, "dump failed: {why}"),
        }
    }
}

/// A dump written.
#[derive(Debug, Clone, PartialEq)]
pub struct DumpReport {
    /// The file.
    pub path: PathBuf,
    /// The triggers that fired into it, first first.
    pub triggers: Vec<String>,
    /// Events in it.
    pub events: u64,
    /// Its size, bytes.
    pub bytes: u64,
    /// Events the probes lost during its window.
    pub lost: u64,
    /// Its first event's start and its last event's end (CLOCK_MONOTONIC ns).
    pub from_ns: u64,
    /// See `from_ns`.
    pub to_ns: u64,
    /// When the first trigger fired (CLOCK_MONOTONIC ns).
    pub at_ns: u64,
    /// From the trigger (`at_ns`: the end of the call that fired it, the end of the window
    /// measured, or the moment it was asked for) to the window before it being readable at its
    /// name.
    pub first_readable: Duration,
    /// From the trigger to the complete file (the window after it included).
    pub took: Duration,
    /// Why it holds less than asked, if it does.
    pub short: Option<String>,
}

/// What a flight recorder did, for its user's messages and metrics.
#[derive(Debug, Clone, PartialEq)]
pub enum FlightEvent {
    /// A trigger fired.
    Fired {
        /// Its name.
        trigger: String,
        /// What fired it.
        reason: String,
        /// When (CLOCK_MONOTONIC ns).
        at_ns: u64,
        /// What became of it.
        outcome: Outcome,
    },
    /// A dump is complete.
    Done(DumpReport),
    /// A dump stopped on an error; `kept`: the part written is at its path, readable.
    Failed {
        /// The file, if it was begun.
        path: Option<PathBuf>,
        /// What went wrong.
        error: String,
        /// Whether what was written is kept, readable.
        kept: bool,
    },
    /// An old file was deleted, and why (`--keep`, the disk budget).
    Deleted {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
}

impl FlightEvent {
    /// The event in words, times as `HH:MM:SS.mmm` UTC (`realtime_offset_ns`: the recording's,
    /// to turn its monotonic times into wall-clock ones).
    pub fn line(&self, realtime_offset_ns: i64) -> String {
        let clock = |mono: u64| {
            let wall = i128::from(mono) + i128::from(realtime_offset_ns);
            let (secs, ns) = (wall.div_euclid(1_000_000_000), wall.rem_euclid(1_000_000_000));
            i64::try_from(secs)
                .ok()
                .and_then(|s| chrono::DateTime::from_timestamp(s, ns as u32))
                .map_or_else(|| format!("{mono} ns"), |t| t.format("%H:%M:%S%.3f").to_string())
        };
        match self {
            FlightEvent::Fired { trigger, reason, at_ns, outcome } => {
                format!("trigger {trigger} fired at {}: {reason}; {outcome}", clock(*at_ns))
            }
            FlightEvent::Done(r) => format!(
                "wrote {}: {} events from {} to {} ({}), {}, {} lost; readable {} after the trigger, complete after {}",
                r.path.display(),
                r.events,
                clock(r.from_ns),
                clock(r.to_ns),
                fmt_ns(r.to_ns.saturating_sub(r.from_ns)),
                fmt_bytes(r.bytes),
                r.lost,
                fmt_ns(r.first_readable.as_nanos() as u64),
                fmt_ns(r.took.as_nanos() as u64)
            ),
            FlightEvent::Failed { path, error, kept } => format!(
                "error: dump{} failed: {error}{}",
                path.as_ref().map_or_else(String::new, |p| format!(" {}", p.display())),
                if *kept { " (what was written is kept, readable)" } else { "" }
            ),
            FlightEvent::Deleted { path, why } => format!("deleted {} ({why})", path.display()),
        }
    }

    /// The event as one JSON object (`event`: `fired`, `dumped`, `failed`, `deleted`).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::json;
        match self {
            FlightEvent::Fired { trigger, reason, at_ns, outcome } => json!({
                "event": "fired", "trigger": trigger, "reason": reason, "at_ns": at_ns,
                "dump": match outcome { Outcome::Dumping(p) | Outcome::Extended(p) => Some(p), _ => None },
                "outcome": outcome.to_string(),
            }),
            FlightEvent::Done(r) => json!({
                "event": "dumped", "file": r.path, "triggers": r.triggers, "events": r.events, "bytes": r.bytes,
                "lost": r.lost, "from_ns": r.from_ns, "to_ns": r.to_ns, "at_ns": r.at_ns,
                "readable_after_s": r.first_readable.as_secs_f64(), "complete_after_s": r.took.as_secs_f64(),
                "short": r.short,
            }),
            FlightEvent::Failed { path, error, kept } => {
                json!({"event": "failed", "file": path, "error": error, "kept": kept})
            }
            FlightEvent::Deleted { path, why } => json!({"event": "deleted", "file": path, "why": why}),
        }
    }
}

/// A flight recorder's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlightStats {
    /// Events that went through the ring.
    pub events: u64,
    /// Memory the ring's blocks take now, bytes.
    pub ring_bytes: u64,
    /// Blocks in the ring now.
    pub ring_blocks: u64,
    /// The time the ring covers now, ns.
    pub ring_span_ns: u64,
    /// Triggers fired.
    pub fired: u64,
    /// Dumps completed.
    pub dumps: u64,
    /// Fires that wrote nothing (no disk space; one deferred by the minimum gap is counted when
    /// its dump could not be begun).
    pub suppressed: u64,
    /// Dumps that stopped on an error.
    pub failed: u64,
    /// Old dumps deleted (`--keep`, the disk budget).
    pub deleted: u64,
    /// Bytes of dumps written.
    pub bytes_written: u64,
}

/// How dumps are written.
#[derive(Debug, Clone)]
pub struct DumpOptions {
    /// The directory of the dumps.
    pub dir: PathBuf,
    /// The window before a trigger (`None`: the whole ring).
    pub before_ns: Option<u64>,
    /// The window after it.
    pub after_ns: u64,
    /// Minimum time between the starts of two dumps.
    pub min_gap: Duration,
    /// At most this many dumps in the directory (the oldest deleted).
    pub keep: Option<usize>,
    /// At most this many bytes of dumps in the directory (the oldest deleted to make room).
    pub disk_budget: Option<u64>,
    /// How late a block may be sealed after the events it holds (the recorder's flush
    /// interval): the dump waits this long past its window's end.
    pub grace: Duration,
}

/// The ring and the tables, shared by the sealing thread and the dumper.
pub(crate) struct Shared {
    pub state: Mutex<State>,
    pub stats: Mutex<FlightStats>,
}

pub(crate) struct State {
    pub ring: Ring,
    pub tables: Tables,
}

/// A message to the dumper.
pub(crate) enum DumpMsg {
    /// A trigger fired; the outcome is sent back when asked for.
    Fire(Fire, Option<SyncSender<Outcome>>),
    /// The recording ends: finish the dump in progress with what there is.
    Stop,
}

/// A trigger the dumper watches itself: a signal's flag, a file.
pub(crate) enum Manual {
    Signal { name: String, sig: i32, flag: Arc<AtomicBool> },
    File { name: String, path: PathBuf, seen: Option<std::time::SystemTime>, next: Instant },
}

/// Triggers that fired within the minimum gap, waiting for it to end: one dump covers them all.
struct Pending {
    first: Fire,
    triggers: Vec<String>,
    last_at_ns: u64,
}

struct Active {
    writer: TraceWriter,
    path: PathBuf,
    triggers: Vec<String>,
    at_ns: u64,
    from_ns: u64,
    /// The window's end; blocks sealed up to `end_ns + grace` are in.
    end_ns: u64,
    /// The furthest extensions take it.
    max_end_ns: u64,
    last_id: Option<u64>,
    base_lost: u64,
    last_lost: u64,
    first_ns: Option<u64>,
    last_end_ns: u64,
    /// Stack table entries of earlier blocks, for the first block with syscalls.
    stacks_before: String,
    committed: bool,
    first_readable: Option<Duration>,
    missed: u64,
    short: Option<String>,
    budget: Option<u64>,
}

pub(crate) struct Dumper {
    opts: DumpOptions,
    shared: Arc<Shared>,
    conditions: Vec<(String, String)>,
    active: Option<Active>,
    last_start: Option<Instant>,
    /// Triggers told they were within the gap since the last dump (told once).
    told: HashSet<String>,
    /// Fires within the minimum gap, dumped when it ends.
    pending: Option<Pending>,
    manual: Vec<Manual>,
    on_event: Box<dyn FnMut(&FlightEvent) + Send>,
    /// The ring's time span, for the window before when none is given.
    ring_span_ns: Option<u64>,
}

/// CLOCK_MONOTONIC now, ns.
pub(crate) fn mono_ns() -> u64 {
    latscope_probe::snapshot::monotonic_ns()
}

/// Time since `mono` (CLOCK_MONOTONIC ns).
fn since(mono: u64) -> Duration {
    Duration::from_nanos(mono_ns().saturating_sub(mono))
}

impl Dumper {
    pub(crate) fn new(
        opts: DumpOptions,
        shared: Arc<Shared>,
        conditions: Vec<(String, String)>,
        manual: Vec<Manual>,
        ring_span_ns: Option<u64>,
        on_event: Box<dyn FnMut(&FlightEvent) + Send>,
    ) -> Dumper {
        Dumper {
            opts,
            shared,
            conditions,
            active: None,
            last_start: None,
            told: HashSet::new(),
            pending: None,
            manual,
            on_event,
            ring_span_ns,
        }
    }

    fn emit(&mut self, e: FlightEvent) {
        (self.on_event)(&e);
    }

    fn stats(&self) -> std::sync::MutexGuard<'_, FlightStats> {
        self.shared.stats.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn run(mut self, rx: Receiver<DumpMsg>) {
        loop {
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(DumpMsg::Fire(f, reply)) => {
                    let o = self.fire(f);
                    if let Some(r) = reply {
                        let _ = r.try_send(o);
                    }
                }
                Ok(DumpMsg::Stop) | Err(RecvTimeoutError::Disconnected) => {
                    self.stop();
                    return;
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
            self.poll_manual();
            self.progress(false);
            self.start_pending(false);
        }
    }

    /// Signals received, files appeared.
    fn poll_manual(&mut self) {
        let mut fires = Vec::new();
        let now = Instant::now();
        for m in &mut self.manual {
            match m {
                Manual::Signal { name, sig, flag } => {
                    if flag.swap(false, Ordering::Relaxed) {
                        let reason = format!("{} received", crate::trigger::signal_name(*sig));
                        fires.push(Fire { trigger: name.clone(), at_ns: mono_ns(), reason });
                    }
                }
                Manual::File { name, path, seen, next } => {
                    if now < *next {
                        continue;
                    }
                    *next = now + Duration::from_millis(250);
                    let m = std::fs::metadata(&*path).ok().and_then(|m| m.modified().ok());
                    if m.is_some() && m != *seen {
                        let reason = format!("{} appeared or was touched", path.display());
                        fires.push(Fire { trigger: name.clone(), at_ns: mono_ns(), reason });
                    }
                    *seen = m;
                }
            }
        }
        for f in fires {
            self.fire(f);
        }
    }

    fn before_ns(&self) -> u64 {
        self.opts.before_ns.or(self.ring_span_ns).unwrap_or(u64::MAX)
    }

    /// Handle a trigger's firing.
    pub(crate) fn fire(&mut self, f: Fire) -> Outcome {
        self.stats().fired += 1;
        let outcome = self.decide(&f);
        let held = matches!(outcome, Outcome::Suppressed(_) | Outcome::Deferred(_));
        let quiet = held && !self.told.insert(f.trigger.clone());
        if matches!(outcome, Outcome::Suppressed(_)) {
            self.stats().suppressed += 1;
        }
        if !quiet {
            self.emit(FlightEvent::Fired {
                trigger: f.trigger.clone(),
                reason: f.reason.clone(),
                at_ns: f.at_ns,
                outcome: outcome.clone(),
            });
        }
        outcome
    }

    fn decide(&mut self, f: &Fire) -> Outcome {
        // A deferred dump whose gap has ended begins first: this firing joins it.
        self.start_pending(false);
        if let Some(a) = &mut self.active {
            let end = f.at_ns.saturating_add(self.opts.after_ns).min(a.max_end_ns);
            a.end_ns = a.end_ns.max(end);
            if !a.triggers.contains(&f.trigger) {
                a.triggers.push(f.trigger.clone());
            }
            return Outcome::Extended(a.path.clone());
        }
        if let Some(t) = self.last_start.filter(|t| t.elapsed() < self.opts.min_gap) {
            // Not lost: dumped when the gap ends, its window reaching back to this trigger
            // (as far as the ring still holds it).
            let left = self.opts.min_gap - t.elapsed();
            let joins = match &mut self.pending {
                Some(p) => {
                    p.last_at_ns = p.last_at_ns.max(f.at_ns);
                    if !p.triggers.contains(&f.trigger) {
                        p.triggers.push(f.trigger.clone());
                    }
                    true
                }
                None => {
                    let p = Pending { first: f.clone(), triggers: vec![f.trigger.clone()], last_at_ns: f.at_ns };
                    self.pending = Some(p);
                    false
                }
            };
            return Outcome::Deferred(format!(
                "within the minimum gap between dumps (--min-gap {}): {} when it ends, in {}",
                fmt_ns(self.opts.min_gap.as_nanos() as u64),
                if joins { "joins the dump that begins" } else { "dumped, with the window before this trigger," },
                fmt_ns(left.as_nanos() as u64)
            ));
        }
        self.begin(f, false)
    }

    /// Begin the deferred dump once the minimum gap has ended (at once, `stopping`).
    fn start_pending(&mut self, stopping: bool) {
        if self.active.is_some() || self.pending.is_none() {
            return;
        }
        if !stopping && self.last_start.is_some_and(|t| t.elapsed() < self.opts.min_gap) {
            return;
        }
        let Some(p) = self.pending.take() else { return };
        let outcome = self.begin(&p.first, true);
        if let (Outcome::Dumping(_), Some(a)) = (&outcome, &mut self.active) {
            let end = p.last_at_ns.saturating_add(self.opts.after_ns).min(a.max_end_ns);
            a.end_ns = a.end_ns.max(end);
            for t in p.triggers {
                if !a.triggers.contains(&t) {
                    a.triggers.push(t);
                }
            }
        }
        if matches!(outcome, Outcome::Suppressed(_)) {
            self.stats().suppressed += 1;
        }
        let f = p.first;
        let reason = format!("{} (deferred by --min-gap)", f.reason);
        self.emit(FlightEvent::Fired { trigger: f.trigger, reason, at_ns: f.at_ns, outcome });
    }

    /// Begin a dump for `f`, unless the disk has no room for it.
    fn begin(&mut self, f: &Fire, deferred: bool) -> Outcome {
        let from_ns = f.at_ns.saturating_sub(self.before_ns());
        let (estimate, _) = {
            let st = self.shared.state.lock().unwrap_or_else(|p| p.into_inner());
            let before = st.ring.file_bytes_from(from_ns);
            let after = st.ring.bytes_per_sec() * self.opts.after_ns as f64 / 1e9;
            (before + after as u64, ())
        };
        // Room on the disk: a dump that cannot fit is not begun (the ring keeps running).
        if let Some(why) = files::free_bytes(&self.opts.dir).and_then(|f| no_room(f, estimate, &self.opts.dir)) {
            return Outcome::Suppressed(why);
        }
        let budget = self.make_room(estimate);
        match self.start(f, from_ns, budget, deferred) {
            Ok(p) => {
                self.last_start = Some(Instant::now());
                self.told.clear();
                Outcome::Dumping(p)
            }
            Err(e) => {
                self.stats().failed += 1;
                Outcome::Failed(e)
            }
        }
    }

    /// Delete the oldest dumps until `estimate` more bytes fit in the disk budget; returns the
    /// bytes this dump may take.
    fn make_room(&mut self, estimate: u64) -> Option<u64> {
        let budget = self.opts.disk_budget?;
        let mut have = files::list(&self.opts.dir, DUMP_PREFIX);
        let mut used: u64 = have.iter().map(|l| l.bytes).sum();
        while used + estimate > budget && !have.is_empty() {
            let old = have.remove(0);
            if std::fs::remove_file(&old.path).is_ok() {
                used -= old.bytes;
                self.stats().deleted += 1;
                let why = format!("the disk budget ({}) needs room for a new dump", fmt_bytes(budget));
                self.emit(FlightEvent::Deleted { path: old.path, why });
            }
        }
        Some(budget.saturating_sub(used))
    }

    fn start(&mut self, f: &Fire, from_ns: u64, budget: Option<u64>, deferred: bool) -> Result<PathBuf, String> {
        let (slots, stacks_before, base_lost, tables, evicted) = {
            let st = self.shared.state.lock().unwrap_or_else(|p| p.into_inner());
            let (slots, stacks, lost) = st.ring.window(from_ns);
            (slots, stacks, lost, st.tables.clone(), st.ring.evicted > 0)
        };
        let first_ns = slots.iter().filter_map(|s| s.block.ts_range()).map(|r| r.0).min().unwrap_or(from_ns);
        // A dump that waited for the gap may find the start of its window gone from the ring.
        let cut = (deferred && evicted && self.opts.before_ns.is_some() && first_ns > from_ns).then(|| {
            format!(
                "the dump waited for --min-gap, and the ring no longer held the first {} of the window before the trigger",
                fmt_ns(first_ns - from_ns)
            )
        });
        let condition =
            self.conditions.iter().find(|(n, _)| *n == f.trigger).map(|(_, c)| c.clone()).unwrap_or_default();
        let mut header = tables.header_at(first_ns, Some(crate::tables::snapshot_now()));
        let suffix = format!("-{}", f.trigger);
        let path = files::new_name(&self.opts.dir, DUMP_PREFIX, header.wall_ns(f.at_ns), &suffix);
        header.flight = Some(FlightInfo {
            trigger: f.trigger.clone(),
            condition,
            reason: f.reason.clone(),
            at_ns: f.at_ns,
            before_ns: f.at_ns.saturating_sub(from_ns),
            after_ns: self.opts.after_ns,
        });
        let wopts = WriterOptions { staged: true, existing: Existing::Refuse, threads: 1, ..Default::default() };
        let writer = TraceWriter::create_with(&path, &header, wopts).map_err(|e| e.to_string())?;
        let end_ns = f.at_ns.saturating_add(self.opts.after_ns);
        let extend = self.before_ns().min(3600 * 1_000_000_000).max(self.opts.after_ns);
        let mut a = Active {
            writer,
            path: path.clone(),
            triggers: vec![f.trigger.clone()],
            at_ns: f.at_ns,
            from_ns,
            end_ns,
            max_end_ns: end_ns.saturating_add(extend),
            last_id: None,
            base_lost,
            last_lost: base_lost,
            first_ns: None,
            last_end_ns: 0,
            stacks_before,
            committed: false,
            first_readable: None,
            missed: 0,
            short: None,
            budget,
        };
        if slots.is_empty() {
            a.short = Some("the ring held no events from the window before the trigger".into());
        } else if cut.is_some() {
            a.short = cut;
        }
        // The window before the trigger, then the file at its name: readable from here on.
        let r = write_slots(&mut a, &slots).and_then(|()| a.writer.commit().map(|_| ()));
        match r {
            Ok(()) => {
                a.committed = true;
                a.first_readable = Some(since(a.at_ns));
                self.active = Some(a);
                Ok(path)
            }
            Err(e) => {
                let msg = e.to_string();
                self.fail(a, e);
                Err(msg)
            }
        }
    }

    /// Write the blocks that arrived for the dump in progress; finish it once its window has
    /// passed (or at once, `stopping`).
    fn progress(&mut self, stopping: bool) {
        let Some(mut a) = self.active.take() else { return };
        let grace = self.opts.grace.as_nanos() as u64;
        let now = mono_ns();
        let slots = {
            let st = self.shared.state.lock().unwrap_or_else(|p| p.into_inner());
            match a.last_id {
                Some(id) => st.ring.after(id),
                None => st.ring.window(a.from_ns).0,
            }
        };
        let limit = a.end_ns.saturating_add(grace);
        let take: Vec<Slot> = slots.into_iter().filter(|s| s.sealed_ns <= limit || stopping).collect();
        if let Err(e) = write_slots(&mut a, &take) {
            self.fail(a, e);
            return;
        }
        if now < limit && !stopping && a.short.as_deref() != Some(BUDGET) {
            self.active = Some(a);
            return;
        }
        if stopping && now < limit {
            a.short
                .get_or_insert_with(|| "the recording stopped before the window after the trigger had passed".into());
        }
        self.finish(a);
    }

    fn finish(&mut self, mut a: Active) {
        let summary = Summary {
            lost: a.last_lost.saturating_sub(a.base_lost),
            duration_ns: a.last_end_ns.saturating_sub(a.first_ns.unwrap_or(a.last_end_ns)),
            end_ns: a.last_end_ns,
            ..Default::default()
        };
        if a.missed > 0 {
            a.short.get_or_insert_with(|| {
                format!("{} blocks left the ring before they were written (the disk was too slow)", a.missed)
            });
        }
        let path = a.path.clone();
        let took = since(a.at_ns);
        let first_readable = a.first_readable.unwrap_or(took);
        let (triggers, at_ns, from, to, short) =
            (a.triggers.clone(), a.at_ns, a.first_ns, a.last_end_ns, a.short.clone());
        let Active { writer, .. } = a;
        match writer.finish(summary) {
            Ok(s) => {
                let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(s.bytes);
                {
                    let mut st = self.stats();
                    st.dumps += 1;
                    st.bytes_written += bytes;
                }
                self.emit(FlightEvent::Done(DumpReport {
                    path: path.clone(),
                    triggers,
                    events: s.events,
                    bytes,
                    lost: s.lost,
                    from_ns: from.unwrap_or(to),
                    to_ns: to,
                    at_ns,
                    first_readable,
                    took,
                    short,
                }));
                self.retain(&path);
            }
            Err(e) => {
                self.stats().failed += 1;
                let full = files::is_full(&e);
                let error = describe_failure(&e, full, &self.opts.dir);
                self.emit(FlightEvent::Failed { path: Some(path), error, kept: true });
            }
        }
    }

    /// `--keep N`: the oldest dumps beyond N go (never the one just written).
    fn retain(&mut self, newest: &Path) {
        let Some(keep) = self.opts.keep else { return };
        let have = files::list(&self.opts.dir, DUMP_PREFIX);
        let excess = have.len().saturating_sub(keep);
        for old in have.into_iter().filter(|l| l.path != newest).take(excess) {
            if std::fs::remove_file(&old.path).is_ok() {
                self.stats().deleted += 1;
                self.emit(FlightEvent::Deleted { path: old.path, why: format!("--keep {keep}: the oldest dump goes") });
            }
        }
    }

    /// A write failed: keep what was written (at its name, cut back to its last complete block)
    /// and say so; the ring keeps running.
    fn fail(&mut self, mut a: Active, e: TraceError) {
        self.stats().failed += 1;
        let full = files::is_full(&e);
        let kept = a.committed || a.writer.commit().is_ok();
        let error = describe_failure(&e, full, &self.opts.dir);
        let path = a.path.clone();
        drop(a);
        self.emit(FlightEvent::Failed { path: Some(path), error, kept });
    }

    fn stop(&mut self) {
        self.progress(true);
        // A dump still waiting for the gap is written with what the ring holds.
        self.start_pending(true);
        self.progress(true);
    }
}

/// Why a dump of about `estimate` bytes is not begun with `free` bytes free in `dir`, if it is not.
fn no_room(free: u64, estimate: u64, dir: &Path) -> Option<String> {
    (free < estimate.saturating_add(DISK_RESERVE)).then(|| {
        format!(
            "not enough disk space: {} free in {}, the dump needs about {} and {} is left free \
             (the ring keeps running; dumps resume when there is room)",
            fmt_bytes(free),
            dir.display(),
            fmt_bytes(estimate),
            fmt_bytes(DISK_RESERVE)
        )
    })
}

/// Space a dump leaves free on its disk: the estimate is rough, and a disk filled to the last
/// byte fails other writers too.
pub(crate) const DISK_RESERVE: u64 = 1 << 20;

const BUDGET: &str = "the disk budget was reached (--disk-budget)";

fn describe_failure(e: &TraceError, full: bool, dir: &Path) -> String {
    if full {
        format!(
            "the disk is full ({e}); the ring keeps running, and the next trigger dumps again once {} has room",
            dir.display()
        )
    } else {
        e.to_string()
    }
}

/// Write `slots` (in ring order) into the dump; stops at the budget.
fn write_slots(a: &mut Active, slots: &[Slot]) -> Result<(), TraceError> {
    for s in slots {
        if a.last_id.is_some_and(|l| s.id <= l) {
            continue;
        }
        if let Some(l) = a.last_id {
            a.missed += s.id - l - 1;
        }
        if a.short.as_deref() == Some(BUDGET) {
            break;
        }
        if let Some(b) = a.budget {
            if a.writer.bytes() + s.block.file_bytes() > b {
                a.short = Some(BUDGET.into());
                break;
            }
        }
        let lost = s.block.lost_total().saturating_sub(a.base_lost);
        // The entries of earlier blocks go with the first block of syscalls (the readers after
        // stacks read syscall blocks).
        let stacks = if s.block.kinds()[0] > 0 { std::mem::take(&mut a.stacks_before) } else { String::new() };
        a.writer.write_sealed(&s.block, lost, &stacks)?;
        a.last_id = Some(s.id);
        a.last_lost = s.block.lost_total();
        if let Some((t0, _)) = s.block.ts_range() {
            a.first_ns = Some(a.first_ns.map_or(t0, |f| f.min(t0)));
        }
        a.last_end_ns = a.last_end_ns.max(s.block.end_max().unwrap_or(0));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_disk_space_message_names_the_space_left_free() {
        let dir = Path::new("/var/tmp/flight");
        let mib = 1 << 20;
        // More free than the dump needs, less than it needs plus what is left free.
        let why = no_room(2 * mib + mib / 3, mib + 2 * mib / 5, dir).expect("not begun");
        assert!(why.contains("2.33MiB free") && why.contains("needs about 1.40MiB"), "{why}");
        assert!(why.contains("and 1.00MiB is left free"), "{why}");
        assert_eq!(no_room(3 * mib, 2 * mib, dir), None, "the dump and the space left free fit");
    }
}
