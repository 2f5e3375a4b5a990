//! Heat maps: time on x, a value (latency, I/O size, offset, offset within the second) on y, the
//! number of events in each cell as colour.
//!
//! Building one has three steps, so that several maps (`--per disk`) share one grid:
//!
//! 1. collect [`Points`] (x = time, y = value) per group, from events ([`EventPoints`]), from
//!    trace2heatmap's two-column text ([`text::parse_two_columns`]) or from anything else;
//! 2. [`Binning::plan`] chooses columns and rows from all points and the options;
//! 3. [`Binning::build`] counts each group's points into a [`HeatMap`], which renders as an
//!    interactive SVG ([`render_svg`]) or as JSON ([`HeatMap::to_json`]).
//!
//! # Binning (linear rows): trace2heatmap.pl's rules, plus its lost column and row
//!
//! With `t0` the smallest time, `f` the time units per second (`--unitstime`), `s` the seconds per
//! column (`--stepsec`), `min`/`max` the value range (`--minlat`, default 0 / `--maxlat`, default the
//! largest value) and `R` the rows asked for (`--rows`, default 50):
//!
//! * `step = floor((max - min) / R)` unless `--steplat` gives it (if that floor is 0 the exact
//!   quotient `(max - min) / R` is used, where trace2heatmap.pl stops with "Row resolution too high");
//! * a value `v` with `v < min` or `v > max` is not counted (reported as not shown);
//! * its column is `floor(((t - t0) / f) / s)` and its row `floor((v - min) / step)`, evaluated in
//!   double precision in exactly that order, as trace2heatmap.pl does;
//! * there are `floor((max - min) / step) + 1` rows and `floor(((tmax - t0) / f) / s) + 1` columns.
//!   trace2heatmap.pl counts the same cells but draws one row and one column fewer: the row holding
//!   `max` (and anything between `min + floor((max-min)/step) * step` and `max`) and the column holding
//!   the last time are lost. latscope draws them, so no event is dropped.
//!
//! trace2heatmap.pl takes `t0` from the first line rather than the smallest time; for time-sorted
//! input (every trace) that is the same.
//!
//! Without `--stepsec` ([`XSpec::step_sec`] `None`) the column width is chosen for the time the data
//! span: the smallest of 1, 2, 5, 10 ... ms giving at most 200 columns ([`stream::auto_step_ns`]).
//!
//! # Binning (log rows)
//!
//! Rows are bins of a global logarithmic grid ([`latscope_hist::LogGrid`]: edges `10^(j/n)`, so each
//! decade `1 us, 10 us, ...` is an edge). `n` bins per decade is the smallest divisor of 60
//! (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60) at or above `R / decades`, so that `[min, max]`
//! (default: smallest positive value, largest value) spans about `R` rows or more. Row `j` holds
//! `10^(j/n) <= v < 10^((j+1)/n)`, exactly (integer values are placed with integer comparisons against
//! the rounded-up edges). Values `<= 0` have no place on a log axis: they are counted as not shown.
//!
//! Log maps of events are built in one pass without keeping the events ([`LogStream`]): counts on
//! the 60-per-decade grid per column, merged into rows at the end (exact, as the edges coincide).
//! Their columns are aligned to the recording start: column `k` covers
//! `[start + k * stepsec, start + (k + 1) * stepsec)`, `k` negative for events that began before it.

mod events;
pub mod render;
pub mod stream;
pub mod text;

pub use events::{EventMapBuilder, EventMapOptions, EventMaps};
pub use render::{render_svg, ColorScale, RenderOptions};
pub use stream::LogStream;

use latscope_event::{BlockOp, EventBatch, EventKind, TraceHeader};
use latscope_hist::{bucket_index_of, Histogram, LogGrid};
use serde_json::{json, Value};

/// What the y axis of a heat map shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum YField {
    /// Latency: syscall entry to return, block issue to completion.
    Latency,
    /// Bytes: the syscall's count argument (or bytes moved), the block request size.
    Size,
    /// File offset, or the block request's byte offset on the device (sector * 512).
    Offset,
    /// Offset of the event within its wall-clock second (x is whole seconds): periodic activity.
    Subsecond,
    /// Block queue time (insert to issue).
    Qtime,
}

impl YField {
    /// Parse `latency`, `size`, `offset`, `subsecond`, `qtime`.
    pub fn parse(s: &str) -> Result<Self, String> {
        Ok(match s {
            "latency" | "lat" => Self::Latency,
            "size" | "bytes" => Self::Size,
            "offset" | "off" => Self::Offset,
            "subsecond" | "subsec" => Self::Subsecond,
            "qtime" => Self::Qtime,
            _ => return Err(format!("unknown y field '{s}' (use latency, size, offset, subsecond or qtime)")),
        })
    }
    /// Name as given on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::Latency => "latency",
            Self::Size => "size",
            Self::Offset => "offset",
            Self::Subsecond => "subsecond",
            Self::Qtime => "qtime",
        }
    }
    /// The word in a title (`Latency` in "Syscall Latency Heat Map").
    pub fn title(self) -> &'static str {
        match self {
            YField::Latency => "Latency",
            YField::Size => "Size",
            YField::Offset => "Offset",
            YField::Subsecond => "Subsecond Offset",
            YField::Qtime => "Queue Time",
        }
    }

    /// Axis label.
    pub fn label(self) -> &'static str {
        match self {
            Self::Latency => "Latency",
            Self::Size => "I/O size",
            Self::Offset => "Offset",
            Self::Subsecond => "Offset within the second",
            Self::Qtime => "Queue time",
        }
    }
    /// The trace columns (by `EventBatch` field name) the value of this field is computed from.
    pub fn columns(self) -> &'static [&'static str] {
        match self {
            Self::Latency => &["lat"],
            Self::Size => &["bytes", "nr", "ret"],
            Self::Offset => &["off"],
            Self::Subsecond => &["ts"],
            Self::Qtime => &["qtime"],
        }
    }
    /// The unit of the values this field yields from events.
    pub fn unit(self) -> YUnit {
        match self {
            Self::Latency | Self::Subsecond | Self::Qtime => YUnit::Nanos,
            Self::Size | Self::Offset => YUnit::Bytes,
        }
    }
}

/// How the values of an axis are written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum YUnit {
    /// Nanoseconds, printed with a fitting unit (`1.50us`, `12.3ms`).
    Nanos,
    /// Bytes, printed with binary units (`4.00KiB`).
    Bytes,
    /// Numbers in the input's own unit, printed as they are followed by this label (`1200us`),
    /// as trace2heatmap.pl does with `--unitslatency`.
    Raw(String),
    /// Numbers in the input's own unit (the label), stored multiplied by `10^k` (the second
    /// field, `k`) so that fractions keep their digits in integer histograms: `0.784` read as 784
    /// thousandths, printed `0.784`.
    Scaled(String, i32),
}

