//! Feeds of spectrogram rows from any source: a file read through a filter ([`FileFeed`]), the
//! live event stream ([`StreamFeed`]) and in-kernel counts ([`CountFeed`]). They know sources
//! only through [`EventSource`] and [`CountSource`], so the spectrogram never learns whether its
//! rows come from a trace or the probes.

use super::feed::{DrillQuery, DrillResult, EventWindow, Feed, Visited, Visitor};
use super::render::FeedStatus;
use super::{Buckets, GroupOrder, Spectrogram};
use crate::events::{line, TimeFormat};
use crate::group::{GroupBy, Grouper};
use crate::stacks::StackNames;
use crate::waits::Counted;
use latscope_event::source::{Chunk, CountKey, CountSource, EventSource, SourceError, ZonePlan};
use latscope_event::{EventBatch, EventKind, StackTable, TraceHeader};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Rows are sealed this long after they end (live), so that events still in the ring buffer land
/// in them.
const GRACE_NS: u64 = 200_000_000;

/// Events ending this long after a row are awaited before the row is sealed (a trace is in
/// completion order per CPU, not globally).
const FILE_SLACK_NS: u64 = 2_000_000_000;

/// What every feed draws.
#[derive(Debug, Clone)]
pub struct FeedOptions {
    /// The events drawn: syscalls or block requests.
    pub kind: EventKind,
    /// One strip per group.
    pub by: Option<GroupBy>,
    /// The source's filter, for the status line ("" for none).
    pub filter: String,
    /// Live streams: events kept for drill-down.
    pub keep: usize,
    /// Count idle waits too ([`crate::waits`]; by default they are left out, as in every view).
    pub waits: bool,
}

/// What a feed of `kind` events counts, and how its status says it.
fn counted_note(c: &Counted, kind: u8) -> String {
    if kind != EventKind::Syscall as u8 {
        return String::new();
    }
    match (c.with_waits(), c.left_out().count()) {
        (true, _) => " (idle waits included)".into(),
        (false, 0) => String::new(),
        (false, n) => format!(" ({n} idle waits left out)"),
    }
}

/// Names the spectrogram's strips after the grouper's groups.
struct Strips {
    grouper: Grouper,
    named: usize,
    header: TraceHeader,
}

impl Strips {
    fn new(by: Option<GroupBy>, header: &TraceHeader, spec: &mut Spectrogram) -> Strips {
        let by = by.unwrap_or(GroupBy::All);
        spec.set_group_order(match by {
            GroupBy::Class | GroupBy::Disk => GroupOrder::ById,
            _ => GroupOrder::ByTotal,
        });
        let mut s = Strips { grouper: Grouper::new(by), named: 0, header: header.clone() };
        if by == GroupBy::Class {
            // The four fd classes as strips from the start; `block` only when seen.
            s.named = 0;
            for g in 0..4 {
                spec.set_group_name(g as u32, s.grouper.names()[g].clone());
            }
            s.named = 4;
        }
        s
    }

    fn by(&self) -> GroupBy {
        self.grouper.by()
    }

    #[inline]
    fn group(&mut self, b: &EventBatch, i: usize) -> u32 {
        if self.by() == GroupBy::All {
            return 0;
        }
        self.grouper.group(b, i, &self.header) as u32
    }

    /// Take the cgroups a source learned since (containers started after it began).
    fn learn(&mut self, h: Option<&TraceHeader>) {
        if let Some(h) = h {
            if h.cgroups.len() > self.header.cgroups.len() {
                let n = self.header.cgroups.len();
                self.header.cgroups.extend_from_slice(&h.cgroups[n..]);
            }
        }
    }

    fn key(&mut self, k: CountKey) -> u32 {
        self.grouper.group_of_key(k, &self.header) as u32
    }

    /// Give new groups (and renamed ones: processes that exec'd) their names.
    fn flush(&mut self, spec: &mut Spectrogram) {
        let names = self.grouper.names();
        for (g, n) in names.iter().enumerate() {
            if g >= self.named || spec.group_name(g as u32) != *n {
                spec.set_group_name(g as u32, n.clone());
            }
        }
        self.named = names.len();
    }
}

