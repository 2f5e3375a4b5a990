//! `latscope spectrogram`: live (in-kernel histograms when the filter allows, the event stream
//! otherwise) or from a trace file, drawn by `latscope_view::spectrogram`.

use crate::cmd::record::SysMode;
use crate::cmd::viewinput::Zone;
use crate::input::parse_filter;
use crate::pushdown::{keep_fd_naming, merge_pushdown, needs_fd_names};
use anyhow::{bail, Context, Result};
use latscope_event::units::{parse_duration_ns, parse_duration_secs_default, parse_size};
use latscope_event::{dev_major_minor, syscall_name, BlockOp, EventBatch, EventKind, FdType, TraceHeader};
use latscope_filter::{EvalContext, Filter};
use latscope_probe::{fd_class_group, snapshot, AggGroup, AggSnapshot, Probe, ProbeConfig, SyscallSel};
use latscope_trace::{Column, ReadOptions, TraceReader};
use latscope_view::events::{line, TimeFormat};
use latscope_view::spectrogram::render::{DrawOptions, FeedStatus, Split};
use latscope_view::spectrogram::svg::{svg, SvgOptions};
use latscope_view::spectrogram::tui::{run_plain, run_tui, RunOptions};
use latscope_view::spectrogram::{
    Buckets, DrillQuery, DrillResult, EventWindow, Feed, GroupOrder, Palette, Spectrogram,
};
use std::collections::{HashMap, HashSet};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How to split the view into strips.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum By {
    /// The class of the file descriptor: file, net, ipc, other (live: in the kernel).
    Class,
    /// Process name (needs the event stream).
    Proc,
    /// Syscall (live: in the kernel).
    Syscall,
    /// Block device; implies --block (live: in the kernel, devices present at start).
    Disk,
}

/// Colour modes.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Colors {
    /// True colour if COLORTERM says so, else 256 colours; no colour when NO_COLOR is set or
    /// when writing plain rows.
    Auto,
    /// The xterm 256-colour palette.
    #[value(name = "256")]
    C256,
    /// 24-bit colour.
    Truecolor,
    /// Glyphs of increasing density instead of colours.
    None,
}

/// Placement of the strips of a split view.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Side by side for fd classes and disks on a wide terminal, stacked otherwise.
    Auto,
    /// Side by side.
    Side,
    /// Stacked.
    Stack,
}

/// Draw syscall (or block request) latency as a spectrogram: one row per interval, one column
/// per latency range on a log scale (1 ns to 10 s by default), each cell coloured by how many
/// calls of that latency ended in that interval: black none, greens up to 99, yellows hundreds,
/// reds thousands and more.
///
/// Live, latency is measured in the kernel, and when the whole filter can be tested there the
/// histograms are also built there (nothing is copied per event); otherwise events are streamed
/// and filtered in user space. On a terminal the view is interactive (space freezes it, arrows
/// or the mouse select a time x latency rectangle, enter lists its events); piped, it prints
/// plain rows.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  latscope spectrogram                                   # every syscall, 500 ms per row
  latscope spectrogram 200 proc.name=httpd               # 5 rows per second, one process
  latscope spectrogram 'proc.name=httpd and fd.type=file and evt.latency > 1ms'
  latscope spectrogram 'proc.name=test and evt.is_io_write=true and fd.name contains /mnt'
  latscope spectrogram --by class --min 1us --max 1s     # file vs net vs ipc, zoomed
  latscope spectrogram --block --by disk                 # block request latency per disk
  latscope spectrogram -r trace.lst --no-pace --svg trace.svg 'evt.type=fsync'
  latscope spectrogram -d 10s --plain --colors none > rows.txt

