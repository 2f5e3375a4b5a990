//! Did it get worse? Two sides of recordings (one or several runs each) compared group by group
//! and percentile by percentile, with intervals and verdicts (`latscope diff`, docs/DIFF.md).
//!
//! A diff is an aggregation over sources like the other views, in two steps:
//!
//! 1. each recording is read into a [`RunAgg`] (chunks in, like every view): per dimension the
//!    count and latency distribution of each group (the [`Grouper`] and the counting rule of
//!    [`crate::top::Top`], without the columns a diff does not compare), the counts of each
//!    group in equal windows of time (the over-dispersion of its rate), and with `--why` traces a [`WhyAgg`]
//!    and the blocked (and on-CPU) time by stack ([`StackAgg`]); [`RunAgg::finish`] gives a
//!    [`Run`];
//! 2. [`diff`] compares the runs of side A with those of side B ([`latscope_stats`]): per group
//!    the percentiles p50, p90, p99, p99.9 and the rate (per second of each recording), each
//!    with an interval of the change and a verdict corrected for the number of comparisons;
//!    groups present on one side only are listed.
//!
//! [`text`] renders a [`Diff`] for a terminal and as JSON; [`svg`] draws the pictures
//! (overlaid histograms, heat maps on one colour scale with their difference, a differential
//! flame graph).

pub mod svg;
pub mod text;

use crate::group::{GroupBy, Grouper};
use crate::heatmap::LogStream;
use crate::latagg::LatAgg;
use crate::stacks::{StackAgg, StackNames};
use crate::waits::{is_idle, BatchRule};
use crate::why::{WhyAgg, PART_LABELS};
use latscope_event::source::Chunk;
use latscope_event::{EventBatch, EventKind, StackTable, TraceHeader, WHY_PARTS};
use latscope_hist::Histogram;
use latscope_stats::{judge, quantile, rate, Estimate, Outcome, Settings, Verdict};

/// What a diff compares groups by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dim {
    /// Syscalls by name (block requests by type).
    Syscall,
    /// Syscalls by process name.
    Proc,
    /// Syscalls by file.
    File,
    /// Block requests by disk.
    Disk,
    /// Time by cause (traces recorded with `--why`).
    Cause,
}

impl Dim {
    /// Parses a list such as `syscall,proc,disk` (`all`: every dimension).
    pub fn parse_list(s: &str) -> Result<Vec<Dim>, String> {
        let mut v = Vec::new();
        for w in s.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            let more: &[Dim] = match w {
                "syscall" | "sys" | "op" => &[Dim::Syscall],
                "proc" | "process" | "comm" => &[Dim::Proc],
                "file" => &[Dim::File],
                "disk" | "dev" | "device" => &[Dim::Disk],
                "cause" | "why" => &[Dim::Cause],
                "all" => &[Dim::Syscall, Dim::Proc, Dim::File, Dim::Disk, Dim::Cause],
                _ => return Err(format!("unknown grouping '{w}' (use syscall, proc, file, disk, cause or all)")),
            };
            for d in more {
                if !v.contains(d) {
                    v.push(*d);
                }
            }
        }
        Ok(v)
    }

    /// Name as given on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Dim::Syscall => "syscall",
            Dim::Proc => "proc",
            Dim::File => "file",
            Dim::Disk => "disk",
            Dim::Cause => "cause",
        }
    }

    fn group_by(self) -> GroupBy {
        match self {
            Dim::Syscall | Dim::Cause => GroupBy::Syscall,
            Dim::Proc => GroupBy::Proc,
            Dim::File => GroupBy::File,
            Dim::Disk => GroupBy::Disk,
        }
    }

    fn kind(self) -> EventKind {
        if self == Dim::Disk {
            EventKind::Block
        } else {
            EventKind::Syscall
        }
    }
}

/// What to aggregate and how to judge.
#[derive(Debug, Clone)]
pub struct DiffOptions {
    /// Groupings compared (the totals of syscalls and block requests always are).
    pub dims: Vec<Dim>,
    /// Count blocking waits (futex, poll, sleeps, ...) with the work.
    pub waits: bool,
    /// Groups compared per dimension: those with the most events on both sides together.
    pub limit: usize,
    /// How verdicts are reached.
    pub settings: Settings,
    /// Keep each run's latency heat map (syscalls, or block requests with `heat_block`).
    pub heatmap: bool,
    /// The heat map and histograms of block requests instead of syscalls.
    pub block: bool,
    /// Keep blocked and on-CPU time by stack (traces recorded with `--why --stacks`).
    pub stacks: bool,
}

impl Default for DiffOptions {
    fn default() -> Self {
        DiffOptions {
            dims: vec![Dim::Syscall, Dim::Disk],
            waits: false,
            limit: 10,
            settings: Settings::default(),
            heatmap: false,
            block: false,
            stacks: false,
        }
    }
}

