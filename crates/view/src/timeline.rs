//! Load over time: operations per second, throughput and p50/p99/max latency per interval, to
//! answer "was it load?" next to a heat map (a latency change without a load change is not load).
//!
//! An event is counted in the interval in which it completed (start + latency), as `iostat` counts
//! I/O; interval `k` covers `[origin + k * interval, origin + (k + 1) * interval)`.
//!
//! Idle waits ([`crate::waits`]: nanosleep, poll, select, futex, epoll_wait, wait4, ...) last as
//! long as their caller chooses to wait, not as long as the system makes it: like every view, the
//! timeline leaves them out (of its counts, rates and latency) unless asked for, and counts them
//! per interval.
//!
//! Rates divide by the time each interval covers ([`latscope_event::span`]): the whole interval,
//! except where the recording (or the filter's window) starts or ends within it.

use crate::heatmap::{moved_bytes, YUnit};
use crate::latagg::LatAgg;
use crate::svg::{self, Svg, SERIES_COLORS};
use crate::waits::Counted;
use latscope_event::source::{Chunk, ZonePlan};
use latscope_event::span::per_sec;
use latscope_event::units::{fmt_bytes, fmt_count, fmt_ns, fmt_ns_f};
use latscope_event::{EventBatch, EventKind, Span};
use serde_json::{json, Value};
use std::fmt::Write;
use std::sync::Arc;

#[derive(Debug, Clone, Default)]
struct Slot {
    count: u64,
    bytes: u64,
    /// Latencies of the events in the latency statistics.
    lat_sum: u128,
    lat: LatAgg,
    /// Idle waits left out.
    waits: u64,
}

/// The values of one interval.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// Interval start, seconds from the origin.
    pub t: f64,
    /// The seconds of the interval the counts cover: the interval's length, or less for the
    /// part of an interval where the recording (or the filter's window) starts or ends.
    pub secs: f64,
    /// Events completed.
    pub count: u64,
    /// Events per second (of `secs`).
    pub ops_per_sec: f64,
    /// Bytes moved.
    pub bytes: u64,
    /// Bytes per second.
    pub bytes_per_sec: f64,
    /// Mean latency, ns (`None` without events; blocking waits left out unless asked for).
    pub mean_ns: Option<f64>,
    /// Median latency, ns.
    pub p50_ns: Option<u64>,
    /// 99th percentile latency, ns.
    pub p99_ns: Option<u64>,
    /// Largest latency, ns.
    pub max_ns: Option<u64>,
    /// Idle waits completed, left out.
    pub waits: u64,
}

/// Per-interval load and latency.
#[derive(Debug)]
pub struct Timeline {
    origin_ns: u64,
    interval_ns: u64,
    max_slots: usize,
    slots: Vec<Slot>,
    /// Events that completed before the origin (counted in the first interval).
    pub early: u64,
    /// Events after the last interval allowed (not counted).
    pub dropped: u64,
    /// What the timeline counts ([`crate::waits`]).
    counted: Counted,
    /// The first and last end time counted (the span of the events, for inputs that do not say
    /// how long they were recorded).
    ends: Option<(u64, u64)>,
    /// The time the counts cover, when known (the rates of the first and last intervals).
    covered: Option<Span>,
}

impl Timeline {
    /// Intervals of `interval_ns` from `origin_ns` (CLOCK_MONOTONIC), at most `max_slots` of them.
    pub fn new(origin_ns: u64, interval_ns: u64, max_slots: usize) -> Self {
        Timeline {
            origin_ns,
            interval_ns: interval_ns.max(1),
            max_slots,
            slots: Vec::new(),
            early: 0,
            dropped: 0,
            counted: Counted::new(false),
            ends: None,
            covered: None,
        }
    }

    /// The time the counts cover ([`latscope_event::span`]): the recording within the filter's
    /// window; an interval's rates divide by its part of it.
    pub fn set_covered(&mut self, covered: Option<Span>) {
        self.covered = covered;
    }

    /// Idle waits counted too (by default they are left out).
    pub fn with_waits(mut self, yes: bool) -> Self {
        self.counted = Counted::new(yes);
        self
    }

    /// The span of the events counted, from the first end time to the last.
    pub fn span(&self) -> Option<Span> {
        self.ends.map(|(a, b)| Span::new(a, b.saturating_add(1)))
    }