Keys: space freeze/resume, arrows move, v mark a corner, enter list events, s keep events
(live in-kernel mode), n draw a paced file at once, ? help, q quit. See docs/SPECTROGRAM.md.")]
pub struct Args {
    /// Draw this trace file (from 'latscope record') instead of the live system.
    #[arg(short = 'r', long = "read", value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Left edge of the latency axis (e.g. 1us).
    #[arg(long, default_value = "1ns", value_parser = parse_duration_ns, value_name = "LATENCY")]
    pub min: u64,
    /// Right edge of the latency axis (e.g. 100ms).
    #[arg(long, default_value = "10s", value_parser = parse_duration_ns, value_name = "LATENCY")]
    pub max: u64,
    /// Split the view into one strip per group.
    #[arg(long, value_enum)]
    pub by: Option<By>,
    /// Block requests (issue to completion) instead of syscalls.
    #[arg(long)]
    pub block: bool,
    /// Placement of the strips with --by.
    #[arg(long, value_enum, default_value = "auto")]
    pub layout: Layout,
    /// Most strips shown with --by (the busiest, or the fixed ones in order).
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub top: usize,
    /// Colours.
    #[arg(long, value_enum, default_value = "auto")]
    pub colors: Colors,
    /// Same as --colors none.
    #[arg(long)]
    pub no_color: bool,
    /// Print plain rows (no cursor control) even on a terminal.
    #[arg(long)]
    pub plain: bool,
    /// Width of plain rows in characters (default: the terminal's, or $COLUMNS, or 120).
    #[arg(long, value_name = "COLUMNS")]
    pub width: Option<usize>,
    /// Trace files: draw everything at once instead of at the pace of the recording.
    #[arg(long)]
    pub no_pace: bool,
    /// Trace files: pace at this multiple of the recording's speed.
    #[arg(long, default_value_t = 1.0, value_name = "FACTOR")]
    pub speed: f64,
    /// Live: stop after this long (e.g. 10s, 5m; a bare number is seconds).
    #[arg(short = 'd', long, value_parser = parse_duration_secs_default, value_name = "DURATION")]
    pub duration: Option<u64>,
    /// Also write the whole spectrogram as an SVG image to FILE when done.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Live: stream events to user space even when the kernel could aggregate (keeps recent
    /// events for drill-down, costs more per syscall).
    #[arg(long)]
    pub stream: bool,
    /// Live, streaming: events kept for drill-down.
    #[arg(long, default_value_t = 1_000_000, value_name = "N")]
    pub keep: usize,
    /// Live: which syscalls to trace.
    #[arg(long, value_enum, default_value = "all")]
    pub syscalls: SysMode,
    /// Live, streaming: ring buffer size.
    #[arg(long, default_value = "64MiB", value_parser = parse_size, value_name = "SIZE")]
    pub buffer_size: u64,
    /// [INTERVAL_MS] [FILTER]: milliseconds per row (default 500), then a filter expression
    /// (sysdig syntax, see 'latscope fields'; several words are joined).
    #[arg(value_name = "INTERVAL_MS] [FILTER")]
    pub words: Vec<String>,
}

/// Interval (ms) and filter text from the positional words.
pub fn split_words(words: &[String]) -> Result<(u64, String)> {
    let mut rest = words;
    let mut ms = 500;
    if let Some(first) = words.first() {
        if !first.is_empty() && first.chars().all(|c| c.is_ascii_digit()) {
            ms = first.parse().context("the interval is not a number of milliseconds")?;
            if ms == 0 {
                bail!("the interval must be at least 1 ms");
            }
            rest = &words[1..];
        }
    }
    Ok((ms, rest.join(" ")))
}

/// Why the kernel cannot apply `filter` exactly (so in-kernel aggregation would count events
/// the filter rejects), or `None` when it can. `block`: the events are block requests.
pub fn kernel_inexact(filter: &Filter, block: bool) -> Option<String> {
    if filter.is_match_all() {
        return None;
    }
    let p = filter.pushdown();
    if p.tids.is_some() {
        return Some("thread.tid is tested in user space".into());
    }
    if block && (p.pids.is_some() || p.comms.is_some()) {
        return Some("the process of a block request is known in user space only".into());
    }
    if p.block_disks.is_some() && p.block_devs.is_none() {
        return Some("blk.disk names are resolved in user space".into());
    }
    let ex = filter.explain();
    let mut lines = ex.lines();
    for l in lines.by_ref() {
        if l.starts_with("user space") {
            break;
        }
        // `latency >= Nns (...)  <- evt.latency = 5ms`: an equality is only a lower bound.
        if l.contains("latency >=") {
            if let Some((_, clause)) = l.split_once("<- ") {
                if !clause.contains('>') {
                    return Some(format!("'{}' is tested in user space", clause.trim()));
                }
            }
        }
    }
    let rest: Vec<&str> = lines.collect();
    if rest.iter().any(|l| l.contains("no clause is left to user space alone")) {
        return None;
    }
    let first = rest.first().map(|l| l.trim()).filter(|l| !l.is_empty());
    Some(match first {
        Some(l) => l.to_string(),
        None => "part of the filter is tested in user space".into(),
    })
}

/// Maps events to strip groups and names the groups.
struct Grouper {
    by: Option<By>,
    comms: HashMap<String, u32>,
    named: HashSet<u32>,
    new_names: Vec<(u32, String)>,
    header: TraceHeader,
}