impl YUnit {
    /// One value with its unit.
    pub fn fmt(&self, v: f64) -> String {
        match self {
            YUnit::Nanos => latscope_event::units::fmt_ns_f(v),
            YUnit::Bytes => {
                if v >= 0.0 && v == v.trunc() && v < u64::MAX as f64 {
                    latscope_event::units::fmt_bytes(v as u64)
                } else {
                    format!("{}B", crate::svg::fmt_num(v))
                }
            }
            YUnit::Raw(u) => format!("{}{u}", crate::svg::fmt_num(v)),
            YUnit::Scaled(u, k) => format!("{}{u}", crate::svg::fmt_num(v / 10f64.powi(*k))),
        }
    }
    /// One value with its unit and `digits` significant digits (at least 3, and never fewer than
    /// the integer part has): `1.0195ms` where [`YUnit::fmt`] writes `1.02ms`. Integers below
    /// the first unit step (ns, bytes) are written exactly.
    pub fn fmt_digits(&self, v: f64, digits: usize) -> String {
        if digits <= 3 {
            return self.fmt(v);
        }
        let sig = |x: f64| {
            let int_digits = if x.abs() >= 1.0 { x.abs().log10().floor() as usize + 1 } else { 1 };
            let decimals = digits.saturating_sub(int_digits);
            format!("{x:.decimals$}")
        };
        match self {
            YUnit::Nanos => {
                let (x, u) = match v.abs() {
                    a if a < 1e3 => (v, "ns"),
                    a if a < 1e6 => (v / 1e3, "us"),
                    a if a < 1e9 => (v / 1e6, "ms"),
                    _ => (v / 1e9, "s"),
                };
                if u == "ns" && x == x.trunc() {
                    format!("{x}ns")
                } else {
                    format!("{}{u}", sig(x))
                }
            }
            YUnit::Bytes => {
                let mut x = v;
                let mut unit = 0;
                while x.abs() >= 1024.0 && unit < 4 {
                    x /= 1024.0;
                    unit += 1;
                }
                let u = ["B", "KiB", "MiB", "GiB", "TiB"][unit];
                if unit == 0 && x == x.trunc() {
                    format!("{x}B")
                } else {
                    format!("{}{u}", sig(x))
                }
            }
            YUnit::Raw(u) => format!("{}{u}", sig(v)),
            YUnit::Scaled(u, k) => format!("{}{u}", sig(v / 10f64.powi(*k))),
        }
    }
    /// One value with its unit, without trailing zeros: `2ms` and `1.5us` where [`YUnit::fmt`]
    /// writes `2.00ms` and `1.50us` (tick labels, messages).
    pub fn fmt_short(&self, v: f64) -> String {
        crate::svg::trim_zeros(&self.fmt(v))
    }
    /// Axis ticks over `[lo, hi]`, about `target` of them, on values that read round in this
    /// unit: 1-2-5 steps (`0, 2ms, 4ms`), of a binary unit for bytes (`0, 64MiB, 128MiB` — not
    /// `47.7MiB`); on a log axis every decade (with 2 and 5 when there are few), powers of two
    /// for bytes (`4KiB, 16KiB, 64KiB`). Label them with [`YUnit::fmt_short`].
    pub fn ticks(&self, lo: f64, hi: f64, target: usize, log: bool) -> Vec<f64> {
        let target = target.max(1);
        match (self, log) {
            (YUnit::Bytes, false) => {
                // Steps of whole units of the largest label's unit (KiB, MiB ...), or of the unit
                // below when that gives fewer than two.
                let mut unit = 1.0;
                while hi.abs() / unit >= 1024.0 && unit < 1024f64.powi(5) {
                    unit *= 1024.0;
                }
                if (hi - lo) / unit < 2.0 && unit > 1.0 {
                    unit /= 1024.0;
                }
                let step = crate::svg::nice_step((hi - lo) / unit / target as f64).max(1.0) * unit;
                let (first, last) = ((lo / step).ceil() as i64, (hi / step).floor() as i64);
                (first..=last).map(|k| k as f64 * step).collect()
            }
            (YUnit::Bytes, true) if lo > 0.0 && hi >= lo => {
                let (k0, k1) = (lo.log2().ceil() as i32, hi.log2().floor() as i32);
                let every = ((k1 - k0 + 1) as usize).div_ceil(target * 2).max(1);
                (k0..=k1).filter(|k| k.rem_euclid(every as i32) == 0).map(|k| 2f64.powi(k)).collect()
            }
            (_, false) => crate::svg::linear_ticks(lo, hi, target),
            (_, true) => {
                let t = crate::svg::log_ticks(lo, hi);
                if t.len() > target * 2 {
                    // Keep whole decades: every `keep`-th power of ten.
                    let decades: Vec<f64> =
                        t.into_iter().filter(|v| (v.log10() - v.log10().round()).abs() < 1e-9).collect();
                    let keep = decades.len().div_ceil(target).max(1);
                    decades.into_iter().step_by(keep).collect()
                } else {
                    t
                }
            }
        }
    }
    /// A range `lo-hi` with units (`1200-1220us` for raw units, as trace2heatmap.pl writes it).
    pub fn fmt_range(&self, lo: f64, hi: f64) -> String {
        match self {
            YUnit::Raw(u) => format!("{}-{}{u}", crate::svg::fmt_num(lo), crate::svg::fmt_num(hi)),
            YUnit::Scaled(u, k) => {
                let per = 10f64.powi(*k);
                format!("{}-{}{u}", crate::svg::fmt_num(lo / per), crate::svg::fmt_num(hi / per))
            }
            _ => format!("{}-{}", self.fmt(lo), self.fmt(hi)),
        }
    }
    /// Short name for JSON.
    pub fn name(&self) -> String {
        match self {
            YUnit::Nanos => "ns".into(),
            YUnit::Bytes => "bytes".into(),
            YUnit::Raw(u) | YUnit::Scaled(u, _) => u.clone(),
        }
    }