/// The columns the breakdown's details and the stacks read, beside the breakdown's own.
const DETAIL_COLUMNS: [&str; 18] = [
    "waker_comm_lo",
    "waker_comm_hi",
    "waker_wait_part",
    "waker_wait_ns",
    "runq_tid",
    "runq_cpu",
    "wake_dev",
    "wake_sector",
    "wake_held_ns",
    "wake_queue_ns",
    "wake_device_ns",
    "fault_addr",
    "fault_off",
    "fault_path",
    "kstack",
    "ustack",
    "path",
    "comm",
];

/// Windows at most per run: when a run is longer, windows are made twice as wide.
const MAX_WINDOWS: usize = 256;
/// The first width of a window (ns).
const FIRST_WINDOW_NS: u64 = 10_000_000;

/// Latencies a group's buffer keeps room for between chunks, at least.
const PENDING_KEPT: usize = 4096;
/// Latencies the buffers of one grouping keep room for between chunks, at most (beyond
/// [`PENDING_KEPT`] each): a few groups keep room for a block's events, and need not grow
/// their buffers again for the next.
const PENDING_BUDGET: usize = 256 * 1024;

/// One group of one grouping of a run, as it is read.
#[derive(Default)]
struct GroupAgg {
    count: u64,
    lat: LatAgg,
    /// Events per window.
    windows: Vec<u32>,
    /// The latencies of the chunk being counted, recorded at its end: one group's distribution
    /// at a time stays in the cache, where events of all groups in turn would evict it. Their
    /// number is the group's events of the chunk (added to `count` at its end, and spread over
    /// its windows when the chunk is placed in time as a whole, [`RunAgg::add_spanned`]).
    pending: Vec<u64>,
}

/// One grouping of one run: per group (numbered by its [`Grouper`]) its events, their latency
/// and their counts per window. A diff compares only these, so it keeps them alone rather than
/// a whole `Top` row per event (bytes, errors, sums); the events counted are the same: idle
/// waits are left out by the rule of [`crate::waits`] ([`BatchRule::is_idle`]), and shown only
/// when nothing else matched, as in `top`.
struct DimAgg {
    dim: Dim,
    grouper: Grouper,
    /// The kind of events grouped (`EventKind as u8`).
    kind: u8,
    /// Idle waits are counted with the work (`--waits`).
    with_waits: bool,
    /// One group for every event (`GroupBy::All`): no group to look up once it is numbered.
    one: bool,
    rows: Vec<GroupAgg>,
    /// The idle waits left out, by group (no windows).
    waits: Vec<GroupAgg>,
}

impl DimAgg {
    /// The group of event `i`, and whether it is an idle wait left out.
    #[inline]
    fn group(&mut self, rule: BatchRule, b: &EventBatch, i: usize, h: &TraceHeader) -> (usize, bool) {
        let g = if self.one && !self.grouper.is_empty() { 0 } else { self.grouper.group(b, i, h) };
        let wait = !self.with_waits && self.kind == EventKind::Syscall as u8 && rule.is_idle(b, i);
        (g, wait)
    }

    /// The group's row (or its row of waits), grown to it.
    #[inline]
    fn row(&mut self, g: usize, wait: bool) -> &mut GroupAgg {
        let rows = if wait { &mut self.waits } else { &mut self.rows };
        if g >= rows.len() {
            rows.resize_with(g + 1, GroupAgg::default);
        }
        &mut rows[g]
    }

    /// Counts event `i` (of this grouping's kind), in window `w`.
    #[inline]
    fn add(&mut self, rule: BatchRule, b: &EventBatch, i: usize, h: &TraceHeader, w: usize) {
        let (g, wait) = self.group(rule, b, i, h);
        let r = self.row(g, wait);
        r.pending.push(b.lat[i]);
        if !wait {
            if r.windows.len() <= w {
                r.windows.resize(w + 1, 0);
            }
            r.windows[w] += 1;
        }
    }

    /// Counts the events of this grouping's kind among `rows`, placed in time by the chunk's
    /// span (at [`DimAgg::flush`]): one pass over the chunk per grouping, each event's group
    /// and latency alone.
    fn add_rows(&mut self, rule: BatchRule, b: &EventBatch, rows: &[u32], h: &TraceHeader) {
        let kind = self.kind;
        for &r in rows {
            let i = r as usize;
            if b.kind[i] != kind {
                continue;
            }
            let (g, wait) = self.group(rule, b, i, h);
            self.row(g, wait).pending.push(b.lat[i]);
        }
    }

