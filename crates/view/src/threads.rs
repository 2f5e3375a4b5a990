//! Every thread's story over a window (`timeline --threads`, the dashboard's threads view): one
//! row per thread, each call a bar from entry to return coloured by its dominant part (from
//! `record --why`: on CPU, run queue, block I/O, lock, ...; grey without a breakdown), and
//! wake-ups as lines from the waking thread's call to the call it woke.
//!
//! The trace records each part's total, not when within the call it came, so a bar is coloured
//! by the part that took most of it rather than cut into parts; the one wait whose time it
//! records, the call's longest, is drawn where it happened (when its part is known), the rest
//! of the call in the colour of the part that took most of the rest. The waking call is found
//! as the Perfetto export finds it: the waker thread's call in progress at the wake-up (the end
//! of that longest wait), or in older recordings its first call that began before the woken
//! call ended and ended after the woken call's CPU and run-queue time before its end (see
//! [`waking_call`], [`EventBatch::wake_window`]); a wake-up from outside a traced call draws no
//! line.

use std::collections::HashMap;
use std::fmt::Write;

use latscope_event::units::fmt_ns;
use latscope_event::{op_name, EventBatch, EventKind, WHY_PARTS};
use serde_json::{json, Value};

use crate::svg::{esc, linear_ticks, nice_time_step_ns, text_width, Svg};
use crate::why::PART_LABELS;
use crate::whysvg::PART_COLORS;

/// One letter per part in the text rendering, in the order of [`PART_LABELS`].
pub const PART_LETTERS: [char; WHY_PARTS] = ['C', 'R', 'I', 'L', 'P', 'T', 'F', 'O', '?'];
/// The letter of a call without a breakdown.
pub const NO_WHY: char = '=';
const NO_WHY_COLOR: &str = "#b0b0b0";

/// One call of a thread.
#[derive(Debug, Clone)]
pub struct Call {
    /// Entry, CLOCK_MONOTONIC ns.
    pub ts: u64,
    /// Return.
    pub end: u64,
    /// Syscall number.
    pub nr: u16,
    /// The part that took most of it (`None`: recorded without a breakdown).
    pub part: Option<usize>,
    /// Its intervals off the CPU where they happened, in time order ([`EventBatch::off_cpu`]),
    /// or, in recordings without them, its longest wait ([`EventBatch::longest_wait`], when its
    /// part is known): start, end, part.
    pub waits: Vec<(u64, u64, usize)>,
    /// The part that took most of the rest of the call (outside `waits`).
    pub rest: usize,
    /// Its longest blocked interval among `waits` (an index).
    longest: Option<usize>,
    /// The thread that woke it, the window its waking call was in progress in
    /// ([`EventBatch::wake_window`]), and the blocked part it spent the most in.
    waker: Option<(u32, (u64, u64), usize)>,
}

/// The calls of one thread.
#[derive(Debug, Clone)]
pub struct Row {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Command name (the latest seen).
    pub comm: String,
    /// Its calls, by entry time once [`ThreadTimeline::finish`]ed.
    pub calls: Vec<Call>,
    /// Time in calls inside the window, ns.
    pub busy_ns: u64,
}

/// A wake-up: call `from.1` of row `from.0` woke call `to.1` of row `to.0` (row indices of
/// [`ThreadTimeline::rows`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wake {
    /// The waking call.
    pub from: (usize, usize),
    /// The woken call.
    pub to: (usize, usize),
}

/// The threads' calls over a window (see the module documentation).
#[derive(Debug, Clone)]
pub struct ThreadTimeline {
    from: u64,
    to: u64,
    max_calls: usize,
    by_tid: HashMap<(u32, u32), usize>,
    rows: Vec<Row>,
    calls: usize,
    /// Calls left out after `max_calls` were taken.
    pub dropped: u64,
    /// The start of the first call left out: the window shown stops there, and calls that began
    /// before it are taken still (a thread's call in progress then, read later since it ended
    /// later), so that every row is whole up to it.
    cut: Option<u64>,
    /// Threads with calls in the window (the rows before the busiest were kept).
    threads_total: usize,
    /// The window's start when none was given and no call was taken (the recording's start).
    start: u64,
    wakes: Vec<Wake>,
    latest: u64,
}

/// Whether syscall `nr` is an idle wait, whose length its caller chooses (sleeps, polls, futex
/// and child waits): time in it is no work, so it does not make a thread one of the busiest.
fn is_idle_wait(nr: u16) -> bool {
    latscope_event::syscalls::desc(nr).class == latscope_event::SysClass::Wait
        || matches!(latscope_event::syscall_name(nr), Some("wait4" | "waitid" | "pause"))
}