    /// A value given by a user in this unit: a bare number, or with units (`250us`, `4KiB`) —
    /// for raw units, time units convert when the input's unit is a time unit (`15ms` in `us`
    /// input is 15000) and size units when it is a size unit.
    pub fn parse_value(&self, s: &str) -> Result<f64, String> {
        use latscope_event::units::{parse_duration_ns, parse_size};
        if let YUnit::Scaled(u, k) = self {
            return YUnit::Raw(u.clone()).parse_value(s).map(|v| v * 10f64.powi(*k));
        }
        if let Ok(v) = s.trim().parse::<f64>() {
            return Ok(v);
        }
        match self {
            YUnit::Nanos => Ok(parse_duration_ns(s)? as f64),
            YUnit::Bytes => Ok(parse_size(s)? as f64),
            YUnit::Raw(u) | YUnit::Scaled(u, _) => {
                if let Ok(per_sec) = text::units_per_sec(u) {
                    return Ok(parse_duration_ns(s)? as f64 / 1e9 * per_sec);
                }
                let size_unit = match u.to_ascii_lowercase().as_str() {
                    "b" | "bytes" | "byte" => Some(1.0),
                    "kb" | "kib" | "kbytes" => Some(1024.0),
                    "mb" | "mib" | "mbytes" => Some(1024.0 * 1024.0),
                    "gb" | "gib" | "gbytes" => Some(1024.0 * 1024.0 * 1024.0),
                    _ => None,
                };
                match size_unit {
                    Some(div) => Ok(parse_size(s)? as f64 / div),
                    None => Err(format!(
                        "'{s}' is not a number (the input's unit '{u}' is not a time or size unit, so give a bare number)"
                    )),
                }
            }
        }
    }
}

/// Linear or logarithmic rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum YScale {
    /// Rows of equal width (trace2heatmap.pl's).
    Linear,
    /// Rows of equal ratio.
    Log,
}

/// Points of one heat map: `x[i]` is a time (in the input's time unit), `y[i]` a value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Points {
    /// Times.
    pub x: Vec<f64>,
    /// Values.
    pub y: Vec<f64>,
}

impl Points {
    /// Number of points.
    pub fn len(&self) -> usize {
        self.x.len()
    }
    /// True when there is no point.
    pub fn is_empty(&self) -> bool {
        self.x.is_empty()
    }
    /// Adds a point.
    #[inline]
    pub fn push(&mut self, x: f64, y: f64) {
        self.x.push(x);
        self.y.push(y);
    }
}

/// Column options.
#[derive(Debug, Clone, PartialEq)]
pub struct XSpec {
    /// Time units per second of the x values (trace2heatmap.pl's `--unitstime`: 1 for s, 1e9 for ns).
    pub units_per_sec: f64,
    /// Seconds per column (`--stepsec`, fractions allowed); `None` chooses it for the time the
    /// data span ([`stream::auto_step_ns`]).
    pub step_sec: Option<f64>,
    /// Time of the first column's left edge is the smaller of this and the smallest time
    /// (`None`: the smallest time, as trace2heatmap.pl).
    pub origin: Option<f64>,
    /// Keep only columns `0..=max_col` (`--maxcol`).
    pub max_col: Option<usize>,
    /// More columns than this is an error (suggesting `--stepsec`/`--unitstime`/`--maxcol`).
    pub col_limit: usize,
    /// Wall-clock ns since the epoch at x = 0, to show absolute times on hover.
    pub wall_ns_at_zero: Option<i64>,
}

impl Default for XSpec {
    fn default() -> Self {
        XSpec {
            units_per_sec: 1.0,
            step_sec: Some(1.0),
            origin: None,
            max_col: None,
            col_limit: 10_000,
            wall_ns_at_zero: None,
        }
    }
}

/// Row options.
#[derive(Debug, Clone, PartialEq)]
pub struct YSpec {
    /// Linear or log rows.
    pub scale: YScale,
    /// Rows asked for (`--rows`).
    pub rows: usize,
    /// Row height in value units (`--steplat`, linear only).
    pub step: Option<f64>,
    /// Smallest value shown (`--minlat`).
    pub min: Option<f64>,
    /// Largest value shown (`--maxlat`).
    pub max: Option<f64>,
    /// `max` itself is excluded and the rows end at `max` exactly (offsets within a second).
    pub max_exclusive: bool,
    /// How values are written.
    pub unit: YUnit,
    /// Axis label (`Latency`).
    pub label: String,
}

impl Default for YSpec {
    fn default() -> Self {
        YSpec {
            scale: YScale::Linear,
            rows: 50,
            step: None,
            min: None,
            max: None,
            max_exclusive: false,
            unit: YUnit::Raw(String::new()),
            label: "Latency".into(),
        }
    }
}

/// The value axis as a command line gives it: the flags, values with units still as text.
#[derive(Debug, Clone, Default)]
pub struct YArgs {
    /// `--log`.
    pub log: bool,
    /// `--linear`.
    pub linear: bool,
    /// `--rows`.
    pub rows: usize,
    /// `--minlat`.
    pub min: Option<String>,
    /// `--maxlat`.
    pub max: Option<String>,
    /// `--steplat`.
    pub step: Option<String>,
}

impl YSpec {
    /// The rows for `field` from a command line's flags, values read in `unit`; log rows unless
    /// `--linear` when `log_default`. Offsets within the second (`Subsecond`) take linear rows
    /// within `[0, 1 s)`. Errors name the flag, with units.
    pub fn from_args(a: &YArgs, field: YField, unit: YUnit, log_default: bool) -> Result<YSpec, String> {
        let scale = if a.log || (!a.linear && log_default) { YScale::Log } else { YScale::Linear };
        let parse = |o: &Option<String>, flag: &str| -> Result<Option<f64>, String> {
            o.as_deref().map(|s| unit.parse_value(s).map_err(|e| format!("{flag}: {e}"))).transpose()
        };
        let mut y = YSpec {
            scale,
            rows: a.rows,
            step: parse(&a.step, "--steplat")?,
            min: parse(&a.min, "--minlat")?,
            max: parse(&a.max, "--maxlat")?,
            max_exclusive: false,
            unit,
            label: field.label().to_string(),
        };
        if a.rows == 0 {
            return Err("--rows must be at least 1".into());
        }
        if let (Some(lo), Some(hi)) = (y.min, y.max) {
            if lo > hi {
                let f = |v| y.unit.fmt_short(v);
                return Err(format!("--minlat ({}) is above --maxlat ({}): swap them", f(lo), f(hi)));
            }
        }
        if scale == YScale::Log && y.step.is_some() {
            return Err("--steplat is for linear rows: use --linear, or --rows with --log".into());
        }
        if field == YField::Subsecond {
            if scale == YScale::Log {
                return Err("--y subsecond needs linear rows".into());
            }
            let min = y.min.unwrap_or(0.0);
            if min >= 1e9 {
                return Err(format!(
                    "--minlat ({}) is past the end of the second: --y subsecond shows offsets from 0 to 1s",
                    y.unit.fmt_short(min)
                ));
            }
            y.min = Some(min);
            y.max = Some(y.max.unwrap_or(1e9).min(1e9));
            y.max_exclusive = y.max == Some(1e9);
        }
        Ok(y)
    }
}

