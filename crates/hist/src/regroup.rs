//! Coarse logarithmic views of a histogram, for terminal histograms, heat-map rows and peak finding.

use crate::histogram::Histogram;

/// A logarithmic grid with `per_decade` bins per power of ten; bin `j` is `[10^(j/n), 10^((j+1)/n))`.
///
/// Edges sit on a global grid (1, 10, 100 ... are always edges), so that the rows of different
/// histograms — the columns of a heat map — line up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogGrid {
    per_decade: u32,
}

impl LogGrid {
    /// Finest grid offered: our buckets are ~295 per decade, so finer bins only add empty rows.
    pub const MAX_PER_DECADE: u32 = 1000;

    /// A grid of `per_decade` bins per decade, clamped to `1 ..= MAX_PER_DECADE`.
    pub fn new(per_decade: u32) -> Self {
        LogGrid { per_decade: per_decade.clamp(1, Self::MAX_PER_DECADE) }
    }

    /// Bins per decade.
    pub fn per_decade(&self) -> u32 {
        self.per_decade
    }

    /// Lower edge of bin `j`: `10^(j / per_decade)`, exact at whole decades.
    pub fn edge(&self, j: i64) -> f64 {
        let n = i64::from(self.per_decade);
        if j % n == 0 {
            10f64.powi((j / n) as i32)
        } else {
            10f64.powf(j as f64 / n as f64)
        }
    }

    /// The bin holding `x`, i.e. `j` with `edge(j) <= x < edge(j + 1)`; `None` unless `x` is positive
    /// and finite.
    pub fn bin_of(&self, x: f64) -> Option<i64> {
        if !(x > 0.0 && x.is_finite()) {
            return None;
        }
        let mut j = (x.log10() * f64::from(self.per_decade)).floor() as i64;
        // log10 can be off by an ulp right at an edge; the edges themselves decide.
        while x < self.edge(j) {
            j -= 1;
        }
        while x >= self.edge(j + 1) {
            j += 1;
        }
        Some(j)
    }

    /// Edges of bins `j0 ..= j1` and the upper edge of `j1`: computed once, so that assigning thousands
    /// of buckets costs a binary search each instead of several `powf` calls.
    pub(crate) fn edges(&self, j0: i64, j1: i64) -> Vec<f64> {
        (j0..=j1 + 1).map(|j| self.edge(j)).collect()
    }
}

/// Position (0-based, clamped to the first and last bin) of `x` among bins with these `edges`.
pub(crate) fn slot(edges: &[f64], x: f64) -> usize {
    edges.partition_point(|&e| e <= x).saturating_sub(1).min(edges.len().saturating_sub(2))
}

