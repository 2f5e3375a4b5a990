//! The histogram itself: bucket scheme, recording, exact summary statistics, quantiles, merge.

use std::fmt;

/// Number of bits of linear sub-bucket resolution per octave (`S` in the crate docs).
pub const SUB_BUCKET_BITS: u32 = 7;

/// Linear sub-buckets per power of two (`2^S = 128`); values below `2 * SUB_BUCKETS` are exact.
pub const SUB_BUCKETS: u64 = 1 << SUB_BUCKET_BITS;

/// Bits of the default range: values `0 ..= 2^40 - 1` (~1099.5 s in ns, 1 TiB in bytes) are tracked.
pub const DEFAULT_MAX_BITS: u32 = 40;

/// Worst-case relative error of a bucket's highest value against any value recorded in it (`1/128`).
pub const MAX_RELATIVE_ERROR: f64 = 1.0 / SUB_BUCKETS as f64;

/// Smallest supported range: `2^8 - 1`, where every bucket is still exact.
pub(crate) const MIN_MAX_BITS: u32 = SUB_BUCKET_BITS + 1;

/// Index of the bucket holding `v`, ignoring the histogram's top (see the crate docs for the formula).
#[inline(always)]
pub(crate) const fn raw_index(v: u64) -> usize {
    // `| SUB_BUCKETS` makes values below 128 land in "octave 7" with shift 0, i.e. index = v.
    let k = 63 - (v | SUB_BUCKETS).leading_zeros();
    let shift = k - SUB_BUCKET_BITS;
    ((shift as usize) << SUB_BUCKET_BITS) + (v >> shift) as usize
}

/// Index of the bucket holding `v` in a histogram whose range reaches `v` (below 7424; above a
/// histogram's top, [`Histogram::bucket_index`] gives its top bucket instead). Without the range
/// check, for tables indexed by bucket.
#[inline]
pub const fn bucket_index_of(v: u64) -> usize {
    raw_index(v)
}

/// Inclusive value range of bucket `index`, for any index a 64-bit range can have (< 7424).
#[inline]
pub(crate) const fn raw_bounds(index: usize) -> (u64, u64) {
    let shift = (index >> SUB_BUCKET_BITS).saturating_sub(1);
    let low = ((index - (shift << SUB_BUCKET_BITS)) as u64) << shift;
    (low, low + ((1u64 << shift) - 1))
}

/// Number of buckets needed to hold every value below `2^max_bits`.
pub(crate) const fn buckets_for_bits(max_bits: u32) -> usize {
    ((max_bits - SUB_BUCKET_BITS + 1) as usize) << SUB_BUCKET_BITS
}