    /// The header line: what the timeline counted and left out.
    pub fn headline(&self, kind: EventKind) -> String {
        self.counted.headline(self.slots.iter().map(|s| s.count).sum(), kind)
    }

    /// Idle waits left out, in all intervals.
    pub fn waits(&self) -> u64 {
        self.slots.iter().map(|s| s.waits).sum()
    }

    /// Interval length in seconds.
    pub fn interval_secs(&self) -> f64 {
        self.interval_ns as f64 / 1e9
    }

    /// Adds event `i` (process events are ignored).
    #[inline]
    pub fn add(&mut self, b: &EventBatch, i: usize) {
        self.add_at(b.end(i), b.kind[i], b, i);
    }

    /// Adds event `i` as [`Timeline::add`] does, given its kind and an end time in the same
    /// interval as its own (for a block of events known to complete in one interval, whose
    /// `ts`, and `kind` when all have the same, need not be read).
    #[inline]
    pub fn add_at(&mut self, end: u64, kind: u8, b: &EventBatch, i: usize) {
        if kind == EventKind::Proc as u8 {
            return;
        }
        let k = if end < self.origin_ns {
            self.early += 1;
            0
        } else {
            ((end - self.origin_ns) / self.interval_ns) as usize
        };
        if k >= self.max_slots {
            self.dropped += 1;
            return;
        }
        if k >= self.slots.len() {
            self.slots.resize_with(k + 1, Slot::default);
        }
        let s = &mut self.slots[k];
        if !self.counted.counts(b, i) {
            s.waits += 1;
            return;
        }
        self.ends = Some(self.ends.map_or((end, end), |(a, z)| (a.min(end), z.max(end))));
        s.count += 1;
        s.bytes += if kind == EventKind::Block as u8 { b.bytes[i] } else { moved_bytes(b, i) };
        s.lat_sum += u128::from(b.lat[i]);
        s.lat.record(b.lat[i]);
    }

    /// What a source with zone maps may skip for events of `kind`: a block whose events all
    /// complete in one interval is added without `ts`, and without `kind` when it holds that
    /// kind only.
    pub fn zone_plan(&self, kind: EventKind) -> ZonePlan {
        let (origin, interval) = (self.origin_ns, self.interval_ns);
        ZonePlan {
            kind,
            by_end: true,
            at_needs_all_kind: false,
            bucket: Some(Arc::new(move |end: u64| {
                Some(if end < origin { u64::MAX } else { (end - origin) / interval })
            })),
        }
    }

    /// Adds the events of `kind` among the chunk's rows.
    pub fn add_chunk(&mut self, c: Chunk<'_>, kind: EventKind) {
        let b = c.batch;
        let z = c.zone;
        let k = kind as u8;
        if z.empty {
            return;
        }
        match (z.at, z.all_kind) {
            (Some(end), true) => (0..b.len()).for_each(|i| self.add_at(end, k, b, i)),
            (Some(end), false) => {
                for i in 0..b.len() {
                    if b.kind[i] == k {
                        self.add_at(end, k, b, i);
                    }
                }
            }
            (None, true) => (0..b.len()).for_each(|i| self.add_at(b.end(i), k, b, i)),
            (None, false) => {
                for &i in c.rows {
                    if b.kind[i as usize] == k {
                        self.add(b, i as usize);
                    }
                }
            }
        }
    }

    /// The interval of end time `end` (`u64::MAX` before the origin), for telling whether two
    /// end times fall in the same one.
    pub fn interval_of(&self, end: u64) -> u64 {
        if end < self.origin_ns {
            u64::MAX
        } else {
            (end - self.origin_ns) / self.interval_ns
        }
    }

    /// The seconds interval `k` covers: its part of the covered time, or the whole interval
    /// when that is unknown (or when the interval lies outside it: events completing after a
    /// filter's window).
    fn covered_secs(&self, k: usize) -> f64 {
        let from = self.origin_ns.saturating_add(k as u64 * self.interval_ns);
        match self.covered {
            Some(c) => match c.overlap_secs(from, from.saturating_add(self.interval_ns)) {
                s if s > 0.0 => s,
                _ => self.interval_secs(),
            },
            None => self.interval_secs(),
        }
    }