impl Histogram {
    /// Regroups the buckets into logarithmic bins, `per_decade` per power of ten (clamped to
    /// `1 ..= 1000`; 0 gives an empty result), covering the values `min ..= max`. Returns
    /// `(low, high, count)` per bin, `low` inclusive and `high` exclusive, in increasing order,
    /// empty bins included so that rows line up across histograms.
    ///
    /// * Bins are those of [`LogGrid`]: the first one is the grid bin holding `max(min, 1)`, the last
    ///   the one holding `max`.
    /// * If `min == 0` the first bin is `(0.0, 1.0)`, holding the value 0, which has no place on a
    ///   logarithmic axis.
    /// * Each of our buckets goes whole to the bin holding its midpoint, so counts are conserved;
    ///   values below `min` or above `max` are counted in the first or last bin (pass the histogram's
    ///   own `min()`/`max()` to see everything).
    /// * Bins narrower than the spacing of integers (below about `per_decade / 2.3` ns) are empty
    ///   between integer values: the data has no resolution there.
    ///
    /// An empty result is returned if `min > max` or `per_decade == 0`.
    pub fn regroup(&self, per_decade: u32, min: u64, max: u64) -> Vec<(f64, f64, u64)> {
        if per_decade == 0 || min > max {
            return Vec::new();
        }
        let grid = LogGrid::new(per_decade);
        let zero_bin = min == 0;
        let mut bins: Vec<(f64, f64, u64)> = Vec::new();
        if zero_bin {
            bins.push((0.0, 1.0, 0));
        }
        let first_grid = bins.len();
        let edges = if max > 0 {
            let j0 = grid.bin_of(min.max(1) as f64).unwrap_or(0);
            let j1 = grid.bin_of(max as f64).unwrap_or(j0);
            grid.edges(j0, j1)
        } else {
            Vec::new()
        };
        bins.extend(edges.windows(2).map(|e| (e[0], e[1], 0)));
        for (low, high, c) in self.iter() {
            // The value 0 goes to its own bin, or to the first one when `min > 0` asked for none.
            let index = if high == 0 || edges.is_empty() {
                0
            } else {
                first_grid + slot(&edges, (low as f64 + high as f64) / 2.0)
            };
            bins[index].2 = bins[index].2.saturating_add(c);
        }
        bins
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::SplitMix as Rng;
    use proptest::prelude::*;

    #[test]
    fn grid_edges() {
        let g = LogGrid::new(10);
        assert_eq!(g.edge(0), 1.0);
        assert_eq!(g.edge(30), 1000.0);
        assert_eq!(g.edge(-10), 0.1);
        assert_eq!(g.bin_of(1000.0), Some(30));
        assert_eq!(g.bin_of(999.999), Some(29));
        assert_eq!(g.bin_of(0.0), None);
        assert_eq!(g.bin_of(f64::NAN), None);
        assert_eq!(LogGrid::new(0).per_decade(), 1);
        assert_eq!(LogGrid::new(u32::MAX).per_decade(), LogGrid::MAX_PER_DECADE);
    }

    #[test]
    fn regroup_decades() {
        let mut h = Histogram::new();
        h.record_n(0, 2);
        h.extend([1, 5, 10, 99, 100, 5000, 1 << 39]);
        let bins = h.regroup(1, 0, 10_000);
        assert_eq!(
            bins,
            vec![
                (0.0, 1.0, 2),
                (1.0, 10.0, 2),
                (10.0, 100.0, 2),
                (100.0, 1000.0, 1),
                (1000.0, 10_000.0, 1),
                // 10_000 itself opens the last bin; 2^39 is above `max` and lands here too.
                (10_000.0, 100_000.0, 1)
            ]
        );
        // Without a zero bin the zeros are counted in the first bin.
        assert_eq!(h.regroup(1, 10, 200)[0], (10.0, 100.0, 6));
        assert!(h.regroup(0, 0, 10).is_empty());
        assert!(h.regroup(10, 11, 10).is_empty());
        assert_eq!(h.regroup(10, 0, 0), vec![(0.0, 1.0, 9)]);
    }

    proptest! {
        #[test]
        fn regroup_conserves_counts_and_places_values(seed in any::<u64>(), n in 1usize..2000, per_decade in 1u32..100) {
            let mut rng = Rng(seed);
            let values: Vec<u64> = (0..n).map(|_| rng.log_value(40) - 1).collect();
            let h: Histogram = values.iter().copied().collect();
            let bins = h.regroup(per_decade, h.min().unwrap(), h.max().unwrap());
            prop_assert_eq!(bins.iter().map(|b| b.2).sum::<u64>(), n as u64);
            prop_assert!(bins.windows(2).all(|w| w[0].1 == w[1].0 && w[0].0 < w[1].0));
            // Every non-empty bin is within one of our buckets' width of data actually recorded there.
            for &(lo, hi, c) in &bins {
                if c > 0 {
                    let near = values.iter().any(|&v| v as f64 >= lo * (1.0 - 1.0 / 64.0) && (v as f64) < hi * (1.0 + 1.0 / 64.0));
                    prop_assert!(near, "bin {}..{} has {} but no value near", lo, hi, c);
                }
            }
        }
    }
}