/// A time `t` as an offset from `origin` (`+1.5s`, `-191ms`: calls under way when a recording
/// began started before it), with digits enough to tell apart times `resolution` ns apart.
pub fn fmt_at(t: u64, origin: u64, resolution: u64) -> String {
    let (sign, d) = if t >= origin { ('+', t - origin) } else { ('-', origin - t) };
    // fmt_ns keeps three significant digits: enough while the offset is under a hundred steps.
    if d / resolution.max(1) < 100 {
        return format!("{sign}{}", fmt_ns(d));
    }
    let (unit, name) = match d {
        1_000_000_000.. => (1_000_000_000u64, "s"),
        1_000_000.. => (1_000_000, "ms"),
        _ => (1_000, "us"),
    };
    // As many decimals as tell `resolution` apart in that unit.
    let decimals = (0..=9u32).find(|&k| unit / 10u64.pow(k) <= resolution.max(1)).unwrap_or(9) as usize;
    format!("{sign}{:.decimals$}{name}", d as f64 / unit as f64)
}

/// The call of `calls` (sorted by entry) that woke a call blocked mostly in `part`, whose
/// waking call was in progress in the window `lo..hi` ([`EventBatch::wake_window`]): of the
/// calls that ended at `lo` or later and began before `hi`, the first that can end such a wait
/// by its kind
/// ([`latscope_event::can_wake`]: a futex for a lock, a write for a pipe), else the first.
/// (A thread's calls follow each other, so their ends are in entry order too.)
pub fn waking_call(calls: &[Call], lo: u64, hi: u64, part: usize) -> Option<usize> {
    let i = calls.partition_point(|c| c.end < lo);
    let n = calls[i..].iter().take_while(|c| c.ts < hi).count();
    (i..i + n).find(|&k| latscope_event::can_wake(calls[k].nr, part)).or((n > 0).then_some(i))
}

impl ThreadTimeline {
    /// Calls that overlap `from..to` (CLOCK_MONOTONIC ns; `from` 0: from the first call, `to`
    /// `u64::MAX`: up to the last call's end), at most `max_calls` of them (the earliest read).
    pub fn new(from: u64, to: u64, max_calls: usize) -> ThreadTimeline {
        ThreadTimeline {
            from,
            to,
            max_calls,
            by_tid: HashMap::new(),
            rows: Vec::new(),
            calls: 0,
            dropped: 0,
            cut: None,
            threads_total: 0,
            start: 0,
            wakes: Vec::new(),
            latest: 0,
        }
    }

    /// The window's start when none was given and no call falls in it: the recording's start.
    pub fn with_start(mut self, start_ns: u64) -> ThreadTimeline {
        self.start = start_ns;
        self
    }

    /// The end of the window shown was brought forward to where the calls left out began (see
    /// [`ThreadTimeline::dropped`]).
    pub fn shortened(&self) -> bool {
        self.cut.is_some()
    }

    /// Takes event `i` of `b` (syscalls only).
    pub fn add(&mut self, b: &EventBatch, i: usize) {
        if b.kind[i] != EventKind::Syscall as u8 {
            return;
        }
        let (ts, end) = (b.ts[i], b.end(i));
        if ts >= self.to || end < self.from {
            return;
        }
        if self.calls >= self.max_calls {
            let cut = *self.cut.get_or_insert(ts);
            if ts >= cut {
                self.dropped += 1;
                return;
            }
        }
        self.calls += 1;
        self.latest = self.latest.max(end);
        let key = (b.pid[i], b.tid[i]);
        let n = self.rows.len();
        let r = *self.by_tid.entry(key).or_insert(n);
        if r == n {
            self.rows.push(Row { pid: key.0, tid: key.1, comm: String::new(), calls: Vec::new(), busy_ns: 0 });
        }
        let row = &mut self.rows[r];
        let comm = b.comm.get(i);
        if row.comm != comm {
            row.comm = comm.to_string();
        }
        if !is_idle_wait(b.nr[i]) {
            row.busy_ns += end.min(self.to).saturating_sub(ts.max(self.from));
        }
        let p = b.why_parts(i);
        let part = b.has_why(i).then(|| (0..WHY_PARTS).fold(0, |m, k| if p[k] > p[m] { k } else { m }));
        let off = b.off_cpu(i);
        let waits: Vec<(u64, u64, usize)> = if off.len > 0 {
            off.intervals().iter().map(|&(a, z, k)| (a, z, usize::from(k))).collect()
        } else {
            b.longest_wait(i, &p).and_then(|(from, to, k)| Some((from, to, k?))).into_iter().collect()
        };
        // The rest of the call: its parts less the waits drawn.
        let mut left = p;
        for &(a, z, k) in &waits {
            left[k] = left[k].saturating_sub(z - a);
        }
        let rest = (0..WHY_PARTS).fold(0, |m, j| if left[j] > left[m] { j } else { m });
        // The one whose waker the recording keeps, else the first of the longest blocked.
        let longest = waits
            .iter()
            .position(|&(a, z, _)| a != 0 && (a, z) == (b.wait_start[i], b.wait_end[i]))
            .or_else(|| (0..waits.len()).filter(|&j| waits[j].2 >= 2).rev().max_by_key(|&j| waits[j].1 - waits[j].0));
        let waker = (b.waker_ctx[i] == 1 && b.waker_tid[i] != 0 && b.waker_tid[i] != b.tid[i]).then(|| {
            let blocked = (2..WHY_PARTS).fold(2, |m, k| if p[k] > p[m] { k } else { m });
            (b.waker_tid[i], b.wake_window(i, &p), blocked)
        });
        row.calls.push(Call { ts, end, nr: b.nr[i], part, waits, rest, longest, waker });
    }

