//! Latency scales: log-linear buckets (how counts are stored) and the logarithmic screen axis
//! (how they are drawn), and the mapping from one to the other.

use latscope_event::units::fmt_ns;

/// A log-linear bucket scheme: values below `2^sub_bits` have one bucket each, every power of
/// two above is cut into `2^sub_bits` equal sub-buckets (relative width at most `2^-sub_bits`).
///
/// [`Buckets::KERNEL`] is the scheme of the probe's in-kernel histograms
/// (`latscope_probe::agg_bucket`), [`Buckets::FINE`] the one used when events are counted in
/// user space. Rows keep counts per bucket, not per screen column, so that they can be redrawn at
/// any width (terminal resize, `--min`/`--max` zoom, SVG).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Buckets {
    /// log2 of the number of sub-buckets per power of two.
    pub sub_bits: u8,
}

impl Buckets {
    /// 16 sub-buckets per power of two: the in-kernel histograms (6.25% wide buckets).
    pub const KERNEL: Buckets = Buckets { sub_bits: 4 };
    /// 128 sub-buckets per power of two (about 425 per decade, 0.8% wide buckets, like
    /// HdrHistogram with 2 significant digits).
    pub const FINE: Buckets = Buckets { sub_bits: 7 };

    /// Number of buckets needed to hold any `u64`.
    pub const fn len(self) -> usize {
        (65 - self.sub_bits as usize) << self.sub_bits
    }

    /// Never true (a scheme always has buckets); here for clippy's `len_without_is_empty`.
    pub const fn is_empty(self) -> bool {
        false
    }

    /// The bucket of value `v`.
    #[inline(always)]
    pub fn index(self, v: u64) -> usize {
        let s = self.sub_bits as u32;
        if v < (1u64 << s) {
            return v as usize;
        }
        let e = 63 - v.leading_zeros();
        (((e - s + 1) as usize) << s) + ((v >> (e - s)) as usize & ((1usize << s) - 1))
    }

    /// The values `[low, high)` of bucket `idx` (`high` saturates at `u64::MAX`).
    pub fn bounds(self, idx: usize) -> (u64, u64) {
        let s = self.sub_bits as u32;
        let n = 1usize << s;
        if idx < n {
            return (idx as u64, idx as u64 + 1);
        }
        let e = (idx >> s) as u32 + s - 1;
        let sub = (idx & (n - 1)) as u64;
        let low = (n as u64 + sub) << (e - s);
        (low, low.saturating_add(1u64 << (e - s)))
    }

    /// The value a bucket stands for when it is placed on an axis: the value itself for
    /// one-value buckets, the middle otherwise.
    pub fn representative(self, idx: usize) -> f64 {
        let (lo, hi) = self.bounds(idx);
        if hi - lo <= 1 {
            lo as f64
        } else {
            (lo as f64 + hi as f64) / 2.0
        }
    }
}

/// A logarithmic latency axis: `[min_ns, max_ns)` spread over `cols` screen columns.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    min_ns: u64,
    max_ns: u64,
    cols: usize,
    lmin: f64,
    /// Columns per decade.
    per_decade: f64,
}

impl Axis {
    /// An axis from `min_ns` (at least 1) to `max_ns` over `cols` columns (at least 1).
    pub fn new(min_ns: u64, max_ns: u64, cols: usize) -> Axis {
        let min_ns = min_ns.max(1);
        let max_ns = max_ns.max(min_ns + 1);
        let cols = cols.max(1);
        let lmin = (min_ns as f64).log10();
        let lmax = (max_ns as f64).log10();
        Axis { min_ns, max_ns, cols, lmin, per_decade: cols as f64 / (lmax - lmin) }
    }

    /// Lowest latency drawn.
    pub fn min_ns(&self) -> u64 {
        self.min_ns
    }
    /// Latency at the right edge (excluded).
    pub fn max_ns(&self) -> u64 {
        self.max_ns
    }
    /// Number of columns.
    pub fn cols(&self) -> usize {
        self.cols
    }
    /// Columns per decade.
    pub fn per_decade(&self) -> f64 {
        self.per_decade
    }