    /// The intervals from the origin to the last one with an event.
    pub fn points(&self) -> Vec<Point> {
        let secs = self.interval_secs();
        self.slots
            .iter()
            .enumerate()
            .map(|(k, s)| {
                let p = s.lat.percentiles(&[50.0, 99.0]);
                let n = s.lat.count();
                let covered = self.covered_secs(k);
                Point {
                    t: k as f64 * secs,
                    secs: covered,
                    count: s.count,
                    ops_per_sec: per_sec(s.count as f64, covered),
                    bytes: s.bytes,
                    bytes_per_sec: per_sec(s.bytes as f64, covered),
                    mean_ns: (n > 0).then(|| s.lat_sum as f64 / n as f64),
                    p50_ns: p[0],
                    p99_ns: p[1],
                    max_ns: s.lat.max(),
                    waits: s.waits,
                }
            })
            .collect()
    }

    /// What the counts leave out, and why, if anything: for tables and charts.
    pub fn waits_note(&self) -> Option<String> {
        self.counted.left_out().note()
    }

    /// Intervals the counts cover only in part (where the recording or the filter's window
    /// starts or ends), said under a table: their rates are per second of that part.
    fn partial_note(&self, pts: &[Point]) -> Option<String> {
        let secs = self.interval_secs();
        let part: Vec<String> = pts
            .iter()
            .filter(|p| p.secs < secs * (1.0 - 1e-9))
            .map(|p| format!("{} covers {}", svg::fmt_secs(p.t), svg::fmt_secs(p.secs)))
            .collect();
        (!part.is_empty()).then(|| {
            format!(
                "rates divide by the time covered: the interval at {} of its {}",
                part.join(", "),
                svg::fmt_secs(secs)
            )
        })
    }

