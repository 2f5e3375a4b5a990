//! Conversions to metric formats: OpenTelemetry exponential histograms, Prometheus native histograms
//! and classic Prometheus cumulative `le` buckets.

use crate::histogram::Histogram;

/// Finest scale/schema exported: 256 buckets per octave, already finer than our 128. Higher scales
/// would only spread our buckets over more, mostly empty, exponential buckets (and allocate for them).
pub const MAX_EXPORT_SCALE: i8 = 8;
/// Coarsest OpenTelemetry scale (base 2^1024 covers all of u64 in one bucket).
pub const MIN_OTEL_SCALE: i8 = -10;
/// Coarsest Prometheus native-histogram schema Prometheus accepts (base 2^16).
pub const MIN_PROMETHEUS_SCHEMA: i8 = -4;

/// A base-2 exponential histogram of non-negative values, as OpenTelemetry's
/// `ExponentialHistogramDataPoint` and Prometheus' native histograms describe it.
///
/// **Index convention: OpenTelemetry's.** With `base = 2^(2^-scale)`, `counts[j]` counts the values in
/// `(base^i, base^(i+1)]` for `i = offset + j` (lower-exclusive, upper-inclusive). Prometheus numbers
/// the same bucket `i + 1` (its bucket `i` is `(base^(i-1), base^i]`);
/// [`prometheus_spans`](Self::prometheus_spans) applies that shift. Value 0 is counted in
/// `zero_count` (zero threshold 0); no negative buckets exist.
#[derive(Clone, Debug, PartialEq)]
pub struct ExponentialHistogram {
    /// OpenTelemetry `scale` = Prometheus `schema`.
    pub scale: i8,
    /// Number of recorded zeros.
    pub zero_count: u64,
    /// Exponential index of `counts[0]` (OpenTelemetry convention).
    pub offset: i32,
    /// Dense positive-bucket counts from `offset` on; empty when every value was 0.
    pub counts: Vec<u64>,
    /// Total number of values, `zero_count` included.
    pub count: u64,
    /// Exact sum of the values, as f64.
    pub sum: f64,
    /// Exact minimum, `None` when empty.
    pub min: Option<u64>,
    /// Exact maximum, `None` when empty.
    pub max: Option<u64>,
}

/// A run of consecutive non-empty Prometheus buckets: `offset` is the gap from the end of the previous
/// span (from index 0 for the first one), in Prometheus' index convention.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrometheusSpan {
    /// Gap before this span (absolute index for the first span).
    pub offset: i32,
    /// Number of buckets in the span.
    pub length: u32,
}

impl ExponentialHistogram {
    /// The bucket growth factor `2^(2^-scale)`.
    pub fn base(&self) -> f64 {
        2f64.powf(2f64.powi(-i32::from(self.scale)))
    }

    /// `(lower, upper)` of `counts[j]`: values `v` with `lower < v <= upper`.
    pub fn bucket_bounds(&self, j: usize) -> (f64, f64) {
        let i = i64::from(self.offset) + j as i64;
        (exp_bound(i, self.scale), exp_bound(i + 1, self.scale))
    }

    /// Prometheus' sparse form: spans and delta-encoded counts (each count minus the previous one, the
    /// first against 0), with indexes shifted by +1 to Prometheus' `(base^(i-1), base^i]` convention.
    pub fn prometheus_spans(&self) -> (Vec<PrometheusSpan>, Vec<i64>) {
        let mut spans: Vec<PrometheusSpan> = Vec::new();
        let mut deltas = Vec::new();
        let mut prev_count = 0i64;
        let mut prev_end: Option<i32> = None;
        for (j, &c) in self.counts.iter().enumerate() {
            if c == 0 {
                continue;
            }
            let index = self.offset + j as i32 + 1;
            match (prev_end, spans.last_mut()) {
                (Some(end), Some(span)) if end == index => span.length += 1,
                _ => spans.push(PrometheusSpan { offset: index - prev_end.unwrap_or(0), length: 1 }),
            }
            prev_end = Some(index + 1);
            let c = i64::try_from(c).unwrap_or(i64::MAX);
            deltas.push(c - prev_count);
            prev_count = c;
        }
        (spans, deltas)
    }
}

