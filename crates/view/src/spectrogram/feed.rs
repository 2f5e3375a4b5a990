//! Data sources of the spectrogram (live probes, trace files) implement [`Feed`]; the runners in
//! [`super::tui`] drive them. [`EventWindow`] keeps recent events for drill-down.

use super::model::Spectrogram;
use super::render::FeedStatus;
use crate::events::{line, TimeFormat};
use latscope_event::units::fmt_ns;
use latscope_event::{EventBatch, TraceHeader};
use std::collections::VecDeque;
use std::time::Duration;

/// The events of a drill-down: a time x latency rectangle, maybe one group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrillQuery {
    /// Events ending at or after this time (same clock as the rows).
    pub t_from: u64,
    /// ... and before this one.
    pub t_to: u64,
    /// Latency at least this (ns).
    pub lat_lo: u64,
    /// ... and below this.
    pub lat_hi: u64,
    /// Only this group (`None`: any).
    pub group: Option<u32>,
    /// Most lines returned.
    pub limit: usize,
}

impl DrillQuery {
    /// Does an event ending at `end` with latency `lat` in group `g` fall inside?
    #[inline]
    pub fn contains(&self, end: u64, lat: u64, g: u32) -> bool {
        end >= self.t_from
            && end < self.t_to
            && lat >= self.lat_lo
            && lat < self.lat_hi
            && self.group.is_none_or(|want| want == g)
    }

    /// A one-line description: `events ending 12.5s..13.0s, latency 100us..126us`.
    pub fn describe(&self, origin_ns: u64) -> String {
        let rel = |t: u64| format!("{:.3}s", t.saturating_sub(origin_ns) as f64 / 1e9);
        format!(
            "ending {}..{}, latency {}..{}",
            rel(self.t_from),
            rel(self.t_to),
            fmt_ns(self.lat_lo),
            fmt_ns(self.lat_hi)
        )
    }
}

/// The answer to a drill-down.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DrillResult {
    /// One line per event (at most the query's limit), in time order.
    pub lines: Vec<String>,
    /// Events inside the rectangle (may exceed the lines).
    pub matched: u64,
    /// Why the list may be incomplete or empty (no events kept, window too short, ...).
    pub note: Option<String>,
}

/// A source of spectrogram rows.
pub trait Feed {
    /// Bring `spec` up to date, waiting at most `wait` for data. Returns `false` when the source
    /// is exhausted (end of a trace file); live sources never end by themselves.
    fn pump(&mut self, spec: &mut Spectrogram, wait: Duration) -> Result<bool, String>;

    /// Numbers and words for the status lines.
    fn status(&self, spec: &Spectrogram) -> FeedStatus;

    /// Damage and warnings the source met (a trace cut short, corrupt blocks skipped).
    fn damage(&self) -> latscope_event::source::SourceDamage {
        Default::default()
    }

    /// The events inside a rectangle.
    fn drill(&mut self, spec: &Spectrogram, q: &DrillQuery) -> Result<DrillResult, String>;

    /// Start keeping events for drill-down if the source does not (live in-kernel aggregation
    /// switching to the event stream). Returns a message for the user.
    fn keep_events(&mut self, _spec: &mut Spectrogram) -> Result<String, String> {
        Ok("this source already keeps its events".into())
    }

    /// Stop pacing: read the rest of a paced source at once (trace files).
    fn fast_forward(&mut self) {}

    /// The last call, for a source stopped at `end_ns` (`-d`, Ctrl-C): take in what ended before
    /// it and seal the rows up to the one holding it, so that the last interval, whole or not,
    /// is drawn.
    fn finish(&mut self, spec: &mut Spectrogram, end_ns: u64) -> Result<(), String> {
        spec.seal_until(spec.row_of(end_ns.saturating_sub(1)) + 1);
        Ok(())
    }

    /// Hand the events inside a rectangle to `f` (event `i` of a batch, with the source's header),
    /// for aggregations over them such as drill-down tables; the query's `limit` does not apply.
    /// Returns how many were visited and why that may be incomplete or empty (a source that keeps
    /// no events visits none and says so).
    fn visit(&mut self, _spec: &Spectrogram, _q: &DrillQuery, _f: &mut Visitor<'_>) -> Result<Visited, String> {
        Ok(Visited { events: 0, note: Some("this source keeps no events".into()) })
    }

    /// The names of the stacks the kept events refer to (`kstack`, `ustack`), when the source
    /// records attribution with stacks; `None` when it records none.
    fn stack_names(&mut self) -> Option<&mut crate::stacks::StackNames> {
        None
    }
}

/// What [`Feed::visit`] calls for each event: the batch, the row, the source's header.
pub type Visitor<'a> = dyn FnMut(&EventBatch, usize, &TraceHeader) + 'a;

/// What [`Feed::visit`] went through.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Visited {
    /// Events handed to the visitor.
    pub events: u64,
    /// Why they may not be all the events inside the rectangle (or why there are none).
    pub note: Option<String>,
}