/// Does event `i` belong to the view (the right kind, a latency)?
#[inline]
fn wanted(b: &EventBatch, i: usize, kind: u8) -> bool {
    b.kind[i] == kind && b.lat[i] > 0
}

/// Events per second in the last complete row.
fn last_rate(spec: &Spectrogram) -> f64 {
    let s = spec.sealed();
    if s == spec.first_index() {
        return 0.0;
    }
    spec.row(s - 1).map_or(0.0, |r| r.total() as f64 * 1e9 / spec.interval_ns() as f64)
}

fn err(e: SourceError) -> String {
    e.to_string()
}

// ---------------------------------------------------------------- files

/// Opens the file again, unfiltered by zone maps, for drill-down.
pub type Reopen = Box<dyn FnMut() -> Result<Box<dyn EventSource>, SourceError>>;

/// Rows from a recorded source (a scan of a trace file), paced or at once.
pub struct FileFeed {
    source: Box<dyn EventSource>,
    reopen: Reopen,
    counter: FileCounter,
    filter_text: String,
    /// Pacing: wall-clock start and speed.
    pace: Option<(Instant, f64)>,
    done: bool,
    /// Said in the status line when nothing else is (e.g. why the file is not paced).
    pub note: String,
}

/// Counts a file's events into rows.
struct FileCounter {
    strips: Strips,
    /// No filter and one strip: the hot loop.
    simple: bool,
    kind: u8,
    max_end: u64,
    /// What the rows count: idle waits left out unless asked for.
    counted: Counted,
    /// Whether idle waits are told apart (syscalls, not `waits`).
    sift: bool,
}

impl FileFeed {
    /// A feed of the `kind` events of `source`, split by `by`; `pace` draws at that multiple of
    /// the recording's speed. `filter` is the source's filter text ("" for none).
    pub fn new(
        source: Box<dyn EventSource>,
        reopen: Reopen,
        o: &FeedOptions,
        pace: Option<f64>,
        spec: &mut Spectrogram,
    ) -> FileFeed {
        let strips = Strips::new(o.by, source.header(), spec);
        let simple = o.filter.is_empty() && strips.by() == GroupBy::All;
        FileFeed {
            source,
            reopen,
            counter: FileCounter {
                strips,
                simple,
                kind: o.kind as u8,
                max_end: 0,
                counted: Counted::new(o.waits),
                sift: o.kind == EventKind::Syscall && !o.waits,
            },
            filter_text: o.filter.clone(),
            pace: pace.map(|s| (Instant::now(), s)),
            done: false,
            note: String::new(),
        }
    }

    /// What a source with zone maps may skip for the simple case (no filter, one strip): a block
    /// of the kind only whose end times fall in one row needs `lat` alone.
    pub fn zone_plan(kind: EventKind, spec: &Spectrogram, by: Option<GroupBy>, filtered: bool) -> Option<ZonePlan> {
        if filtered || by.is_some_and(|b| b != GroupBy::All) {
            return None;
        }
        let (interval, origin) = (spec.interval_ns(), spec.origin_ns());
        Some(ZonePlan {
            kind,
            by_end: true,
            at_needs_all_kind: true,
            bucket: Some(Arc::new(move |end: u64| Some(end.saturating_sub(origin) / interval))),
        })
    }

    /// Trace time the display has reached.
    fn target(&self, spec: &Spectrogram) -> u64 {
        match self.pace {
            Some((start, speed)) => spec.origin_ns() + (start.elapsed().as_secs_f64() * speed * 1e9) as u64,
            None => u64::MAX,
        }
    }
}