/// Group ids of `--by class`, in display order.
const CLASS_NAMES: [&str; 5] = ["file", "net", "ipc", "other", "block"];
const BLOCK_GROUP: u32 = 0x10000;

impl Grouper {
    fn new(by: Option<By>, header: &TraceHeader, spec: &mut Spectrogram) -> Grouper {
        let mut g =
            Grouper { by, comms: HashMap::new(), named: HashSet::new(), new_names: Vec::new(), header: header.clone() };
        match by {
            Some(By::Class) => {
                for (i, n) in CLASS_NAMES.iter().take(4).enumerate() {
                    spec.set_group_name(i as u32, *n);
                }
                spec.set_group_order(GroupOrder::ById);
            }
            Some(By::Disk) => spec.set_group_order(GroupOrder::ById),
            _ => spec.set_group_order(GroupOrder::ByTotal),
        }
        g.flush(spec);
        g
    }

    /// Display group of a kernel fd-class group (0 other, 1 file, 2 net, 3 ipc).
    fn from_fd_class(k: u32) -> u32 {
        (k + 3) % 4
    }

    #[inline]
    fn group(&mut self, b: &EventBatch, i: usize) -> u32 {
        let block = b.kind[i] == EventKind::Block as u8;
        match self.by {
            None => 0,
            Some(By::Class) => {
                if block {
                    4
                } else {
                    Self::from_fd_class(fd_class_group(FdType::from_u8(b.fd_type[i])))
                }
            }
            Some(By::Syscall) => {
                let g = if block { BLOCK_GROUP + b.nr[i] as u32 } else { b.nr[i] as u32 };
                self.name_syscall(g);
                g
            }
            Some(By::Disk) => {
                let d = b.dev[i];
                self.name_disk(d);
                d
            }
            Some(By::Proc) => {
                let c = b.comm.get(i);
                if let Some(&g) = self.comms.get(c) {
                    return g;
                }
                let g = self.comms.len() as u32;
                self.comms.insert(c.to_string(), g);
                self.new_names.push((g, if c.is_empty() { "?".into() } else { c.to_string() }));
                g
            }
        }
    }

    fn name_syscall(&mut self, g: u32) {
        if !self.named.insert(g) {
            return;
        }
        let name = if g >= BLOCK_GROUP {
            format!("block_{}", BlockOp::from_u16((g - BLOCK_GROUP) as u16).name())
        } else {
            syscall_name(g as u16).map_or_else(|| format!("syscall_{g}"), str::to_string)
        };
        self.new_names.push((g, name));
    }

    fn name_disk(&mut self, dev: u32) {
        if !self.named.insert(dev) {
            return;
        }
        let (ma, mi) = dev_major_minor(dev);
        let name = match self.header.disk_name(dev) {
            Some(n) => format!("{n} ({ma}:{mi})"),
            None => format!("{ma}:{mi}"),
        };
        self.new_names.push((dev, name));
    }

    fn flush(&mut self, spec: &mut Spectrogram) {
        for (g, n) in self.new_names.drain(..) {
            spec.set_group_name(g, n);
        }
    }
}

/// Events per second in the last complete row.
fn last_rate(spec: &Spectrogram) -> f64 {
    let s = spec.sealed();
    if s == spec.first_index() {
        return 0.0;
    }
    spec.row(s - 1).map_or(0.0, |r| r.total() as f64 * 1e9 / spec.interval_ns() as f64)
}

/// Does event `i` belong to the view (the right kind, through the filter)?
#[inline]
fn wanted(b: &EventBatch, i: usize, kind: u8, filter: &Filter, ctx: &EvalContext) -> bool {
    b.kind[i] == kind && b.lat[i] > 0 && (filter.is_match_all() || filter.matches(b, i, ctx))
}

// ---------------------------------------------------------------- live, in-kernel histograms

struct AggFeed {
    probe: Option<Probe>,
    prev: AggSnapshot,
    cfg: ProbeConfig,
    header: TraceHeader,
    filter: Filter,
    by: Option<By>,
    devs: Vec<u32>,
    next_row: u64,
    stream: Option<StreamFeed>,
    keep: usize,
}

impl AggFeed {
    fn remap(&self, g: u32) -> u32 {
        match self.by {
            None | Some(By::Proc) => 0,
            Some(By::Class) => Grouper::from_fd_class(g),
            Some(By::Syscall) => g,
            Some(By::Disk) => self.devs.get(g as usize).copied().unwrap_or(g),
        }
    }
}

