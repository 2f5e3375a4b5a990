//! Heat maps of events: chunks from any source in, one map per group out.

use super::{Binning, EventPoints, HeatMap, LogStream, Points, XSpec, YField, YScale, YSpec};
use crate::group::{GroupBy, Grouper};
use crate::waits::Counted;
use latscope_event::source::{Chunk, ZonePlan};
use latscope_event::{EventKind, TraceHeader};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Columns all groups' streams may hold together before they are all made 10 times wider (about
/// 7 KiB each): bounds the memory of maps with many groups.
const AUTO_BUDGET_COLS: usize = 40_000;

/// What to draw.
#[derive(Debug, Clone)]
pub struct EventMapOptions {
    /// The events drawn: syscalls or block requests.
    pub kind: EventKind,
    /// The y axis.
    pub y: YField,
    /// Rows and value range (`scale` picks the one-pass log path or the linear one).
    pub yspec: YSpec,
    /// Seconds per column; `None` chooses it for the time the data span (about 100 to 200
    /// columns of 1, 2 or 5 times a power of ten, see [`super::stream::auto_step_ns`]).
    pub step_sec: Option<f64>,
    /// Keep only the columns up to this one.
    pub max_col: Option<usize>,
    /// One map per group.
    pub per: GroupBy,
    /// At most this many maps (the groups with the most events).
    pub max_maps: usize,
    /// The maps' title.
    pub title: String,
    /// Count idle waits too ([`crate::waits`]; by default they are left out, as in every view).
    pub waits: bool,
}

impl EventMapOptions {
    /// The title when none is given: `Syscall Latency Heat Map`, `Block I/O Size Heat Map`, ...
    pub fn default_title(y: YField, kind: EventKind) -> String {
        let noun = if kind == EventKind::Block { "Block I/O" } else { "Syscall" };
        format!("{noun} {} Heat Map", y.title())
    }

    /// The columns the maps read (by `EventBatch` field name).
    pub fn columns(&self) -> Vec<&'static str> {
        let mut c = vec!["kind", "ts"];
        c.extend(self.y.columns());
        c.extend(self.per.columns());
        if self.kind == EventKind::Syscall && !self.waits {
            c.extend(crate::waits::columns());
        }
        c
    }
}

/// The maps and what did not make it into them.
#[derive(Debug)]
pub struct EventMaps {
    /// One map per group shown (at least one, possibly empty), sharing one grid.
    pub maps: Vec<HeatMap>,
    /// Events counted in cells or out of range.
    pub total: u64,
    /// Events without a value for the y field (no offset, ...).
    pub no_value: u64,
    /// Groups seen (more than `maps.len()` when some were left out).
    pub groups: usize,
    /// What the maps count: idle waits left out unless asked for ([`crate::waits`]).
    pub counted: Counted,
}

impl EventMaps {
    /// The line under the title: the source, the events, the filter (if any), the grid, events
    /// without a value, groups left out.
    pub fn subtitle(&self, o: &EventMapOptions, source: &str, filter: Option<&str>) -> String {
        let mut sub = vec![source.to_string(), self.counted.headline(self.total, o.kind)];
        if let Some(f) = filter {
            sub.push(format!("filter: {f}"));
        }
        if let Some(m) = self.maps.first() {
            sub.push(super::grid_note(&m.bins));
        }
        if self.no_value > 0 {
            let name = o.y.name();
            let article = if name.starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" };
            sub.push(format!("{} without {article} {name}", crate::text::plural(self.no_value, "event")));
        }
        if self.groups > self.maps.len() && o.per != GroupBy::All {
            sub.push(format!("{} of {} groups", self.maps.len(), self.groups));
        }
        sub.join("; ")
    }
}

enum Acc {
    /// Log rows: counted in one pass, memory per column.
    Log { streams: Vec<LogStream>, per_group: Vec<u64>, scratch: Vec<u64> },
    /// Linear rows: points kept, then binned.
    Linear(EventPoints),
}

/// Builds heat maps of events (see [`EventMapOptions`]).
pub struct EventMapBuilder {
    o: EventMapOptions,
    origin: u64,
    /// The current column width of the streams, ns, shared with the zone plan's bucketing.
    step: Arc<AtomicU64>,
    grouper: Grouper,
    acc: Acc,
    total: u64,
    no_value: u64,
    counted: Counted,
}

impl EventMapBuilder {
    /// Maps of the events of a recording whose header is `header` (time zero its start).
    pub fn new(o: EventMapOptions, header: &TraceHeader) -> Self {
        let acc = match o.yspec.scale {
            YScale::Log => Acc::Log { streams: Vec::new(), per_group: Vec::new(), scratch: Vec::new() },
            YScale::Linear => Acc::Linear(EventPoints::new(o.y, header.start_ns)),
        };
        let step = match o.step_sec {
            Some(s) => ((s * 1e9).round() as u64).max(1),
            None => super::stream::AUTO_FIRST_STEP_NS,
        };
        EventMapBuilder {
            grouper: Grouper::new(o.per),
            origin: header.start_ns,
            step: Arc::new(AtomicU64::new(step)),
            counted: Counted::new(o.waits),
            o,
            acc,
            total: 0,
            no_value: 0,
        }
    }

