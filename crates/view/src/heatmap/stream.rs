//! One-pass log heat maps of events: memory per column, not per event.
//!
//! Each [`LogStream`] counts integer values per column on a fine logarithmic grid of
//! [`FINE_PER_DECADE`] bins per decade. The rows of the final map use a grid whose bins per
//! decade divide it, so every fine bin lies in exactly one row: merging is exact, and the result
//! equals what [`Binning::plan`] and [`Binning::build`] give on the same values.

use super::{Binning, HeatMap, LogRows, RowRule, YScale, YUnit};
use latscope_hist::LogGrid;

/// Bins per decade of the fine grid.
pub const FINE_PER_DECADE: u32 = 60;

/// Largest value a stream places (2^48: 78 hours in ns, 256 TiB in bytes); larger ones are
/// counted as above the range.
pub const STREAM_MAX_VALUE: u64 = 1 << 48;

/// Columns a stream choosing its own column width keeps before it makes them 10 times wider.
pub const AUTO_MAX_COLS: usize = 2000;

/// The column width of a stream choosing its own, to begin with (1 ms; a power of ten of ns, so
/// that every width of [`auto_step_ns`] at or above it is a whole number of them).
pub const AUTO_FIRST_STEP_NS: u64 = 1_000_000;

/// Columns a map whose column width is chosen for it has at most (and at least half as many,
/// unless the data are shorter than that many milliseconds).
pub const AUTO_COLS: u64 = 200;

/// The column width for `span_ns` of data: the smallest of 1, 2, 5, 10, 20, 50 ... ms (and 1 s,
/// 2 s, 5 s, 10 s ...) giving at most [`AUTO_COLS`] columns; at least 1 ms.
pub fn auto_step_ns(span_ns: u64) -> u64 {
    let mut decade = AUTO_FIRST_STEP_NS;
    loop {
        for m in [1, 2, 5] {
            let step = m * decade;
            if span_ns.div_ceil(step) <= AUTO_COLS || step >= u64::MAX / 100 {
                return step;
            }
        }
        decade *= 10;
    }
}

/// Divisors of [`FINE_PER_DECADE`], the rows per decade a log map may have.
const DIVISORS: [u32; 12] = [1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60];

/// Rows per decade for about `rows` rows over `[min, max]`: the smallest divisor of
/// [`FINE_PER_DECADE`] at or above `rows / decades` (at most 60; 10 when `min == max`).
pub fn log_per_decade(rows: usize, min: f64, max: f64) -> u32 {
    let decades = if min > 0.0 && max > min { (max / min).log10() } else { 0.0 };
    if decades <= 1e-9 {
        return 10;
    }
    let want = rows.max(1) as f64 / decades;
    DIVISORS.iter().copied().find(|&d| f64::from(d) >= want - 1e-9).unwrap_or(FINE_PER_DECADE)
}

/// Per-column counts of one group's values on the fine grid.
#[derive(Debug, Clone)]
pub struct LogStream {
    origin: u64,
    step: u64,
    min_keep: u64,
    max_keep: u64,
    max_col: Option<i64>,
    col_limit: usize,
    fine: LogRows,
    nfine: usize,
    first_col: i64,
    cols: usize,
    counts: Vec<u64>,
    cache_lo: u64,
    cache_hi: u64,
    cache_slot: usize,
    min_seen: u64,
    max_seen: u64,
    below: u64,
    above: u64,
    beyond: u64,
    too_many_cols: bool,
    /// The column width is the stream's to choose: it starts fine and widens as data come.
    auto: bool,
}

impl LogStream {
    /// Columns of `step_ns` aligned to `origin_ns`; values outside `[min, max]` (defaults 1 and
    /// [`STREAM_MAX_VALUE`]) are counted as not shown; columns after `max_col` (counted from the
    /// origin's column) are dropped; more than `col_limit` columns is an error at the end.
    pub fn new(
        origin_ns: u64,
        step_ns: u64,
        min: Option<u64>,
        max: Option<u64>,
        max_col: Option<usize>,
        col_limit: usize,
    ) -> Self {
        let grid = LogGrid::new(FINE_PER_DECADE);
        let j1 = grid.bin_of(STREAM_MAX_VALUE as f64).unwrap_or(0);
        let fine = LogRows::new(grid, 0, j1);
        let nfine = (j1 + 1) as usize;
        LogStream {
            origin: origin_ns,
            step: step_ns.max(1),
            min_keep: min.unwrap_or(1).max(1),
            max_keep: max.unwrap_or(STREAM_MAX_VALUE).min(STREAM_MAX_VALUE),
            max_col: max_col.map(|m| m as i64),
            col_limit,
            fine,
            nfine,
            first_col: 0,
            cols: 0,
            counts: Vec::new(),
            cache_lo: 1,
            cache_hi: 0,
            cache_slot: 0,
            min_seen: u64::MAX,
            max_seen: 0,
            below: 0,
            above: 0,
            beyond: 0,
            too_many_cols: false,
            auto: false,
        }
    }