/// A log-linear histogram of `u64` values with exact `count`/`min`/`max`/`sum`.
///
/// See the crate docs for the bucket scheme, the `1/128` error bound and quantile semantics.
/// Not synchronized: keep one per thread or CPU and [`merge`](Histogram::merge) them.
#[derive(Clone, PartialEq, Eq)]
pub struct Histogram {
    /// Dense counts, one per bucket, allocated once so that recording never allocates.
    pub(crate) counts: Vec<u64>,
    /// Values up to `2^max_bits - 1` have their own bucket.
    pub(crate) max_bits: u32,
    /// Cached `2^max_bits - 1` so the clamp test in `record` is one comparison.
    pub(crate) max_trackable: u64,
    pub(crate) total: u64,
    /// u128 so that e.g. 10^9 values of 2^40 ns cannot overflow.
    pub(crate) sum: u128,
    /// `u64::MAX` while empty, so `min` needs no branch in `record`.
    pub(crate) min: u64,
    pub(crate) max: u64,
    pub(crate) clamped_low: u64,
    pub(crate) clamped_high: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl Histogram {
    /// An empty histogram tracking values `0 ..= 2^40 - 1` (4352 buckets, 34 KiB).
    pub fn new() -> Self {
        Self::with_max_bits(DEFAULT_MAX_BITS)
    }

    /// An empty histogram whose buckets reach at least `max_value` (the top becomes `2^b - 1` for the
    /// smallest such `b`, and at least 255). `u64::MAX` gives the full range in 7424 buckets (58 KiB).
    pub fn with_max_value(max_value: u64) -> Self {
        Self::with_max_bits(64 - max_value.leading_zeros())
    }

    /// Builds with a range of `max_bits` bits, clamped into the supported `8 ..= 64`.
    pub(crate) fn with_max_bits(max_bits: u32) -> Self {
        let max_bits = max_bits.clamp(MIN_MAX_BITS, 64);
        Histogram {
            counts: vec![0; buckets_for_bits(max_bits)],
            max_bits,
            max_trackable: u64::MAX >> (64 - max_bits),
            total: 0,
            sum: 0,
            min: u64::MAX,
            max: 0,
            clamped_low: 0,
            clamped_high: 0,
        }
    }

    /// Records one occurrence of `v`. Constant time, no allocation; values above
    /// [`max_trackable`](Self::max_trackable) go to the top bucket and are counted in
    /// [`clamped_high`](Self::clamped_high).
    #[inline]
    pub fn record(&mut self, v: u64) {
        self.record_n(v, 1);
    }

    /// Records `n` occurrences of `v` (e.g. from a pre-aggregated BPF map). `n = 0` changes nothing.
    #[inline]
    pub fn record_n(&mut self, v: u64, n: u64) {
        if n == 0 {
            return;
        }
        let index = if v > self.max_trackable {
            self.clamped_high = self.clamped_high.saturating_add(n);
            self.counts.len() - 1
        } else {
            raw_index(v)
        };
        // Saturating rather than `+` so that not even 2^64 events can panic in a debug build.
        self.counts[index] = self.counts[index].saturating_add(n);
        self.total = self.total.saturating_add(n);
        self.sum = self.sum.saturating_add(u128::from(v) * u128::from(n));
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    /// Records every value of `values`: the same as [`record`](Self::record) for each, faster for
    /// a column of values (the running count, sum, minimum and maximum stay in registers; only the
    /// bucket counts are written per value).
    pub fn record_slice(&mut self, values: &[u64]) {
        let max_trackable = self.max_trackable;
        let top = self.counts.len() - 1;
        let counts = &mut self.counts[..];
        let (mut min, mut max, mut sum, mut high) = (self.min, self.max, 0u128, 0u64);
        for &v in values {
            let clamped = v > max_trackable;
            let index = if clamped { top } else { raw_index(v) };
            high += u64::from(clamped);
            // Saturating for the same reason as in `record_n` (never reached in practice).
            counts[index] = counts[index].saturating_add(1);
            sum += u128::from(v);
            min = min.min(v);
            max = max.max(v);
        }
        let n = values.len() as u64;
        self.total = self.total.saturating_add(n);
        self.sum = self.sum.saturating_add(sum);
        self.clamped_high = self.clamped_high.saturating_add(high);
        (self.min, self.max) = (min, max);
    }

    /// Records a signed value; negatives (e.g. a completion timestamped on a CPU whose clock lags the
    /// issuing one) are recorded as 0 and counted in [`clamped_low`](Self::clamped_low).
    #[inline]
    pub fn record_signed(&mut self, v: i64) {
        match u64::try_from(v) {
            Ok(v) => self.record(v),
            Err(_) => {
                self.clamped_low = self.clamped_low.saturating_add(1);
                self.record(0);
            }
        }
    }

    /// Records the duration `end - start`; an `end` before `start` is recorded as 0 and counted in
    /// [`clamped_low`](Self::clamped_low).
    #[inline]
    pub fn record_interval(&mut self, start: u64, end: u64) {
        match end.checked_sub(start) {
            Some(d) => self.record(d),
            None => {
                self.clamped_low = self.clamped_low.saturating_add(1);
                self.record(0);
            }
        }
    }

    /// Adds every count of `other` into `self`. Buckets of `other` above this histogram's range go to
    /// the top bucket and are counted as clamped high; min, max, sum and clamp counters combine exactly.
    pub fn merge(&mut self, other: &Histogram) {
        // The index scheme does not depend on the range, so common buckets line up one to one.
        let common = self.counts.len().min(other.counts.len());
        for (a, b) in self.counts[..common].iter_mut().zip(&other.counts[..common]) {
            *a = a.saturating_add(*b);
        }
        let beyond: u64 = other.counts[common..].iter().fold(0u64, |acc, c| acc.saturating_add(*c));
        if beyond > 0 {
            let top = self.counts.len() - 1;
            self.counts[top] = self.counts[top].saturating_add(beyond);
            // `beyond` includes `other`'s own clamped values (its top bucket), which are added with
            // `other.clamped_high` below; count only the ones this merge clamps.
            let newly = beyond.saturating_sub(other.clamped_high);
            self.clamped_high = self.clamped_high.saturating_add(newly);
        }
        self.total = self.total.saturating_add(other.total);
        self.sum = self.sum.saturating_add(other.sum);
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.clamped_low = self.clamped_low.saturating_add(other.clamped_low);
        self.clamped_high = self.clamped_high.saturating_add(other.clamped_high);
    }

    /// Empties the histogram, keeping its range and its allocation.
    pub fn reset(&mut self) {
        self.counts.fill(0);
        self.total = 0;
        self.sum = 0;
        self.min = u64::MAX;
        self.max = 0;
        self.clamped_low = 0;
        self.clamped_high = 0;
    }

    /// Number of recorded values (clamped ones included).
    pub fn count(&self) -> u64 {
        self.total
    }

    /// True when nothing has been recorded.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// Exact smallest recorded value (negative inputs count as 0), `None` when empty.
    pub fn min(&self) -> Option<u64> {
        (self.total > 0).then_some(self.min)
    }

    /// Exact largest recorded value, even if it was clamped into the top bucket; `None` when empty.
    pub fn max(&self) -> Option<u64> {
        (self.total > 0).then_some(self.max)
    }

    /// Exact sum of recorded values (negative inputs count as 0), saturating at `u128::MAX`.
    pub fn sum(&self) -> u128 {
        self.sum
    }

    /// Replaces the sum: for a histogram built from bucket counts (each bucket's values recorded
    /// as one value standing for them) whose exact sum was kept apart, as the probes' in-kernel
    /// aggregates keep it. The mean then is exact too; counts, min and max are left as recorded.
    pub fn set_sum(&mut self, sum: u128) {
        self.sum = sum;
    }

    /// Exact mean (`sum / count`, rounded to f64), `None` when empty.
    pub fn mean(&self) -> Option<f64> {
        (self.total > 0).then(|| self.sum as f64 / self.total as f64)
    }

    /// Number of values above [`max_trackable`](Self::max_trackable), counted in the top bucket.
    pub fn clamped_high(&self) -> u64 {
        self.clamped_high
    }

    /// Number of negative values (from [`record_signed`](Self::record_signed) or
    /// [`record_interval`](Self::record_interval)) recorded as 0.
    pub fn clamped_low(&self) -> u64 {
        self.clamped_low
    }

    /// Highest value with an in-range bucket (`2^b - 1`, by default `2^40 - 1`).
    pub fn max_trackable(&self) -> u64 {
        self.max_trackable
    }

    /// Number of buckets (the length of the dense count array).
    pub fn num_buckets(&self) -> usize {
        self.counts.len()
    }

    /// Index of the bucket `v` is recorded in (the top bucket for values above the range).
    #[inline]
    pub fn bucket_index(&self, v: u64) -> usize {
        if v > self.max_trackable {
            self.counts.len() - 1
        } else {
            raw_index(v)
        }
    }

    /// Inclusive `(low, high)` value range of bucket `index`, `None` past the last bucket.
    pub fn bucket_bounds(&self, index: usize) -> Option<(u64, u64)> {
        (index < self.counts.len()).then(|| raw_bounds(index))
    }

    /// Count in bucket `index` (0 past the last bucket).
    pub fn count_at_index(&self, index: usize) -> u64 {
        self.counts.get(index).copied().unwrap_or(0)
    }

    /// The non-empty buckets in increasing value order as `(low, high, count)`, bounds inclusive.
    /// Values clamped high are in the last bucket even though they exceed its `high`.
    pub fn iter(&self) -> Iter<'_> {
        Iter { counts: &self.counts, index: 0 }
    }

    /// The value at quantile `q` in `0.0 ..= 1.0` (clamped into that range): the highest value of the
    /// bucket holding rank `ceil(q * count)` of the sorted values, clamped to the exact `[min, max]`.
    ///
    /// It is never below the exact answer at that rank and at most `1/128` above it (unless that rank
    /// was clamped high). `q = 0` gives the exact min, `q = 1` the exact max; `None` if the histogram
    /// is empty or `q` is NaN.
    pub fn value_at_quantile(&self, q: f64) -> Option<u64> {
        if self.total == 0 || q.is_nan() {
            return None;
        }
        let q = q.clamp(0.0, 1.0);
        if q == 0.0 {
            return Some(self.min);
        }
        if q == 1.0 {
            return Some(self.max);
        }
        Some(self.bucket_value(self.index_of_rank(rank_for(q, self.total))))
    }

    /// [`value_at_quantile`](Self::value_at_quantile)`(p / 100)` for each percentile `p` (e.g. `99.9`),
    /// in the order given.
    pub fn percentiles(&self, ps: &[f64]) -> Vec<Option<u64>> {
        ps.iter().map(|&p| self.value_at_quantile(p / 100.0)).collect()
    }

    /// Index of the bucket holding the `rank`-th smallest value (`1 ..= total`).
    ///
    /// Scans only between the buckets of the exact min and max, from the nearer end (tail quantiles
    /// such as p99.9 touch a handful of buckets), skipping 32 buckets at a time while the target is
    /// further: chunk sums vectorize, so a query costs well under a microsecond.
    fn index_of_rank(&self, rank: u64) -> usize {
        const CHUNK: usize = 32;
        // Wrapping, not saturating, so the chunk sum vectorizes; the total is below 2^64 anyway.
        let chunk_sum = |c: &[u64]| c.iter().fold(0u64, |a, &x| a.wrapping_add(x));
        let (lo, hi) = (self.bucket_index(self.min), self.bucket_index(self.max));
        if rank <= self.total / 2 {
            let mut seen = 0u64;
            let mut i = lo;
            while i + CHUNK <= hi {
                let s = chunk_sum(&self.counts[i..i + CHUNK]);
                if seen.saturating_add(s) >= rank {
                    break;
                }
                seen += s;
                i += CHUNK;
            }
            while i < hi {
                seen = seen.saturating_add(self.counts[i]);
                if seen >= rank {
                    return i;
                }
                i += 1;
            }
            hi
        } else {
            // The rank-th smallest is the (total - rank + 1)-th largest.
            let need = self.total - rank + 1;
            let mut seen = 0u64;
            let mut end = hi + 1;
            while end > lo + CHUNK {
                let s = chunk_sum(&self.counts[end - CHUNK..end]);
                if seen.saturating_add(s) >= need {
                    break;
                }
                seen += s;
                end -= CHUNK;
            }
            while end > lo + 1 {
                end -= 1;
                seen = seen.saturating_add(self.counts[end]);
                if seen >= need {
                    return end;
                }
            }
            lo
        }
    }

    /// The value reported for bucket `index`: its highest value, tightened by the exact min and max.
    fn bucket_value(&self, index: usize) -> u64 {
        raw_bounds(index).1.clamp(self.min, self.max)
    }
}

/// Rank (1-based) of quantile `q` in `(0, 1)` among `total` sorted values: `ceil(q * total)`, at least 1.
pub(crate) fn rank_for(q: f64, total: u64) -> u64 {
    ((q * total as f64).ceil() as u64).clamp(1, total)
}

/// The value at quantile `q` of `sorted` (ascending) by the one rule of every latscope view:
/// [`Histogram::value_at_quantile`]'s, computed without building a histogram. Rank `ceil(q * n)`
/// (at least 1), then the highest value of the bucket holding the value of that rank, tightened
/// to the exact minimum and maximum; `q = 0` gives the minimum, `q = 1` the maximum. A few values
/// kept exactly (a drill-down table's small groups) thus read the same as the histogram of the
/// same values (a `hist` of that group), never a second opinion 0.78 % away.
pub fn quantile_of_sorted(sorted: &[u64], q: f64) -> Option<u64> {
    let (&min, &max) = (sorted.first()?, sorted.last()?);
    if q.is_nan() {
        return None;
    }
    let q = q.clamp(0.0, 1.0);
    if q == 0.0 {
        return Some(min);
    }
    if q == 1.0 {
        return Some(max);
    }
    let v = sorted[rank_for(q, sorted.len() as u64) as usize - 1];
    Some(raw_bounds(raw_index(v)).1.clamp(min, max))
}

impl fmt::Debug for Histogram {
    /// A summary instead of thousands of counts.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Histogram")
            .field("count", &self.total)
            .field("min", &self.min())
            .field("max", &self.max())
            .field("sum", &self.sum)
            .field("clamped_low", &self.clamped_low)
            .field("clamped_high", &self.clamped_high)
            .field("max_trackable", &self.max_trackable)
            .field("nonempty_buckets", &self.counts.iter().filter(|&&c| c > 0).count())
            .finish()
    }
}