    /// A table, one line per interval.
    pub fn render_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{:>10} {:>9} {:>10} {:>12} {:>9} {:>9} {:>9} {:>9}",
            "TIME(s)", "COUNT", "OPS/s", "THROUGHPUT", "P50", "P99", "MAX", "MEAN"
        );
        let dash = || "-".to_string();
        let mut mean_above_p99 = 0;
        let pts = self.points();
        for p in &pts {
            if p.mean_ns.zip(p.p99_ns).is_some_and(|(m, q)| m > q as f64) {
                mean_above_p99 += 1;
            }
            let _ = writeln!(
                s,
                "{:>10} {:>9} {:>10} {:>12} {:>9} {:>9} {:>9} {:>9}",
                svg::fmt_num((p.t * 1e6).round() / 1e6),
                p.count,
                fmt_count((p.ops_per_sec * 10.0).round() / 10.0),
                format!("{}/s", fmt_bytes(p.bytes_per_sec as u64)),
                p.p50_ns.map(fmt_ns).unwrap_or_else(dash),
                p.p99_ns.map(fmt_ns).unwrap_or_else(dash),
                p.max_ns.map(fmt_ns).unwrap_or_else(dash),
                p.mean_ns.map(fmt_ns_f).unwrap_or_else(dash),
            );
        }
        if let Some(n) = self.waits_note() {
            let _ = writeln!(s, "({n})");
        }
        if let Some(n) = self.partial_note(&pts) {
            let _ = writeln!(s, "({n})");
        }
        if mean_above_p99 > 0 {
            let _ = writeln!(
                s,
                "(MEAN is above P99 in {mean_above_p99} intervals: fewer than 1 % of the calls there, the longest \
                 (see MAX), make up most of the time)"
            );
        }
        if self.dropped > 0 {
            let _ = writeln!(s, "({} events after the last interval allowed were not counted)", self.dropped);
        }
        s
    }

    /// The series as JSON.
    pub fn to_json(&self, start_wall_ns: Option<i64>) -> Value {
        let pts: Vec<Value> = self
            .points()
            .iter()
            .map(|p| {
                json!({"t_s": p.t, "covered_s": p.secs, "count": p.count, "ops_per_s": p.ops_per_sec, "bytes": p.bytes,
                       "bytes_per_s": p.bytes_per_sec, "mean_ns": p.mean_ns, "p50_ns": p.p50_ns, "p99_ns": p.p99_ns,
                       "max_ns": p.max_ns, "waits": p.waits})
            })
            .collect();
        json!({
            "interval_s": self.interval_secs(),
            "start_wall_ns": start_wall_ns,
            "rule": "an event counts in the interval in which it completed (start + latency)",
            "rate_rule": "rates divide by the seconds of the interval covered (covered_s): less than interval_s where the recording or the filter's time window starts or ends",
            "counted": self.counted.to_json(),
            "latency_rule": if self.counted.with_waits() {
                "every event, idle waits included"
            } else {
                "idle waits (ended by their own timeout or by outside work; without a breakdown, syscalls of class wait) left out of counts, rates and latency, counted in waits"
            },
            "wait_kinds": self.counted.left_out().kinds_json(),
            "completed_before_start": self.early,
            "not_counted": self.dropped,
            "points": pts,
        })
    }

    /// Three stacked line charts sharing the time axis: operations/s, throughput, and p50, p99
    /// and max latency (on a log axis when they span more than a factor of 20). Each interval has
    /// a hover box with all its values; a note says what the latency leaves out.
    pub fn render_svg(&self, title: &str, subtitle: Option<&str>) -> String {
        let pts = self.points();
        let (w, left, right, top, ph, gap) = (1000.0, 80.0, 30.0, 60.0, 160.0, 50.0);
        let note = self.waits_note();
        let height = top + 3.0 * (ph + gap) + 20.0 + if note.is_some() { 16.0 } else { 0.0 };
        let pw = w - left - right;
        let mut s = Svg::new(w, height, "");
        s.text_fit(w / 2.0, 24.0, 17.0, "middle", "black", title, r#"class="title""#, w - 20.0);
        if let Some(sub) = subtitle {
            s.text_fit(w / 2.0, 42.0, 11.0, "middle", "#555", sub, r#"class="subtitle""#, w - 20.0);
        }
        let n = pts.len().max(1);
        let secs = self.interval_secs();
        let tmax = n as f64 * secs;
        let xpos = |t: f64| left + t / tmax * pw;
        let lat = |f: fn(&Point) -> Option<u64>| pts.iter().map(|p| f(p).map(|v| v as f64)).collect::<Vec<_>>();
        type Series<'a> = (&'a str, Vec<Option<f64>>);
        type Panel<'a> = (&'a str, fn(f64) -> String, Vec<Series<'a>>);
        let panels: [Panel; 3] = [
            (
                "Operations per second",
                // Round tick values read round: 10k, 10MiB/s (not 10.0k).
                |v| svg::trim_zeros(&fmt_count(v.round())),
                vec![("ops/s", pts.iter().map(|p| Some(p.ops_per_sec)).collect())],
            ),
            (
                "Throughput (bytes per second)",
                |v| format!("{}/s", svg::trim_zeros(&fmt_bytes(v as u64))),
                vec![("bytes/s", pts.iter().map(|p| Some(p.bytes_per_sec)).collect())],
            ),
            (
                "Latency",
                |v| YUnit::Nanos.fmt_short(v),
                vec![("p50", lat(|p| p.p50_ns)), ("p99", lat(|p| p.p99_ns)), ("max", lat(|p| p.max_ns))],
            ),
        ];
        for (pi, (ptitle, fmt, series)) in panels.iter().enumerate() {
            let y0 = top + pi as f64 * (ph + gap) + 20.0;
            let _ = writeln!(s, r#"<g class="panel" data-panel="{pi}">"#);
            let values = || series.iter().flat_map(|(_, v)| v.iter().flatten()).copied();
            let vmax = values().fold(0.0f64, f64::max);
            let vmin = values().filter(|&v| v > 0.0).fold(f64::INFINITY, f64::min);
            // Latency percentiles spread over decades: a log axis shows them all.
            let log = pi == 2 && vmin.is_finite() && vmax > 20.0 * vmin;
            let (lo, hi) =
                if log { (vmin / 1.5, vmax * 1.5) } else { (0.0, if vmax > 0.0 { vmax * 1.05 } else { 1.0 }) };
            let ypos = |v: f64| {
                if log {
                    y0 + ph - (v.max(lo).ln() - lo.ln()) / (hi.ln() - lo.ln()) * ph
                } else {
                    y0 + ph - (v - lo) / (hi - lo) * ph
                }
            };
            let ptitle = if log { format!("{ptitle} (log)") } else { ptitle.to_string() };
            s.text(left, y0 - 6.0, 12.0, "start", "black", &ptitle, r#"class="paneltitle""#);
            s.rect(left, y0, pw, ph, "white", r##"stroke="#bbb" stroke-width="0.5""##);
            let ticks = match pi {
                1 => YUnit::Bytes.ticks(lo, hi, 4, false),
                2 => YUnit::Nanos.ticks(lo, hi, 4, log),
                _ => svg::linear_ticks(lo, hi, 4),
            };
            for t in ticks {
                let y = ypos(t);
                s.line(left - 4.0, y, left, y, "#333", "");
                s.line(left, y, left + pw, y, "#eee", "");
                s.text(left - 6.0, y + 3.5, 10.0, "end", "#333", &fmt(t), r#"class="tick""#);
            }
            let label_w = svg::text_width(&svg::fmt_secs(tmax), 10.0) + 10.0;
            for t in svg::linear_ticks(0.0, tmax, ((pw / label_w) as usize).clamp(1, 10)) {
                let x = xpos(t);
                s.line(x, y0 + ph, x, y0 + ph + 4.0, "#333", "");
                s.text(x, y0 + ph + 15.0, 10.0, "middle", "#333", &svg::fmt_secs(t), r#"class="tick""#);
            }
            for (si, (sname, vals)) in series.iter().enumerate() {
                let color = SERIES_COLORS[si % SERIES_COLORS.len()];
                // Break the line where an interval has no value.
                let mut run: Vec<(f64, f64)> = Vec::new();
                for (k, v) in vals.iter().enumerate() {
                    match v {
                        Some(v) => run.push((xpos((k as f64 + 0.5) * secs), ypos(*v))),
                        None => {
                            if !run.is_empty() {
                                s.polyline(&run, color, &format!(r#"class="series" data-series="{sname}""#));
                                run.clear();
                            }
                        }
                    }
                }
                if run.len() == 1 {
                    let (x, y) = run[0];
                    let _ = writeln!(s, r#"<circle cx="{x:.1}" cy="{y:.1}" r="2.5" fill="{color}"/>"#);
                }
                if !run.is_empty() {
                    s.polyline(&run, color, &format!(r#"class="series" data-series="{sname}""#));
                }
                if series.len() > 1 {
                    let lx = left + pw - 60.0 * series.len() as f64 + si as f64 * 60.0;
                    let _ = write!(s, r#"<g class="legend">"#);
                    s.rect(lx, y0 - 11.0, 16.0, 2.5, color, "");
                    s.text(lx + 20.0, y0 - 6.0, 10.0, "start", "#333", sname, "");
                    s.raw("</g>\n");
                }
            }
            s.raw("</g>\n");
        }
        // Hover boxes: one transparent column per interval over all panels.
        let y_top = top + 20.0;
        let y_h = 3.0 * (ph + gap) - gap;
        s.raw("<g class=\"hover\">\n");
        let dash = || "-".to_string();
        for (k, p) in pts.iter().enumerate() {
            let tip = format!(
                "{} - {}{}: {} events, {} ops/s, {}/s, p50 {}, p99 {}, max {}, mean {}{}",
                svg::fmt_secs(p.t),
                svg::fmt_secs(p.t + secs),
                if p.secs < secs * (1.0 - 1e-9) {
                    format!(" ({} covered)", svg::fmt_secs(p.secs))
                } else {
                    String::new()
                },
                p.count,
                fmt_count((p.ops_per_sec * 10.0).round() / 10.0),
                fmt_bytes(p.bytes_per_sec as u64),
                p.p50_ns.map(fmt_ns).unwrap_or_else(dash),
                p.p99_ns.map(fmt_ns).unwrap_or_else(dash),
                p.max_ns.map(fmt_ns).unwrap_or_else(dash),
                p.mean_ns.map(fmt_ns_f).unwrap_or_else(dash),
                if p.waits > 0 { format!(" ({} idle waits left out)", p.waits) } else { String::new() },
            );
            let _ = writeln!(
                s,
                r#"<rect x="{:.2}" y="{y_top:.1}" width="{:.2}" height="{y_h:.1}" fill="black" fill-opacity="0" data-t="{}" data-count="{}"><title>{}</title></rect>"#,
                xpos(k as f64 * secs),
                (pw / n as f64).max(0.5),
                p.t,
                p.count,
                svg::esc(&tip)
            );
        }
        s.raw("</g>\n");
        if let Some(note) = &note {
            s.text_fit(left, height - 26.0, 10.0, "start", "#555", note, r#"class="note""#, pw);
        }
        s.text(
            left + pw / 2.0,
            height - 8.0,
            11.0,
            "middle",
            "black",
            "Time since the start — mouse over for the values of an interval",
            "",
        );
        s.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use latscope_event::Event;

    #[test]
    fn intervals_by_completion() {
        let mut b = EventBatch::with_capacity(8);
        let read = latscope_event::syscall_nr("read").unwrap();
        // Origin 1 s; two events complete in [1, 2) s, one in [3, 4) s, one before the origin.
        for (ts, lat, ret) in
            [(1_000_000_000u64, 1000u64, 10i64), (1_500_000_000, 3000, 20), (2_999_999_000, 2000, 0), (10, 10, 1)]
        {
            b.push(&Event { kind: 0, nr: read, ts, lat, ret, ..Default::default() });
        }
        b.push(&Event { kind: 1, ts: 100_000_000_000, lat: 1, bytes: 512, ..Default::default() });
        let mut t = Timeline::new(1_000_000_000, 1_000_000_000, 5);
        for i in 0..b.len() {
            t.add(&b, i);
        }
        assert_eq!(t.early, 1);
        assert_eq!(t.dropped, 1);
        let p = t.points();
        assert_eq!(p.len(), 3);
        assert_eq!(p[0].count, 3);
        assert_eq!(p[0].bytes, 31);
        assert_eq!(p[0].mean_ns, Some((1000.0 + 3000.0 + 10.0) / 3.0));
        assert_eq!(p[0].p99_ns, Some(3000));
        // The histogram's rule: the top of the bucket of the value of rank ceil(q n).
        assert_eq!(p[0].p50_ns, Some(1003));
        assert_eq!(p[1].count, 0);
        assert_eq!(p[1].mean_ns, None);
        assert_eq!(p[2].count, 1);
        assert_eq!(p[2].t, 2.0);
        let txt = t.render_text();
        assert!(txt.contains("OPS/s"));
        let j = t.to_json(None);
        assert_eq!(j["points"].as_array().unwrap().len(), 3);
        let svg = t.render_svg("Timeline", Some("x"));
        assert_eq!(svg.matches("class=\"panel\"").count(), 3);
        for series in ["p50", "p99", "max"] {
            assert!(svg.contains(&format!("data-series=\"{series}\"")), "{series}");
        }
        assert!(svg.contains("<title>0s - 1s: 3 events"), "{svg}");
    }

    #[test]
    fn blocking_waits_are_left_out_of_latency_unless_asked_for() {
        let mut b = EventBatch::with_capacity(8);
        let read = latscope_event::syscall_nr("read").unwrap();
        let sleep = latscope_event::syscall_nr("nanosleep").unwrap();
        for k in 0..99u64 {
            b.push(&Event { kind: 0, nr: read, ts: 1_000_000 + k * 1000, lat: 10_000, ret: 1, ..Default::default() });
        }
        b.push(&Event { kind: 0, nr: sleep, ts: 0, lat: 900_000_000, ..Default::default() });
        let run = |with: bool| {
            let mut t = Timeline::new(0, 1_000_000_000, 10).with_waits(with);
            for i in 0..b.len() {
                t.add(&b, i);
            }
            t
        };
        let t = run(false);
        let p = &t.points()[0];
        assert_eq!((p.count, p.waits), (99, 1));
        assert_eq!(
            (p.p50_ns, p.p99_ns, p.max_ns, p.mean_ns),
            (Some(10_000), Some(10_000), Some(10_000), Some(10_000.0))
        );
        let text = t.render_text();
        assert!(text.contains("left out: 1 blocking waits") && text.contains("--waits"), "{text}");
        assert!(t.render_svg("t", None).contains("left out: 1 blocking waits"));
        // With the waits, the mean (9 ms) is above the p99 (10 us): the table says why.
        let t = run(true);
        let p = &t.points()[0];
        // The p99 by the one percentile rule: the top of the 1/128 bucket holding 10 us.
        assert_eq!((p.waits, p.max_ns), (0, Some(900_000_000)));
        let p99 = p.p99_ns.unwrap();
        assert!((10_000..=10_000 + 10_000 / 128).contains(&p99), "{p99}");
        let text = t.render_text();
        assert!(text.contains("MEAN is above P99 in 1 intervals"), "{text}");
        assert!(!text.contains("left out") && text.contains("idle waits ranked with the work"), "{text}");
    }
}