    /// A stream that chooses its column width: it counts in columns of
    /// [`AUTO_FIRST_STEP_NS`], made 10 times wider whenever there would be more than
    /// [`AUTO_MAX_COLS`] (memory per group stays bounded), and [`LogStream::finish`] merges
    /// them into columns of [`auto_step_ns`] of the time the data span.
    pub fn auto(origin_ns: u64, min: Option<u64>, max: Option<u64>) -> Self {
        let mut s = LogStream::new(origin_ns, AUTO_FIRST_STEP_NS, min, max, None, usize::MAX);
        s.auto = true;
        s
    }

    /// Whether the stream chooses its column width.
    pub fn auto_chosen(&self) -> bool {
        self.auto
    }

    /// The current column width, ns.
    pub fn step_ns(&self) -> u64 {
        self.step
    }

    /// Makes the columns `factor` times wider (merging their counts): column `c` becomes
    /// `c.div_euclid(factor)`, so columns stay aligned to the origin.
    pub fn widen(&mut self, factor: u64) {
        if factor <= 1 {
            return;
        }
        self.step = self.step.saturating_mul(factor);
        self.cache_lo = 1;
        self.cache_hi = 0;
        if self.cols == 0 {
            return;
        }
        let f = factor as i64;
        let first = self.first_col.div_euclid(f);
        let last = (self.first_col + self.cols as i64 - 1).div_euclid(f);
        let cols = (last - first + 1) as usize;
        let mut counts = vec![0u64; cols * self.nfine];
        for k in 0..self.cols {
            let to = ((self.first_col + k as i64).div_euclid(f) - first) as usize;
            let (src, dst) = (&self.counts[k * self.nfine..(k + 1) * self.nfine], &mut counts[to * self.nfine..]);
            for (d, &n) in dst.iter_mut().zip(src) {
                *d += n;
            }
        }
        (self.first_col, self.cols, self.counts) = (first, cols, counts);
    }

    /// Columns held.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Events counted in cells.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The slot (column index into `counts`) of time `ts`, growing the columns as needed.
    #[inline]
    fn slot(&mut self, ts: u64) -> Option<usize> {
        if ts >= self.cache_lo && ts < self.cache_hi {
            return Some(self.cache_slot);
        }
        let d = ts as i128 - self.origin as i128;
        let mut c = d.div_euclid(self.step as i128) as i64;
        while self.auto && self.cols > 0 && {
            let (lo, hi) = (c.min(self.first_col), c.max(self.first_col + self.cols as i64 - 1));
            (hi - lo + 1) as usize > AUTO_MAX_COLS
        } {
            self.widen(10);
            c = d.div_euclid(self.step as i128) as i64;
        }
        if self.max_col.is_some_and(|m| c > m) {
            self.beyond += 1;
            return None;
        }
        if self.cols == 0 {
            self.first_col = c;
            self.cols = 1;
            self.counts = vec![0; self.nfine];
        } else if c >= self.first_col + self.cols as i64 {
            let n = (c - self.first_col + 1) as usize;
            if n > self.col_limit {
                self.too_many_cols = true;
                self.beyond += 1;
                return None;
            }
            self.counts.resize(n * self.nfine, 0);
            self.cols = n;
        } else if c < self.first_col {
            let extra = (self.first_col - c) as usize;
            if self.cols + extra > self.col_limit {
                self.too_many_cols = true;
                self.beyond += 1;
                return None;
            }
            let mut v = vec![0u64; extra * self.nfine];
            v.extend_from_slice(&self.counts);
            self.counts = v;
            self.first_col = c;
            self.cols += extra;
        }
        let slot = (c - self.first_col) as usize;
        (self.cache_lo, self.cache_hi) = self.col_bounds(c as i128);
        self.cache_slot = slot;
        Some(slot)
    }

    /// Counts value `v` at time `ts` (CLOCK_MONOTONIC ns).
    #[inline]
    pub fn add(&mut self, ts: u64, v: u64) {
        if v < self.min_keep {
            self.below += 1;
            return;
        }
        if v > self.max_keep {
            self.above += 1;
            return;
        }
        let Some(slot) = self.slot(ts) else { return };
        let j = self.fine.row_u64(v).unwrap_or(0);
        self.counts[slot * self.nfine + j] += 1;
        self.min_seen = self.min_seen.min(v);
        self.max_seen = self.max_seen.max(v);
    }