impl Extend<u64> for Histogram {
    /// Records every value of the iterator.
    fn extend<I: IntoIterator<Item = u64>>(&mut self, values: I) {
        for v in values {
            self.record(v);
        }
    }
}

impl FromIterator<u64> for Histogram {
    /// A default-range histogram of the iterator's values.
    fn from_iter<I: IntoIterator<Item = u64>>(values: I) -> Self {
        let mut h = Histogram::new();
        h.extend(values);
        h
    }
}

impl<'a> IntoIterator for &'a Histogram {
    type Item = (u64, u64, u64);
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

/// Iterator over the non-empty buckets of a [`Histogram`], yielding `(low, high, count)`.
#[derive(Clone, Debug)]
pub struct Iter<'a> {
    counts: &'a [u64],
    index: usize,
}

impl Iterator for Iter<'_> {
    type Item = (u64, u64, u64);

    fn next(&mut self) -> Option<Self::Item> {
        while self.index < self.counts.len() {
            let index = self.index;
            self.index += 1;
            let c = self.counts[index];
            if c > 0 {
                let (low, high) = raw_bounds(index);
                return Some((low, high, c));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    use crate::testutil::SplitMix as Rng;

    #[test]
    fn small_values_are_exact() {
        for v in 0..256u64 {
            assert_eq!(raw_index(v), v as usize);
            assert_eq!(raw_bounds(v as usize), (v, v));
        }
        assert_eq!(raw_bounds(256), (256, 257));
        assert_eq!(raw_index(257), 256);
        assert_eq!(raw_index(258), 257);
    }

    #[test]
    fn bucket_counts_per_range() {
        assert_eq!(Histogram::new().num_buckets(), 4352);
        assert_eq!(Histogram::with_max_value(u64::MAX).num_buckets(), 7424);
        assert_eq!(Histogram::with_max_value(0).max_trackable(), 255);
        assert_eq!(Histogram::with_max_value(100_000_000_000).max_trackable(), (1 << 37) - 1);
        let full = Histogram::with_max_value(u64::MAX);
        assert_eq!(full.bucket_bounds(7423), Some((255 << 56, u64::MAX)));
        assert_eq!(full.bucket_index(u64::MAX), 7423);
        assert_eq!(full.bucket_bounds(7424), None);
    }

    #[test]
    fn buckets_tile_the_range_without_gaps() {
        let h = Histogram::new();
        let mut expected_low = 0;
        for i in 0..h.num_buckets() {
            let (lo, hi) = h.bucket_bounds(i).unwrap();
            assert_eq!(lo, expected_low, "bucket {i}");
            assert!(hi >= lo);
            assert_eq!(h.bucket_index(lo), i);
            assert_eq!(h.bucket_index(hi), i);
            expected_low = hi + 1;
        }
        assert_eq!(expected_low, 1 << 40);
    }

    #[test]
    fn empty_histogram() {
        let h = Histogram::new();
        assert_eq!(h.count(), 0);
        assert!(h.is_empty());
        assert_eq!((h.min(), h.max(), h.mean()), (None, None, None));
        assert_eq!(h.value_at_quantile(0.5), None);
        assert_eq!(h.percentiles(&[50.0, 99.0]), vec![None, None]);
        assert_eq!(h.iter().count(), 0);
    }

    #[test]
    fn zero_is_a_value() {
        let mut h = Histogram::new();
        h.record(0);
        h.record_n(0, 2);
        h.record(1);
        assert_eq!(h.count(), 4);
        assert_eq!(h.iter().collect::<Vec<_>>(), vec![(0, 0, 3), (1, 1, 1)]);
        assert_eq!(h.value_at_quantile(0.75), Some(0));
        assert_eq!(h.value_at_quantile(0.76), Some(1));
        assert_eq!(h.clamped_low(), 0);
    }

    #[test]
    fn clamping_is_counted_not_an_error() {
        let mut h = Histogram::with_max_value(1000); // top = 1023
        h.record(5000);
        h.record_n(u64::MAX, 3);
        h.record_signed(-7);
        h.record_interval(10, 4);
        h.record_interval(4, 10);
        assert_eq!(h.clamped_high(), 4);
        assert_eq!(h.clamped_low(), 2);
        assert_eq!(h.count(), 7);
        assert_eq!(h.max(), Some(u64::MAX));
        assert_eq!(h.min(), Some(0));
        assert_eq!(h.count_at_index(h.num_buckets() - 1), 4);
        assert_eq!(h.count_at_index(0), 2);
        assert_eq!(h.count_at_index(6), 1);
        assert_eq!(h.sum(), 5000 + 3 * u128::from(u64::MAX) + 6);
        // The top bucket's answer is its bound: the clamped values carry no error guarantee.
        assert_eq!(h.value_at_quantile(0.9), Some(1023));
        assert_eq!(h.value_at_quantile(1.0), Some(u64::MAX));
    }

    #[test]
    fn quantile_edges_and_nan() {
        let h: Histogram = [1000u64, 2000, 3000, 4000].into_iter().collect();
        assert_eq!(h.value_at_quantile(0.0), Some(1000));
        assert_eq!(h.value_at_quantile(-3.0), Some(1000));
        assert_eq!(h.value_at_quantile(1.0), Some(4000));
        assert_eq!(h.value_at_quantile(7.0), Some(4000));
        assert_eq!(h.value_at_quantile(f64::NAN), None);
        // rank ceil(0.5 * 4) = 2 -> 2000's bucket [2000, 2007].
        assert_eq!(h.value_at_quantile(0.5), Some(2007));
        assert_eq!(h.value_at_quantile(0.51), Some(3000 + 7));
        assert_eq!(h.percentiles(&[100.0, 50.0, f64::NAN, 0.0]), vec![Some(4000), Some(2007), None, Some(1000)]);
        assert_eq!(h.mean(), Some(2500.0));
    }

    #[test]
    fn a_few_sorted_values_give_the_histograms_percentiles() {
        let mut rng = Rng(11);
        for n in [1usize, 2, 3, 7, 100, 256, 1000] {
            let mut v: Vec<u64> = (0..n).map(|_| rng.log_value(30)).collect();
            let h: Histogram = v.iter().copied().collect();
            v.sort_unstable();
            for q in [0.0, 0.001, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0] {
                assert_eq!(quantile_of_sorted(&v, q), h.value_at_quantile(q), "n {n} q {q}");
            }
        }
        assert_eq!(quantile_of_sorted(&[], 0.5), None);
        assert_eq!(quantile_of_sorted(&[5], f64::NAN), None);
    }

    #[test]
    fn reset_keeps_range() {
        let mut h = Histogram::with_max_value(1 << 20);
        h.extend([1, 2, 3, 1 << 30]);
        h.reset();
        assert_eq!(h, Histogram::with_max_value(1 << 20));
    }

    #[test]
    fn merge_into_smaller_range_clamps() {
        let mut small = Histogram::with_max_value(1000);
        let mut big = Histogram::new();
        big.extend([10, 100_000, 200_000]);
        big.record(1 << 50); // clamped in `big` already
        small.merge(&big);
        assert_eq!(small.count(), 4);
        assert_eq!(small.clamped_high(), 3);
        assert_eq!(small.count_at_index(small.num_buckets() - 1), 3);
        assert_eq!(small.max(), Some(1 << 50));
        // And the other way round nothing is clamped.
        let mut big2 = Histogram::new();
        let mut small2 = Histogram::with_max_value(1000);
        small2.extend([10, 20]);
        big2.merge(&small2);
        assert_eq!(big2.clamped_high(), 0);
        assert_eq!(big2.iter().collect::<Vec<_>>(), vec![(10, 10, 1), (20, 20, 1)]);
    }

    #[test]
    fn debug_is_a_summary() {
        let h: Histogram = [5u64].into_iter().collect();
        let s = format!("{h:?}");
        assert!(s.contains("count: 1") && s.contains("nonempty_buckets: 1"), "{s}");
    }

    proptest! {
        #[test]
        fn every_value_lies_in_its_bucket(v in any::<u64>()) {
            let h = Histogram::with_max_value(u64::MAX);
            let (lo, hi) = h.bucket_bounds(h.bucket_index(v)).unwrap();
            prop_assert!(lo <= v && v <= hi);
            // The bucket is at most 1/128 of its low end wide: the documented error bound.
            prop_assert!(lo < 256 && lo == hi || (hi - lo + 1) as f64 <= lo as f64 * MAX_RELATIVE_ERROR);
            prop_assert!((hi - v) as f64 <= v as f64 * MAX_RELATIVE_ERROR);
        }

        #[test]
        fn quantiles_within_error(seed in any::<u64>(), n in 1usize..2000, qs in prop::collection::vec(0.0f64..=1.0, 1..8)) {
            let mut rng = Rng(seed);
            let mut values: Vec<u64> = (0..n).map(|_| rng.log_value(40) - 1).collect();
            let h: Histogram = values.iter().copied().collect();
            values.sort_unstable();
            let ps: Vec<f64> = qs.iter().map(|q| q * 100.0).collect();
            let batch = h.percentiles(&ps);
            for (&q, b) in qs.iter().zip(batch) {
                let got = h.value_at_quantile(q).unwrap();
                let exact = if q == 0.0 { values[0] } else { values[rank_for(q, n as u64) as usize - 1] };
                prop_assert!(got >= exact, "q={} got={} exact={}", q, got, exact);
                prop_assert!(got as f64 <= exact as f64 * (1.0 + MAX_RELATIVE_ERROR), "q={} got={} exact={}", q, got, exact);
                // `percentiles` is the same answer for q2 = (q * 100) / 100 (equal to q up to rounding).
                let q2 = q * 100.0 / 100.0;
                let exact2 = if q2 == 0.0 { values[0] } else { values[rank_for(q2, n as u64) as usize - 1] };
                prop_assert_eq!(b, h.value_at_quantile(q2));
                let b = b.unwrap();
                prop_assert!(b >= exact2 && b as f64 <= exact2 as f64 * (1.0 + MAX_RELATIVE_ERROR));
            }
            prop_assert_eq!(h.min(), Some(values[0]));
            prop_assert_eq!(h.max(), Some(values[n - 1]));
            prop_assert_eq!(h.sum(), values.iter().map(|&v| u128::from(v)).sum::<u128>());
        }

        #[test]
        fn merge_equals_recording_the_union(seed in any::<u64>(), na in 0usize..400, nb in 0usize..400) {
            let mut rng = Rng(seed);
            let a: Vec<u64> = (0..na).map(|_| rng.log_value(44)).collect();
            let b: Vec<u64> = (0..nb).map(|_| rng.log_value(44)).collect();
            let (mut ha, mut hb, mut union) = (Histogram::new(), Histogram::new(), Histogram::new());
            for &v in &a { ha.record(v); union.record(v); }
            for &v in &b { hb.record(v); union.record(v); }
            ha.merge(&hb);
            prop_assert_eq!(ha, union);
        }

        #[test]
        fn record_slice_equals_recording_each(values in prop::collection::vec(any::<u64>().prop_map(|v| v >> (v % 64)), 0..400),
                                              bits in 8u32..=64, split in 0usize..400) {
            // Clamped values (above the range of a small histogram) included; two slices in a row.
            let (mut each, mut slices) = (Histogram::with_max_bits(bits), Histogram::with_max_bits(bits));
            for &v in &values { each.record(v); }
            let (a, b) = values.split_at(split.min(values.len()));
            slices.record_slice(a);
            slices.record_slice(b);
            prop_assert_eq!(slices, each);
        }

        #[test]
        fn merge_across_ranges_equals_union(a in prop::collection::vec(any::<u64>().prop_map(|v| v >> (v % 64)), 0..200),
                                            b in prop::collection::vec(any::<u64>().prop_map(|v| v >> (v % 64)), 0..200),
                                            bits_a in 8u32..=64, bits_b in 8u32..=64) {
            let mut ha = Histogram::with_max_bits(bits_a);
            let mut hb = Histogram::with_max_bits(bits_b);
            let mut union = Histogram::with_max_bits(bits_a);
            for &v in &a { ha.record(v); union.record(v); }
            // Values `hb` itself had to clamp have lost their position; only in-range ones can match.
            let top_b = hb.max_trackable();
            for &v in b.iter().filter(|&&v| v <= top_b) { hb.record(v); union.record(v); }
            ha.merge(&hb);
            prop_assert_eq!(ha, union);
        }

        #[test]
        fn iter_sums_to_count(values in prop::collection::vec(any::<u64>(), 0..500)) {
            let h: Histogram = values.iter().copied().collect();
            prop_assert_eq!(h.iter().map(|(_, _, c)| c).sum::<u64>(), values.len() as u64);
            prop_assert_eq!(h.clamped_high(), values.iter().filter(|&&v| v >= 1 << 40).count() as u64);
        }
    }
}