/// How rows are found.
#[derive(Debug, Clone)]
enum RowRule {
    Linear { min: f64, step: f64 },
    Log(Box<LogRows>),
}

/// Log rows: grid edges, plus a table from histogram bucket to row so that integer values are
/// placed without a logarithm.
#[derive(Debug, Clone)]
struct LogRows {
    grid: LogGrid,
    j0: i64,
    /// `ceil(edge)` of each row's lower edge and of the top edge (rows + 1 entries).
    int_edges: Vec<u64>,
    /// Rows of the values of each bucket of a full-range histogram.
    table: Vec<BucketRows>,
    /// Every bucket holds at most one distinct edge value, so `table` alone gives the row;
    /// otherwise (grids much finer than the buckets) the row is walked up from `table`'s.
    one_edge: bool,
}

/// Rows of one histogram bucket's values: `hi` from `split` on, `lo` below it (-1: below the
/// first row). Rows are clamped to the top row.
#[derive(Debug, Clone, Copy)]
struct BucketRows {
    split: u64,
    lo: i32,
    hi: i32,
}

/// Rows of integer values from a table with at most one edge per bucket: a load and a select.
#[derive(Debug, Clone, Copy)]
struct SplitRows<'a> {
    table: &'a [BucketRows],
}

impl SplitRows<'_> {
    /// Row of `u`, -1 below the first row, clamped to the top row.
    #[inline]
    fn row(self, u: u64) -> i32 {
        let cell = self.table[bucket_index_of(u)];
        // A select, not a branch: which side of the edge `u` falls is unpredictable.
        if u >= cell.split {
            cell.hi
        } else {
            cell.lo
        }
    }
}

impl LogRows {
    fn new(grid: LogGrid, j0: i64, j1: i64) -> Self {
        let rows = (j1 - j0 + 1) as usize;
        let int_edges: Vec<u64> = (0..=rows).map(|r| ceil_u64(grid.edge(j0 + r as i64))).collect();
        // Row of `u` (unclamped, -1 below the first row), walking up from row `r` <= it.
        let walk = |mut r: usize, u: u64| {
            while r < int_edges.len() && u >= int_edges[r] {
                r += 1;
            }
            r as i64 - 1
        };
        let clamp = |r: i64| r.min(rows as i64 - 1) as i32;
        let index = Histogram::with_max_value(u64::MAX);
        let mut table = Vec::with_capacity(index.num_buckets());
        let mut one_edge = true;
        let mut r_low: i64 = -1;
        for b in 0..index.num_buckets() {
            let (low, high) = index.bucket_bounds(b).unwrap_or((u64::MAX, u64::MAX));
            r_low = walk((r_low + 1) as usize, low);
            let next = (r_low + 1) as usize;
            let mut cell = BucketRows { split: u64::MAX, lo: clamp(r_low), hi: clamp(r_low) };
            if next < int_edges.len() && int_edges[next] <= high {
                // An edge inside the bucket (several rows may share its value: empty rows).
                let split = int_edges[next];
                let r_split = walk(next, split);
                cell = BucketRows { split, lo: clamp(r_low), hi: clamp(r_split) };
                let after = (r_split + 1) as usize;
                if after < int_edges.len() && int_edges[after] <= high {
                    one_edge = false;
                }
            }
            table.push(cell);
        }
        LogRows { grid, j0, int_edges, table, one_edge }
    }

    /// The table alone, when it gives the rows (see [`SplitRows`]).
    fn split_rows(&self) -> Option<SplitRows<'_>> {
        self.one_edge.then_some(SplitRows { table: &self.table })
    }

    /// Row of an integer value, `None` below the first row; values above the top edge
    /// go to the top row (the caller excludes them).
    #[inline]
    fn row_u64(&self, u: u64) -> Option<usize> {
        let mut r = SplitRows { table: &self.table }.row(u) as i64;
        if !self.one_edge {
            let rows = self.int_edges.len() - 1;
            while ((r + 1) as usize) <= rows && u >= self.int_edges[(r + 1) as usize] {
                r += 1;
            }
            r = r.min(rows as i64 - 1);
        }
        (r >= 0).then_some(r as usize)
    }

    /// Row of `v`, `None` below the first row; the caller has excluded values above `max`.
    #[inline]
    fn row(&self, v: f64) -> Option<usize> {
        let rows = self.int_edges.len() - 1;
        if (0.0..9.0e15).contains(&v) && v == v.trunc() {
            self.row_u64(v as u64)
        } else {
            let j = self.grid.bin_of(v)?;
            let r = j - self.j0;
            if r < 0 {
                None
            } else {
                Some((r as usize).min(rows - 1))
            }
        }
    }
}

fn ceil_u64(x: f64) -> u64 {
    if x <= 0.0 {
        0
    } else if x >= u64::MAX as f64 {
        u64::MAX
    } else {
        x.ceil() as u64
    }
}

/// The grid shared by the heat maps of one command: column times and row edges.
#[derive(Debug, Clone)]
pub struct Binning {
    /// Time of column 0's left edge (input time units).
    pub t0: f64,
    /// Time units per second.
    pub units_per_sec: f64,
    /// Seconds per column.
    pub step_sec: f64,
    /// Number of columns.
    pub cols: usize,
    /// Row edges (rows + 1 values, increasing): row `r` holds `edges[r] <= v < edges[r + 1]`.
    pub edges: Vec<f64>,
    /// Smallest value counted.
    pub min: f64,
    /// Largest value counted.
    pub max: f64,
    /// `max` itself is excluded.
    pub max_exclusive: bool,
    /// Linear or log rows.
    pub scale: YScale,
    /// Unit of the values.
    pub unit: YUnit,
    /// Axis label.
    pub label: String,
    /// Wall-clock ns at time 0, if known.
    pub wall_ns_at_zero: Option<i64>,
    /// Time that axis labels count seconds from: the origin if one was given, else `t0`.
    pub label_zero: f64,
    max_col: Option<usize>,
    rule: RowRule,
}