/// `base^i = 2^(i * 2^-scale)`.
fn exp_bound(i: i64, scale: i8) -> f64 {
    2f64.powf(i as f64 * 2f64.powi(-i32::from(scale)))
}

/// OpenTelemetry index of the bucket `(base^i, base^(i+1)]` holding `x > 0`.
fn exp_index(x: f64, scale: i8) -> i32 {
    // ceil(log_base(x)) - 1; log2 and the power-of-two factor are exact for powers of two, which are
    // exactly the bucket boundaries at scale <= 0 and many of them above.
    let l = x.log2() * 2f64.powi(i32::from(scale));
    let mut i = l.ceil() as i64 - 1;
    // One correction step each way against rounding of log2 for values right at a boundary.
    if x <= exp_bound(i, scale) {
        i -= 1;
    } else if x > exp_bound(i + 1, scale) {
        i += 1;
    }
    i as i32
}

impl Histogram {
    /// This histogram as an OpenTelemetry exponential histogram of the given `scale`, clamped to
    /// `MIN_OTEL_SCALE ..= MAX_EXPORT_SCALE` (-10..=8).
    ///
    /// Each of our buckets goes whole to the exponential bucket containing its midpoint
    /// `(low + high) / 2`; width-1 buckets (values below 256) are therefore placed exactly, wider ones
    /// can move values by at most half a bucket (0.39 %) across an exponential boundary.
    pub fn to_exponential(&self, scale: i8) -> ExponentialHistogram {
        self.to_exponential_scaled(scale, 1.0)
    }

    /// Like [`to_exponential`](Self::to_exponential), with every value multiplied by `unit` first:
    /// the bucket boundaries are powers of the base in the exported unit (`unit = 1e-9` exports
    /// nanoseconds as seconds, Prometheus' base unit). `sum` is in the exported unit; `min` and
    /// `max` stay exact integers in the recorded unit. A `unit` that is not finite and positive is
    /// taken as 1.
    pub fn to_exponential_scaled(&self, scale: i8, unit: f64) -> ExponentialHistogram {
        let unit = if unit.is_finite() && unit > 0.0 { unit } else { 1.0 };
        let scale = scale.clamp(MIN_OTEL_SCALE, MAX_EXPORT_SCALE);
        let mut zero_count = 0;
        let mut placed: Vec<(i32, u64)> = Vec::new();
        for (low, high, c) in self.iter() {
            if high == 0 {
                zero_count += c;
                continue;
            }
            let mid = (low as f64 + high as f64) / 2.0 * unit;
            placed.push((exp_index(mid, scale), c));
        }
        let (offset, counts) = match (placed.first(), placed.last()) {
            (Some(&(first, _)), Some(&(last, _))) => {
                // Midpoints increase with our index, so exponential indexes are non-decreasing.
                let mut counts = vec![0u64; (last - first) as usize + 1];
                for (i, c) in placed {
                    let slot = &mut counts[(i - first) as usize];
                    *slot = slot.saturating_add(c);
                }
                (first, counts)
            }
            _ => (0, Vec::new()),
        };
        ExponentialHistogram {
            scale,
            zero_count,
            offset,
            counts,
            count: self.count(),
            sum: self.sum() as f64 * unit,
            min: self.min(),
            max: self.max(),
        }
    }

    /// Like [`to_exponential`](Self::to_exponential) with the schema clamped to the range Prometheus
    /// accepts (`-4 ..= 8`). The result keeps the OpenTelemetry index convention; use
    /// [`ExponentialHistogram::prometheus_spans`] for Prometheus' own indexes.
    pub fn to_prometheus_native(&self, schema: i8) -> ExponentialHistogram {
        self.to_exponential(schema.clamp(MIN_PROMETHEUS_SCHEMA, MAX_EXPORT_SCALE))
    }

