//! The live page's data: latency of the host's syscalls (or block requests) as rows of
//! histograms, one per interval, from a `LiveSession` that counts in the kernel when the filter
//! allows and streams events otherwise (or when a viewer asks for drill-down), drawn as a heat
//! map and a spectrogram, with drill-down tables and the events of a cell.
//!
//! Sessions are started lazily (by the first request of the live API), shared by every viewer of
//! the same filter and kind, and stopped when nobody asked for them for [`LiveOptions::idle`].
//! Each runs on its own thread, which owns the probes and the rows; requests are commands to that
//! thread, answered within a timeout, so a live view never blocks the store pages.

use crate::params::{ParamError, Params};
use latscope_event::{dev_major_minor, EventBatch, EventKind, SyscallSet, TraceHeader, WHY_PART_NAMES};
use latscope_filter::{Filter, FilterError};
use latscope_live::{CountBy, SessionBuilder};
use latscope_view::chain::ChainIndex;
use latscope_view::group::GroupBy;
use latscope_view::spectrogram::color::{color, Palette};
use latscope_view::spectrogram::model::MapCache;
use latscope_view::spectrogram::{Axis, Buckets, CountFeed, DrillQuery, Feed, FeedOptions, Spectrogram, StreamFeed};
use latscope_view::stacks::StackAgg;
use latscope_view::threads::ThreadTimeline;
use latscope_view::top::{SortKey, Top};
use latscope_view::why::{WhyAgg, PART_LABELS};
use latscope_view::whysvg::PART_COLORS;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How live sessions run.
#[derive(Debug, Clone)]
pub struct LiveOptions {
    /// A session nobody asked for this long is stopped.
    pub idle: Duration,
    /// Sessions at once (each attaches the probes; viewers of the same filter share one).
    pub max_sessions: usize,
    /// Events kept for drill-down when streaming.
    pub keep: usize,
    /// Length of a row (a heat-map column).
    pub interval: Duration,
    /// Rows kept.
    pub max_rows: usize,
    /// Ring buffer of a session, bytes.
    pub ring_bytes: usize,
}

impl Default for LiveOptions {
    fn default() -> Self {
        LiveOptions {
            idle: Duration::from_secs(30),
            max_sessions: 3,
            keep: 200_000,
            interval: Duration::from_secs(1),
            max_rows: 3600,
            ring_bytes: 64 << 20,
        }
    }
}

/// Most characters of a live filter.
pub const MAX_FILTER_CHARS: usize = 2000;
/// Most rows (intervals) one view returns.
pub const MAX_VIEW_ROWS: i64 = 3600;
/// Most latency columns of one view.
pub const MAX_VIEW_COLS: i64 = 400;
/// Most rows of a drill-down table.
pub const MAX_TABLE_ROWS: i64 = 200;
/// How long a request waits for its session's thread.
const REPLY_TIMEOUT: Duration = Duration::from_secs(5);
/// The groupings of the drill-down tables, in the order shown.
pub const TABLES: [GroupBy; 7] =
    [GroupBy::Proc, GroupBy::Syscall, GroupBy::File, GroupBy::Disk, GroupBy::Client, GroupBy::Container, GroupBy::Pod];

/// Why a live request failed before reaching a session.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// The filter does not parse (the error carries the place).
    #[error("invalid filter: {0}")]
    Filter(FilterError),
    /// The filter and the kind leave nothing to show.
    #[error("{0}")]
    Nothing(String),
    /// A parameter is wrong.
    #[error(transparent)]
    Param(#[from] ParamError),
    /// Too many sessions of other filters run.
    #[error("{0} live views with other filters are open (the most at once): close one, or wait until it has been unused for {1} s")]
    Busy(usize, u64),
    /// The session's thread did not answer in time.
    #[error("the live session did not answer in time")]
    Timeout,
    /// The session stopped (idle) as the request arrived.
    #[error("the live session has just stopped")]
    Ended,
    /// The server is stopping.
    #[error("the server is stopping")]
    Stopping,
}

impl LiveError {
    /// JSON for the page: the message, and for a filter error where it is.
    pub fn to_json(&self) -> Value {
        match self {
            LiveError::Filter(e) => {
                let (start, len) = e.char_span();
                json!({
                    "error": format!("invalid filter: {}", e.message()),
                    "filter_error": {"message": e.message(), "expr": e.expr(), "start": start, "len": len, "text": e.to_string()},
                })
            }
            e => json!({ "error": e.to_string() }),
        }
    }