/// A heat map: counts per (column, row), and everything needed to label them.
#[derive(Debug, Clone)]
pub struct HeatMap {
    /// Title.
    pub title: String,
    /// Name of the group (`vda`, `read`, `postgres`) when there is one map per group.
    pub group: Option<String>,
    /// The grid.
    pub bins: Binning,
    /// Number of rows.
    pub rows: usize,
    /// Counts, column-major: `counts[col * rows + row]`.
    pub counts: Vec<u64>,
    /// The largest count of a cell.
    pub max_count: u64,
    /// Events counted in cells.
    pub total: u64,
    /// Events below the smallest value shown (including values <= 0 on a log axis).
    pub below: u64,
    /// Events above the largest value shown.
    pub above: u64,
    /// Events after the last column kept by `--maxcol`.
    pub beyond: u64,
}

impl Binning {
    /// Chooses columns and rows for `groups` (all points of all maps); see the module docs.
    /// Errors say which option to change.
    pub fn plan(groups: &[&Points], x: &XSpec, y: &YSpec) -> Result<Binning, String> {
        if !(x.units_per_sec > 0.0 && x.units_per_sec.is_finite()) {
            return Err("time units per second must be positive".into());
        }
        if let Some(s) = x.step_sec.filter(|s| !(*s > 0.0 && s.is_finite())) {
            return Err(format!("--stepsec must be a positive number of seconds, not {s}"));
        }
        let (mut tmin, mut tmax) = (f64::INFINITY, f64::NEG_INFINITY);
        let (mut vmax, mut vmin_pos) = (f64::NEG_INFINITY, f64::INFINITY);
        let mut n = 0usize;
        for p in groups {
            n += p.len();
            for &t in &p.x {
                tmin = tmin.min(t);
                tmax = tmax.max(t);
            }
            for &v in &p.y {
                vmax = vmax.max(v);
                if v > 0.0 && v < vmin_pos {
                    vmin_pos = v;
                }
            }
        }
        if n == 0 {
            tmin = 0.0;
            tmax = 0.0;
        }
        let t0 = match x.origin {
            Some(o) => o.min(tmin),
            None => tmin,
        };
        let step_sec = x.step_sec.unwrap_or_else(|| {
            let span_ns = ((tmax - t0) / x.units_per_sec * 1e9).clamp(0.0, u64::MAX as f64 / 2.0) as u64;
            stream::auto_step_ns(span_ns) as f64 / 1e9
        });
        let last_col = (((tmax - t0) / x.units_per_sec) / step_sec).floor();
        let mut cols = if last_col.is_finite() && last_col >= 0.0 { last_col as u64 + 1 } else { 1 };
        if let Some(m) = x.max_col {
            cols = cols.min(m as u64 + 1);
        }
        if cols > x.col_limit as u64 {
            return Err(format!(
                "too many columns ({cols} > {}): the times span {} s at {} s per column; use a larger --stepsec, \
                 check the time unit (--unitstime), or keep the first columns with --maxcol",
                x.col_limit,
                crate::svg::fmt_num((tmax - t0) / x.units_per_sec),
                crate::svg::fmt_num(step_sec)
            ));
        }
        let rows_wanted = y.rows.max(1);
        let (rule, edges, min, max) = match y.scale {
            YScale::Linear => {
                let min = y.min.unwrap_or(0.0);
                let max = match y.max {
                    Some(m) => m,
                    None if vmax.is_finite() => vmax.max(min),
                    None => min + rows_wanted as f64,
                };
                if max < min {
                    let f = |v| y.unit.fmt_short(v);
                    return Err(format!("the largest value shown ({}) is below the smallest ({})", f(max), f(min)));
                }
                let step = match y.step {
                    Some(s) if s > 0.0 && s.is_finite() => s,
                    Some(s) => return Err(format!("--steplat must be positive, not {s}")),
                    None => {
                        let exact = (max - min) / rows_wanted as f64;
                        if exact.floor() >= 1.0 && !y.max_exclusive {
                            exact.floor()
                        } else if exact > 0.0 {
                            exact
                        } else {
                            1.0
                        }
                    }
                };
                let rows = if y.max_exclusive {
                    (((max - min) / step).ceil() as u64).max(1)
                } else {
                    ((max - min) / step).floor() as u64 + 1
                };
                if rows > 100_000 {
                    return Err(format!("too many rows ({rows}): use fewer --rows or a larger --steplat"));
                }
                let edges = (0..=rows).map(|r| min + r as f64 * step).collect();
                (RowRule::Linear { min, step }, edges, min, max)
            }
            YScale::Log => {
                let min = match y.min {
                    Some(m) if m > 0.0 => m,
                    Some(m) => return Err(format!("the smallest value on a log axis must be positive, not {m}")),
                    None if vmin_pos.is_finite() => vmin_pos,
                    None => 1.0,
                };
                let max = match y.max {
                    Some(m) => m,
                    None if vmax.is_finite() && vmax >= min => vmax,
                    None => min * 10.0,
                };
                if max < min {
                    let f = |v| y.unit.fmt_short(v);
                    return Err(format!("the largest value shown ({}) is below the smallest ({})", f(max), f(min)));
                }
                let grid = LogGrid::new(stream::log_per_decade(rows_wanted, min, max));
                let j0 = grid.bin_of(min).unwrap_or(0);
                let j1 = grid.bin_of(max).unwrap_or(j0).max(j0);
                let edges: Vec<f64> = (j0..=j1 + 1).map(|j| grid.edge(j)).collect();
                (RowRule::Log(Box::new(LogRows::new(grid, j0, j1))), edges, min, max)
            }
        };
        Ok(Binning {
            t0,
            units_per_sec: x.units_per_sec,
            step_sec,
            cols: cols as usize,
            edges,
            min,
            max,
            max_exclusive: y.max_exclusive,
            scale: y.scale,
            unit: y.unit.clone(),
            label: y.label.clone(),
            wall_ns_at_zero: x.wall_ns_at_zero,
            label_zero: x.origin.unwrap_or(t0),
            max_col: x.max_col,
            rule,
        })
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.edges.len() - 1
    }

    /// Column of time `t`, `None` after the last column (or before the first).
    #[inline]
    pub fn col(&self, t: f64) -> Option<usize> {
        let c = ((t - self.t0) / self.units_per_sec) / self.step_sec;
        // Truncation is the floor here (c >= 0), and cheaper than floor() on baseline x86-64.
        if c >= 0.0 && c < self.cols as f64 {
            Some(c as usize)
        } else {
            None
        }
    }

    /// Row of value `v`: `Err(false)` below the range, `Err(true)` above it.
    #[inline]
    pub fn row(&self, v: f64) -> Result<usize, bool> {
        if v > self.max || (self.max_exclusive && v >= self.max) {
            return Err(true);
        }
        if v < self.min || v.is_nan() {
            return Err(false);
        }
        match &self.rule {
            RowRule::Linear { min, step } => {
                // v >= min: truncation is the floor.
                let r = (v - min) / step;
                Ok((r as usize).min(self.rows() - 1))
            }
            RowRule::Log(l) => l.row(v).ok_or(false),
        }
    }