/// A window of recent events kept for drill-down: whole batches with the rows that matched the
/// filter and their group, dropped oldest first beyond a number of events.
#[derive(Debug, Default)]
pub struct EventWindow {
    batches: VecDeque<(EventBatch, Vec<u32>, Vec<u32>)>,
    kept: usize,
    max_events: usize,
    /// Events dropped from the window so far.
    pub dropped: u64,
    /// End time of the oldest event dropped (drill-downs before it are incomplete).
    pub horizon: u64,
}

impl EventWindow {
    /// A window of at most `max_events` matching events.
    pub fn new(max_events: usize) -> EventWindow {
        EventWindow { max_events: max_events.max(1), ..Default::default() }
    }

    /// Keep `rows` of `batch` (the matching ones) with their `groups` (same length as `rows`).
    pub fn push(&mut self, batch: EventBatch, rows: Vec<u32>, groups: Vec<u32>) {
        if rows.is_empty() {
            return;
        }
        self.kept += rows.len();
        self.batches.push_back((batch, rows, groups));
        while self.kept > self.max_events && self.batches.len() > 1 {
            let (b, rows, _) = self.batches.pop_front().expect("non-empty");
            self.kept -= rows.len();
            self.dropped += rows.len() as u64;
            for &r in &rows {
                self.horizon = self.horizon.max(b.end(r as usize));
            }
        }
    }

    /// Events kept.
    pub fn len(&self) -> usize {
        self.kept
    }
    /// True when nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.kept == 0
    }

    /// Calls `f` for every kept event inside `q` (oldest first by batch), whatever `q.limit`.
    pub fn visit(&self, header: &TraceHeader, q: &DrillQuery, f: &mut Visitor<'_>) -> Visited {
        let mut events = 0u64;
        for (b, rows, groups) in &self.batches {
            for (k, &r) in rows.iter().enumerate() {
                let i = r as usize;
                if q.contains(b.end(i), b.lat[i], groups.get(k).copied().unwrap_or(0)) {
                    events += 1;
                    f(b, i, header);
                }
            }
        }
        Visited { events, note: self.incomplete(q) }
    }

    /// The note of a query reaching back before the oldest kept event.
    fn incomplete(&self, q: &DrillQuery) -> Option<String> {
        (self.dropped > 0 && q.t_from < self.horizon).then(|| {
            format!(
                "the window of kept events starts later ({} older events dropped): the list is incomplete",
                self.dropped
            )
        })
    }

    /// The kept events inside `q`, as event lines.
    pub fn select(&self, header: &TraceHeader, q: &DrillQuery) -> DrillResult {
        let mut hits: Vec<(u64, usize, u32)> = Vec::new();
        let mut matched = 0u64;
        for (bi, (b, rows, groups)) in self.batches.iter().enumerate() {
            for (k, &r) in rows.iter().enumerate() {
                let i = r as usize;
                if q.contains(b.end(i), b.lat[i], groups.get(k).copied().unwrap_or(0)) {
                    matched += 1;
                    hits.push((b.ts[i], bi, r));
                }
            }
        }
        hits.sort_unstable();
        let lines = hits
            .iter()
            .take(q.limit)
            .map(|&(_, bi, r)| line(header, &self.batches[bi].0, r as usize, TimeFormat::Relative))
            .collect();
        DrillResult { lines, matched, note: self.incomplete(q) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use latscope_event::Event;

    #[test]
    fn window_selects_and_evicts() {
        let mut w = EventWindow::new(3);
        let h = TraceHeader::default();
        for k in 0..3u64 {
            let mut b = EventBatch::default();
            for i in 0..2u64 {
                b.push(&Event { ts: k * 100 + i, lat: 10 + i, comm: format!("p{k}"), ..Default::default() });
            }
            w.push(b, vec![0, 1], vec![0, 1]);
        }
        // 6 pushed, cap 3: the first two batches went.
        assert_eq!(w.len(), 2);
        assert_eq!(w.dropped, 4);
        let q = DrillQuery { t_from: 0, t_to: 1_000, lat_lo: 10, lat_hi: 12, group: None, limit: 10 };
        let r = w.select(&h, &q);
        assert_eq!(r.matched, 2);
        assert!(r.lines[0].contains("p2"));
        assert!(r.note.is_some());
        let r = w.select(&h, &DrillQuery { group: Some(1), ..q });
        assert_eq!(r.matched, 1);
        let r = w.select(&h, &DrillQuery { lat_lo: 11, t_from: 205, ..q });
        assert_eq!(r.matched, 1);
        assert!(r.note.is_none());
        // Visiting sees the same events as selecting, whatever the limit.
        let mut seen = Vec::new();
        let v = w.visit(&h, &DrillQuery { limit: 0, ..q }, &mut |b, i, _| seen.push(b.comm.get(i).to_string()));
        assert_eq!((v.events, seen), (2, vec!["p2".to_string(), "p2".to_string()]));
        assert!(v.note.is_some());
        assert!(q.describe(0).starts_with("ending 0.000s..0.000s, latency 10ns..12ns"));
    }
}