    /// Records the latencies of the chunk counted; with `span` (the chunk's first and last
    /// window, from and to offsets relative to the run's start, and the windows' width), spreads
    /// each group's events of the chunk over its windows.
    fn flush(&mut self, span: Option<(u64, u64, u64)>) {
        if let Some((lo, hi, width)) = span {
            for r in self.rows.iter_mut().filter(|r| !r.pending.is_empty()) {
                spread(&mut r.windows, r.pending.len() as u32, lo, hi, width);
            }
        }
        // Thousands of groups (files) keep little each.
        let kept = PENDING_KEPT.max(PENDING_BUDGET / (self.rows.len() + self.waits.len()).max(1));
        for r in self.rows.iter_mut().chain(self.waits.iter_mut()).filter(|r| !r.pending.is_empty()) {
            r.count += r.pending.len() as u64;
            r.lat.record_all(&r.pending);
            if r.pending.capacity() > kept {
                r.pending = Vec::new();
            } else {
                r.pending.clear();
            }
        }
    }

    /// The groups with events, by number: the idle waits when nothing else matched.
    fn shown(self) -> (Grouper, Vec<(usize, GroupAgg)>) {
        let showing_waits = !self.rows.iter().any(|r| r.count > 0) && self.waits.iter().any(|r| r.count > 0);
        let rows = if showing_waits { self.waits } else { self.rows };
        (self.grouper, rows.into_iter().enumerate().filter(|(_, r)| r.count > 0).collect())
    }
}

/// Adds `n` events that fell between offsets `lo` and `hi` (ns from the run's start, both
/// included) to the windows of `width` ns, in proportion to the time of each window the span
/// covers; the shares are rounded so that they add up to `n`.
fn spread(windows: &mut Vec<u32>, n: u32, lo: u64, hi: u64, width: u64) {
    let (first, last) = ((lo / width) as usize, (hi / width) as usize);
    if windows.len() <= last {
        windows.resize(last + 1, 0);
    }
    if first == last {
        windows[first] += n;
        return;
    }
    let len = u128::from(hi - lo + 1);
    let mut given = 0u32;
    for (k, w) in windows.iter_mut().enumerate().take(last + 1).skip(first) {
        let end = ((k as u64 + 1) * width).min(hi + 1);
        // Of the n events, those up to the end of this window: n * covered / len, rounded down.
        let upto = (u128::from(n) * u128::from(end - lo) / len) as u32;
        *w += upto - given;
        given = upto;
    }
}

/// One recording read for a diff (chunks in, as every view).
pub struct RunAgg {
    o: DiffOptions,
    start_ns: u64,
    width_ns: u64,
    totals: [DimAgg; 2],
    dims: Vec<DimAgg>,
    why: Option<(WhyAgg, Vec<[u64; WHY_PARTS]>, [u64; WHY_PARTS])>,
    stacks: Option<(StackAgg, StackAgg, StackTable)>,
    heat: Option<LogStream>,
    last_ns: u64,
    /// The window of the last event, and where it starts.
    win: usize,
    win_start: u64,
    /// The groupings (by index) whose groups add up to all syscalls and all block requests.
    derived_totals: [Option<usize>; 2],
}

fn dim_agg(dim: Dim, by: GroupBy, waits: bool) -> DimAgg {
    DimAgg {
        dim,
        grouper: Grouper::new(by),
        kind: dim.kind() as u8,
        with_waits: waits,
        one: by == GroupBy::All,
        rows: Vec::new(),
        waits: Vec::new(),
    }
}

impl RunAgg {
    /// A run whose header is `header` (time zero its start).
    pub fn new(o: &DiffOptions, header: &TraceHeader) -> RunAgg {
        let dims: Vec<DimAgg> =
            o.dims.iter().filter(|d| **d != Dim::Cause).map(|&d| dim_agg(d, d.group_by(), o.waits)).collect();
        let derived_totals =
            [dims.iter().position(|d| d.dim == Dim::Syscall), dims.iter().position(|d| d.dim == Dim::Disk)];
        let why = o
            .dims
            .contains(&Dim::Cause)
            .then(|| (WhyAgg { with_waits: o.waits, ..Default::default() }, Vec::new(), [0u64; WHY_PARTS]));
        let stacks = o.stacks.then(|| {
            (
                StackAgg { with_waits: o.waits, ..Default::default() },
                StackAgg { with_waits: o.waits, on_cpu: true, ..Default::default() },
                StackTable::default(),
            )
        });
        RunAgg {
            start_ns: header.start_ns,
            width_ns: FIRST_WINDOW_NS,
            totals: [dim_agg(Dim::Syscall, GroupBy::All, o.waits), dim_agg(Dim::Disk, GroupBy::All, o.waits)],
            dims,
            why,
            stacks,
            heat: o.heatmap.then(|| LogStream::auto(header.start_ns, None, None)),
            last_ns: header.start_ns,
            derived_totals,
            win: 0,
            win_start: header.start_ns,
            o: o.clone(),
        }
    }