    /// Seconds from the label origin (the recording start for events, the first time for text
    /// input) to the left edge of column `c`.
    pub fn col_start_sec(&self, c: usize) -> f64 {
        (self.t0 - self.label_zero) / self.units_per_sec + c as f64 * self.step_sec
    }

    /// Wall-clock ns since the epoch of the left edge of column `c`, when known.
    pub fn col_start_wall_ns(&self, c: usize) -> Option<i64> {
        let w = self.wall_ns_at_zero?;
        Some(w + ((self.t0 / self.units_per_sec + c as f64 * self.step_sec) * 1e9).round() as i64)
    }

    /// Counts `points` into a heat map.
    pub fn build(&self, points: &Points, title: &str, group: Option<String>) -> HeatMap {
        let rows = self.rows();
        let mut counts = vec![0u64; self.cols * rows];
        let (mut below, mut above, mut beyond) = (0u64, 0u64, 0u64);
        for (&t, &v) in points.x.iter().zip(&points.y) {
            let r = match self.row(v) {
                Ok(r) => r,
                Err(true) => {
                    above += 1;
                    continue;
                }
                Err(false) => {
                    below += 1;
                    continue;
                }
            };
            match self.col(t) {
                Some(c) => counts[c * rows + r] += 1,
                None => beyond += 1,
            }
        }
        let max_count = counts.iter().copied().max().unwrap_or(0);
        let total = counts.iter().sum();
        HeatMap {
            title: title.to_string(),
            group,
            bins: self.clone(),
            rows,
            counts,
            max_count,
            total,
            below,
            above,
            beyond,
        }
    }
}

impl HeatMap {
    /// Count of a cell (0 outside the map).
    pub fn count(&self, col: usize, row: usize) -> u64 {
        if col < self.bins.cols && row < self.rows {
            self.counts[col * self.rows + row]
        } else {
            0
        }
    }

    /// Counts of one column, bottom row first.
    pub fn column(&self, col: usize) -> &[u64] {
        &self.counts[col * self.rows..(col + 1) * self.rows]
    }

    /// `[low, high)` of row `r` in value units.
    pub fn row_bounds(&self, r: usize) -> (f64, f64) {
        (self.bins.edges[r], self.bins.edges[r + 1])
    }

    /// Whether one cell would wash out the rest on a linear colour scale: the largest count is
    /// more than 20 times the 99th percentile of the non-empty cells' counts (so that 99 % of
    /// them would be drawn in the palest twentieth of the scale).
    pub fn washes_out(&self) -> bool {
        let mut n: Vec<u64> = self.counts.iter().copied().filter(|&c| c > 0).collect();
        if n.is_empty() {
            return false;
        }
        n.sort_unstable();
        let p99 = n[((n.len() as f64 * 0.99).ceil() as usize).clamp(1, n.len()) - 1];
        self.max_count > 20 * p99
    }
    /// A one-line account of the events not drawn, or `None` when every event is in a cell.
    pub fn not_shown(&self) -> Option<String> {
        let mut parts = Vec::new();
        if self.below > 0 {
            let what = if self.bins.scale == YScale::Log && self.bins.min > 0.0 {
                format!("below {} (or <= 0 on the log axis)", self.bins.unit.fmt(self.bins.min))
            } else {
                format!("below {}", self.bins.unit.fmt(self.bins.min))
            };
            parts.push(format!("{} {what}", self.below));
        }
        if self.above > 0 {
            parts.push(format!("{} above {}", self.above, self.bins.unit.fmt(self.bins.max)));
        }
        if self.beyond > 0 {
            parts.push(format!("{} after column {} (--maxcol)", self.beyond, self.bins.max_col.unwrap_or(0)));
        }
        (!parts.is_empty()).then(|| format!("not shown: {}", parts.join(", ")))
    }

    /// The matrix for scripts: column and row bounds, and `counts[col][row]` (bottom row first).
    pub fn to_json(&self) -> Value {
        let b = &self.bins;
        let col_bounds: Vec<Value> =
            (0..b.cols).map(|c| json!([b.col_start_sec(c), b.col_start_sec(c) + b.step_sec])).collect();
        let row_bounds: Vec<Value> = (0..self.rows).map(|r| json!([b.edges[r], b.edges[r + 1]])).collect();
        let counts: Vec<Value> = (0..b.cols).map(|c| json!(self.column(c))).collect();
        json!({
            "title": self.title,
            "group": self.group,
            "x": {
                "unit": "s",
                "step": b.step_sec,
                "cols": b.cols,
                "start_wall_ns": b.col_start_wall_ns(0),
                "col_bounds": col_bounds,
            },
            "y": {
                "label": b.label,
                "unit": b.unit.name(),
                "scale": match b.scale { YScale::Linear => "linear", YScale::Log => "log" },
                "rows": self.rows,
                "min": b.min,
                "max": b.max,
                "row_bounds": row_bounds,
                "row_rule": match b.scale {
                    YScale::Linear => "row r holds row_bounds[r][0] <= v < row_bounds[r][1]; the top row also holds max",
                    YScale::Log => "row r holds row_bounds[r][0] <= v < row_bounds[r][1]",
                },
            },
            "counts": counts,
            "max_count": self.max_count,
            "total": self.total,
            "not_shown": {"below_min": self.below, "above_max": self.above, "after_maxcol": self.beyond},
        })
    }
}

/// The grid in words: `50 log rows, 120 columns of 1s`.
pub fn grid_note(b: &Binning) -> String {
    let rows = b.rows();
    let r = match b.scale {
        YScale::Linear => format!("{rows} rows of {}", b.unit.fmt(b.edges[1] - b.edges[0])),
        YScale::Log => format!("{rows} log rows"),
    };
    format!("{r}, {} columns of {}", b.cols, crate::svg::fmt_secs(b.step_sec))
}

/// What was drawn, in words: maps, rows x columns, events in cells, what was not shown.
pub fn summary(maps: &[HeatMap]) -> String {
    let Some(m) = maps.first() else { return "no map".into() };
    let events: u64 = maps.iter().map(|m| m.total).sum();
    let mut note = format!(
        "{} map{}, {} rows x {} columns, {events} events in cells",
        maps.len(),
        if maps.len() == 1 { "" } else { "s" },
        m.rows,
        m.bins.cols
    );
    for m in maps {
        if let Some(ns) = m.not_shown() {
            note.push_str(&format!("; {}{ns}", m.group.as_deref().map(|g| format!("{g}: ")).unwrap_or_default()));
        }
    }
    note
}