impl FileCounter {
    /// Count one batch of a file into the spectrogram.
    fn count(&mut self, spec: &mut Spectrogram, c: Chunk<'_>) {
        let (b, rows, z, kind) = (c.batch, c.rows, c.zone, self.kind);
        let max_end = &mut self.max_end;
        let n = b.len();
        let counted = &mut self.counted;
        if self.sift {
            // Idle waits are told apart per event (by `nr`): no column-at-once shortcut.
            if z.empty {
                return;
            }
            for &r in rows {
                let i = r as usize;
                if (z.all_kind || b.kind[i] == kind) && b.lat[i] > 0 && counted.counts(b, i) {
                    let g = if self.simple { 0 } else { self.strips.group(b, i) };
                    let end = z.at.unwrap_or_else(|| b.end(i));
                    spec.add(end, b.lat[i], g);
                    *max_end = (*max_end).max(end);
                }
            }
            if !self.simple {
                self.strips.flush(spec);
            }
            return;
        }
        if self.simple {
            // The hot loop: two columns, one strip. With a zone map, a block of the wanted kind
            // only whose end times fall in one row needs `lat` alone (the block's largest end time
            // is the metadata's), and a block without the kind nothing.
            if z.empty {
                return;
            }
            let lat = &b.lat[..n];
            if let Some(end) = z.at {
                for &l in lat {
                    spec.add(end, l, 0);
                }
                *max_end = (*max_end).max(end);
                return;
            }
            let ts = &b.ts[..n];
            let mut m = *max_end;
            if z.all_kind {
                for i in 0..n {
                    let end = ts[i].saturating_add(lat[i]);
                    spec.add(end, lat[i], 0);
                    m = m.max(end);
                }
            } else {
                let kinds = &b.kind[..n];
                for i in 0..n {
                    if kinds[i] == kind {
                        let end = ts[i].saturating_add(lat[i]);
                        spec.add(end, lat[i], 0);
                        m = m.max(end);
                    }
                }
            }
            *max_end = m;
            return;
        }
        for &i in rows {
            let i = i as usize;
            if wanted(b, i, kind) {
                let g = self.strips.group(b, i);
                let end = b.end(i);
                spec.add(end, b.lat[i], g);
                *max_end = (*max_end).max(end);
            }
        }
        self.strips.flush(spec);
    }
}

impl Feed for FileFeed {
    fn damage(&self) -> latscope_event::source::SourceDamage {
        self.source.damage()
    }

    fn pump(&mut self, spec: &mut Spectrogram, wait: Duration) -> Result<bool, String> {
        if self.done {
            return Ok(false);
        }
        let started = Instant::now();
        let target = self.target(spec);
        while self.counter.max_end < target.saturating_add(FILE_SLACK_NS)
            && started.elapsed() < Duration::from_millis(100)
        {
            match self.source.next_chunk_and_header(Duration::ZERO).map_err(err)? {
                None => {
                    self.done = true;
                    spec.seal_until(spec.row_of(self.counter.max_end) + 1);
                    return Ok(false);
                }
                Some((c, h)) => {
                    self.counter.strips.learn(h);
                    self.counter.count(spec, c)
                }
            }
        }
        let max_end = self.counter.max_end;
        let complete = spec.row_of(max_end.saturating_sub(FILE_SLACK_NS));
        let due = if target == u64::MAX { complete } else { complete.min(spec.row_of(target)) };
        spec.seal_until(due);
        if self.pace.is_some() && max_end >= target.saturating_add(FILE_SLACK_NS) {
            std::thread::sleep(wait);
        }
        Ok(true)
    }

    fn finish(&mut self, _spec: &mut Spectrogram, _end_ns: u64) -> Result<(), String> {
        // A file's rows are sealed as they are read; its times are not now's.
        Ok(())
    }

    fn status(&self, spec: &Spectrogram) -> FeedStatus {
        let mut note = String::new();
        if let Some((_, speed)) = self.pace {
            if !self.done {
                note = format!("paced at {speed}x (n: draw the rest now)");
            }
        } else {
            note.clone_from(&self.note);
        }
        // A file drops nothing; what the recording lost is worth a word.
        let lost = self.source.lost();
        if lost > 0 {
            let sep = if note.is_empty() { "" } else { "; " };
            note = format!("{note}{sep}{lost} events lost when recorded");
        }
        FeedStatus {
            source: self.source.describe(),
            filter: self.filter_text.clone(),
            events_per_s: last_rate(spec),
            drops: None,
            note,
            has_events: true,
            counted: counted_note(&self.counter.counted, self.counter.kind),
        }
    }