    /// The columns read (by `EventBatch` field name).
    pub fn columns(&self) -> Vec<&'static str> {
        // The counting rule's columns too: on a `--why` trace, how a wait ended decides whether
        // it is idle, as in every other view.
        let mut c: Vec<&'static str> = vec!["ts"];
        c.extend(crate::waits::columns());
        for d in &self.dims {
            if d.dim == Dim::Disk {
                // Block requests only: their device names need no fd type.
                c.extend(["kind", "dev"]);
            } else {
                c.extend(d.dim.group_by().columns());
            }
        }
        if self.why.is_some() || self.stacks.is_some() {
            c.extend(latscope_event::WHY_COLUMNS);
            c.extend(DETAIL_COLUMNS);
        }
        c.sort_unstable();
        c.dedup();
        c
    }

    /// The columns of [`RunAgg::columns`] read only in batches where
    /// [`BatchRule::reads_breakdown`] (the counting rule's breakdown, when neither the time by
    /// cause nor the stacks are kept): a source may leave them undecoded elsewhere.
    pub fn deferred_columns(&self) -> Vec<&'static str> {
        if self.why.is_some() || self.stacks.is_some() {
            return Vec::new();
        }
        latscope_event::WHY_COLUMNS.to_vec()
    }

    /// Doubles the windows' width until window `w` fits.
    fn fit(&mut self, mut w: u64) -> usize {
        while w >= MAX_WINDOWS as u64 {
            self.width_ns *= 2;
            self.win_start = u64::MAX / 2;
            w /= 2;
            for d in self.dims.iter_mut().chain(self.totals.iter_mut()) {
                for v in d.rows.iter_mut().map(|r| &mut r.windows) {
                    let folded: Vec<u32> = v.chunks(2).map(|p| p.iter().sum()).collect();
                    *v = folded;
                }
            }
            if let Some((_, v, _)) = self.why.as_mut() {
                *v = v.chunks(2).map(|p| std::array::from_fn(|k| p.iter().map(|x| x[k]).sum())).collect();
            }
        }
        w as usize
    }

    /// Whether chunks may be placed in time by their block's span alone
    /// ([`RunAgg::add_spanned`]): not when the heat map or the time by cause, which place each
    /// event, are kept.
    pub fn by_span(&self) -> bool {
        self.heat.is_none() && self.why.is_none()
    }

    /// Count a chunk.
    pub fn add(&mut self, c: Chunk<'_>, h: &TraceHeader) {
        self.add_spanned(c, h, None);
    }

    /// Count a chunk; with `span`, the earliest and latest end time of the chunk's block (from
    /// the trace's zone map, when [`RunAgg::by_span`]: `ts` then need not be decoded), its
    /// events are placed in the windows of that span rather than each by its start.
    ///
    /// Windows only serve the noise estimate of the rates (their over-dispersion: the variance
    /// of the counts per window over their mean, [`latscope_stats::rate`]). Spread evenly over
    /// its block's span (`record` writes a block at least every second, `--flush-every`), a
    /// group's counts keep the variation between blocks but lose that
    /// within one: the over-dispersion seen is that of time scales longer than a block, which
    /// is the drift a rate over the whole recording suffers; bursts shorter than a block are
    /// not seen (the estimate tends to the Poisson 1, its floor). With one recording per side
    /// the assumed run-to-run noise (--run-noise, 10 %: 0.01 on the log's variance) is added:
    /// a dispersion D not seen weighs only in groups of fewer than about 100 D events; with
    /// several recordings per side the runs' scatter is measured.
    pub fn add_spanned(&mut self, c: Chunk<'_>, h: &TraceHeader, span: Option<(u64, u64)>) {
        let span = span.filter(|_| self.by_span());
        let b = c.batch;
        if let Some((lo, hi)) = span {
            let rule = BatchRule::of(b);
            // Grouping by grouping: each pass reads the kind, the group's columns and the
            // latency of the events of its kind.
            let derived = self.derived_totals;
            let totals = self.totals.iter_mut().enumerate().filter(|(t, _)| derived[*t].is_none()).map(|(_, d)| d);
            for d in self.dims.iter_mut().chain(totals) {
                d.add_rows(rule, b, c.rows, h);
            }
            self.last_ns = self.last_ns.max(hi);
            let (lo, hi) = (lo.saturating_sub(self.start_ns), hi.saturating_sub(self.start_ns));
            self.fit(hi / self.width_ns);
            let span = Some((lo, hi, self.width_ns));
            for d in self.dims.iter_mut().chain(self.totals.iter_mut()) {
                d.flush(span);
            }
            self.add_stacks(c);
            return;
        }
        let (sys, blk) = (EventKind::Syscall as u8, EventKind::Block as u8);
        let rule = BatchRule::of(b);
        for &r in c.rows {
            let i = r as usize;
            let k = b.kind[i];
            if k != sys && k != blk {
                continue;
            }
            let ts = b.ts[i];
            self.last_ns = self.last_ns.max(b.end(i));
            // Most events fall in the window of the one before: no division.
            let w = if (self.win_start..self.win_start + self.width_ns).contains(&ts) {
                self.win
            } else {
                let rel = ts.saturating_sub(self.start_ns);
                let w = self.fit(rel / self.width_ns);
                (self.win, self.win_start) = (w, self.start_ns + w as u64 * self.width_ns);
                w
            };
            let kind = if k == sys { EventKind::Syscall } else { EventKind::Block };
            for d in self.dims.iter_mut() {
                if d.kind == k {
                    d.add(rule, b, i, h, w);
                }
            }
            // The totals are the sums of the syscall and disk groupings when those are kept.
            let t = usize::from(k != sys);
            if self.derived_totals[t].is_none() {
                self.totals[t].add(rule, b, i, h, w);
            }
            if let Some(hs) = self.heat.as_mut() {
                if (kind == EventKind::Block) == self.o.block {
                    hs.add(ts, b.lat[i]);
                }
            }
            if k == sys {
                if let Some((_, wins, totals)) = self.why.as_mut() {
                    let p = b.why_parts(i);
                    if p.iter().any(|&v| v > 0) && (self.o.waits || !is_idle(b, i)) {
                        if wins.len() <= w {
                            wins.resize(w + 1, [0; WHY_PARTS]);
                        }
                        for (x, (y, t)) in p.iter().zip(wins[w].iter_mut().zip(totals.iter_mut())) {
                            *y += x;
                            *t += x;
                        }
                    }
                }
            }
        }
        for d in self.dims.iter_mut().chain(self.totals.iter_mut()) {
            d.flush(None);
        }
        if let Some((agg, _, _)) = self.why.as_mut() {
            agg.add(b, c.rows);
        }
        self.add_stacks(c);
    }

    /// Blocked and on-CPU time by stack of a chunk, when kept.
    fn add_stacks(&mut self, c: Chunk<'_>) {
        let b = c.batch;
        if let Some((blocked, cpu, table)) = self.stacks.as_mut() {
            blocked.add(b, c.rows);
            cpu.add(b, c.rows);
            if !b.stacks.is_empty() {
                // Entries already known are replaced by the same (ids are unique in a trace).
                let _ = table.add_lines(&b.stacks);
            }
        }
    }

    /// The run: `name` for messages, `duration_ns` the recording's (when its summary says;
    /// else from its start to the last event's end); `binaries` where to find the recorded
    /// binaries to name user frames.
    pub fn finish(self, name: &str, duration_ns: Option<u64>, binaries: Option<&std::path::Path>) -> Run {
        let dur = duration_ns.filter(|&d| d > 0).unwrap_or(self.last_ns.saturating_sub(self.start_ns)).max(1);
        let full = (dur / self.width_ns) as usize;
        let groups = |d: DimAgg| -> DimRun {
            let dim = d.dim;
            let (grouper, rows) = d.shown();
            let groups = rows
                .into_iter()
                .map(|(g, row)| {
                    let mut w: Vec<u64> = row.windows.into_iter().map(u64::from).collect();
                    w.resize(full, 0);
                    let name = grouper.names()[g].clone();
                    GroupRun { name, count: row.count, lat: row.lat.to_histogram(), windows: w }
                })
                .collect();
            DimRun { dim, groups }
        };
        let dims: Vec<DimRun> = self.dims.into_iter().map(groups).collect();
        let [sys, blk] = self.totals;
        let total = |t: DimAgg, from: Option<usize>| -> DimRun {
            let Some(k) = from else { return groups(t) };
            // One group, `all`: the sum of the grouping's groups.
            let mut all = GroupRun { name: "all".into(), count: 0, lat: Histogram::new(), windows: vec![0; full] };
            for g in &dims[k].groups {
                all.count += g.count;
                all.lat.merge(&g.lat);
                for (x, y) in all.windows.iter_mut().zip(&g.windows) {
                    *x += y;
                }
            }
            DimRun { dim: t.dim, groups: if all.count > 0 { vec![all] } else { Vec::new() } }
        };
        let totals = [total(sys, self.derived_totals[0]), total(blk, self.derived_totals[1])];
        let why = self.why.map(|(agg, wins, totals)| {
            let mut wins = wins;
            wins.resize(full, [0; WHY_PARTS]);
            CauseRun { agg, windows: wins, totals }
        });
        let stacks = self.stacks.map(|(blocked, cpu, table)| {
            let mut names = StackNames::new(table, binaries);
            let b = crate::stacks::folded(&blocked, &mut names);
            let c = crate::stacks::folded(&cpu, &mut names);
            (b, c)
        });
        Run {
            name: name.to_string(),
            secs: dur as f64 / 1e9,
            window_secs: self.width_ns as f64 / 1e9,
            totals,
            dims,
            why,
            stacks,
            heat: self.heat,
        }
    }
}