/// Collects heat-map points from events, one [`Points`] per group.
///
/// x is ns relative to the recording start (so maps of one trace line up with its other views);
/// y is the chosen field.
#[derive(Debug)]
pub struct EventPoints {
    field: YField,
    base_ns: u64,
    /// Points per group, in [`crate::group::Grouper`] order.
    pub groups: Vec<Points>,
}

impl EventPoints {
    /// Points of `field`, times relative to `base_ns` (the recording start).
    pub fn new(field: YField, base_ns: u64) -> Self {
        EventPoints { field, base_ns, groups: Vec::new() }
    }

    /// The y value of event `i`, or `None` when the event has none (no offset, not a block
    /// event for queue time, a process event).
    #[inline]
    pub fn value(field: YField, b: &EventBatch, i: usize, h: &TraceHeader) -> Option<f64> {
        let kind = b.kind[i];
        if kind == EventKind::Proc as u8 {
            return None;
        }
        let block = kind == EventKind::Block as u8;
        Some(match field {
            YField::Latency => b.lat[i] as f64,
            YField::Size => {
                if block {
                    b.bytes[i] as f64
                } else {
                    io_bytes(b, i)? as f64
                }
            }
            YField::Offset => {
                let o = b.off[i];
                if o < 0 {
                    return None;
                }
                if block {
                    o as f64 * 512.0
                } else {
                    o as f64
                }
            }
            YField::Subsecond => h.wall_ns(b.ts[i]).rem_euclid(1_000_000_000) as f64,
            YField::Qtime => {
                if !block {
                    return None;
                }
                b.qtime[i] as f64
            }
        })
    }

    /// Adds the latency of the rows of `b` whose kind byte is `kind` to group 0: the fast path of a
    /// single latency map (no grouping). Returns the number of events added.
    pub fn add_latency_rows(&mut self, b: &EventBatch, rows: &[u32], kind: u8) -> u64 {
        if self.groups.is_empty() {
            self.groups.push(Points::default());
        }
        let p = &mut self.groups[0];
        let base = self.base_ns as f64;
        let before = p.len();
        if rows.len() == b.len() {
            for ((&k, &ts), &lat) in b.kind.iter().zip(&b.ts).zip(&b.lat) {
                if k == kind {
                    p.push(ts as f64 - base, lat as f64);
                }
            }
        } else {
            for &i in rows {
                let i = i as usize;
                if b.kind[i] == kind {
                    p.push(b.ts[i] as f64 - base, b.lat[i] as f64);
                }
            }
        }
        (p.len() - before) as u64
    }

    /// Adds event `i` of `b` to group `g`; returns false when the event has no value for the field.
    #[inline]
    pub fn add(&mut self, g: usize, b: &EventBatch, i: usize, h: &TraceHeader) -> bool {
        let Some(v) = Self::value(self.field, b, i, h) else { return false };
        while self.groups.len() <= g {
            self.groups.push(Points::default());
        }
        let t = if self.field == YField::Subsecond {
            // Whole wall-clock seconds on x, so that the rows line up with the clock.
            h.wall_ns(b.ts[i]).div_euclid(1_000_000_000) as f64 * 1e9
        } else {
            b.ts[i] as f64 - self.base_ns as f64
        };
        self.groups[g].push(t, v);
        true
    }
}

/// Bytes a syscall moved (its non-negative result for data calls), else its count argument; `None`
/// for calls that move no data.
pub fn io_bytes(b: &EventBatch, i: usize) -> Option<u64> {
    let d = latscope_event::syscalls::desc(b.nr[i]);
    if d.is_io() {
        Some(b.ret[i].max(0) as u64)
    } else if d.count != latscope_event::syscalls::NONE {
        Some(b.bytes[i])
    } else {
        None
    }
}

/// Bytes a data syscall (read, write, send, ...) moved: its non-negative result; 0 for other calls.
#[inline]
pub fn moved_bytes(b: &EventBatch, i: usize) -> u64 {
    if latscope_event::syscalls::desc(b.nr[i]).is_io() {
        b.ret[i].max(0) as u64
    } else {
        0
    }
}