    fn drill(&mut self, _spec: &Spectrogram, q: &DrillQuery) -> Result<DrillResult, String> {
        let mut src = (self.reopen)().map_err(err)?;
        let header = src.header().clone();
        let kind = self.counter.kind;
        let mut hits: Vec<(u64, String)> = Vec::new();
        let mut matched = 0u64;
        while let Some(c) = src.next_chunk(Duration::ZERO).map_err(err)? {
            let b = c.batch;
            let mut min_end = u64::MAX;
            for &i in c.rows {
                let i = i as usize;
                let end = b.end(i);
                min_end = min_end.min(end);
                let left_out = self.counter.sift && crate::waits::is_idle(b, i);
                if end < q.t_from || end >= q.t_to || !wanted(b, i, kind) || left_out {
                    continue;
                }
                let g = self.counter.strips.group(b, i);
                if q.contains(end, b.lat[i], g) {
                    matched += 1;
                    if hits.len() < q.limit {
                        hits.push((b.ts[i], line(&header, b, i, TimeFormat::Relative)));
                    }
                }
            }
            if min_end != u64::MAX && min_end > q.t_to.saturating_add(FILE_SLACK_NS) {
                break;
            }
        }
        hits.sort();
        Ok(DrillResult { lines: hits.into_iter().map(|(_, l)| l).collect(), matched, note: None })
    }

    fn fast_forward(&mut self) {
        self.pace = None;
    }
}

// ---------------------------------------------------------------- live, event stream

/// Rows from the live event stream, with a window of recent events for drill-down.
pub struct StreamFeed {
    source: Box<dyn EventSource>,
    strips: Strips,
    window: EventWindow,
    kind: u8,
    filter_text: String,
    /// Why the events are streamed (shown in the status line).
    pub note: String,
    /// Events ending at or after this are not drawn (set by `finish`).
    until: u64,
    /// The stack table the kept events refer to, from the entries the chunks carry.
    stacks: Option<StackNames>,
    /// What the rows count: idle waits left out unless asked for.
    counted: Counted,
    /// The source does not trace the idle waits at all (switched from in-kernel counting, which
    /// left them out in the kernel).
    waits_untraced: bool,
}

impl StreamFeed {
    /// A feed of the events of a live `source`, keeping the last `keep` for drill-down.
    pub fn new(source: Box<dyn EventSource>, o: &FeedOptions, spec: &mut Spectrogram) -> StreamFeed {
        let strips = Strips::new(o.by, source.header(), spec);
        Self::with_strips(source, strips, o)
    }

    fn with_strips(source: Box<dyn EventSource>, strips: Strips, o: &FeedOptions) -> Self {
        StreamFeed {
            source,
            strips,
            window: EventWindow::new(o.keep),
            kind: o.kind as u8,
            filter_text: o.filter.clone(),
            note: String::new(),
            until: u64::MAX,
            stacks: None,
            counted: Counted::new(o.waits),
            waits_untraced: false,
        }
    }
}

impl Feed for StreamFeed {
    fn pump(&mut self, spec: &mut Spectrogram, wait: Duration) -> Result<bool, String> {
        let Some((c, h)) = self.source.next_chunk_and_header(wait.min(Duration::from_millis(50))).map_err(err)? else {
            return Ok(false);
        };
        self.strips.learn(h);
        let b = c.batch;
        if !b.stacks.is_empty() {
            let names = self.stacks.get_or_insert_with(|| StackNames::new(StackTable::default(), None));
            names.add_lines(&b.stacks)?;
        }
        // The events drawn are kept for drill-down (only those: the batch is the source's).
        let mut kept = EventBatch::default();
        let mut groups = Vec::new();
        for &i in c.rows {
            let i = i as usize;
            if wanted(b, i, self.kind) && b.end(i) < self.until && self.counted.counts(b, i) {
                let g = self.strips.group(b, i);
                spec.add(b.end(i), b.lat[i], g);
                kept.push_from(b, i);
                groups.push(g);
            }
        }
        self.strips.flush(spec);
        if !kept.is_empty() {
            let rows = (0..kept.len() as u32).collect();
            self.window.push(kept, rows, groups);
        }
        let now = now_ns();
        spec.seal_until(spec.row_of(now.saturating_sub(GRACE_NS)));
        Ok(true)
    }