    /// Start and end (exclusive) of column `c`, clamped to the range of times.
    fn col_bounds(&self, c: i128) -> (u64, u64) {
        let lo = self.origin as i128 + c * self.step as i128;
        (lo.clamp(0, u64::MAX as i128) as u64, (lo + self.step as i128).clamp(0, u64::MAX as i128) as u64)
    }

    /// Counts `values[i]` at time `ts[i]`: the same as [`LogStream::add`] for each pair, done as
    /// one [`LogStream::add_column`] per run of consecutive times in one column (events are
    /// nearly in time order, so a block that straddles a column edge is a few runs).
    pub fn add_pairs(&mut self, ts: &[u64], values: &[u64]) {
        let n = ts.len().min(values.len());
        let mut i = 0;
        while i < n {
            let (lo, hi) = self.col_bounds((ts[i] as i128 - self.origin as i128).div_euclid(self.step as i128));
            let run = ts[i + 1..n].iter().position(|&t| t < lo || t >= hi).map_or(n, |k| i + 1 + k);
            self.add_column(ts[i], &values[i..run]);
            i = run;
        }
    }

    /// Counts `values`, all at times in the column of time `ts`: the same as calling
    /// [`LogStream::add`]`(ts, v)` for each, without finding the column more than once (for a
    /// block of events whose time range lies within one column).
    pub fn add_column(&mut self, ts: u64, values: &[u64]) {
        let (min_keep, max_keep) = (self.min_keep, self.max_keep);
        // The column is only looked up (and created) for a value that is kept, as `add` does.
        let Some(first) = values.iter().position(|&v| (min_keep..=max_keep).contains(&v)) else {
            self.count_out(values);
            return;
        };
        self.count_out(&values[..first]);
        let rest = &values[first..];
        let Some(slot) = self.slot(ts) else {
            // Not placed: `slot` counted the first value; each further kept value is too.
            let kept = rest[1..].iter().filter(|&&v| (min_keep..=max_keep).contains(&v)).count();
            self.beyond += kept as u64;
            self.count_out(&rest[1..]);
            return;
        };
        // Everything the loop reads is in locals, so that stores to `cells` do not make the
        // compiler reload it.
        let rows = self.fine.split_rows().expect("one fine edge per histogram bucket");
        let cells = &mut self.counts[slot * self.nfine..(slot + 1) * self.nfine];
        let (mut lo, mut hi) = (self.min_seen, self.max_seen);
        let (mut below, mut above) = (0u64, 0u64);
        // A value was kept, so `min_keep <= max_keep`.
        let span = max_keep - min_keep;
        for &v in rest {
            // One compare for the usual kept value.
            if v.wrapping_sub(min_keep) <= span {
                // Kept values are at least 1: row 0 or above (-1 would fail the bounds check).
                cells[rows.row(v) as usize] += 1;
                lo = lo.min(v);
                hi = hi.max(v);
            } else if v < min_keep {
                below += 1;
            } else {
                above += 1;
            }
        }
        (self.min_seen, self.max_seen) = (lo, hi);
        self.below += below;
        self.above += above;
    }

    /// Counts the values of `values` below and above the range (the kept ones are the caller's).
    fn count_out(&mut self, values: &[u64]) {
        for &v in values {
            if v < self.min_keep {
                self.below += 1;
            } else if v > self.max_keep {
                self.above += 1;
            }
        }
    }