/// One group of one run.
#[derive(Debug, Clone)]
pub struct GroupRun {
    /// Its name.
    pub name: String,
    /// Events.
    pub count: u64,
    /// Their latency.
    pub lat: Histogram,
    /// Events per window of the run (complete windows only).
    pub windows: Vec<u64>,
}

/// One grouping of one run.
#[derive(Debug, Clone)]
pub struct DimRun {
    /// The grouping.
    pub dim: Dim,
    /// Its groups.
    pub groups: Vec<GroupRun>,
}

/// Time by cause of one run.
#[derive(Debug, Clone)]
pub struct CauseRun {
    /// The breakdown.
    pub agg: WhyAgg,
    /// Time (ns) of each cause per window.
    pub windows: Vec<[u64; WHY_PARTS]>,
    /// Time (ns) of each cause.
    pub totals: [u64; WHY_PARTS],
}

/// One recording, read.
#[derive(Debug, Clone)]
pub struct Run {
    /// Its name (the file).
    pub name: String,
    /// The recording's duration (s): rates are per second of it.
    pub secs: f64,
    /// Width of its windows (s).
    pub window_secs: f64,
    /// All syscalls, all block requests.
    pub totals: [DimRun; 2],
    /// Per grouping.
    pub dims: Vec<DimRun>,
    /// Time by cause (with `--why` traces and the `cause` grouping).
    pub why: Option<CauseRun>,
    /// Folded stacks of blocked and on-CPU time (us), when asked for.
    pub stacks: Option<(String, String)>,
    /// Its latency heat map, when asked for.
    pub heat: Option<LogStream>,
}