    /// Orders the calls and finds the wake-ups; keeps the `max_rows` busiest threads (the most
    /// time in calls other than idle waits, then the most calls), ordered by process and thread id.
    pub fn finish(&mut self, max_rows: usize) {
        if self.from == 0 {
            let first = self.rows.iter().flat_map(|r| r.calls.iter().map(|c| c.ts)).min();
            self.from = first.unwrap_or(if self.to == u64::MAX { self.start } else { self.start.min(self.to - 1) });
        }
        if self.to == u64::MAX {
            self.to = self.latest.max(self.from + 1);
        }
        if let Some(cut) = self.cut {
            self.to = self.to.min(cut).max(self.from + 1);
            // Calls that began after the window's new end (read before the cap was reached) go.
            let to = self.to;
            let mut gone = 0;
            for r in &mut self.rows {
                let n = r.calls.len();
                r.calls.retain(|c| c.ts < to);
                gone += n - r.calls.len();
            }
            self.calls -= gone;
            self.dropped += gone as u64;
            self.rows.retain(|r| !r.calls.is_empty());
            self.by_tid.clear();
        }
        for r in &mut self.rows {
            r.calls.sort_by_key(|c| (c.ts, c.end));
        }
        self.threads_total = self.rows.len();
        if self.rows.len() > max_rows {
            self.rows.sort_by_key(|r| std::cmp::Reverse((r.busy_ns, r.calls.len())));
            self.rows.truncate(max_rows);
        }
        self.rows.sort_by_key(|r| (r.pid, r.tid));
        let by_tid: HashMap<u32, usize> = self.rows.iter().enumerate().map(|(i, r)| (r.tid, i)).collect();
        self.wakes.clear();
        for (ri, r) in self.rows.iter().enumerate() {
            for (ci, c) in r.calls.iter().enumerate() {
                let Some((w, (lo, hi), part)) = c.waker else { continue };
                let Some(&wr) = by_tid.get(&w) else { continue };
                if let Some(wc) = waking_call(&self.rows[wr].calls, lo, hi, part) {
                    self.wakes.push(Wake { from: (wr, wc), to: (ri, ci) });
                }
            }
        }
    }

    /// The rows, after [`ThreadTimeline::finish`].
    pub fn rows(&self) -> &[Row] {
        &self.rows
    }

    /// The wake-ups found, after [`ThreadTimeline::finish`].
    pub fn wakes(&self) -> &[Wake] {
        &self.wakes
    }

    /// The window shown (`to` is the last call's end when none was given).
    pub fn window(&self) -> (u64, u64) {
        (self.from, self.to)
    }

    /// Calls taken in the window (of every thread, shown or not).
    pub fn calls(&self) -> usize {
        self.calls
    }

    /// Calls of the threads shown.
    pub fn calls_shown(&self) -> usize {
        self.rows.iter().map(|r| r.calls.len()).sum()
    }

    /// Threads with calls in the window, shown or not (after [`ThreadTimeline::finish`]).
    pub fn threads_total(&self) -> usize {
        self.threads_total
    }

    /// "N calls of M threads", saying so when only the busiest threads are shown.
    pub fn counts(&self) -> String {
        if self.rows.len() < self.threads_total {
            format!(
                "{} calls of the {} busiest threads (of {} calls of {} threads)",
                self.calls_shown(),
                self.rows.len(),
                self.calls,
                self.threads_total
            )
        } else {
            format!("{} calls of {} threads", self.calls, self.rows.len())
        }
    }

    /// What was left out beyond the most calls a timeline holds, and how the window was cut.
    pub fn dropped_note(&self) -> String {
        if self.shortened() {
            format!(
                "{} calls left out beyond the {} a timeline holds: the window ends early, where they begin; narrow it \
                 (--from, --to) to see the rest",
                self.dropped, self.max_calls
            )
        } else {
            format!("{} calls left out after the first {}: narrow the window (--from, --to)", self.dropped, self.calls)
        }
    }