    /// Turns the streams of all groups (sharing origin and step) into heat maps sharing one grid.
    /// `rows` is the number of rows wanted, `min`/`max` the range given (default: the data's).
    #[allow(clippy::too_many_arguments)]
    pub fn finish(
        streams: &[(&LogStream, Option<String>)],
        rows: usize,
        min: Option<u64>,
        max: Option<u64>,
        unit: YUnit,
        label: &str,
        title: &str,
        wall_ns_at_origin: Option<i64>,
    ) -> Result<Vec<HeatMap>, String> {
        let Some(first) = streams.first().map(|s| s.0) else { return Ok(Vec::new()) };
        if let Some(s) = streams.iter().find(|s| s.0.too_many_cols) {
            return Err(format!(
                "too many columns (more than {}): use a larger --stepsec, or keep the first columns with --maxcol",
                s.0.col_limit
            ));
        }
        let seen_min = streams.iter().map(|s| s.0.min_seen).min().unwrap_or(u64::MAX);
        let seen_max = streams.iter().map(|s| s.0.max_seen).max().unwrap_or(0);
        let any = seen_min <= seen_max;
        let lo = min.map(|m| m.max(1)).unwrap_or(if any { seen_min } else { 1 }) as f64;
        let hi = max.map(|m| m as f64).unwrap_or(if any { seen_max as f64 } else { lo * 10.0 }).max(lo);
        let pd = log_per_decade(rows, lo, hi);
        let grid = LogGrid::new(pd);
        let j0 = grid.bin_of(lo).unwrap_or(0);
        let j1 = grid.bin_of(hi).unwrap_or(j0).max(j0);
        let nrows = (j1 - j0 + 1) as usize;
        let ratio = (FINE_PER_DECADE / pd) as i64;
        // The column width: the streams' own, or for streams that choose it the width for the
        // time the data span, a whole number of every stream's columns (all are aligned to the
        // origin, so the columns nest).
        let widest = streams.iter().map(|s| s.0.step).max().unwrap_or(first.step);
        let step = if first.auto {
            let ns = |s: &LogStream, k: i64| (s.first_col + k) as i128 * s.step as i128;
            let held = streams.iter().map(|s| s.0).filter(|s| s.cols > 0);
            let t0 = held.clone().map(|s| ns(s, 0)).min().unwrap_or(0);
            let t1 = held.map(|s| ns(s, s.cols as i64)).max().unwrap_or(0);
            auto_step_ns((t1 - t0).clamp(0, u64::MAX as i128) as u64).max(widest)
        } else {
            first.step
        };
        let col_of = |s: &LogStream, k: usize| {
            ((s.first_col + k as i64) as i128 * s.step as i128).div_euclid(step as i128) as i64
        };
        let held = streams.iter().map(|s| s.0).filter(|s| s.cols > 0);
        let c0 = held.clone().map(|s| col_of(s, 0)).min().unwrap_or(0);
        let c1 = held.map(|s| col_of(s, s.cols - 1)).max().unwrap_or(0);
        let cols = (c1 - c0 + 1).max(1) as usize;
        if cols > first.col_limit {
            return Err(format!(
                "too many columns ({cols} > {}): use a larger --stepsec, or keep the first columns with --maxcol",
                first.col_limit
            ));
        }
        let step_sec = step as f64 / 1e9;
        let bins = Binning {
            t0: c0 as f64 * step as f64,
            units_per_sec: 1e9,
            step_sec,
            cols,
            edges: (j0..=j1 + 1).map(|j| grid.edge(j)).collect(),
            min: lo,
            max: hi,
            max_exclusive: false,
            scale: YScale::Log,
            unit,
            label: label.to_string(),
            wall_ns_at_zero: wall_ns_at_origin,
            label_zero: 0.0,
            max_col: first.max_col.map(|m| m.max(0) as usize),
            rule: RowRule::Log(Box::new(LogRows::new(grid, j0, j1))),
        };
        let mut maps = Vec::with_capacity(streams.len());
        for (s, group) in streams {
            let mut counts = vec![0u64; cols * nrows];
            let mut below = s.below;
            let mut above = s.above;
            for k in 0..s.cols {
                let c = (col_of(s, k) - c0) as usize;
                for (jf, &n) in s.counts[k * s.nfine..(k + 1) * s.nfine].iter().enumerate() {
                    if n == 0 {
                        continue;
                    }
                    let r = (jf as i64).div_euclid(ratio) - j0;
                    if r < 0 {
                        below += n;
                    } else if r as usize >= nrows {
                        above += n;
                    } else {
                        counts[c * nrows + r as usize] += n;
                    }
                }
            }
            let max_count = counts.iter().copied().max().unwrap_or(0);
            let total = counts.iter().sum();
            maps.push(HeatMap {
                title: title.to_string(),
                group: group.clone(),
                bins: bins.clone(),
                rows: nrows,
                counts,
                max_count,
                total,
                below,
                above,
                beyond: s.beyond,
            });
        }
        Ok(maps)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::heatmap::{Points, XSpec, YSpec};

    fn rng(seed: &mut u64) -> u64 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        *seed
    }

    #[test]
    fn per_decade_divides_the_fine_grid() {
        assert_eq!(log_per_decade(50, 1e3, 1e9), 10);
        assert_eq!(log_per_decade(50, 1e4, 1e8), 15);
        assert_eq!(log_per_decade(50, 1e3, 1e3), 10);
        assert_eq!(log_per_decade(5000, 1e3, 1e4), 60);
        assert_eq!(log_per_decade(3, 1e3, 1e6), 1);
    }