impl Run {
    /// Syscalls counted.
    pub fn syscalls(&self) -> u64 {
        self.totals[0].groups.iter().map(|g| g.count).sum()
    }

    /// Block requests counted.
    pub fn blocks(&self) -> u64 {
        self.totals[1].groups.iter().map(|g| g.count).sum()
    }
}

/// The percentiles compared, with their names.
pub const PERCENTILES: [(&str, f64); 4] = [("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p99.9", 0.999)];

/// One metric of one group on both sides.
#[derive(Debug, Clone)]
pub struct MetricDiff {
    /// `p50`, `p90`, `p99`, `p99.9`, `rate`, or a cause's time per second.
    pub metric: String,
    /// `ns` or `/s` (events per second) or `ns/s` (time per second).
    pub unit: &'static str,
    /// The comparison.
    pub outcome: Outcome,
}

/// One group on both sides.
#[derive(Debug, Clone)]
pub struct GroupDiff {
    /// Its name.
    pub name: String,
    /// Events per run, each side (the mean over its runs).
    pub count: (f64, f64),
    /// Its metrics.
    pub metrics: Vec<MetricDiff>,
}

/// A group on one side only.
#[derive(Debug, Clone)]
pub struct OneSide {
    /// Its name.
    pub name: String,
    /// Events per run.
    pub count: f64,
    /// Events per second.
    pub rate: f64,
}

/// One grouping on both sides.
#[derive(Debug, Clone)]
pub struct DimDiff {
    /// `all`, `syscall`, `proc`, `file`, `disk`, `cause`.
    pub by: String,
    /// The groups compared, most events first.
    pub groups: Vec<GroupDiff>,
    /// Groups on both sides not compared (beyond the limit).
    pub not_shown: usize,
    /// Groups only side A has.
    pub only_a: Vec<OneSide>,
    /// Groups only side B has.
    pub only_b: Vec<OneSide>,
}

/// A side's runs, described.
#[derive(Debug, Clone)]
pub struct SideInfo {
    /// Its recordings.
    pub files: Vec<String>,
    /// Their durations (s).
    pub secs: Vec<f64>,
    /// Syscalls and block requests counted, per run.
    pub events: Vec<(u64, u64)>,
}

/// Two sides compared.
#[derive(Debug, Clone)]
pub struct Diff {
    /// Side A.
    pub a: SideInfo,
    /// Side B.
    pub b: SideInfo,
    /// How verdicts were reached.
    pub settings: Settings,
    /// Metrics compared (what the verdicts are corrected for).
    pub comparisons: usize,
    /// Per grouping (first the totals).
    pub dims: Vec<DimDiff>,
}