    /// Classic Prometheus `le` buckets: for each bound `b` (any order), the number of values `<= b`,
    /// followed by the `+Inf` bucket (the total count); length `bounds.len() + 1`.
    ///
    /// Exact when `b` is a bucket's upper end, below the minimum or at least the maximum. Otherwise the
    /// one bucket straddling `b` counts as `<= b` iff its midpoint is, so only values within 0.78 % of
    /// `b` can be misattributed.
    pub fn to_cumulative_le(&self, bounds: &[u64]) -> Vec<u64> {
        // Cumulative counts per bucket, so that each bound costs one index computation.
        let mut cumulative = Vec::with_capacity(self.counts.len());
        let mut seen = 0u64;
        for &c in &self.counts {
            seen = seen.saturating_add(c);
            cumulative.push(seen);
        }
        let mut out: Vec<u64> = bounds
            .iter()
            .map(|&b| match (self.min(), self.max()) {
                (Some(min), Some(max)) if b >= min && b < max => {
                    let index = self.bucket_index(b);
                    let (low, high) = self.bucket_bounds(index).unwrap_or((b, b));
                    let mid_included = (low as f64 + high as f64) / 2.0 <= b as f64;
                    if high == b || mid_included {
                        cumulative[index]
                    } else {
                        index.checked_sub(1).map_or(0, |i| cumulative[i])
                    }
                }
                (Some(_), Some(max)) if b >= max => self.count(),
                _ => 0,
            })
            .collect();
        out.push(self.count());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::SplitMix as Rng;
    use proptest::prelude::*;

    #[test]
    fn boundaries_are_upper_inclusive() {
        // scale 0: buckets (1,2], (2,4], (4,8]...; index i covers (2^i, 2^(i+1)].
        assert_eq!(exp_index(1.0, 0), -1);
        assert_eq!(exp_index(2.0, 0), 0);
        assert_eq!(exp_index(2.5, 0), 1);
        assert_eq!(exp_index(4.0, 0), 1);
        assert_eq!(exp_index(1024.0, 3), 79);
        assert_eq!(exp_index(1025.0, 3), 80);
        assert_eq!(exp_index(4.0, -1), 0); // base 4: (1, 4]
        assert_eq!(exp_index(5.0, -1), 1);
        for scale in MIN_OTEL_SCALE..=MAX_EXPORT_SCALE {
            for x in [1.0, 3.0, 1000.0, 123_456_789.0, 1e19] {
                let i = exp_index(x, scale);
                assert!(exp_bound(i as i64, scale) < x && x <= exp_bound(i as i64 + 1, scale), "{x} {scale}");
            }
        }
    }

    #[test]
    fn exponential_export() {
        let mut h = Histogram::new();
        h.record_n(0, 5);
        h.extend([1, 2, 3, 4]);
        let e = h.to_exponential(0);
        assert_eq!(e.zero_count, 5);
        assert_eq!(e.count, 9);
        assert_eq!(e.offset, -1);
        assert_eq!(e.counts, vec![1, 1, 2]); // 1 in (0.5,1], 2 in (1,2], 3 and 4 in (2,4]
        assert_eq!(e.bucket_bounds(2), (2.0, 4.0));
        assert_eq!(e.base(), 2.0);
        let (spans, deltas) = e.prometheus_spans();
        assert_eq!(spans, vec![PrometheusSpan { offset: 0, length: 3 }]);
        assert_eq!(deltas, vec![1, 0, 1]);
        assert_eq!(h.to_prometheus_native(-9).scale, -4);
        assert_eq!(h.to_exponential(20).scale, 8);
        let only_zero: Histogram = [0u64].into_iter().collect();
        assert_eq!(only_zero.to_exponential(3).counts, Vec::<u64>::new());
        assert_eq!(Histogram::new().to_exponential(3).count, 0);
    }

    #[test]
    fn scaled_export_buckets_in_the_exported_unit() {
        // 10 ms in ns, exported in seconds at scale 0: 0.01 s is in (2^-7, 2^-6].
        let h: Histogram = [10_000_000u64, 0].into_iter().collect();
        let e = h.to_exponential_scaled(0, 1e-9);
        assert_eq!(e.zero_count, 1);
        assert_eq!(e.offset, -7);
        assert_eq!(e.counts, vec![1]);
        assert!((e.sum - 0.01).abs() < 1e-12);
        assert_eq!(e.max, Some(10_000_000));
        assert_eq!(h.to_exponential_scaled(3, f64::NAN), h.to_exponential(3));
    }

    #[test]
    fn prometheus_spans_split_on_gaps() {
        let h: Histogram = [3u64, 100, 100, 1000].into_iter().collect();
        let e = h.to_prometheus_native(0);
        // OTel indexes 1 (3), 6 (100), 9 (1000) -> Prometheus 2, 7, 10.
        assert_eq!(e.offset, 1);
        let (spans, deltas) = e.prometheus_spans();
        assert_eq!(
            spans,
            vec![
                PrometheusSpan { offset: 2, length: 1 },
                PrometheusSpan { offset: 4, length: 1 },
                PrometheusSpan { offset: 2, length: 1 }
            ]
        );
        assert_eq!(deltas, vec![1, 1, -1]);
    }

    #[test]
    fn cumulative_le() {
        let h: Histogram = [5u64, 10, 1000, 5_000_000, 5_000_000, 7_000_000].into_iter().collect();
        // 1000 is the low end of bucket [1000, 1003] whose midpoint is above 1000: the documented
        // midpoint rule leaves it out, one of the cases the 0.78 % caveat is about.
        assert_eq!(
            h.to_cumulative_le(&[1, 5, 10, 999, 1000, 1003, 5_000_000, 10_000_000]),
            vec![0, 1, 2, 2, 2, 3, 5, 6, 6]
        );
        assert_eq!(h.to_cumulative_le(&[]), vec![6]);
        assert_eq!(Histogram::new().to_cumulative_le(&[1, 2]), vec![0, 0, 0]);
    }

    proptest! {
        #[test]
        fn exponential_counts_add_up_and_contain_values(seed in any::<u64>(), n in 1usize..500, scale in -10i8..=8) {
            let mut rng = Rng(seed);
            let values: Vec<u64> = (0..n).map(|_| rng.log_value(40) - 1).collect();
            let h: Histogram = values.iter().copied().collect();
            let e = h.to_exponential(scale);
            prop_assert_eq!(e.zero_count + e.counts.iter().sum::<u64>(), n as u64);
            // Width-1 buckets are placed exactly: each small value lies within its exponential bucket.
            for &v in values.iter().filter(|&&v| (1..256).contains(&v)) {
                let i = exp_index(v as f64, e.scale) - e.offset;
                prop_assert!(e.counts[i as usize] > 0);
                let (lo, hi) = e.bucket_bounds(i as usize);
                prop_assert!(lo < v as f64 && v as f64 <= hi);
            }
        }

        #[test]
        fn cumulative_le_is_monotone_and_near_exact(seed in any::<u64>(), n in 1usize..500,
                                                     mut bounds in prop::collection::vec(0u64..1 << 40, 0..10)) {
            let mut rng = Rng(seed);
            let values: Vec<u64> = (0..n).map(|_| rng.log_value(40) - 1).collect();
            let h: Histogram = values.iter().copied().collect();
            bounds.sort_unstable();
            let le = h.to_cumulative_le(&bounds);
            prop_assert!(le.windows(2).all(|w| w[0] <= w[1]));
            for (&b, &got) in bounds.iter().zip(&le) {
                // Exact for values outside the straddling bucket.
                let sure = values.iter().filter(|&&v| v as f64 <= b as f64 * (1.0 - 1.0 / 128.0)).count() as u64;
                let maybe = values.iter().filter(|&&v| v as f64 <= b as f64 * (1.0 + 1.0 / 128.0)).count() as u64;
                prop_assert!(sure <= got && got <= maybe, "b={} got={} sure={} maybe={}", b, got, sure, maybe);
            }
        }
    }
}