    /// The HTTP status.
    pub fn status(&self) -> u16 {
        match self {
            LiveError::Filter(_) | LiveError::Nothing(_) | LiveError::Param(_) => 400,
            LiveError::Busy(..) | LiveError::Timeout | LiveError::Ended | LiveError::Stopping => 503,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Key {
    filter: String,
    block: bool,
    /// Attribution recorded: a session of its own, never shared with one without.
    why: bool,
    /// Idle waits counted (drawn and in the tables): a session of its own too, since the rows
    /// of one without them never held them.
    waits: bool,
}

enum State {
    Starting,
    Running,
    Failed(String, Instant),
}

enum Cmd {
    View(ViewQuery, Sender<Value>),
    Events(CellQuery, Sender<Value>),
    Tables(TableQuery, Sender<Value>),
    Threads(ThreadsQuery, Sender<Value>),
    KeepEvents(Sender<Value>),
}

/// One shared session.
struct Slot {
    key: Key,
    tx: Mutex<Sender<Cmd>>,
    state: Mutex<State>,
    last_seen: Mutex<Instant>,
    done: AtomicBool,
}

impl Slot {
    fn touch(&self) {
        *self.last_seen.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
    }
    fn idle_for(&self) -> Duration {
        self.last_seen.lock().unwrap_or_else(|e| e.into_inner()).elapsed()
    }
    fn set(&self, s: State) {
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = s;
    }
}

/// Live sessions shared by the viewers of the live page.
pub struct LiveHub {
    opts: LiveOptions,
    slots: Mutex<Vec<Arc<Slot>>>,
    stop: Arc<AtomicBool>,
}

/// The window of rows and the latency axis a view shows.
#[derive(Debug, Clone)]
pub struct ViewQuery {
    /// Rows (intervals) up to the latest.
    pub rows: usize,
    /// Latency columns (the heat map's rows).
    pub cols: usize,
    /// Lowest latency shown, ns; `None`: the decade below the fastest event kept (1 ns before
    /// any), as the command line's pictures start.
    pub min_ns: Option<u64>,
    /// Highest latency shown, ns.
    pub max_ns: u64,
}

/// A rectangle of cells: rows `r0..=r1` (row indices), columns `c0..=c1` of a view's axis.
#[derive(Debug, Clone)]
pub struct CellQuery {
    /// The view it was picked on.
    pub view: ViewQuery,
    /// First row.
    pub r0: u64,
    /// Last row.
    pub r1: u64,
    /// First column.
    pub c0: usize,
    /// Last column.
    pub c1: usize,
    /// Most event lines returned.
    pub limit: usize,
    /// Blocking waits counted in the breakdown of a `why` session (by default left out).
    pub waits: bool,
}

/// Drill-down tables: the events of the last `secs` rows (or of a rectangle).
#[derive(Debug, Clone)]
pub struct TableQuery {
    /// Rows back from the latest (when no rectangle is given).
    pub rows: u64,
    /// A rectangle instead.
    pub cell: Option<CellQuery>,
    /// Rows per table.
    pub limit: usize,
    /// The filter the tables were made with (for the narrowed filters of their rows).
    pub filter: String,
    /// Block requests.
    pub block: bool,
    /// Blocking waits ranked with the work (by default left out, and the tables say so).
    pub waits: bool,
}

/// The threads view: every thread's calls of the last `seconds` rows and who woke whom.
#[derive(Debug, Clone)]
pub struct ThreadsQuery {
    /// Rows (seconds) back from the latest.
    pub seconds: u64,
    /// Most threads shown (the busiest).
    pub rows: usize,
}

/// What a live request asks for.
pub enum Ask {
    /// The rows.
    View(ViewQuery),
    /// The events of a rectangle.
    Events(CellQuery),
    /// Drill-down tables.
    Tables(TableQuery),
    /// The threads view.
    Threads(ThreadsQuery),
}

impl LiveHub {
    /// A hub; `stop` ends every session (the server is stopping).
    pub fn new(opts: LiveOptions, stop: Arc<AtomicBool>) -> LiveHub {
        LiveHub { opts, slots: Mutex::default(), stop }
    }

    /// Live sessions running now.
    pub fn sessions(&self) -> usize {
        self.slots.lock().unwrap_or_else(|e| e.into_inner()).iter().filter(|s| !s.done.load(Ordering::Acquire)).count()
    }

    /// Answers a live request: parses the filter (`filter`), the kind (`block=1`), whether to
    /// keep events (`stream=1`) and whether to record attribution (`why=1`: each syscall's
    /// latency split into causes, with stacks; the session streams), finds or starts the
    /// session, and asks it.
    pub fn request(&self, p: &Params, ask: Ask) -> Result<Value, LiveError> {
        if self.stop.load(Ordering::Relaxed) {
            return Err(LiveError::Stopping);
        }
        let src = p.str("filter", MAX_FILTER_CHARS)?.unwrap_or_default();
        let filter = Filter::parse(src.trim()).map_err(LiveError::Filter)?;
        let block = p.flag("block")?;
        let stream = p.flag("stream")?;
        let why = p.flag("why")?;
        let waits = p.flag("waits")? && !block;
        let kinds = filter.needs_kinds();
        if why && block {
            return Err(LiveError::Nothing(
                "attribution (why) is recorded for syscalls: uncheck block requests or why was it slow".into(),
            ));
        }
        if block && !kinds.block {
            return Err(LiveError::Nothing("the filter can only match syscalls: uncheck block requests".into()));
        }
        if !block && !kinds.syscall {
            return Err(LiveError::Nothing("the filter matches no syscall: check block requests".into()));
        }
        let key = Key { filter: filter.source().to_string(), block, why, waits };
        let slot = self.slot(key, filter)?;
        slot.touch();
        let state = match &*slot.state.lock().unwrap_or_else(|e| e.into_inner()) {
            State::Starting => Some(json!({"state": "starting"})),
            State::Failed(msg, _) => Some(json!({"state": "failed", "error": msg})),
            State::Running => None,
        };
        if let Some(s) = state {
            return Ok(s);
        }
        let (tx, rx) = mpsc::channel();
        let send = |cmd| {
            slot.tx.lock().unwrap_or_else(|e| e.into_inner()).send(cmd).map_err(|_| {
                if slot.done.load(Ordering::Acquire) {
                    // It stopped (idle) just now: the next request starts a new one.
                    LiveError::Ended
                } else {
                    // Gone without saying why: the next request after a few seconds starts afresh.
                    slot.set(State::Failed("the live session ended unexpectedly".into(), Instant::now()));
                    LiveError::Timeout
                }
            })
        };
        if stream {
            let (ktx, krx) = mpsc::channel();
            if let Err(LiveError::Ended) = send(Cmd::KeepEvents(ktx)) {
                return Ok(json!({"state": "starting"}));
            }
            krx.recv_timeout(REPLY_TIMEOUT).map_err(|_| LiveError::Timeout)?;
        }
        let sent = send(match ask {
            Ask::View(q) => Cmd::View(q, tx),
            Ask::Events(q) => Cmd::Events(q, tx),
            Ask::Tables(q) => Cmd::Tables(q, tx),
            Ask::Threads(q) => Cmd::Threads(q, tx),
        });
        if let Err(LiveError::Ended) = sent {
            return Ok(json!({"state": "starting"}));
        }
        sent?;
        rx.recv_timeout(REPLY_TIMEOUT).map_err(|_| LiveError::Timeout)
    }

    /// The session of `key`, started if needed.
    fn slot(&self, key: Key, filter: Filter) -> Result<Arc<Slot>, LiveError> {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        // Ended sessions go, and failed ones once their error has been shown for a while (so
        // that a retry starts afresh).
        slots.retain(|s| match &*s.state.lock().unwrap_or_else(|e| e.into_inner()) {
            State::Failed(_, at) => at.elapsed() <= Duration::from_secs(5),
            _ => !s.done.load(Ordering::Acquire),
        });
        if let Some(s) = slots.iter().find(|s| s.key == key) {
            return Ok(s.clone());
        }
        if slots.len() >= self.opts.max_sessions {
            return Err(LiveError::Busy(slots.len(), self.opts.idle.as_secs()));
        }
        let (tx, rx) = mpsc::channel();
        let slot = Arc::new(Slot {
            key: key.clone(),
            tx: Mutex::new(tx),
            state: Mutex::new(State::Starting),
            last_seen: Mutex::new(Instant::now()),
            done: AtomicBool::new(false),
        });
        let (s2, opts, stop) = (slot.clone(), self.opts.clone(), self.stop.clone());
        std::thread::Builder::new()
            .name("latscope-live".into())
            .spawn(move || {
                run_session(&s2, &rx, filter, &key, &opts, &stop);
                // Done before the commands' receiver goes: a request that cannot send knows why.
                s2.done.store(true, Ordering::Release);
                drop(rx);
            })
            .map_err(|e| LiveError::Nothing(format!("cannot start a thread: {e}")))?;
        slots.push(slot.clone());
        Ok(slot)
    }
}

fn run_session(slot: &Slot, rx: &Receiver<Cmd>, filter: Filter, key: &Key, opts: &LiveOptions, stop: &AtomicBool) {
    let (block, why) = (key.block, key.why);
    let kind = if block { EventKind::Block } else { EventKind::Syscall };
    let filter_text = filter.source().to_string();
    let builder = SessionBuilder::new()
        .stop_on(&[])
        .ring_bytes(opts.ring_bytes)
        .need_fd_names(!block)
        .syscalls(if block { SyscallSet::None } else { SyscallSet::All })
        .block(block)
        .filter(filter)
        // Every call carries its breakdown and, when it blocked, its stacks; counting in the
        // kernel then gives way to the event stream.
        .why(why.then_some(0))
        .why_stacks(why)
        .count_in_kernel(CountBy::All, kind)
        // The idle waits, left out unless asked for as in every view: the kernel's histograms
        // cannot tell them apart, so a counting session does not count them.
        .count_without(if block || key.waits { Vec::new() } else { latscope_view::waits::wait_syscalls() });
    let session = match builder.start() {
        Ok(s) => s,
        Err(e) => {
            slot.set(State::Failed(format!("cannot start the live session: {e}"), Instant::now()));
            return;
        }
    };
    let header = session.header().clone();
    let mut spec = Spectrogram::new(opts.interval.as_nanos() as u64, header.start_ns, opts.max_rows);
    let o = FeedOptions { kind, by: None, filter: filter_text, keep: opts.keep, waits: key.waits };
    let mut streaming_reason = session.streaming_reason().map(str::to_string);
    let mut feed: Box<dyn Feed> = if session.is_counting() {
        Box::new(CountFeed::new(Box::new(session), &header, &[], &o, &mut spec))
    } else {
        let mut s = StreamFeed::new(Box::new(session), &o, &mut spec);
        s.note = streaming_reason.clone().unwrap_or_default();
        Box::new(s)
    };
    let mut counting = streaming_reason.is_none();
    slot.set(State::Running);
    loop {
        while let Ok(cmd) = rx.try_recv() {
            match cmd {
                Cmd::View(q, tx) => {
                    let _ = tx.send(view(&spec, feed.as_ref(), &header, &q, counting, streaming_reason.as_deref()));
                }
                Cmd::Events(q, tx) => {
                    let _ = tx.send(events(&spec, feed.as_mut(), &q, why));
                }
                Cmd::Tables(q, tx) => {
                    let _ = tx.send(tables(&spec, feed.as_mut(), &q, opts.interval));
                }
                Cmd::Threads(q, tx) => {
                    let _ = tx.send(threads(&spec, feed.as_mut(), &q, why));
                }
                Cmd::KeepEvents(tx) => {
                    if counting {
                        match feed.keep_events(&mut spec) {
                            Ok(_) => {
                                counting = false;
                                streaming_reason = Some("a viewer asked for events (drill-down)".into());
                            }
                            Err(e) => {
                                slot.set(State::Failed(
                                    format!("cannot switch to the event stream: {e}"),
                                    Instant::now(),
                                ));
                                return;
                            }
                        }
                    }
                    let _ = tx.send(json!({}));
                }
            }
        }
        if stop.load(Ordering::Relaxed) || slot.idle_for() > opts.idle {
            break;
        }
        if let Err(e) = feed.pump(&mut spec, Duration::from_millis(50)) {
            slot.set(State::Failed(format!("the live session failed: {e}"), Instant::now()));
            return;
        }
    }
    // Dropping the feed detaches the probes.
}

/// Colours of counts 10^(i/10), i = 0..=60: the terminal spectrogram's true-colour scale.
pub fn palette() -> Vec<String> {
    (0..=60)
        .map(|i| {
            let n = 10f64.powf(i as f64 / 10.0).round() as u64;
            let (r, g, b) = color(n.max(1), Palette::TrueColor).map(|c| c.rgb()).unwrap_or((0, 0, 0));
            format!("#{r:02x}{g:02x}{b:02x}")
        })
        .collect()
}

fn axis_json(axis: &Axis) -> Value {
    let edges: Vec<f64> =
        (0..axis.cols()).map(|c| axis.col_bounds(c).0).chain([axis.col_bounds(axis.cols() - 1).1]).collect();
    json!({"min_ns": axis.min_ns(), "max_ns": axis.max_ns(), "cols": axis.cols(), "edges": edges})
}

fn view(
    spec: &Spectrogram,
    feed: &dyn Feed,
    header: &TraceHeader,
    q: &ViewQuery,
    counting: bool,
    streaming_reason: Option<&str>,
) -> Value {
    let axis = view_axis(spec, q);
    let mut maps = MapCache::new(axis.clone());
    let last = spec.sealed();
    let first = spec.first_index().max(last.saturating_sub(q.rows as u64));
    let mut rows = Vec::new();
    let (mut shown, mut below_all, mut above_all) = (0u64, 0u64, 0u64);
    for i in first..last {
        let (counts, below, above) = spec.columns(i, None, &mut maps);
        shown += counts.iter().sum::<u64>();
        below_all += below;
        above_all += above;
        rows.push(json!({"i": i, "counts": counts, "below": below, "above": above}));
    }
    let st = feed.status(spec);
    json!({
        "state": "running",
        "mode": if counting { "counting" } else { "streaming" },
        "streaming_reason": streaming_reason,
        "source": st.source,
        "filter": st.filter,
        "events_per_s": st.events_per_s,
        "lost": st.drops,
        "note": st.note,
        "has_events": st.has_events,
        "interval_ns": spec.interval_ns(),
        "origin_ns": spec.origin_ns(),
        "origin_wall_ns": header.wall_ns(spec.origin_ns()),
        "first_row": first,
        "sealed": last,
        "rows": rows,
        "axis": axis_json(&axis),
        "shown": shown,
        "below": below_all,
        "above": above_all,
        "events_total": spec.events,
        "counted": st.counted,
        "palette": palette(),
    })
}

/// The latency axis of view `q`: from its `min_ns`, or from the decade below the fastest event
/// (at least two decades below `max_ns`).
fn view_axis(spec: &Spectrogram, q: &ViewQuery) -> Axis {
    let min = q.min_ns.unwrap_or_else(|| {
        let fastest = spec.lat_span().map_or(1, |(lo, _)| lo.max(1));
        10u64.pow(fastest.ilog10()).min(q.max_ns / 100).max(1)
    });
    Axis::new(min, q.max_ns, q.cols)
}

fn rect(spec: &Spectrogram, c: &CellQuery) -> DrillQuery {
    let axis = view_axis(spec, &c.view);
    let mut maps = MapCache::new(axis);
    let (c0, c1) = (c.c0.min(c.c1), c.c0.max(c.c1).min(c.view.cols.saturating_sub(1)));
    let (lat_lo, lat_hi) = maps.lat_range(Buckets::FINE, c0, c1);
    let (r0, r1) = (c.r0.min(c.r1), c.r0.max(c.r1));
    DrillQuery { t_from: spec.row_start(r0), t_to: spec.row_start(r1 + 1), lat_lo, lat_hi, group: None, limit: c.limit }
}

fn events(spec: &Spectrogram, feed: &mut dyn Feed, c: &CellQuery, why: bool) -> Value {
    let q = rect(spec, c);
    let (breakdown, why_note) = match why {
        true => (breakdown(spec, feed, &q, c.waits), None),
        false => (Value::Null, Some("this live view records no attribution: ask for why=1 (the page's “why was it slow”) to break each call's latency into causes, from then on")),
    };
    match feed.drill(spec, &q) {
        Ok(r) => json!({
            "query": q.describe(spec.origin_ns()),
            "lat_lo": q.lat_lo,
            "lat_hi": q.lat_hi,
            "matched": r.matched,
            "lines": r.lines,
            "note": r.note,
            "why": breakdown,
            "why_note": why_note,
        }),
        Err(e) => json!({"error": e}),
    }
}

/// Most wakers and operations of a breakdown.
const WHY_ROWS: usize = 10;
/// Most stacks of a breakdown.
const WHY_STACKS: usize = 5;

/// The breakdown of the syscalls inside `q` (`top --by cause`'s aggregation): time by cause,
/// blocked time by waker with what the waker was in, operations, and the blocking stacks.
fn breakdown(spec: &Spectrogram, feed: &mut dyn Feed, q: &DrillQuery, waits: bool) -> Value {
    let mut agg = WhyAgg { with_waits: waits, ..Default::default() };
    let mut by_stack = StackAgg { with_waits: waits, ..Default::default() };
    // The chains of waits go through every kept call, not only the selected ones.
    let mut chains = ChainIndex::new();
    let all = DrillQuery { t_from: 0, t_to: u64::MAX, lat_lo: 0, lat_hi: u64::MAX, group: None, limit: 0 };
    let _ = feed.visit(spec, &all, &mut |b, i, _| chains.add_row(b, i));
    let mut header = None;
    let visited = feed.visit(spec, q, &mut |b, i, h| {
        agg.add_with_chains(b, &[i as u32], Some(&chains));
        by_stack.add(b, &[i as u32]);
        header.get_or_insert_with(|| h.clone());
    });
    let mut j = agg.to_json(WHY_ROWS);
    j["chain_roots"] = agg.roots_json(header.as_ref(), WHY_ROWS);
    j["labels"] = WHY_PART_NAMES.iter().zip(PART_LABELS).map(|(k, l)| ((*k).to_string(), json!(l))).collect();
    // The colours of the breakdown pictures (`top --by cause --svg`, `why --svg`).
    j["colors"] = WHY_PART_NAMES.iter().zip(PART_COLORS).map(|(k, c)| ((*k).to_string(), json!(c))).collect();
    j["stacks"] = match feed.stack_names() {
        Some(names) => latscope_view::stacks::to_json(&by_stack, names, WHY_STACKS),
        None => {
            json!({"stacks": [], "total_blocked_ns": by_stack.total_ns, "note": "no blocked call carries a stack yet"})
        }
    };
    if let Err(e) = visited {
        j["error"] = json!(e);
    }
    j
}

fn tables(spec: &Spectrogram, feed: &mut dyn Feed, q: &TableQuery, interval: Duration) -> Value {
    let (dq, secs) = match &q.cell {
        Some(c) => {
            let dq = rect(spec, c);
            let secs = (dq.t_to - dq.t_from) as f64 / 1e9;
            (dq, secs)
        }
        None => {
            let from = spec.sealed().saturating_sub(q.rows).max(spec.first_index());
            let dq = DrillQuery {
                t_from: spec.row_start(from),
                t_to: u64::MAX,
                lat_lo: 0,
                lat_hi: u64::MAX,
                group: None,
                limit: 0,
            };
            // The open row counts too: the rows asked for plus the one filling now (shortened
            // below to the time the kept events cover, for a session that streams since lately).
            (dq, (q.rows + 1) as f64 * interval.as_secs_f64())
        }
    };
    let kind = if q.block { EventKind::Block } else { EventKind::Syscall };
    let mut tops: Vec<Top> = TABLES.iter().map(|&by| Top::new(by).with_waits(q.waits)).collect();
    let mut first_ts = u64::MAX;
    let visited = feed.visit(spec, &dq, &mut |b, i, h| {
        if b.kind[i] == kind as u8 {
            first_ts = first_ts.min(b.ts[i]);
            for t in &mut tops {
                if t.by() != GroupBy::Disk || on_a_disk(b, i, h) {
                    t.add(b, i, h);
                }
            }
        }
    });
    let secs = match q.cell {
        Some(_) => secs,
        // Rates over the time the events cover when that is shorter (events kept only lately).
        None if first_ts != u64::MAX => {
            let covered = monotonic_ns().saturating_sub(first_ts.max(dq.t_from)) as f64 / 1e9;
            covered.clamp(interval.as_secs_f64().min(secs), secs)
        }
        None => secs,
    };
    let visited = match visited {
        Ok(v) => v,
        Err(e) => return json!({"error": e}),
    };
    let tables: Vec<Value> = tops
        .iter()
        .map(|t| {
            let mut j = t.to_json(SortKey::Total, q.limit, secs);
            // The page includes them with its box, not a flag.
            j["note"] = json!(t.waits_note_with("tick \"count idle waits\" to include them"));
            if t.by() == GroupBy::Disk && !q.block {
                j["scope"] = json!("block devices only");
                j["scope_note"] = json!("files on proc, sysfs, cgroup or tmpfs, pipes and sockets are on no disk");
            }
            if let Some(rows) = j["rows"].as_array_mut() {
                for r in rows {
                    let name = r["name"].as_str().unwrap_or("").to_string();
                    r["narrow"] = match narrow_clause(t.by(), &name, q.block) {
                        Some(c) => json!(narrow(&q.filter, &c)),
                        None => Value::Null,
                    };
                }
            }
            j
        })
        .collect();
    json!({"events": visited.events, "note": visited.note, "seconds": secs, "tables": tables})
}

/// Most calls the threads view draws.
const MAX_THREAD_CALLS: usize = 50_000;

/// Every thread's calls of the last `q.seconds` rows (the one filling now included) as
/// `timeline --threads` draws them: the SVG, and the numbers it shows.
fn threads(spec: &Spectrogram, feed: &mut dyn Feed, q: &ThreadsQuery, why: bool) -> Value {
    let from = spec.row_start(spec.sealed().saturating_sub(q.seconds).max(spec.first_index()));
    let dq = DrillQuery { t_from: from, t_to: u64::MAX, lat_lo: 0, lat_hi: u64::MAX, group: None, limit: 0 };
    let mut tl = ThreadTimeline::new(from.max(1), u64::MAX, MAX_THREAD_CALLS);
    let visited = feed.visit(spec, &dq, &mut |b, i, _| tl.add(b, i));
    let mut visited = match visited {
        Ok(v) => v,
        Err(e) => return json!({"error": e}),
    };
    if tl.dropped > 0 {
        // More calls than a picture holds: the latest of them, from where they begin (a view
        // of the last seconds shows the last seconds), found from the calls' ends.
        let mut ends: Vec<u64> = Vec::new();
        let _ = feed.visit(spec, &dq, &mut |b, i, _| {
            if b.kind[i] == latscope_event::EventKind::Syscall as u8 {
                ends.push(b.end(i));
            }
        });
        ends.sort_unstable();
        let later = ends.len().checked_sub(MAX_THREAD_CALLS).map_or(from, |k| ends[k].max(from));
        let dq = DrillQuery { t_from: later, ..dq };
        tl = ThreadTimeline::new(later.max(1), u64::MAX, MAX_THREAD_CALLS);
        visited = match feed.visit(spec, &dq, &mut |b, i, _| tl.add(b, i)) {
            Ok(v) => v,
            Err(e) => return json!({"error": e}),
        };
    }
    tl.finish(q.rows);
    let (f, t) = tl.window();
    let sub = format!(
        "{} over the last {} s{}",
        tl.counts(),
        q.seconds,
        if why { "" } else { "; tick “why was it slow” to colour each call by its cause and draw who woke whom" }
    );
    json!({
        "svg": tl.render_svg("Threads: calls and wake-ups", &sub, f),
        "calls": tl.calls(),
        "threads": tl.rows().len(),
        "wakeups": tl.wakes().len(),
        "dropped": tl.dropped,
        "from_ns": f,
        "to_ns": t,
        "events": visited.events,
        "note": visited.note,
    })
}

/// Whether event `i` is on a disk: a block request, or a syscall on a file of a block device (a
/// known disk, or any device with a major number; proc, sysfs, cgroup, tmpfs, pipes and sockets
/// live on anonymous devices, major 0, and are no disk).
fn on_a_disk(b: &EventBatch, i: usize, h: &TraceHeader) -> bool {
    let dev = b.dev[i];
    b.kind[i] == EventKind::Block as u8 || h.disk_name(dev).is_some() || dev_major_minor(dev).0 != 0
}

/// CLOCK_MONOTONIC in ns: the clock of event times.
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A filter clause that keeps only the events of a drill-down row (`by` = `name`), if the filter
/// language can say it.
pub fn narrow_clause(by: GroupBy, name: &str, block: bool) -> Option<String> {
    let q = quote(name);
    let clause = match by {
        GroupBy::Proc if name != "?" => format!("proc.name = {q}"),
        GroupBy::Pid => format!("proc.pid = {}", pid_of(name)?),
        GroupBy::Syscall | GroupBy::Op => format!("evt.type = {name}"),
        GroupBy::File => match name.strip_prefix('<').and_then(|n| n.strip_suffix('>')) {
            Some(t) => format!("fd.type = {t}"),
            None => format!("fd.name = {q}"),
        },
        GroupBy::Dir => format!("fd.directory = {q}"),
        GroupBy::Disk if block => match name.split_once(':') {
            Some(_) => format!("blk.dev = {q}"),
            None => format!("blk.disk = {q}"),
        },
        GroupBy::Container if !name.starts_with('<') => format!("(container.name = {q} or container.id = {q})"),
        GroupBy::Pod => match name.split_once('/') {
            Some((ns, pod)) => format!("(k8s.ns.name = {} and k8s.pod.name = {})", quote(ns), quote(pod)),
            None => format!("k8s.pod.uid = {}", quote(name.strip_prefix("pod ")?)),
        },
        GroupBy::Cgroup if name.starts_with('/') => format!("cgroup.path = {q}"),
        GroupBy::Client => match pid_of(name) {
            Some(pid) => format!("proc.pid = {pid}"),
            None => format!("fd.name contains {}", quote(&format!("->{name}:"))),
        },
        _ => return None,
    };
    // Only clauses the language accepts (an fd type name it does not know, ...).
    Filter::parse(&clause).ok().map(|_| clause)
}

/// `old and clause`, with `old` in parentheses when it has an `or`.
pub fn narrow(old: &str, clause: &str) -> String {
    let old = old.trim();
    if old.is_empty() {
        return clause.to_string();
    }
    let has_or = old.split(|c: char| c.is_whitespace() || c == '(' || c == ')').any(|w| w.eq_ignore_ascii_case("or"));
    if has_or {
        format!("({old}) and {clause}")
    } else {
        format!("{old} and {clause}")
    }
}

/// The pid of a `comm[pid]` group name.
fn pid_of(name: &str) -> Option<u32> {
    name.strip_suffix(']')?.rsplit_once('[')?.1.parse().ok()
}

/// A filter string value in single quotes.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drill_down_rows_become_filter_clauses() {
        assert_eq!(narrow_clause(GroupBy::Proc, "postgres", false).as_deref(), Some("proc.name = 'postgres'"));
        assert_eq!(narrow_clause(GroupBy::Pid, "cat[812]", false).as_deref(), Some("proc.pid = 812"));
        assert_eq!(narrow_clause(GroupBy::Syscall, "pwrite64", false).as_deref(), Some("evt.type = pwrite64"));
        assert_eq!(narrow_clause(GroupBy::Syscall, "block_write", true).as_deref(), Some("evt.type = block_write"));
        assert_eq!(narrow_clause(GroupBy::File, "/tmp/it's", false).as_deref(), Some("fd.name = '/tmp/it\\'s'"));
        assert_eq!(narrow_clause(GroupBy::File, "<pipe>", false).as_deref(), Some("fd.type = pipe"));
        assert_eq!(narrow_clause(GroupBy::File, "<block device>", false), None);
        assert_eq!(narrow_clause(GroupBy::Disk, "vda", true).as_deref(), Some("blk.disk = 'vda'"));
        assert_eq!(narrow_clause(GroupBy::Disk, "vda", false), None, "no filter field names a syscall's disk");
        assert_eq!(
            narrow_clause(GroupBy::Client, "10.0.0.2", false).as_deref(),
            Some("fd.name contains '->10.0.0.2:'")
        );
        assert_eq!(narrow_clause(GroupBy::Client, "srv[9]", false).as_deref(), Some("proc.pid = 9"));
        assert_eq!(
            narrow_clause(GroupBy::Container, "web", false).as_deref(),
            Some("(container.name = 'web' or container.id = 'web')")
        );
        assert_eq!(narrow_clause(GroupBy::Container, "<cgroup 7>", false), None);
        assert_eq!(
            narrow_clause(GroupBy::Pod, "shop/api-7d9f", false).as_deref(),
            Some("(k8s.ns.name = 'shop' and k8s.pod.name = 'api-7d9f')")
        );
        assert_eq!(narrow_clause(GroupBy::Pod, "<no pod>", false), None);
        assert_eq!(narrow_clause(GroupBy::Cgroup, "/a.slice", false).as_deref(), Some("cgroup.path = '/a.slice'"));
        assert_eq!(narrow("", "evt.type = read"), "evt.type = read");
        assert_eq!(narrow("proc.name = a", "evt.type = read"), "proc.name = a and evt.type = read");
        assert_eq!(narrow("proc.name = a OR proc.name = b", "x"), "(proc.name = a OR proc.name = b) and x");
        // Every narrowed filter parses.
        for c in ["proc.name = 'x'", "fd.name = '/a b'"] {
            assert!(Filter::parse(&narrow("proc.name = a or proc.pid = 3", c)).is_ok());
        }
        assert_eq!(palette().len(), 61);
        assert_eq!(palette()[0], "#005000");
    }

    /// Events of one syscall each, held as a live session holds them.
    struct Calls(EventBatch);

    impl Feed for Calls {
        fn pump(&mut self, _: &mut Spectrogram, _: Duration) -> Result<bool, String> {
            Ok(true)
        }
        fn status(&self, _: &Spectrogram) -> latscope_view::spectrogram::FeedStatus {
            Default::default()
        }
        fn drill(
            &mut self,
            _: &Spectrogram,
            _: &DrillQuery,
        ) -> Result<latscope_view::spectrogram::DrillResult, String> {
            Err("not here".into())
        }
        fn visit(
            &mut self,
            _: &Spectrogram,
            q: &DrillQuery,
            f: &mut latscope_view::spectrogram::Visitor<'_>,
        ) -> Result<latscope_view::spectrogram::Visited, String> {
            let h = TraceHeader::default();
            let mut n = 0;
            for i in (0..self.0.len()).filter(|&i| self.0.end(i) >= q.t_from) {
                f(&self.0, i, &h);
                n += 1;
            }
            Ok(latscope_view::spectrogram::Visited { events: n, note: None })
        }
    }

    /// More calls in the last seconds than the view draws: it draws the latest of them, up to
    /// the newest, not the earliest.
    #[test]
    fn the_threads_view_over_its_cap_keeps_the_latest_calls() {
        const S: u64 = 1_000_000_000;
        let n = MAX_THREAD_CALLS as u64 * 2;
        let mut b = EventBatch::default();
        for k in 0..n {
            // Two threads, a call each every 20 us over 2 s.
            let ts = S + k * 20_000;
            b.push(&latscope_event::Event {
                kind: 0,
                ts,
                lat: 5_000,
                pid: 1,
                tid: 1 + (k % 2) as u32,
                ..Default::default()
            });
        }
        let mut spec = Spectrogram::new(S, S, 100);
        spec.seal_until(4);
        let v = threads(&spec, &mut Calls(b), &ThreadsQuery { seconds: 10, rows: 10 }, false);
        let (from, to) = (v["from_ns"].as_u64().unwrap(), v["to_ns"].as_u64().unwrap());
        assert_eq!(to, S + (n - 1) * 20_000 + 5_000, "up to the newest call: {}", v["to_ns"]);
        assert!(from >= S + (n / 2 - 2) * 20_000, "the latest half: from {from}");
        assert!(v["calls"].as_u64().unwrap() >= MAX_THREAD_CALLS as u64 - 2, "{}", v["calls"]);
    }
}