    /// The column of latency `v`, or `Err(Below)`/`Err(Above)` when it is off the axis.
    pub fn col_of(&self, v: f64) -> Result<usize, OffAxis> {
        if v < self.min_ns as f64 {
            return Err(OffAxis::Below);
        }
        if v >= self.max_ns as f64 {
            return Err(OffAxis::Above);
        }
        // The epsilon keeps exact decades (1000 ns) in the column they start.
        let x = ((v.log10() - self.lmin) * self.per_decade + 1e-9).floor();
        Ok((x.max(0.0) as usize).min(self.cols - 1))
    }

    /// The latencies `[low, high)` column `c` covers.
    pub fn col_bounds(&self, c: usize) -> (f64, f64) {
        let at = |x: f64| 10f64.powf(self.lmin + x / self.per_decade);
        (at(c as f64), at(c as f64 + 1.0))
    }

    /// The latency at the middle (on the log scale) of column `c`.
    pub fn col_center(&self, c: usize) -> f64 {
        10f64.powf(self.lmin + (c as f64 + 0.5) / self.per_decade)
    }

    /// The powers of ten on the axis and the column each starts in.
    pub fn decades(&self) -> Vec<(usize, u64)> {
        let mut out = Vec::new();
        let mut p: u64 = 1;
        loop {
            if p >= self.min_ns && p < self.max_ns {
                if let Ok(c) = self.col_of(p as f64) {
                    out.push((c, p));
                }
            }
            match p.checked_mul(10) {
                Some(n) if n < self.max_ns => p = n,
                _ => break,
            }
        }
        out
    }

    /// The axis line: `|` where each decade starts, and labels. The decades of a unit (`1ns`,
    /// `1us`, `1ms`, `1s`) are labelled first, over the bare ticks of the decades between them when
    /// the axis is narrow (a strip of a split view); the other decades get their label when it fits
    /// before the next tick. Exactly [`Axis::cols`] characters.
    pub fn label_line(&self) -> String {
        let mut line = vec![' '; self.cols];
        let ticks = self.decades();
        for &(c, _) in &ticks {
            line[c] = '|';
        }
        let mut taken = vec![false; self.cols];
        let unit = |p: u64| matches!(p, 1 | 1_000 | 1_000_000 | 1_000_000_000);
        let write = |line: &mut Vec<char>, taken: &mut Vec<bool>, c: usize, label: &str| {
            for (k, ch) in label.chars().enumerate() {
                line[c + 1 + k] = ch;
            }
            taken[c..c + 1 + label.len()].iter_mut().for_each(|t| *t = true);
        };
        for (i, &(c, p)) in ticks.iter().enumerate().filter(|(_, t)| unit(t.1)) {
            let label = decade_label(p);
            let end = c + 1 + label.len();
            // Up to the next unit's tick (the bare ticks between may be written over).
            let limit = ticks[i + 1..].iter().find(|t| unit(t.1)).map_or(self.cols, |t| t.0);
            if end <= limit && !taken[c..end].iter().any(|&t| t) {
                write(&mut line, &mut taken, c, &label);
            }
        }
        for (i, &(c, p)) in ticks.iter().enumerate().filter(|(_, t)| !unit(t.1)) {
            let label = decade_label(p);
            let end = c + 1 + label.len();
            let limit = ticks.get(i + 1).map_or(self.cols, |t| t.0);
            if line[c] == '|' && end <= limit && !taken[c..end].iter().any(|&t| t) {
                write(&mut line, &mut taken, c, &label);
            }
        }
        line.into_iter().collect()
    }
}

/// Label of a power of ten: `1ns`, `10ns`, `100ns`, `1us`, ..., `10s`, `100s`.
pub fn decade_label(p: u64) -> String {
    match p {
        0..=999 => format!("{p}ns"),
        1_000..=999_999 => format!("{}us", p / 1_000),
        1_000_000..=999_999_999 => format!("{}ms", p / 1_000_000),
        _ => format!("{}s", p / 1_000_000_000),
    }
}

/// Where an off-axis value lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffAxis {
    /// Faster than the axis minimum.
    Below,
    /// Slower than the axis maximum.
    Above,
}