    #[test]
    fn stream_equals_buffered_binning() {
        let origin = 1_000_000_000_000u64;
        let step = 250_000_000u64;
        let mut seed = 42u64;
        let mut s = LogStream::new(origin, step, None, None, None, 10_000);
        let mut p = Points::default();
        for k in 0..50_000u64 {
            let ts = origin + k * 97_003 + rng(&mut seed) % 1000;
            let v = match rng(&mut seed) % 4 {
                0 => 0,
                1 => 1 + rng(&mut seed) % 1000,
                2 => 10_000 + rng(&mut seed) % 90_000,
                _ => 1_000_000 + rng(&mut seed) % 9_000_000,
            };
            s.add(ts, v);
            p.push((ts - origin) as f64, v as f64);
        }
        // An event from before the origin adds a column in front.
        s.add(origin - 1, 5000);
        p.push(-1.0, 5000.0);
        for rows in [10, 50, 200] {
            let maps = LogStream::finish(&[(&s, None)], rows, None, None, YUnit::Nanos, "Latency", "t", None).unwrap();
            let m = &maps[0];
            // The buffered path with the column origin at the first column's start.
            let x =
                XSpec { units_per_sec: 1e9, step_sec: Some(0.25), origin: Some(-(step as f64)), ..Default::default() };
            let y = YSpec { scale: YScale::Log, rows, ..Default::default() };
            let b = Binning::plan(&[&p], &x, &y).unwrap();
            let want = b.build(&p, "t", None);
            assert_eq!(m.bins.edges, want.bins.edges, "rows {rows}");
            assert_eq!(m.bins.cols, want.bins.cols);
            assert_eq!(m.counts, want.counts, "rows {rows}");
            assert_eq!(m.below, want.below);
            assert_eq!(m.total, 50_001 - want.below);
            assert_eq!(m.bins.col_start_sec(0), -0.25);
        }
    }

    /// `add_pairs` counts as `add` does pair by pair: times in and out of order, before the
    /// origin, past the last column, values out of range.
    #[test]
    fn add_pairs_equals_add() {
        let mut seed = 9u64;
        for (min, max, max_col) in [(None, None, None), (Some(500), Some(200_000), Some(6))] {
            let origin = 5_000_000_000u64;
            let (mut one, mut runs) = (
                LogStream::new(origin, 100_000_000, min, max, max_col, 1000),
                LogStream::new(origin, 100_000_000, min, max, max_col, 1000),
            );
            let mut t = origin - 150_000_000;
            let (mut ts, mut vs) = (Vec::new(), Vec::new());
            for _ in 0..20_000 {
                t += rng(&mut seed) % 100_000;
                // Some events end out of order (their entry time is earlier than the last one).
                let x = if rng(&mut seed).is_multiple_of(50) { t - rng(&mut seed) % 30_000_000 } else { t };
                ts.push(x);
                vs.push(rng(&mut seed) % 1_000_000);
            }
            for (&x, &v) in ts.iter().zip(&vs) {
                one.add(x, v);
            }
            for (a, b) in [(0, 1), (1, 777), (777, 5000), (5000, 20_000)] {
                runs.add_pairs(&ts[a..b], &vs[a..b]);
            }
            assert_eq!(one.counts, runs.counts);
            assert_eq!((one.first_col, one.cols), (runs.first_col, runs.cols));
            assert_eq!((one.below, one.above, one.beyond), (runs.below, runs.above, runs.beyond));
            assert_eq!((one.min_seen, one.max_seen), (runs.min_seen, runs.max_seen));
        }
    }

    #[test]
    fn limits_and_ranges() {
        let mut s = LogStream::new(0, 1_000_000_000, Some(100), Some(1000), Some(2), 5);
        s.add(0, 99);
        s.add(0, 1001);
        s.add(0, 100);
        s.add(3_000_000_000, 500);
        let maps =
            LogStream::finish(&[(&s, Some("g".into()))], 10, Some(100), Some(1000), YUnit::Nanos, "L", "t", Some(0))
                .unwrap();
        let m = &maps[0];
        assert_eq!((m.below, m.above, m.beyond, m.total), (1, 1, 1, 1));
        let mut s = LogStream::new(0, 1, None, None, None, 5);
        for t in 0..10 {
            s.add(t, 7);
        }
        let e = LogStream::finish(&[(&s, None)], 10, None, None, YUnit::Nanos, "L", "t", None).unwrap_err();
        assert!(e.contains("--stepsec"), "{e}");
        let empty = LogStream::new(0, 1, None, None, None, 5);
        let maps = LogStream::finish(&[(&empty, None)], 10, None, None, YUnit::Nanos, "L", "t", None).unwrap();
        assert_eq!(maps[0].total, 0);
    }
}