impl Feed for AggFeed {
    fn pump(&mut self, spec: &mut Spectrogram, wait: Duration) -> Result<bool, String> {
        if let Some(s) = &mut self.stream {
            return s.pump(spec, wait);
        }
        let now = snapshot::monotonic_ns();
        let due = spec.row_start(self.next_row + 1);
        if now < due {
            std::thread::sleep(Duration::from_nanos(due - now).min(wait));
            if snapshot::monotonic_ns() < due {
                return Ok(true);
            }
        }
        let probe = self.probe.as_ref().expect("aggregating");
        let snap = probe.read_agg().map_err(|e| e.to_string())?;
        let delta = snap.since(&self.prev);
        self.prev = snap;
        let mut groups: Vec<(u32, Vec<u64>)> = Vec::new();
        for (g, c) in delta.groups {
            let g = self.remap(g);
            match groups.iter_mut().find(|(k, _)| *k == g) {
                Some((_, acc)) => acc.iter_mut().zip(&c).for_each(|(a, v)| *a += v),
                None => groups.push((g, c)),
            }
        }
        if self.by == Some(By::Syscall) {
            for (g, _) in &groups {
                if spec.group_name(*g) == g.to_string() {
                    spec.set_group_name(
                        *g,
                        syscall_name(*g as u16).map_or_else(|| format!("syscall_{g}"), str::to_string),
                    );
                }
            }
        }
        // A late read (the display was busy) puts everything since the last one in the last
        // complete row.
        let row = spec.row_of(snapshot::monotonic_ns()).saturating_sub(1).max(self.next_row);
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
            source: "live: in-kernel aggregation".into(),
            filter: self.filter.source().to_string(),
            events_per_s: last_rate(spec),
            drops: 0,
            note: String::new(),
            has_events: false,
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

    fn keep_events(&mut self, spec: &mut Spectrogram) -> Result<String, String> {
        if self.stream.is_some() {
            return Ok("already streaming events".into());
        }
        // Finish the current row from the histograms, then hand over to the event stream.
        self.probe = None;
        let mut cfg = self.cfg.clone();
        cfg.aggregate = None;
        cfg.procs = true;
        let probe = Probe::start(&cfg, &self.header).map_err(|e| e.to_string())?;
        let mut s = StreamFeed::new(probe, self.filter.clone(), &self.header, self.by, spec, self.keep, self.cfg.block);
        s.note = "switched to the event stream: events from now on can be listed".into();
        spec.seal_until(self.next_row);
        self.stream = Some(s);
        Ok("switched to the event stream: select cells of the new rows to list their events".into())
    }
}

// ---------------------------------------------------------------- live, event stream

struct StreamFeed {
    probe: Probe,
    filter: Filter,
    ctx: EvalContext,
    header: TraceHeader,
    grouper: Grouper,
    window: EventWindow,
    kind: u8,
    note: String,
}

/// Was the wait interrupted by a signal?
fn is_eintr(e: &latscope_probe::ProbeError) -> bool {
    let s = e.to_string();
    s.contains("os error 4") || s.contains("Interrupted system call")
}

/// Rows are sealed this long after they end, so that events still in the ring buffer land in them.
const GRACE_NS: u64 = 200_000_000;

impl StreamFeed {
    fn new(
        probe: Probe,
        filter: Filter,
        header: &TraceHeader,
        by: Option<By>,
        spec: &mut Spectrogram,
        keep: usize,
        block: bool,
    ) -> StreamFeed {
        StreamFeed {
            probe,
            ctx: EvalContext::new(header),
            filter,
            header: header.clone(),
            grouper: Grouper::new(by, header, spec),
            window: EventWindow::new(keep),
            kind: if block { EventKind::Block as u8 } else { EventKind::Syscall as u8 },
            note: String::new(),
        }
    }
}

impl Feed for StreamFeed {
    fn pump(&mut self, spec: &mut Spectrogram, wait: Duration) -> Result<bool, String> {
        let batch = match self.probe.poll(wait.min(Duration::from_millis(50))) {
            Ok(b) => b,
            // A signal (SIGWINCH on a terminal resize) interrupted the wait: read what is there.
            Err(e) if is_eintr(&e) => self.probe.drain().map_err(|e| e.to_string())?,
            Err(e) => return Err(e.to_string()),
        };
        self.ctx.observe(&batch);
        let mut rows = Vec::new();
        let mut groups = Vec::new();
        for i in 0..batch.len() {
            if wanted(&batch, i, self.kind, &self.filter, &self.ctx) {
                let g = self.grouper.group(&batch, i);
                spec.add(batch.end(i), batch.lat[i], g);
                rows.push(i as u32);
                groups.push(g);
            }
        }
        self.grouper.flush(spec);
        self.window.push(batch, rows, groups);
        let now = snapshot::monotonic_ns();
        spec.seal_until(spec.row_of(now.saturating_sub(GRACE_NS)));
        Ok(true)
    }