/// How the buckets of one scheme land on the columns of one axis.
#[derive(Debug, Clone)]
pub struct ColumnMap {
    /// The scheme mapped.
    pub buckets: Buckets,
    /// Column of each bucket; [`ColumnMap::BELOW`] / [`ColumnMap::ABOVE`] when off the axis.
    pub bucket_col: Vec<u16>,
    /// For each column that no bucket lands in (the axis is finer than the scheme there), the
    /// bucket that covers its middle: it is drawn with that bucket's count.
    pub fill: Vec<Option<u32>>,
    /// First and last bucket landing in each column (inclusive), if any.
    pub col_buckets: Vec<Option<(u32, u32)>>,
}

impl ColumnMap {
    /// Marker for buckets below the axis.
    pub const BELOW: u16 = u16::MAX;
    /// Marker for buckets above the axis.
    pub const ABOVE: u16 = u16::MAX - 1;

    /// Map `buckets` onto `axis`.
    pub fn new(axis: &Axis, buckets: Buckets) -> ColumnMap {
        let n = buckets.len();
        let mut bucket_col = Vec::with_capacity(n);
        let mut col_buckets: Vec<Option<(u32, u32)>> = vec![None; axis.cols()];
        for b in 0..n {
            let c = match axis.col_of(buckets.representative(b)) {
                Ok(c) => {
                    let e = &mut col_buckets[c];
                    *e = Some(match *e {
                        None => (b as u32, b as u32),
                        Some((lo, _)) => (lo, b as u32),
                    });
                    c as u16
                }
                Err(OffAxis::Below) => Self::BELOW,
                Err(OffAxis::Above) => Self::ABOVE,
            };
            bucket_col.push(c);
        }
        let fill = (0..axis.cols())
            .map(|c| {
                if col_buckets[c].is_some() {
                    return None;
                }
                let center = axis.col_center(c);
                let b = buckets.index(center as u64);
                // The bucket may straddle an edge of the axis: it is drawn, and also counted off-axis.
                (b < n && center >= 1.0).then_some(b as u32)
            })
            .collect();
        ColumnMap { buckets, bucket_col, fill, col_buckets }
    }

    /// The latencies `[low, high)` counted in columns `c0..=c1`: the union of their buckets.
    pub fn lat_range(&self, c0: usize, c1: usize) -> (u64, u64) {
        let mut lo = u64::MAX;
        let mut hi = 0u64;
        for c in c0..=c1.min(self.fill.len().saturating_sub(1)) {
            let range = match (self.col_buckets[c], self.fill[c]) {
                (Some((a, b)), _) => Some((a, b)),
                (None, Some(b)) => Some((b, b)),
                _ => None,
            };
            if let Some((a, b)) = range {
                lo = lo.min(self.buckets.bounds(a as usize).0);
                hi = hi.max(self.buckets.bounds(b as usize).1);
            }
        }
        if lo > hi {
            (0, 0)
        } else {
            (lo, hi)
        }
    }
}