    fn status(&self, spec: &Spectrogram) -> FeedStatus {
        FeedStatus {
            source: self.source.describe(),
            filter: self.filter_text.clone(),
            events_per_s: last_rate(spec),
            drops: Some(self.source.lost()),
            note: self.note.clone(),
            has_events: true,
            counted: if self.waits_untraced && !self.counted.with_waits() {
                " (idle waits not traced: left out in the kernel)".into()
            } else {
                counted_note(&self.counted, self.kind)
            },
        }
    }

    fn drill(&mut self, _spec: &Spectrogram, q: &DrillQuery) -> Result<DrillResult, String> {
        Ok(self.window.select(self.source.header(), q))
    }

    fn finish(&mut self, spec: &mut Spectrogram, end_ns: u64) -> Result<(), String> {
        // Events reach the ring buffer within the grace period after they end.
        self.until = end_ns;
        while now_ns() < end_ns.saturating_add(GRACE_NS) {
            if !self.pump(spec, Duration::from_millis(20))? {
                break;
            }
        }
        spec.seal_until(spec.row_of(end_ns.saturating_sub(1)) + 1);
        Ok(())
    }

    fn visit(&mut self, _spec: &Spectrogram, q: &DrillQuery, f: &mut Visitor<'_>) -> Result<Visited, String> {
        Ok(self.window.visit(self.source.header(), q, f))
    }

    fn stack_names(&mut self) -> Option<&mut StackNames> {
        self.stacks.as_mut()
    }
}

/// CLOCK_MONOTONIC now, ns (the clock of the events and rows).
pub(crate) fn now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

// ---------------------------------------------------------------- live, in-kernel counts

/// Rows from in-kernel histograms, read once per row; switches to a [`StreamFeed`] when the
/// user asks for events.
pub struct CountFeed {
    source: Option<Box<dyn CountSource>>,
    prev: HashMap<CountKey, Vec<u64>>,
    strips: Strips,
    o: FeedOptions,
    next_row: u64,
    stream: Option<StreamFeed>,
}

impl CountFeed {
    /// A feed of `source`'s counts, split by `by` (class, syscall or disk). `devices` are named as
    /// disk strips from the start.
    pub fn new(
        source: Box<dyn CountSource>,
        header: &TraceHeader,
        devices: &[u32],
        o: &FeedOptions,
        spec: &mut Spectrogram,
    ) -> CountFeed {
        let mut strips = Strips::new(o.by, header, spec);
        if o.by == Some(GroupBy::Disk) {
            for &d in devices {
                strips.key(CountKey::Dev(d));
            }
            strips.flush(spec);
        }
        CountFeed { source: Some(source), prev: HashMap::new(), strips, o: o.clone(), next_row: 0, stream: None }
    }
}

impl CountFeed {
    /// The counts since the last read, per group.
    fn read_deltas(&mut self, spec: &mut Spectrogram) -> Result<Vec<(u32, Vec<u64>)>, String> {
        let source = self.source.as_mut().ok_or("no source")?;
        let counts = source.read_counts().map_err(err)?;
        let mut groups: Vec<(u32, Vec<u64>)> = Vec::new();
        for (key, c) in counts {
            let prev = self.prev.entry(key).or_default();
            prev.resize(c.len(), 0);
            let delta: Vec<u64> = c.iter().zip(prev.iter()).map(|(a, b)| a.saturating_sub(*b)).collect();
            *prev = c;
            let g = self.strips.key(key);
            match groups.iter_mut().find(|(k, _)| *k == g) {
                Some((_, acc)) => acc.iter_mut().zip(&delta).for_each(|(a, v)| *a += v),
                None => groups.push((g, delta)),
            }
        }
        self.strips.flush(spec);
        Ok(groups)
    }
}