    fn status(&self, spec: &Spectrogram) -> FeedStatus {
        FeedStatus {
            source: "live: event stream".into(),
            filter: self.filter.source().to_string(),
            events_per_s: last_rate(spec),
            drops: self.probe.stats().lost,
            note: self.note.clone(),
            has_events: true,
        }
    }

    fn drill(&mut self, _spec: &Spectrogram, q: &DrillQuery) -> Result<DrillResult, String> {
        Ok(self.window.select(&self.header, q))
    }
}

// ---------------------------------------------------------------- trace files

/// Events ending this long after a row are awaited before the row is sealed (a trace is in
/// completion order per CPU, not globally).
const FILE_SLACK_NS: u64 = 2_000_000_000;

struct FileFeed {
    path: PathBuf,
    reader: TraceReader,
    filter: Filter,
    ctx: EvalContext,
    grouper: Grouper,
    kind: u8,
    /// Pacing: wall-clock start and speed.
    pace: Option<(Instant, f64)>,
    max_end: u64,
    done: bool,
    corrupt: u64,
    /// Recycled for every block.
    batch: EventBatch,
}

impl FileFeed {
    /// Whether the hot loop applies: no filter, one group.
    fn simple(&self) -> bool {
        self.filter.is_match_all() && self.grouper.by.is_none()
    }

    fn process(&mut self, spec: &mut Spectrogram, b: &EventBatch, z: Zone) {
        let n = b.len();
        if self.simple() {
            // The hot loop: two columns, no filter, one group. With a zone map, a block of
            // the wanted kind only whose end times fall in one row needs `lat` alone (the
            // block's largest end time is the metadata's), and a block without the kind nothing.
            if z.empty {
                return;
            }
            let lat = &b.lat[..n];
            if let Some(end) = z.at {
                for &l in lat {
                    spec.add(end, l, 0);
                }
                self.max_end = self.max_end.max(end);
                return;
            }
            let ts = &b.ts[..n];
            let mut max_end = self.max_end;
            if z.all_kind {
                for i in 0..n {
                    let end = ts[i].saturating_add(lat[i]);
                    spec.add(end, lat[i], 0);
                    max_end = max_end.max(end);
                }
            } else {
                let kinds = &b.kind[..n];
                for i in 0..n {
                    if kinds[i] == self.kind {
                        let end = ts[i].saturating_add(lat[i]);
                        spec.add(end, lat[i], 0);
                        max_end = max_end.max(end);
                    }
                }
            }
            self.max_end = max_end;
            return;
        }
        self.ctx.observe(b);
        for i in 0..n {
            if wanted(b, i, self.kind, &self.filter, &self.ctx) {
                let g = self.grouper.group(b, i);
                let end = b.end(i);
                spec.add(end, b.lat[i], g);
                self.max_end = self.max_end.max(end);
            }
        }
        self.grouper.flush(spec);
    }

    /// Trace time the display has reached.
    fn target(&self, spec: &Spectrogram) -> u64 {
        match self.pace {
            Some((start, speed)) => spec.origin_ns() + (start.elapsed().as_secs_f64() * speed * 1e9) as u64,
            None => u64::MAX,
        }
    }
}

impl Feed for FileFeed {
    fn pump(&mut self, spec: &mut Spectrogram, wait: Duration) -> Result<bool, String> {
        if self.done {
            return Ok(false);
        }
        let started = Instant::now();
        let target = self.target(spec);
        while self.max_end < target.saturating_add(FILE_SLACK_NS) && started.elapsed() < Duration::from_millis(100) {
            let mut b = std::mem::take(&mut self.batch);
            let mut z = Zone::default();
            let simple = self.simple();
            let (kind, interval, origin) = (self.kind, spec.interval_ns(), spec.origin_ns());
            let row = move |end: u64| Some(end.saturating_sub(origin) / interval);
            let r = self.reader.next_batch_pruned(&mut b, |m| {
                if !simple {
                    return &[][..];
                }
                let (d, skip) = Zone::of(m, kind, true, true, row);
                z = d;
                skip
            });
            let r = match r {
                Some(Ok(())) => {
                    self.process(spec, &b, z);
                    Some(Ok(()))
                }
                r => r,
            };
            self.batch = b;
            match r {
                None => {
                    self.done = true;
                    spec.seal_until(spec.row_of(self.max_end) + 1);
                    return Ok(false);
                }
                Some(Err(e)) if e.is_corrupt_block() => {
                    self.corrupt += 1;
                    continue;
                }
                Some(Err(e)) => return Err(format!("reading {}: {e}", self.path.display())),
                Some(Ok(())) => {}
            }
        }
        let complete = spec.row_of(self.max_end.saturating_sub(FILE_SLACK_NS));
        let due = if target == u64::MAX { complete } else { complete.min(spec.row_of(target)) };
        spec.seal_until(due);
        if self.pace.is_some() && self.max_end >= target.saturating_add(FILE_SLACK_NS) {
            std::thread::sleep(wait);
        }
        Ok(true)
    }