/// A readable range: `1.00us..1.12us`.
pub fn fmt_range(lo: u64, hi: u64) -> String {
    format!("{}..{}", fmt_ns(lo), fmt_ns(hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_scheme_matches_the_probe_formula() {
        // The probe's formula (latscope_probe::agg_bucket), restated.
        let probe = |v: u64| -> usize {
            if v < 16 {
                return v as usize;
            }
            let e = 63 - v.leading_zeros();
            ((e as usize - 3) * 16 + ((v >> (e - 4)) & 15) as usize).min(639)
        };
        for v in [0u64, 1, 7, 8, 9, 15, 16, 100, 1000, 123_456, 10_000_000, 1 << 40] {
            assert_eq!(Buckets::KERNEL.index(v), probe(v), "{v}");
        }
        assert_eq!(Buckets::KERNEL.bounds(8), (8, 9));
        assert_eq!(Buckets::KERNEL.bounds(16), (16, 17));
        assert_eq!(Buckets::KERNEL.bounds(32), (32, 34));
    }

    #[test]
    fn buckets_cover_every_value_once() {
        for b in [Buckets::KERNEL, Buckets::FINE] {
            let mut prev_hi = 0;
            for i in 0..b.len() {
                let (lo, hi) = b.bounds(i);
                assert_eq!(lo, prev_hi, "bucket {i} of {b:?}");
                prev_hi = hi;
                assert_eq!(b.index(lo), i);
                if hi > lo + 1 && hi < u64::MAX {
                    assert_eq!(b.index(hi - 1), i);
                }
            }
            assert_eq!(prev_hi, u64::MAX);
            assert_eq!(b.index(u64::MAX), b.len() - 1);
        }
    }

    #[test]
    fn axis_columns_and_labels() {
        // 1 ns .. 10 s is 10 decades: 100 columns give 10 per decade.
        let a = Axis::new(1, 10_000_000_000, 100);
        assert_eq!(a.col_of(1.0), Ok(0));
        assert_eq!(a.col_of(1000.0), Ok(30));
        assert_eq!(a.col_of(999.0), Ok(29));
        assert_eq!(a.col_of(100_000.0), Ok(50));
        assert_eq!(a.col_of(10_000_000.0), Ok(70));
        assert_eq!(a.col_of(9_999_999_999.0), Ok(99));
        assert_eq!(a.col_of(0.5), Err(OffAxis::Below));
        assert_eq!(a.col_of(1e10), Err(OffAxis::Above));
        let (lo, hi) = a.col_bounds(50);
        assert!((lo - 100_000.0).abs() < 1e-6 && (hi - 125_892.5).abs() < 1.0, "{lo} {hi}");
        let line = a.label_line();
        assert_eq!(line.chars().count(), 100);
        assert!(line.starts_with("|1ns      |10ns     |100ns    |1us      |10us"), "{line}");
        assert!(line.ends_with("|1s       "), "{line}");
        assert_eq!(a.decades().len(), 10);
    }

    #[test]
    fn crowded_labels_are_skipped_not_overlapped() {
        let a = Axis::new(1, 10_000_000_000, 30);
        let line = a.label_line();
        assert_eq!(line.chars().count(), 30);
        // Each label is preceded by its tick.
        for w in line.split('|').skip(1) {
            let w = w.trim_end();
            assert!(w.is_empty() || w.ends_with('s'), "{line}");
        }
    }

    #[test]
    fn narrow_strips_label_every_unit_decade() {
        // The strips of a split view: 2 to 4 columns per decade. Every unit decade (1ns, 1us,
        // 1ms, 1s) is labelled right after its tick, other labels only where they fit.
        for cols in [20usize, 27, 30, 35, 47] {
            let a = Axis::new(1, 10_000_000_000, cols);
            let line = a.label_line();
            assert_eq!(line.chars().count(), cols);
            for (c, p) in a.decades() {
                let label = format!("|{}", decade_label(p));
                if matches!(p, 1 | 1_000 | 1_000_000 | 1_000_000_000) && c + label.len() <= cols {
                    assert_eq!(line.chars().skip(c).take(label.len()).collect::<String>(), label, "{cols}: {line}");
                }
            }
            for w in line.split('|').skip(1) {
                assert!(
                    ["", "1ns", "10ns", "100ns", "1us", "10us", "100us", "1ms", "10ms", "100ms", "1s"]
                        .contains(&w.trim_end()),
                    "{cols}: {line}"
                );
            }
        }
    }

    #[test]
    fn column_map_fine_and_coarse() {
        let a = Axis::new(1, 10_000_000_000, 100);
        let m = ColumnMap::new(&a, Buckets::FINE);
        // 150 us lands where the axis says.
        let b = Buckets::FINE.index(150_000);
        assert_eq!(m.bucket_col[b] as usize, a.col_of(150_000.0).unwrap());
        // Every column at >= 1 us has buckets of its own with the fine scheme.
        for c in 30..100 {
            assert!(m.col_buckets[c].is_some(), "column {c}");
        }
        // Zoomed far in, the kernel scheme is coarser than the columns: gaps are filled.
        let z = Axis::new(100_000, 200_000, 100);
        let k = ColumnMap::new(&z, Buckets::KERNEL);
        for c in 0..100 {
            assert!(k.col_buckets[c].is_some() || k.fill[c].is_some(), "column {c}");
        }
        let (lo, hi) = k.lat_range(0, 99);
        assert!(lo <= 100_000 && hi >= 200_000, "{lo} {hi}");
        assert_eq!(m.bucket_col[Buckets::FINE.index(20_000_000_000)], ColumnMap::ABOVE);
        assert_eq!(m.bucket_col[0], ColumnMap::BELOW);
    }
}