fn info(runs: &[Run]) -> SideInfo {
    SideInfo {
        files: runs.iter().map(|r| r.name.clone()).collect(),
        secs: runs.iter().map(|r| r.secs).collect(),
        events: runs.iter().map(|r| (r.syscalls(), r.blocks())).collect(),
    }
}

/// The group `name` of each run of a side (an empty one where a run lacks it).
fn group_of<'a>(runs: &'a [Run], pick: &dyn Fn(&'a Run) -> &'a DimRun, name: &str) -> Vec<Option<&'a GroupRun>> {
    runs.iter().map(|r| pick(r).groups.iter().find(|g| g.name == name)).collect()
}

/// The metrics of one group: percentiles and rate, per run of each side.
fn group_metrics(
    a: &[Option<&GroupRun>],
    ra: &[Run],
    b: &[Option<&GroupRun>],
    rb: &[Run],
    s: &Settings,
) -> Vec<MetricDiff> {
    let mut out = Vec::new();
    let empty = Histogram::new();
    for (name, q) in PERCENTILES {
        let est = |side: &[Option<&GroupRun>]| -> Vec<Estimate> {
            side.iter()
                .map(|g| {
                    quantile(g.map_or(&empty, |g| &g.lat), q).unwrap_or(Estimate {
                        value: 0.0,
                        var_log: 0.0,
                        support: 0,
                    })
                })
                .collect()
        };
        out.push(MetricDiff { metric: name.into(), unit: "ns", outcome: latscope_stats::compare(&est(a), &est(b), s) });
    }
    let rates = |side: &[Option<&GroupRun>], runs: &[Run]| -> Vec<Estimate> {
        // A run without the group: half an event (its rate is not zero on a log scale).
        side.iter()
            .zip(runs)
            .map(|(g, r)| match g.and_then(|g| rate(g.count, r.secs, &g.windows)) {
                Some(e) => e,
                None => Estimate { value: 0.5 / r.secs, var_log: 2.0, support: 0 },
            })
            .collect()
    };
    let mut o = latscope_stats::compare(&rates(a, ra), &rates(b, rb), s);
    // A rate rests on the events of both sides: a group of 5 events against 500 is a change.
    if o.verdict == Verdict::TooFew && o.support.0 + o.support.1 >= 2 * s.min_support {
        let mut s2 = *s;
        s2.min_support = 0;
        o = latscope_stats::compare(&rates(a, ra), &rates(b, rb), &s2);
    }
    out.push(MetricDiff { metric: "rate".into(), unit: "/s", outcome: o });
    out
}

/// One grouping compared: groups on both sides (the `limit` with the most events), and those
/// on one side only.
fn dim_diff(by: &str, a: &[Run], b: &[Run], pick: &dyn Fn(&Run) -> &DimRun, o: &DiffOptions) -> DimDiff {
    use std::collections::BTreeMap;
    // Events per run, by group, each side.
    let mut counts: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
    for (runs, side) in [(a, 0), (b, 1)] {
        for r in runs {
            for g in &pick(r).groups {
                let e = counts.entry(g.name.as_str()).or_default();
                let per_run = g.count as f64 / runs.len() as f64;
                if side == 0 {
                    e.0 += per_run;
                } else {
                    e.1 += per_run;
                }
            }
        }
    }
    let secs = |runs: &[Run]| runs.iter().map(|r| r.secs).sum::<f64>() / runs.len().max(1) as f64;
    let mut both: Vec<(&str, (f64, f64))> =
        counts.iter().filter(|(_, c)| c.0 > 0.0 && c.1 > 0.0).map(|(k, c)| (*k, *c)).collect();
    both.sort_by(|x, y| (y.1 .0 + y.1 .1).total_cmp(&(x.1 .0 + x.1 .1)).then(x.0.cmp(y.0)));
    let not_shown = both.len().saturating_sub(o.limit);
    both.truncate(o.limit);
    let one = |side: usize| -> Vec<OneSide> {
        let mut v: Vec<OneSide> = counts
            .iter()
            .filter(|(_, c)| if side == 0 { c.1 == 0.0 } else { c.0 == 0.0 })
            .map(|(k, c)| {
                let n = if side == 0 { c.0 } else { c.1 };
                OneSide { name: k.to_string(), count: n, rate: n / secs(if side == 0 { a } else { b }) }
            })
            .collect();
        v.sort_by(|x, y| y.count.total_cmp(&x.count).then(x.name.cmp(&y.name)));
        v
    };
    let groups = both
        .iter()
        .map(|(name, c)| {
            let (ga, gb) = (group_of(a, &|r| pick(r), name), group_of(b, &|r| pick(r), name));
            GroupDiff { name: name.to_string(), count: *c, metrics: group_metrics(&ga, a, &gb, b, &o.settings) }
        })
        .collect();
    DimDiff { by: by.into(), groups, not_shown, only_a: one(0), only_b: one(1) }
}