    /// `comm/tid`, the name escaped ([`crate::text::clean`]): the label goes as it is into its
    /// row's line, where a newline in the name would split it.
    fn label(r: &Row) -> String {
        format!("{}/{}", if r.comm.is_empty() { "?".into() } else { crate::text::clean(&r.comm) }, r.tid)
    }

    /// For each of `cols` columns of a row, the letter of what filled most of it (a space: no call).
    fn columns(&self, r: &Row, cols: usize) -> String {
        let span = (self.to - self.from).max(1) as f64;
        let mut fill = vec![[0u64; WHY_PARTS + 1]; cols];
        for c in &r.calls {
            let (a, b) = (c.ts.max(self.from), c.end.min(self.to));
            if b < a {
                continue;
            }
            let mut add = |a: u64, b: u64, k: usize| {
                let x0 = ((a - self.from) as f64 / span * cols as f64) as usize;
                let x1 = (((b - self.from) as f64 / span * cols as f64) as usize).min(cols - 1);
                for (x, f) in fill.iter_mut().enumerate().take(x1 + 1).skip(x0.min(cols - 1)) {
                    let lo = self.from + (x as f64 * span / cols as f64) as u64;
                    let hi = self.from + ((x + 1) as f64 * span / cols as f64) as u64;
                    // At least 1 ns: a call shorter than a column still shows.
                    f[k] += b.min(hi).saturating_sub(a.max(lo)).max(1);
                }
            };
            if c.waits.is_empty() {
                add(a, b, c.part.unwrap_or(WHY_PARTS));
                continue;
            }
            // The waits where they were, the rest of the call by the part that took most of it.
            let mut at = a;
            for &(wa, wb, k) in &c.waits {
                let (wa, wb) = (wa.clamp(a, b), wb.clamp(a, b));
                if wa > at {
                    add(at, wa, c.rest);
                }
                if wb > wa {
                    add(wa, wb, k);
                }
                at = at.max(wb);
            }
            if b > at {
                add(at, b, c.rest);
            }
        }
        fill.iter()
            .map(|f| match (0..=WHY_PARTS).filter(|&k| f[k] > 0).max_by_key(|&k| f[k]) {
                None => ' ',
                Some(WHY_PARTS) => NO_WHY,
                Some(k) => PART_LETTERS[k],
            })
            .collect()
    }

    /// The rows as text, `width` characters wide: a label, then one character per column of time
    /// (the letter of the part that filled most of it); a legend; the first wake-ups.
    pub fn render_text(&self, width: usize, origin_ns: u64) -> String {
        let mut s = String::new();
        let label_w = self.rows.iter().map(|r| Self::label(r).chars().count()).max().unwrap_or(6).clamp(6, 28);
        let cols = width.saturating_sub(label_w + 3).max(10);
        let per_col = ((self.to - self.from) / cols as u64).max(1);
        let at = |t: u64| fmt_at(t, origin_ns, per_col);
        let _ =
            writeln!(s, "{} from {} to {} ({} per column)", self.counts(), at(self.from), at(self.to), fmt_ns(per_col));
        for r in &self.rows {
            let mut l = Self::label(r);
            if l.chars().count() > label_w {
                l = l.chars().take(label_w - 1).collect::<String>() + "…";
            }
            let _ = writeln!(s, "{l:>label_w$} |{}|", crate::text::clean(&self.columns(r, cols)));
        }
        let legend: Vec<String> = PART_LETTERS
            .iter()
            .zip(PART_LABELS)
            .map(|(c, l)| format!("{c} {l}"))
            .chain([format!("{NO_WHY} a call without a breakdown")])
            .collect();
        let _ = writeln!(
            s,
            "each column: the part that took most of it, a call's longest wait where it happened ({})",
            legend.join(", ")
        );
        if self.dropped > 0 {
            let _ = writeln!(s, "{}", self.dropped_note());
        }
        const WAKES: usize = 20;
        if !self.wakes.is_empty() {
            let _ = writeln!(s, "wake-ups ({} in all, the first {}):", self.wakes.len(), self.wakes.len().min(WAKES));
            let mut w: Vec<&Wake> = self.wakes.iter().collect();
            w.sort_by_key(|w| self.rows[w.to.0].calls[w.to.1].end);
            for w in w.into_iter().take(WAKES) {
                let (fr, fc) = (&self.rows[w.from.0], &self.rows[w.from.0].calls[w.from.1]);
                let (tr, tc) = (&self.rows[w.to.0], &self.rows[w.to.0].calls[w.to.1]);
                let at = |t: u64| fmt_at(t, origin_ns, 1000);
                let line = format!(
                    "  {} {} ({}) woke {} ({} {}, returned at {})",
                    at(fc.ts),
                    Self::label(fr),
                    op_name(0, fc.nr),
                    Self::label(tr),
                    op_name(0, tc.nr),
                    fmt_ns(tc.end - tc.ts),
                    at(tc.end)
                );
                let _ = writeln!(s, "{}", crate::text::clean(&line));
            }
        }
        s
    }