    fn status(&self, spec: &Spectrogram) -> FeedStatus {
        let mut note = String::new();
        if let Some((_, speed)) = self.pace {
            if !self.done {
                note = format!("paced at {speed}x (n: draw the rest now)");
            }
        }
        if self.corrupt > 0 {
            note.push_str(&format!(" {} corrupt blocks skipped", self.corrupt));
        }
        FeedStatus {
            source: self.path.display().to_string(),
            filter: self.filter.source().to_string(),
            events_per_s: last_rate(spec),
            drops: self.reader.stats().lost_total,
            note,
            has_events: true,
        }
    }

    fn drill(&mut self, _spec: &Spectrogram, q: &DrillQuery) -> Result<DrillResult, String> {
        let mut r = TraceReader::open_with(&self.path, ReadOptions { projection: None, skip_corrupt: true })
            .map_err(|e| format!("cannot read {}: {e}", self.path.display()))?;
        let mut ctx = EvalContext::new(r.header());
        let header = r.header().clone();
        let mut hits: Vec<(u64, String)> = Vec::new();
        let mut matched = 0u64;
        while let Some(b) = r.next_batch() {
            let Ok(b) = b else { continue };
            ctx.observe(&b);
            let mut min_end = u64::MAX;
            for i in 0..b.len() {
                let end = b.end(i);
                min_end = min_end.min(end);
                if end < q.t_from || end >= q.t_to || !wanted(&b, i, self.kind, &self.filter, &ctx) {
                    continue;
                }
                let g = self.grouper.group(&b, i);
                if q.contains(end, b.lat[i], g) {
                    matched += 1;
                    if hits.len() < q.limit {
                        hits.push((b.ts[i], line(&header, &b, i, TimeFormat::Relative)));
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

// ---------------------------------------------------------------- the command

/// The width of the terminal on stdout, if it is one.
fn terminal_width() -> Option<usize> {
    // SAFETY: TIOCGWINSZ fills a winsize struct; we pass a valid pointer.
    unsafe {
        let mut ws: libc::winsize = std::mem::zeroed();
        if libc::ioctl(1, libc::TIOCGWINSZ, &mut ws) == 0 && ws.ws_col > 0 {
            return Some(ws.ws_col as usize);
        }
    }
    None
}

fn write_svg(path: &Path, spec: &Spectrogram, a: &Args, palette: Palette, split: bool, title: String) -> Result<()> {
    let groups = split.then(|| spec.top_groups(a.top.max(1)));
    let s = svg(spec, &SvgOptions { min_ns: a.min, max_ns: a.max, cols: 200, palette, title, groups });
    std::fs::write(path, s).with_context(|| format!("cannot write {}", path.display()))?;
    eprintln!("latscope: wrote {}", path.display());
    Ok(())
}

pub fn run(a: Args) -> Result<ExitCode> {
    let (interval_ms, filter_src) = split_words(&a.words)?;
    let filter = parse_filter(Some(&filter_src))?;
    if a.min >= a.max {
        bail!("--min ({}) must be below --max ({})", a.min, a.max);
    }
    if a.speed.is_nan() || a.speed <= 0.0 {
        bail!("--speed must be a positive number");
    }
    let kinds = filter.needs_kinds();
    let block = a.block || a.by == Some(By::Disk) || (!kinds.syscall && kinds.block);
    if block && !kinds.block {
        bail!("the filter can only match syscalls, but --block (or --by disk) draws block requests: drop one of them");
    }
    if !block && !kinds.syscall {
        bail!("the filter matches no syscall and no block request (only process events have no latency)");
    }
    let plain = a.plain || !std::io::stdout().is_terminal();
    let palette = match (a.no_color, a.colors) {
        (true, _) | (_, Colors::None) => Palette::Mono,
        (_, Colors::C256) => Palette::Ansi256,
        (_, Colors::Truecolor) => Palette::TrueColor,
        (_, Colors::Auto) if plain => Palette::Mono,
        (_, Colors::Auto) => Palette::detect(),
    };
    let width = a
        .width
        .or_else(terminal_width)
        .or_else(|| std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok()))
        .unwrap_or(120)
        .max(30);
    let split = a.by.is_some();
    let layout = match a.layout {
        Layout::Side => Split::Side,
        Layout::Stack => Split::Stack,
        Layout::Auto => {
            if matches!(a.by, Some(By::Class) | Some(By::Disk)) && width >= 160 {
                Split::Side
            } else {
                Split::Stack
            }
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM, signal_hook::consts::SIGHUP] {
        signal_hook::flag::register(sig, stop.clone()).context("cannot install signal handlers")?;
    }
    let interval_ns = interval_ms * 1_000_000;
    let what = if block { "block request latency" } else { "syscall latency" };
    let mut opts = RunOptions {
        draw: DrawOptions {
            min_ns: a.min,
            max_ns: a.max,
            palette,
            split,
            layout,
            max_strips: a.top.max(1),
            title: format!("latscope spectrogram: {what}"),
        },
        stop,
        duration: a.duration.map(Duration::from_nanos),
        drill_limit: 2_000,
    };

    let (mut spec, mut feed): (Spectrogram, Box<dyn Feed>) = match &a.file {
        Some(path) => {
            let mut cols = vec![Column::Kind, Column::Ts, Column::Lat];
            cols.extend(match a.by {
                None => vec![],
                Some(By::Class) => vec![Column::FdType],
                Some(By::Syscall) => vec![Column::Nr],
                Some(By::Disk) => vec![Column::Dev],
                Some(By::Proc) => vec![Column::Comm],
            });
            let projection = filter.is_match_all().then_some(cols);
            let reader = TraceReader::open_with(path, ReadOptions { projection, skip_corrupt: true })
                .with_context(|| format!("cannot read {}", path.display()))?;
            let header = reader.header().clone();
            let mut spec = Spectrogram::new(interval_ns, header.start_ns, 10_000_000);
            let grouper = Grouper::new(a.by, &header, &mut spec);
            let pace = (!plain && !a.no_pace && a.svg.is_none()).then(|| (Instant::now(), a.speed));
            let feed = FileFeed {
                path: path.clone(),
                ctx: EvalContext::new(&header),
                reader,
                filter: filter.clone(),
                grouper,
                kind: if block { EventKind::Block as u8 } else { EventKind::Syscall as u8 },
                pace,
                max_end: 0,
                done: false,
                corrupt: 0,
                batch: EventBatch::default(),
            };
            opts.duration = None;
            (spec, Box::new(feed))
        }
        None => {
            latscope_probe::check_environment()?;
            let argv: Vec<String> = std::env::args().collect();
            let sys_name = if block {
                "none"
            } else if a.syscalls == SysMode::Io {
                "io"
            } else {
                "all"
            };
            let mut header =
                snapshot::take(argv, sys_name, block, (!filter.is_match_all()).then(|| filter.source().to_string()));
            let mut cfg = ProbeConfig {
                syscalls: match (block, a.syscalls) {
                    (true, _) | (_, SysMode::None) => SyscallSel::Off,
                    (_, SysMode::Io) => SyscallSel::Io,
                    (_, SysMode::All) => SyscallSel::All,
                },
                block,
                ring_bytes: a.buffer_size as usize,
                ..Default::default()
            };
            let mut p = filter.pushdown();
            p.resolve_disks(|name| header.block_devices.iter().find(|d| d.name == name).map(|d| d.dev));
            merge_pushdown(&mut cfg, &p);
            if block {
                cfg.syscalls = SyscallSel::Off;
                cfg.block = true;
            } else {
                cfg.block = false;
            }
            if matches!(&cfg.syscalls, SyscallSel::Only(v) if v.is_empty()) {
                cfg.syscalls = SyscallSel::Off;
            }
            if cfg.syscalls == SyscallSel::Off && !cfg.block {
                bail!("nothing to draw: the filter and --syscalls exclude every syscall");
            }
            let why_stream = if a.stream {
                Some("--stream".to_string())
            } else if a.by == Some(By::Proc) {
                Some("--by proc needs the events".to_string())
            } else {
                kernel_inexact(&filter, block)
            };
            if why_stream.is_some() && needs_fd_names(&filter) {
                keep_fd_naming(&mut cfg);
            }
            let mut devs = Vec::new();
            if why_stream.is_none() {
                cfg.procs = false;
                cfg.aggregate = Some(match a.by {
                    None | Some(By::Proc) => AggGroup::All,
                    Some(By::Class) => AggGroup::FdClass,
                    Some(By::Syscall) => AggGroup::Syscall,
                    Some(By::Disk) => AggGroup::All,
                });
                if a.by == Some(By::Disk) && cfg.devs.is_empty() {
                    cfg.devs = header.block_devices.iter().map(|d| d.dev).collect();
                }
                devs = cfg.devs.clone();
            }
            let probe = Probe::start(&cfg, &header)?;
            let origin = snapshot::monotonic_ns();
            header.start_ns = origin;
            let mut spec = Spectrogram::new(interval_ns, origin, 200_000);
            let feed: Box<dyn Feed> = match why_stream {
                None => {
                    let mut g = Grouper::new(a.by, &header, &mut spec);
                    for &d in &devs {
                        g.name_disk(d);
                    }
                    if a.by == Some(By::Disk) {
                        g.flush(&mut spec);
                    }
                    Box::new(AggFeed {
                        probe: Some(probe),
                        prev: AggSnapshot::default(),
                        cfg,
                        header,
                        filter: filter.clone(),
                        by: a.by,
                        devs,
                        next_row: 0,
                        stream: None,
                        keep: a.keep,
                    })
                }
                Some(why) => {
                    let mut s = StreamFeed::new(probe, filter.clone(), &header, a.by, &mut spec, a.keep, block);
                    s.note = format!("streaming: {why}");
                    Box::new(s)
                }
            };
            (spec, feed)
        }
    };

    let r = if plain {
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        run_plain(feed.as_mut(), &mut spec, &opts, width, &mut out)
    } else {
        run_tui(feed.as_mut(), &mut spec, &opts)
    };
    r.map_err(anyhow::Error::msg)?;
    if let Some(path) = &a.svg {
        let src = feed.status(&spec).source;
        let title = if filter.is_match_all() {
            format!("latscope spectrogram: {what}, {src}")
        } else {
            format!("latscope spectrogram: {what}, {src}\nfilter: {}", filter.source())
        };
        write_svg(path, &spec, &a, palette, split, title)?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_scheme_is_the_probe_scheme() {
        for i in 0..latscope_probe::AGG_BUCKETS - 1 {
            assert_eq!(Buckets::KERNEL.bounds(i), latscope_probe::agg_bucket_bounds(i), "bucket {i}");
        }
        for v in [1u64, 9, 100, 12_345, 99_999_999] {
            assert_eq!(Buckets::KERNEL.index(v), latscope_probe::agg_bucket(v));
        }
    }

    #[test]
    fn positional_words() {
        let w = |v: &[&str]| split_words(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        assert_eq!(w(&[]), (500, String::new()));
        assert_eq!(w(&["200"]), (200, String::new()));
        assert_eq!(w(&["200", "proc.name=httpd"]), (200, "proc.name=httpd".into()));
        assert_eq!(w(&["proc.name=httpd", "and", "fd.type=file"]), (500, "proc.name=httpd and fd.type=file".into()));
        assert!(split_words(&["0".to_string()]).is_err());
    }

    #[test]
    fn which_filters_the_kernel_applies_exactly() {
        let inexact = |s: &str, block: bool| kernel_inexact(&Filter::parse(s).unwrap(), block);
        // The seed's examples.
        assert_eq!(inexact("", false), None);
        assert_eq!(inexact("proc.name=httpd", false), None);
        assert_eq!(inexact("proc.name=httpd and fd.type=file", false), None);
        assert_eq!(inexact("proc.name=httpd and fd.type=file and evt.latency > 1000000", false), None);
        assert_eq!(inexact("evt.latency > 1000000", false), None);
        assert_eq!(inexact("evt.is_io_write=true", false), None);
        let why = inexact("proc.name=test and evt.is_io_write=true and fd.name contains /mnt", false);
        assert!(why.as_deref().is_some_and(|w| w.contains("fd.name")), "{why:?}");
        assert!(inexact("evt.latency = 5ms", false).is_some());
        assert!(inexact("proc.name=a or proc.name=b", false).is_some());
        assert!(inexact("thread.tid=5", false).is_some());
        assert!(inexact("proc.name=dd", true).is_some());
        assert_eq!(inexact("evt.latency >= 1ms", true), None);
    }
}