/// Time by cause compared: per cause, its time per second of recording.
fn cause_diff(a: &[Run], b: &[Run], s: &Settings) -> Option<DimDiff> {
    let has = |runs: &[Run]| runs.iter().all(|r| r.why.as_ref().is_some_and(|w| w.agg.calls > 0));
    if !has(a) || !has(b) {
        return None;
    }
    let mut groups = Vec::new();
    let (mut only_a, mut only_b) = (Vec::new(), Vec::new());
    for (k, label) in PART_LABELS.iter().enumerate() {
        let est = |runs: &[Run]| -> Vec<Option<Estimate>> {
            runs.iter()
                .map(|r| {
                    let w = r.why.as_ref()?;
                    let per: Vec<f64> = w.windows.iter().map(|x| x[k] as f64 / r.window_secs).collect();
                    let total = w.totals[k] as f64 / r.secs;
                    if total <= 0.0 {
                        return None;
                    }
                    let calls = w.agg.by_op.values().filter(|o| o.parts[k] > 0).map(|o| o.calls).sum();
                    let mut e = latscope_stats::windows(&per, calls).unwrap_or(Estimate {
                        value: 0.0,
                        var_log: 1.0,
                        support: calls,
                    });
                    e.value = total;
                    Some(e)
                })
                .collect()
        };
        let (ea, eb) = (est(a), est(b));
        let mean =
            |v: &[Option<Estimate>]| v.iter().map(|e| e.map_or(0.0, |e| e.value)).sum::<f64>() / v.len().max(1) as f64;
        let (ma, mb) = (mean(&ea), mean(&eb));
        match (ma > 0.0, mb > 0.0) {
            (false, false) => continue,
            (true, false) => only_a.push(OneSide { name: label.to_string(), count: ma, rate: ma }),
            (false, true) => only_b.push(OneSide { name: label.to_string(), count: mb, rate: mb }),
            (true, true) => {
                let fill = |v: Vec<Option<Estimate>>| -> Vec<Estimate> {
                    v.into_iter().map(|e| e.unwrap_or(Estimate { value: 1.0, var_log: 2.0, support: 0 })).collect()
                };
                let outcome = latscope_stats::compare(&fill(ea), &fill(eb), s);
                groups.push(GroupDiff {
                    name: label.to_string(),
                    count: (ma, mb),
                    metrics: vec![MetricDiff { metric: "time/s".into(), unit: "ns/s", outcome }],
                });
            }
        }
    }
    groups.sort_by(|x, y| (y.count.0 + y.count.1).total_cmp(&(x.count.0 + x.count.1)));
    Some(DimDiff { by: "cause".into(), groups, not_shown: 0, only_a, only_b })
}

/// Compares the runs of side A with those of side B (see the module docs).
pub fn diff(a: &[Run], b: &[Run], o: &DiffOptions) -> Diff {
    let mut dims =
        vec![dim_diff("all", a, b, &|r| &r.totals[0], o), dim_diff("all block I/O", a, b, &|r| &r.totals[1], o)];
    dims[0].by = "all syscalls".into();
    for (k, d) in o.dims.iter().filter(|d| **d != Dim::Cause).enumerate() {
        dims.push(dim_diff(d.name(), a, b, &|r| &r.dims[k], o));
    }
    if o.dims.contains(&Dim::Cause) {
        if let Some(c) = cause_diff(a, b, &o.settings) {
            dims.push(c);
        }
    }
    // Sides without any event of a kind have nothing to say about it.
    dims.retain(|d| !d.groups.is_empty() || !d.only_a.is_empty() || !d.only_b.is_empty());
    let mut refs: Vec<&mut Outcome> = dims
        .iter_mut()
        .flat_map(|d| d.groups.iter_mut().flat_map(|g| g.metrics.iter_mut().map(|m| &mut m.outcome)))
        .collect();
    let comparisons = judge(&mut refs, &o.settings);
    Diff { a: info(a), b: info(b), settings: o.settings, comparisons, dims }
}

impl Diff {
    /// Every change found: (grouping, group, metric), largest change first.
    pub fn changes(&self) -> Vec<(&DimDiff, &GroupDiff, &MetricDiff)> {
        let mut v: Vec<(&DimDiff, &GroupDiff, &MetricDiff)> = self
            .dims
            .iter()
            .flat_map(|d| {
                d.groups
                    .iter()
                    .flat_map(move |g| g.metrics.iter().filter(|m| m.outcome.verdict.changed()).map(move |m| (d, g, m)))
            })
            .collect();
        v.sort_by(|x, y| {
            let r = |m: &MetricDiff| (1.0 + m.outcome.change).ln().abs();
            r(y.2).total_cmp(&r(x.2))
        });
        v
    }
}

#[cfg(test)]
mod tests;