    /// The rows as an SVG document: a time axis, a row per thread with a bar per call (its
    /// tooltip: the call, its latency and parts), wake-ups as arrows, a legend.
    pub fn render_svg(&self, title: &str, subtitle: &str, origin_ns: u64) -> String {
        const W: f64 = 1200.0;
        const PAD: f64 = 12.0;
        const ROW: f64 = 20.0;
        const FONT: f64 = 12.0;
        let label_w =
            self.rows.iter().map(|r| text_width(&Self::label(r), FONT)).fold(80.0f64, f64::max).min(240.0) + 8.0;
        let x0 = PAD + label_w;
        let plot_w = W - x0 - PAD;
        let top = 64.0;
        let h = top + self.rows.len().max(1) as f64 * ROW + 70.0;
        let span = (self.to - self.from).max(1) as f64;
        let x = |t: u64| x0 + (t.clamp(self.from, self.to) - self.from) as f64 / span * plot_w;
        let y = |r: usize| top + r as f64 * ROW;
        let mut svg = Svg::new(W, h, "");
        svg.raw(r##"<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#333"/></marker></defs>
"##);
        svg.text(PAD, 20.0, 15.0, "start", "#000", title, "font-weight=\"bold\"");
        svg.text_fit(PAD, 38.0, 11.0, "start", "#444", subtitle, "", W - 2.0 * PAD);
        // Time axis, relative to the recording's start (before it: calls under way then).
        let step = nice_time_step_ns(span / 8.0);
        let rel = |t: u64| t as f64 - origin_ns as f64;
        let first = (rel(self.from) / step).ceil() * step;
        let last = rel(self.to);
        let mut last_x = f64::NEG_INFINITY;
        for t in linear_ticks(first, last, 8).into_iter().filter(|t| *t >= first) {
            let at = (origin_ns as f64 + t).round().max(0.0) as u64;
            let tx = x(at);
            // A window shorter than a tick step (a live page's first moments) puts ticks on
            // one place: one label each.
            if tx - last_x < 48.0 {
                continue;
            }
            last_x = tx;
            svg.line(tx, top - 6.0, tx, y(self.rows.len()), "#ddd", "");
            // A label at the right edge would run off the picture if centred on its tick.
            let anchor = if tx > W - PAD - 30.0 { "end" } else { "middle" };
            svg.text(tx, top - 9.0, 10.0, anchor, "#444", &fmt_at(at, origin_ns, (step as u64).max(1)), "");
        }
        for (ri, r) in self.rows.iter().enumerate() {
            let ry = y(ri);
            if ri % 2 == 1 {
                svg.rect(x0, ry, plot_w, ROW, "#f6f6f6", "");
            }
            svg.text_fit(x0 - 6.0, ry + 14.0, FONT, "end", "#000", &Self::label(r), "", label_w - 4.0);
            for c in &r.calls {
                if c.end < self.from || c.ts > self.to {
                    continue;
                }
                let (a, b) = (x(c.ts), x(c.end));
                // With its longest wait drawn over it, the rest of the call in the colour of what
                // took most of the rest.
                let fill = match (c.waits.is_empty(), c.part) {
                    (false, _) => PART_COLORS[c.rest],
                    (true, Some(k)) => PART_COLORS[k],
                    (true, None) => NO_WHY_COLOR,
                };
                let what = c.part.map_or("no breakdown".to_string(), |k| format!("mostly {}", PART_LABELS[k]));
                let tip = format!(
                    "{} {} at {}: {what}",
                    op_name(0, c.nr),
                    fmt_ns(c.end - c.ts),
                    fmt_at(c.ts, origin_ns, 1000)
                );
                svg.raw(&format!(
                    "<rect x=\"{a:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{fill}\"><title>{}</title></rect>\n",
                    ry + 3.0,
                    (b - a).max(1.0),
                    ROW - 6.0,
                    esc(&tip)
                ));
                // The waits, where they happened, over the bar.
                for (j, &(wa, wb, k)) in c.waits.iter().enumerate() {
                    let (wx0, wx1) = (x(wa), x(wb));
                    let which = if c.longest == Some(j) { "its longest wait" } else { "a wait" };
                    let tip = format!(
                        "{} {} at {}: {which}, {} {} from {}",
                        op_name(0, c.nr),
                        fmt_ns(c.end - c.ts),
                        fmt_at(c.ts, origin_ns, 1000),
                        PART_LABELS[k],
                        fmt_ns(wb - wa),
                        fmt_at(wa, origin_ns, 1000)
                    );
                    svg.raw(&format!(
                        "<rect x=\"{wx0:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\"><title>{}</title></rect>\n",
                        ry + 3.0,
                        (wx1 - wx0).max(1.0),
                        ROW - 6.0,
                        PART_COLORS[k],
                        esc(&tip)
                    ));
                }
            }
        }
        for w in &self.wakes {
            let fc = &self.rows[w.from.0].calls[w.from.1];
            let tc = &self.rows[w.to.0].calls[w.to.1];
            // From the waking call (its end, or the woken call's end if that came first) to the
            // end of the woken call.
            let (x1, x2) = (x(fc.end.min(tc.end)), x(tc.end));
            let (y1, y2) = (y(w.from.0) + ROW / 2.0, y(w.to.0) + ROW / 2.0);
            svg.raw(&format!(
                "<line x1=\"{x1:.1}\" y1=\"{y1:.1}\" x2=\"{x2:.1}\" y2=\"{y2:.1}\" stroke=\"#333\" stroke-width=\"1\" marker-end=\"url(#arrow)\"><title>{} woke {}</title></line>\n",
                esc(&Self::label(&self.rows[w.from.0])),
                esc(&Self::label(&self.rows[w.to.0]))
            ));
        }
        // Legend.
        let ly = y(self.rows.len()) + 24.0;
        let mut lx = PAD;
        let items = PART_LABELS.iter().zip(PART_COLORS).map(|(l, c)| (*l, c)).chain([("no breakdown", NO_WHY_COLOR)]);
        for (l, c) in items {
            svg.rect(lx, ly - 10.0, 12.0, 12.0, c, "");
            svg.text(lx + 16.0, ly, 11.0, "start", "#000", l, "");
            lx += 16.0 + text_width(l, 11.0) + 14.0;
        }
        svg.line(lx, ly - 4.0, lx + 24.0, ly - 4.0, "#333", "marker-end=\"url(#arrow)\"");
        svg.text(lx + 30.0, ly, 11.0, "start", "#000", "woke", "");
        if self.dropped > 0 {
            svg.text(PAD, ly + 20.0, 11.0, "start", "#a00", &self.dropped_note(), "");
        }
        svg.finish()
    }

    /// [`ThreadTimeline::render_svg`] in an HTML page (for a browser; the bars' tooltips say what
    /// each call was).
    pub fn render_html(&self, title: &str, subtitle: &str, origin_ns: u64) -> String {
        let svg = self.render_svg(title, subtitle, origin_ns);
        let body = svg.split_once("?>").map_or(svg.as_str(), |(_, b)| b);
        format!(
            "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{}</title>\n<style>body{{font-family:Verdana,Helvetica,Arial,sans-serif;margin:16px}}</style></head>\n<body>\n{}\n<p>One row per thread; each call a bar from entry to return, coloured by the part of its latency that took most of it (<code>record --why</code>), its waits drawn where they happened (all of them where the recording keeps them: the longest otherwise); arrows from the call that woke a call to it. Hover a bar for the call.</p>\n</body></html>\n",
            esc(title),
            body.trim()
        )
    }

    /// The rows, calls and wake-ups as JSON.
    pub fn to_json(&self, origin_ns: u64) -> Value {
        let rows: Vec<Value> = self
            .rows
            .iter()
            .map(|r| {
                json!({
                    "pid": r.pid, "tid": r.tid, "comm": r.comm, "busy_ns": r.busy_ns,
                    "calls": r.calls.iter().map(|c| json!({
                        "type": op_name(0, c.nr), "ts_ns": c.ts, "latency_ns": c.end - c.ts,
                        "main": c.part.map(|k| latscope_event::WHY_PART_NAMES[k]),
                        "longest_wait": c.longest.map(|j| c.waits[j]).map(|(a, b, k)| json!({
                            "part": latscope_event::WHY_PART_NAMES[k], "ts_ns": a, "dur_ns": b - a,
                        })),
                        "waits": c.waits.iter().map(|&(a, b, k)| json!({
                            "part": latscope_event::WHY_PART_NAMES[k], "ts_ns": a, "dur_ns": b - a,
                        })).collect::<Vec<_>>(),
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        let wakes: Vec<Value> = self
            .wakes
            .iter()
            .map(|w| {
                let (fc, tc) = (&self.rows[w.from.0].calls[w.from.1], &self.rows[w.to.0].calls[w.to.1]);
                json!({
                    "from": {"tid": self.rows[w.from.0].tid, "type": op_name(0, fc.nr), "ts_ns": fc.ts},
                    "to": {"tid": self.rows[w.to.0].tid, "type": op_name(0, tc.nr), "ts_ns": tc.ts},
                })
            })
            .collect();
        json!({
            "from_ns": self.from, "to_ns": self.to, "origin_ns": origin_ns,
            "calls": self.calls, "calls_shown": self.calls_shown(), "threads_total": self.threads_total,
            "dropped": self.dropped, "window_shortened": self.shortened(), "threads": rows, "wakeups": wakes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use latscope_event::{comm_to_words, syscall_nr, Event};

    fn call(tid: u32, nr: &str, ts: u64, end: u64) -> Event {
        Event {
            kind: 0,
            ts,
            lat: end - ts,
            pid: 1,
            tid,
            nr: syscall_nr(nr).unwrap(),
            comm: format!("t{tid}"),
            ..Default::default()
        }
    }

    fn timeline() -> ThreadTimeline {
        let mut b = EventBatch::default();
        let (lo, hi) = comm_to_words("t2");
        let mut wait = call(1, "futex", 0, 1000);
        wait.why_lock = 900;
        wait.why_cpu = 60;
        wait.why_runq = 40;
        wait.waker_ctx = 1;
        wait.waker_tid = 2;
        wait.waker_comm_lo = lo;
        wait.waker_comm_hi = hi;
        for e in [wait, call(2, "write", 100, 200), call(2, "futex", 880, 950), call(2, "read", 960, 1200)] {
            b.push(&e);
        }
        let mut t = ThreadTimeline::new(0, 1200, 100);
        (0..b.len()).for_each(|i| t.add(&b, i));
        t.finish(10);
        t
    }

    #[test]
    fn a_wakeup_joins_the_wakers_call_in_progress_to_the_woken_call() {
        let t = timeline();
        assert_eq!(t.wakes(), &[Wake { from: (1, 1), to: (0, 0) }]);
        assert_eq!(t.rows()[1].calls[1].ts, 880);
        let j = t.to_json(0);
        assert_eq!(j["wakeups"][0]["from"]["type"], "futex");
    }

    #[test]
    fn text_rows_show_each_calls_main_part_and_the_wakeups() {
        let t = timeline();
        let s = t.render_text(52, 0);
        let lines: Vec<&str> = s.lines().collect();
        let row1 = lines.iter().find(|l| l.trim_start().starts_with("t1/1")).unwrap();
        // The futex wait fills most of t1's row with lock time.
        assert!(row1.matches('L').count() > 30, "{s}");
        let row2 = lines.iter().find(|l| l.trim_start().starts_with("t2/2")).unwrap();
        assert!(row2.contains('=') && row2.contains(' '), "{s}");
        assert!(s.contains("t2/2 (futex) woke t1/1 (futex"), "{s}");
    }

    /// A newline in a thread's name split its row's line (the label was not escaped), so the
    /// rest of the name read as a line of latscope's own.
    #[test]
    fn a_newline_in_a_thread_name_forges_no_line() {
        let mut b = EventBatch::default();
        b.push(&Event { comm: "x\nFORGED".into(), ..call(1, "read", 0, 1000) });
        let mut t = ThreadTimeline::new(0, 1000, 100);
        t.add(&b, 0);
        t.finish(10);
        let s = t.render_text(52, 0);
        assert!(!s.lines().any(|l| l.trim_start().starts_with("FORGED")), "{s}");
        assert!(s.contains(r"x\nFORGED/1 |"), "{s}");
    }

    #[test]
    fn the_svg_draws_a_bar_per_call_and_an_arrow_per_wakeup() {
        let t = timeline();
        let svg = t.render_svg("threads", "sub", 0);
        assert_eq!(svg.matches("<title>").count(), 4 + 1);
        assert_eq!(svg.matches("marker-end=\"url(#arrow)\"><title>").count(), 1);
        assert!(t.render_html("threads", "sub", 0).starts_with("<!doctype html>"));
    }

    /// A call that ran 500 ns, waited 400 ns for a lock (its longest wait, recorded) and ran
    /// 100 ns more: the lock drawn where it was, the rest as CPU (the call's main part is lock).
    #[test]
    fn a_calls_longest_wait_is_drawn_where_it_happened() {
        let mut b = EventBatch::default();
        let mut e = call(1, "futex", 0, 1000);
        (e.why_cpu, e.why_lock, e.wait_start, e.wait_end) = (600, 400, 500, 900);
        b.push(&e);
        let mut t = ThreadTimeline::new(0, 1000, 100);
        t.add(&b, 0);
        t.finish(10);
        let s = t.render_text(10 + 3 + 6, 0);
        let row = s.lines().find(|l| l.trim_start().starts_with("t1/1")).unwrap();
        assert!(row.ends_with("|CCCCCLLLLC|"), "{s}");
        let j = t.to_json(0);
        let c = &j["threads"][0]["calls"][0];
        assert_eq!((c["main"].as_str(), c["longest_wait"]["part"].as_str()), (Some("cpu"), Some("lock")));
        assert_eq!((c["longest_wait"]["ts_ns"].as_u64(), c["longest_wait"]["dur_ns"].as_u64()), (Some(500), Some(400)));
        let svg = t.render_svg("threads", "sub", 0);
        assert!(svg.contains("its longest wait, lock 400ns from +500ns"), "{svg}");
    }

    /// A call that ran, waited for a pipe, waited for a CPU, ran, waited for a pipe again: each
    /// of its intervals off the CPU drawn where it was, in order.
    #[test]
    fn a_calls_waits_are_drawn_in_order_where_the_recording_keeps_them() {
        let mut b = EventBatch::default();
        let mut e = call(1, "read", 0, 1000);
        (e.why_cpu, e.why_runq, e.why_ipc) = (300, 100, 600);
        e.off_count = 3;
        (e.off0_part, e.off0_start, e.off0_end) = (4, 100, 400);
        (e.off1_part, e.off1_start, e.off1_end) = (1, 400, 500);
        (e.off2_part, e.off2_start, e.off2_end) = (4, 600, 900);
        b.push(&e);
        let mut t = ThreadTimeline::new(0, 1000, 100);
        t.add(&b, 0);
        t.finish(10);
        let s = t.render_text(10 + 3 + 6, 0);
        let row = s.lines().find(|l| l.trim_start().starts_with("t1/1")).unwrap();
        assert!(row.ends_with("|CPPPRCPPPC|"), "{s}");
        let j = t.to_json(0);
        let c = &j["threads"][0]["calls"][0];
        let parts: Vec<&str> = c["waits"].as_array().unwrap().iter().map(|w| w["part"].as_str().unwrap()).collect();
        assert_eq!(parts, ["ipc", "runq", "ipc"]);
        assert_eq!((c["longest_wait"]["ts_ns"].as_u64(), c["longest_wait"]["dur_ns"].as_u64()), (Some(100), Some(300)));
        let svg = t.render_svg("threads", "sub", 0);
        assert!(svg.contains("a wait, pipe/socket 300ns from +600ns"), "{svg}");
    }

    #[test]
    fn times_are_offsets_with_the_digits_their_resolution_needs_and_a_sign() {
        let s = 1_000_000_000;
        assert_eq!(fmt_at(5 * s + 2 * s / 1000, 5 * s, 100_000), "+2.00ms");
        assert_eq!(fmt_at(9 * s + 4 * s, 9 * s, s / 1000 * 5), "+4.000s");
        assert_eq!(fmt_at(9 * s + 4 * s + 1234, 9 * s, 1000), "+4.000001s");
        assert_eq!(fmt_at(9 * s - 191 * s / 1000, 9 * s, s / 100), "-191ms");
    }

    /// More calls than a timeline holds: the window ends where the first left out ends, and the
    /// calls in progress then (read later, since they ended later) are kept, so every row is
    /// whole up to there; the busiest threads are those working, not those idly waiting.
    #[test]
    fn beyond_its_calls_the_window_ends_early_with_every_row_whole() {
        let mut b = EventBatch::default();
        for k in 0..20u64 {
            b.push(&call(1, "read", k * 100, k * 100 + 50));
        }
        // Read after the cap: a call in progress since 150 (a long wait), and one after the cut.
        b.push(&call(2, "epoll_wait", 150, 5_000));
        b.push(&call(3, "write", 4_000, 4_100));
        let mut t = ThreadTimeline::new(0, u64::MAX, 10);
        (0..b.len()).for_each(|i| t.add(&b, i));
        t.finish(1);
        // The 11th read (from 1000) was the first left out.
        assert_eq!(t.window(), (0, 1_000));
        assert!(t.shortened() && t.dropped == 11, "{}", t.dropped);
        assert_eq!(t.calls(), 11);
        // The reader is the busiest; the epoll_wait thread, idle, is not shown with --rows 1.
        assert_eq!((t.rows().len(), t.rows()[0].tid, t.threads_total()), (1, 1, 2));
        assert!(t.counts().contains("the 1 busiest threads (of 11 calls of 2 threads)"), "{}", t.counts());
        assert!(t.render_text(60, 0).contains("the window ends early"));
    }

    /// A window that starts before the recording (a call under way when it began): its axis and
    /// header say so with a minus, not "+0ns".
    #[test]
    fn a_window_before_the_recording_is_labelled_before_it() {
        let mut b = EventBatch::default();
        b.push(&call(1, "read", 800, 1_400));
        let mut t = ThreadTimeline::new(0, u64::MAX, 10).with_start(1_000);
        t.add(&b, 0);
        t.finish(10);
        let s = t.render_text(60, 1_000);
        assert!(s.contains("from -200ns to +400ns"), "{s}");
        assert!(t.render_svg("t", "s", 1_000).contains(">-200ns<"));
        // No call in a window given only its end: it starts at the recording's start.
        let mut t = ThreadTimeline::new(0, 2_000, 10).with_start(1_000);
        t.finish(10);
        assert_eq!(t.window(), (1_000, 2_000));
    }
}