impl Feed for CountFeed {
    fn pump(&mut self, spec: &mut Spectrogram, wait: Duration) -> Result<bool, String> {
        if let Some(s) = &mut self.stream {
            return s.pump(spec, wait);
        }
        let now = now_ns();
        let due = spec.row_start(self.next_row + 1);
        if now < due {
            std::thread::sleep(Duration::from_nanos(due - now).min(wait));
            if now_ns() < due {
                return Ok(true);
            }
        }
        let groups = self.read_deltas(spec)?;
        // A late read (the display was busy) puts everything since the last one in the last
        // complete row.
        let row = spec.row_of(now_ns()).saturating_sub(1).max(self.next_row);
        spec.add_row_counts(row, Buckets::KERNEL, &groups);
        self.next_row = row + 1;
        Ok(true)
    }

    fn status(&self, spec: &Spectrogram) -> FeedStatus {
        if let Some(s) = &self.stream {
            let mut st = s.status(spec);
            st.source = "live: event stream (switched from in-kernel aggregation)".into();
            return st;
        }
        FeedStatus {
            source: self.source.as_ref().map_or_else(String::new, |s| s.describe()),
            filter: self.o.filter.clone(),
            events_per_s: last_rate(spec),
            drops: Some(0),
            note: String::new(),
            has_events: false,
            counted: match (self.o.kind, self.o.waits) {
                (EventKind::Syscall, false) => " (idle waits not counted: left out in the kernel)".into(),
                (EventKind::Syscall, true) => " (idle waits included)".into(),
                _ => String::new(),
            },
        }
    }

    fn drill(&mut self, spec: &Spectrogram, q: &DrillQuery) -> Result<DrillResult, String> {
        if let Some(s) = &mut self.stream {
            return s.drill(spec, q);
        }
        Ok(DrillResult {
            lines: Vec::new(),
            matched: 0,
            note: Some(
                "the histograms are built in the kernel, which keeps no events: press s to switch to the event stream \
                 (events from then on can be listed), or start with --stream"
                    .into(),
            ),
        })
    }

    fn finish(&mut self, spec: &mut Spectrogram, end_ns: u64) -> Result<(), String> {
        if let Some(s) = &mut self.stream {
            return s.finish(spec, end_ns);
        }
        // The counts since the last read, into the row holding the end (the kernel's counts
        // cannot be split in time).
        let last = spec.row_of(end_ns.saturating_sub(1));
        if self.next_row <= last {
            let groups = self.read_deltas(spec)?;
            spec.add_row_counts(last, Buckets::KERNEL, &groups);
            self.next_row = last + 1;
        }
        spec.seal_until(last + 1);
        Ok(())
    }

    fn visit(&mut self, spec: &Spectrogram, q: &DrillQuery, f: &mut Visitor<'_>) -> Result<Visited, String> {
        match &mut self.stream {
            Some(s) => s.visit(spec, q, f),
            None => Ok(Visited {
                events: 0,
                note: Some(
                    "the histograms are built in the kernel, which keeps no events: switch to the event stream".into(),
                ),
            }),
        }
    }

    fn stack_names(&mut self) -> Option<&mut StackNames> {
        self.stream.as_mut().and_then(|s| s.stack_names())
    }

    fn keep_events(&mut self, spec: &mut Spectrogram) -> Result<String, String> {
        if self.stream.is_some() {
            return Ok("already streaming events".into());
        }
        let source = self.source.take().ok_or("no source")?;
        let events = source.into_events().map_err(err)?;
        // The same strips: a group keeps its number across the switch.
        let strips = std::mem::replace(&mut self.strips, Strips::new(None, events.header(), spec));
        let mut s = StreamFeed::with_strips(events, strips, &self.o);
        s.waits_untraced = self.o.kind == EventKind::Syscall && !self.o.waits;
        // Short: the status line is shared with the numbers and the key hints.
        s.note = "events kept since the switch".into();
        spec.seal_until(self.next_row);
        self.stream = Some(s);
        Ok("switched to the event stream: select cells of the new rows to list their events".into())
    }
}