/// The block op name of event `i`, for titles and grouping.
pub fn block_op_name(b: &EventBatch, i: usize) -> &'static str {
    BlockOp::from_u16(b.nr[i]).name()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pts(v: &[(f64, f64)]) -> Points {
        let mut p = Points::default();
        for &(x, y) in v {
            p.push(x, y);
        }
        p
    }

    #[test]
    fn linear_keeps_last_column_and_top_row() {
        // Times 0..=3 s, values 0..=100, 10 rows: step 10, rows 0..=10 (11), cols 0..=3 (4).
        let p = pts(&[(0.0, 0.0), (1.5, 55.0), (3.0, 100.0), (3.9, 99.0)]);
        let y = YSpec { rows: 10, ..Default::default() };
        let b = Binning::plan(&[&p], &XSpec::default(), &y).unwrap();
        assert_eq!(b.cols, 4);
        assert_eq!(b.rows(), 11);
        let m = b.build(&p, "t", None);
        assert_eq!(m.count(0, 0), 1);
        assert_eq!(m.count(1, 5), 1);
        assert_eq!(m.count(3, 10), 1);
        assert_eq!(m.count(3, 9), 1);
        assert_eq!(m.total, 4);
        assert_eq!(m.max_count, 1);
        assert!(m.not_shown().is_none());
    }

    #[test]
    fn min_max_filtering_and_floor_step() {
        // max - min = 105 over 50 rows: step floor(2.1) = 2, rows floor(105/2)+1 = 53.
        let p = pts(&[(0.0, 5.0), (0.0, 110.0), (0.0, 4.0), (0.0, 111.0)]);
        let y = YSpec { min: Some(5.0), max: Some(110.0), ..Default::default() };
        let b = Binning::plan(&[&p], &XSpec::default(), &y).unwrap();
        assert_eq!(b.rows(), 53);
        let m = b.build(&p, "t", None);
        assert_eq!(m.count(0, 0), 1);
        assert_eq!(m.count(0, 52), 1);
        assert_eq!((m.below, m.above), (1, 1));
        assert!(m.not_shown().unwrap().contains("1 above"));
    }

    #[test]
    fn fractional_step_and_subsecond_rows() {
        let p = pts(&[(0.0, 0.0), (0.0, 0.999), (1.0, 0.5)]);
        let y = YSpec { min: Some(0.0), max: Some(1.0), max_exclusive: true, rows: 50, ..Default::default() };
        let b = Binning::plan(&[&p], &XSpec::default(), &y).unwrap();
        assert_eq!(b.rows(), 50);
        let m = b.build(&p, "t", None);
        assert_eq!(m.count(0, 49), 1);
        assert_eq!(m.count(1, 25), 1);
    }

    #[test]
    fn columns_with_units_and_fractional_steps() {
        // us timestamps, 0.5 s columns.
        let p = pts(&[(1_000_000.0, 1.0), (1_499_999.0, 1.0), (1_500_000.0, 1.0), (3_000_000.0, 1.0)]);
        let x = XSpec { units_per_sec: 1e6, step_sec: Some(0.5), ..Default::default() };
        let b = Binning::plan(&[&p], &x, &YSpec::default()).unwrap();
        assert_eq!(b.cols, 5);
        let m = b.build(&p, "t", None);
        let per_col: Vec<u64> = (0..5).map(|c| m.column(c).iter().sum()).collect();
        assert_eq!(per_col, vec![2, 1, 0, 0, 1]);
    }

    #[test]
    fn too_many_columns_is_a_clear_error() {
        let p = pts(&[(0.0, 1.0), (1e9, 1.0)]);
        let e = Binning::plan(&[&p], &XSpec::default(), &YSpec::default()).unwrap_err();
        assert!(e.contains("--stepsec"), "{e}");
        let x = XSpec { max_col: Some(9), ..Default::default() };
        let b = Binning::plan(&[&p], &x, &YSpec::default()).unwrap();
        assert_eq!(b.cols, 10);
        let m = b.build(&p, "t", None);
        assert_eq!(m.beyond, 1);
    }

    #[test]
    fn log_rows_are_exact_at_edges() {
        let vals = [1000.0, 9_999.0, 10_000.0, 99_999.0, 100_000.0, 1e6];
        let p = pts(&vals.iter().map(|&v| (0.0, v)).collect::<Vec<_>>());
        let y = YSpec { scale: YScale::Log, rows: 3, ..Default::default() };
        let b = Binning::plan(&[&p], &XSpec::default(), &y).unwrap();
        // 3 decades, 3 rows wanted: 1 row per decade; 1e6 opens a 4th row.
        assert_eq!(b.edges, vec![1e3, 1e4, 1e5, 1e6, 1e7]);
        let m = b.build(&p, "t", None);
        assert_eq!(m.column(0), &[2, 2, 1, 1]);
        // Every integer lands where the grid says, fast path or not.
        let y = YSpec { scale: YScale::Log, rows: 60, min: Some(1.0), max: Some(1e12), ..Default::default() };
        let b = Binning::plan(&[&p], &XSpec::default(), &y).unwrap();
        let grid = LogGrid::new(5);
        let mut v = 1u64;
        while v < 1_000_000_000_000 {
            for w in [v, v + 1, v.saturating_sub(1).max(1), v * 3 / 2] {
                if w > 1_000_000_000_000 {
                    continue;
                }
                let want = (grid.bin_of(w as f64).unwrap() - grid.bin_of(1.0).unwrap()) as usize;
                assert_eq!(b.row(w as f64), Ok(want), "value {w}");
            }
            v = v * 7 / 3 + 1;
        }
        assert_eq!(b.row(0.0), Err(false));
        assert_eq!(b.row(2e12), Err(true));
    }

    /// The row lookup before bucket splits: the row of each bucket's lowest value, walked up.
    fn walked_rows(rows: &LogRows) -> impl Fn(u64) -> Option<usize> + '_ {
        let n = rows.int_edges.len() - 1;
        let index = Histogram::with_max_value(1u64 << 53);
        let mut first = Vec::with_capacity(index.num_buckets());
        let mut r: i64 = -1;
        for b in 0..index.num_buckets() {
            let (low, _) = index.bucket_bounds(b).unwrap();
            while ((r + 1) as usize) < rows.int_edges.len() && low >= rows.int_edges[(r + 1) as usize] {
                r += 1;
            }
            first.push(r.min(n as i64));
        }
        move |u| {
            let mut r = first[index.bucket_index(u)];
            while ((r + 1) as usize) <= n && u >= rows.int_edges[(r + 1) as usize] {
                r += 1;
            }
            (r >= 0).then(|| (r as usize).min(n - 1))
        }
    }

    #[test]
    fn log_rows_split_buckets_equal_the_walk() {
        let mut seed = 7u64;
        let mut rng = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let fine = LogGrid::new(60);
        let fine_top = fine.bin_of((1u64 << 48) as f64).unwrap();
        let mut cases = vec![(fine, 0, fine_top)];
        for d in [1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60, 300, 1000] {
            let g = LogGrid::new(d);
            let at = |v: f64| g.bin_of(v).unwrap();
            for (lo, hi) in [(1.0, 1e3), (1.0, 2.8e14), (300.0, 3.3e3), (2e4, 2e6), (7.0, 7.0), (1e9, 1e12)] {
                cases.push((g, at(lo), at(hi)));
            }
        }
        for (grid, j0, j1) in cases {
            let rows = LogRows::new(grid, j0, j1);
            let d = grid.per_decade();
            // Buckets are at most 1/128 wide: at 60 rows per decade or fewer, one edge each; at
            // 1000, the walk is taken.
            assert!(rows.one_edge || d > 60, "{d} per decade");
            assert!(!rows.one_edge || d < 1000 || j1 - j0 < 100, "{d} per decade");
            let walked = walked_rows(&rows);
            let check = |u: u64| assert_eq!(rows.row_u64(u), walked(u), "{d}/decade {j0}..={j1}: {u}");
            for u in 0..=100_000 {
                check(u);
            }
            for &e in &rows.int_edges {
                for u in [e.saturating_sub(1), e, e + 1] {
                    check(u);
                }
            }
            for _ in 0..20_000 {
                let bits = rng() % 49;
                check(rng() & ((1u64 << bits) - 1));
            }
            for u in [1 << 48, 1 << 53, 1 << 60, u64::MAX] {
                check(u);
            }
        }
    }

    #[test]
    fn empty_points_make_an_empty_map() {
        let p = Points::default();
        let b = Binning::plan(&[&p], &XSpec::default(), &YSpec::default()).unwrap();
        let m = b.build(&p, "t", None);
        assert_eq!(m.total, 0);
        assert_eq!(b.cols, 1);
        let j = m.to_json();
        assert_eq!(j["counts"].as_array().unwrap().len(), 1);
    }
}