    /// The columns the maps read (by `EventBatch` field name).
    pub fn columns(&self) -> Vec<&'static str> {
        self.o.columns()
    }

    fn fast(&self) -> bool {
        self.o.per == GroupBy::All && self.o.y == YField::Latency
    }

    /// What a source with zone maps may skip: a block whose events all fall in one column is
    /// counted from `lat` alone (and `kind`, unless the block holds the drawn kind only). The
    /// bucketing follows the columns as they widen (wider columns hold whole narrower ones).
    pub fn zone_plan(&self) -> Option<ZonePlan> {
        if !(self.fast() && matches!(self.acc, Acc::Log { .. })) {
            return None;
        }
        let (origin, step) = (self.origin, self.step.clone());
        Some(ZonePlan {
            kind: self.o.kind,
            by_end: false,
            at_needs_all_kind: false,
            bucket: Some(Arc::new(move |ts: u64| {
                Some((ts as i128 - origin as i128).div_euclid(step.load(Ordering::Relaxed) as i128) as u64)
            })),
        })
    }

    fn new_stream(&self) -> LogStream {
        let min = self.o.yspec.min.map(|m| m.max(1.0).ceil() as u64);
        let max = self.o.yspec.max.map(|m| m.max(0.0).floor() as u64);
        match self.o.step_sec {
            None => LogStream::auto(self.origin, min, max),
            Some(_) => LogStream::new(self.origin, self.step.load(Ordering::Relaxed), min, max, self.o.max_col, 10_000),
        }
    }

    /// Count a chunk.
    pub fn add(&mut self, c: Chunk<'_>, h: &TraceHeader) {
        let kind = self.o.kind as u8;
        let fast = self.fast();
        // Idle waits are told apart per event (they need `nr`): a syscall map that leaves them
        // out takes the per-row paths.
        let sift = kind == EventKind::Syscall as u8 && !self.counted.with_waits();
        let (template, now) = (self.new_stream(), self.step.load(Ordering::Relaxed));
        let fresh = || {
            // A new group's stream starts as wide as the others are now.
            let mut s = template.clone();
            if s.auto_chosen() {
                s.widen(now / s.step_ns());
            }
            s
        };
        let b = c.batch;
        let counted = &mut self.counted;
        match &mut self.acc {
            Acc::Log { streams, per_group, scratch } if fast => {
                if streams.is_empty() {
                    streams.push(fresh());
                    per_group.push(0);
                    self.grouper.group(b, 0, h);
                }
                if c.zone.empty {
                    return;
                }
                let st = &mut streams[0];
                let before = self.total;
                let z = c.zone;
                // A block's rows of the kind drawn (every row when the zone says all are), the
                // idle waits left out.
                let all_rows = c.all_rows();
                let mut wanted = |i: usize| (z.all_kind || b.kind[i] == kind) && (!sift || counted.counts(b, i));
                if let Some(ts) = z.at {
                    // Every event in the column of `ts`.
                    if z.all_kind && !sift {
                        st.add_column(ts, &b.lat);
                        self.total += b.len() as u64;
                    } else {
                        scratch.clear();
                        scratch.extend((0..b.len()).filter(|&i| wanted(i)).map(|i| b.lat[i]));
                        st.add_column(ts, scratch);
                        self.total += scratch.len() as u64;
                    }
                } else if z.all_kind && !sift {
                    st.add_pairs(&b.ts, &b.lat);
                    self.total += b.len() as u64;
                } else if all_rows {
                    for i in 0..b.len() {
                        if wanted(i) {
                            st.add(b.ts[i], b.lat[i]);
                            self.total += 1;
                        }
                    }
                } else {
                    for &i in c.rows {
                        let i = i as usize;
                        if wanted(i) {
                            st.add(b.ts[i], b.lat[i]);
                            self.total += 1;
                        }
                    }
                }
                per_group[0] += self.total - before;
                self.step.store(st.step_ns(), Ordering::Relaxed);
            }
            Acc::Log { streams, per_group, .. } => {
                for &i in c.rows {
                    let i = i as usize;
                    if b.kind[i] != kind || (sift && !counted.counts(b, i)) {
                        continue;
                    }
                    let Some(v) = EventPoints::value(self.o.y, b, i, h) else {
                        self.no_value += 1;
                        continue;
                    };
                    let g = self.grouper.group(b, i, h);
                    while streams.len() <= g {
                        streams.push(fresh());
                        per_group.push(0);
                    }
                    streams[g].add(b.ts[i], v as u64);
                    per_group[g] += 1;
                    self.total += 1;
                }
                if streams.first().is_some_and(|s| s.auto_chosen()) {
                    // Every group's columns as wide as the widest, and all wider when together
                    // they hold too many.
                    let mut widest = streams.iter().map(|s| s.step_ns()).max().unwrap_or(1);
                    if streams.iter().map(|s| s.cols()).sum::<usize>() > AUTO_BUDGET_COLS {
                        widest *= 10;
                    }
                    for s in streams.iter_mut() {
                        s.widen(widest / s.step_ns());
                    }
                    self.step.store(widest, Ordering::Relaxed);
                }
            }
            Acc::Linear(pts) if fast => {
                if self.grouper.is_empty() && !b.is_empty() {
                    self.grouper.group(b, 0, h);
                }
                if sift {
                    let rows: Vec<u32> = c
                        .rows
                        .iter()
                        .copied()
                        .filter(|&i| b.kind[i as usize] == kind && counted.counts(b, i as usize))
                        .collect();
                    self.total += pts.add_latency_rows(b, &rows, kind);
                } else {
                    self.total += pts.add_latency_rows(b, c.rows, kind);
                }
            }
            Acc::Linear(pts) => {
                for &i in c.rows {
                    let i = i as usize;
                    if b.kind[i] != kind || (sift && !counted.counts(b, i)) {
                        continue;
                    }
                    let g = self.grouper.group(b, i, h);
                    if pts.add(g, b, i, h) {
                        self.total += 1;
                    } else {
                        self.no_value += 1;
                    }
                }
            }
        }
    }

    /// The groups to show: most events first, at most `max_maps`.
    fn chosen(&self, counts: &[u64]) -> Vec<usize> {
        let names = self.grouper.names();
        let mut order: Vec<usize> = (0..counts.len()).filter(|&g| counts[g] > 0).collect();
        order.sort_by_key(|&g| (std::cmp::Reverse(counts[g]), names.get(g).cloned().unwrap_or_default()));
        order.truncate(self.o.max_maps.max(1));
        order
    }

    fn group_name(&self, g: usize) -> Option<String> {
        (self.o.per != GroupBy::All)
            .then(|| format!("{} {}", self.o.per.name(), self.grouper.names().get(g).map_or("?", |s| s.as_str())))
    }

    /// The maps, sharing one grid. `wall_ns_at_start` shows absolute times on hover.
    pub fn finish(self, wall_ns_at_start: Option<i64>) -> Result<EventMaps, String> {
        let (maps, groups) = match &self.acc {
            Acc::Log { streams, per_group, .. } => {
                let order = self.chosen(per_group);
                let empty = self.new_stream();
                let chosen: Vec<(&LogStream, Option<String>)> = if order.is_empty() {
                    vec![(&empty, None)]
                } else {
                    order.iter().map(|&g| (&streams[g], self.group_name(g))).collect()
                };
                let y = &self.o.yspec;
                let min = y.min.map(|m| m.max(1.0).ceil() as u64);
                let max = y.max.map(|m| m.max(0.0).floor() as u64);
                let maps = LogStream::finish(
                    &chosen,
                    y.rows,
                    min,
                    max,
                    y.unit.clone(),
                    &y.label,
                    &self.o.title,
                    wall_ns_at_start,
                )?;
                (maps, streams.len())
            }
            Acc::Linear(pts) => {
                let subsec = self.o.y == YField::Subsecond;
                let x = XSpec {
                    units_per_sec: 1e9,
                    step_sec: if subsec { Some(self.o.step_sec.unwrap_or(1.0)) } else { self.o.step_sec },
                    origin: if subsec { None } else { Some(0.0) },
                    max_col: self.o.max_col,
                    col_limit: 10_000,
                    wall_ns_at_zero: if subsec { wall_ns_at_start.map(|_| 0) } else { wall_ns_at_start },
                };
                let counts: Vec<u64> = pts.groups.iter().map(|p| p.len() as u64).collect();
                let order = self.chosen(&counts);
                let empty = Points::default();
                let plan_input: Vec<&Points> =
                    if order.is_empty() { vec![&empty] } else { order.iter().map(|&g| &pts.groups[g]).collect() };
                let bins = Binning::plan(&plan_input, &x, &self.o.yspec)?;
                let maps = if order.is_empty() {
                    vec![bins.build(&empty, &self.o.title, None)]
                } else {
                    order.iter().map(|&g| bins.build(&pts.groups[g], &self.o.title, self.group_name(g))).collect()
                };
                (maps, pts.groups.len())
            }
        };
        Ok(EventMaps { maps, total: self.total, no_value: self.no_value, groups, counted: self.counted })
    }
}
