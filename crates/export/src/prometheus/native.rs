//! latscope histograms as Prometheus native histograms.

use latscope_hist::{Histogram, PrometheusSpan, MAX_EXPORT_SCALE, MIN_PROMETHEUS_SCHEMA};

/// Nanoseconds to seconds, Prometheus' base unit of time.
pub const NS_TO_SECONDS: f64 = 1e-9;

/// The zero threshold Prometheus' own client libraries use by default (2^-128): only 0 is in the
/// zero bucket.
pub const DEFAULT_ZERO_THRESHOLD: f64 = 2.938_735_877_055_719e-39;

/// How to turn a [`Histogram`] into a [`NativeHistogram`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NativeOptions {
    /// Value of one recorded unit in the exported unit: [`NS_TO_SECONDS`] for latencies (the
    /// default), 1 for bytes.
    pub unit: f64,
    /// Schema: buckets grow by `2^(2^-schema)`, -4 (x 65536) to 8 (+0.27 %). The default comes
    /// from a 5 % resolution ([`schema_for_resolution`]): 4.
    pub schema: i8,
    /// At most this many non-empty buckets (0: no limit): the schema is lowered (each step merges
    /// pairs of buckets) until the histogram fits, as Prometheus' clients do. Default 160.
    pub max_buckets: usize,
    /// Values up to this many exported units count in the zero bucket (default
    /// [`DEFAULT_ZERO_THRESHOLD`]).
    pub zero_threshold: f64,
}

impl Default for NativeOptions {
    fn default() -> Self {
        NativeOptions {
            unit: NS_TO_SECONDS,
            schema: schema_for_resolution(0.05),
            max_buckets: 160,
            zero_threshold: DEFAULT_ZERO_THRESHOLD,
        }
    }
}

impl NativeOptions {
    /// These options with the schema chosen for `resolution` (see [`schema_for_resolution`]).
    pub fn with_resolution(mut self, resolution: f64) -> Self {
        self.schema = schema_for_resolution(resolution);
        self
    }
}

/// Relative width of the buckets of a schema, `2^(2^-schema) - 1`: a value reported as its
/// bucket's upper bound is at most this much above the true value (8: 0.27 %, 5: 2.2 %,
/// 3: 9.1 %, 0: 100 %).
pub fn schema_resolution(schema: i8) -> f64 {
    2f64.powf(2f64.powi(-i32::from(schema))) - 1.0
}

/// The coarsest schema (fewest buckets) whose buckets are at most `resolution` wide relative to
/// their lower bound, within the schemas Prometheus accepts (-4 to 8). `0.01` gives 7 (0.54 %),
/// `0.05` gives 4 (4.4 %), `0.1` gives 3 (9.1 %); 8 for anything finer than 0.27 %, or not a
/// positive number.
pub fn schema_for_resolution(resolution: f64) -> i8 {
    (MIN_PROMETHEUS_SCHEMA..=MAX_EXPORT_SCALE).find(|&s| schema_resolution(s) <= resolution).unwrap_or(MAX_EXPORT_SCALE)
}

/// A Prometheus native histogram: sparse exponential buckets in Prometheus' own index convention
/// (bucket `i` holds values in `(base^(i-1), base^i]`, `base = 2^(2^-schema)`), as spans of
/// consecutive buckets and delta-encoded counts, ready for the protobuf exposition format.
#[derive(Debug, Clone, PartialEq)]
pub struct NativeHistogram {
    /// Bucket schema, -4 to 8.
    pub schema: i8,
    /// Upper bound of the zero bucket, in exported units.
    pub zero_threshold: f64,
    /// Values in the zero bucket.
    pub zero_count: u64,
    /// All values.
    pub count: u64,
    /// Sum of the values, in exported units.
    pub sum: f64,
    /// Runs of consecutive non-empty buckets: the first offset is the first bucket's index, each
    /// next one the gap after the previous span.
    pub spans: Vec<PrometheusSpan>,
    /// Bucket counts, each as the difference to the previous bucket's (the first to 0).
    pub deltas: Vec<i64>,
}

impl NativeHistogram {
    /// `h` as a native histogram with options `o` (see [`NativeOptions`]).
    ///
    /// Each of `h`'s buckets (1/128 wide) goes whole to the exponential bucket holding its
    /// midpoint, so a value can move by at most 0.39 % across a bucket boundary; counts and the sum
    /// are exact.
    pub fn from_histogram(h: &Histogram, o: &NativeOptions) -> NativeHistogram {
        let mut schema = o.schema.clamp(MIN_PROMETHEUS_SCHEMA, MAX_EXPORT_SCALE);
        loop {
            let n = Self::at_schema(h, o, schema);
            if o.max_buckets == 0 || n.bucket_count() <= o.max_buckets || schema == MIN_PROMETHEUS_SCHEMA {
                return n;
            }
            schema -= 1;
        }
    }

    fn at_schema(h: &Histogram, o: &NativeOptions, schema: i8) -> NativeHistogram {
        let mut e = h.to_exponential_scaled(schema, o.unit);
        // Buckets entirely at or below the zero threshold join the zero bucket.
        let threshold = o.zero_threshold.max(0.0);
        let mut zero_count = e.zero_count;
        let below = (0..e.counts.len()).take_while(|&j| e.bucket_bounds(j).1 <= threshold).count();
        zero_count += e.counts.drain(..below).sum::<u64>();
        e.offset += below as i32;
        let (spans, deltas) = e.prometheus_spans();
        NativeHistogram {
            schema: e.scale,
            zero_threshold: threshold,
            zero_count,
            count: e.count,
            sum: e.sum,
            spans,
            deltas,
        }
    }

    /// Number of non-empty buckets (the zero bucket not counted).
    pub fn bucket_count(&self) -> usize {
        self.spans.iter().map(|s| s.length as usize).sum()
    }

    /// The bucket growth factor `2^(2^-schema)`.
    pub fn base(&self) -> f64 {
        2f64.powf(2f64.powi(-i32::from(self.schema)))
    }

    /// `(upper bound, count)` of every non-empty bucket, ascending (decoded spans and deltas).
    pub fn buckets(&self) -> Vec<(f64, u64)> {
        let mut out = Vec::with_capacity(self.deltas.len());
        let mut deltas = self.deltas.iter();
        let mut index = 0i64;
        let mut count = 0i64;
        for s in &self.spans {
            // The first offset is an index, each later one the gap after the previous span.
            index += i64::from(s.offset);
            for _ in 0..s.length {
                count += deltas.next().copied().unwrap_or(0);
                let upper = 2f64.powf(index as f64 * 2f64.powi(-i32::from(self.schema)));
                out.push((upper, count.max(0) as u64));
                index += 1;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_from_resolutions() {
        assert_eq!(schema_for_resolution(0.01), 7);
        assert_eq!(schema_for_resolution(0.05), 4);
        assert_eq!(schema_for_resolution(0.1), 3);
        assert_eq!(schema_for_resolution(1.0), 0);
        assert_eq!(schema_for_resolution(1e-6), 8);
        assert_eq!(schema_for_resolution(f64::NAN), 8);
        assert_eq!(schema_for_resolution(1e9), -4);
        assert!((schema_resolution(3) - 0.0905).abs() < 1e-3);
    }

    #[test]
    fn ten_ms_sleeps_land_in_the_bucket_of_ten_ms() {
        let h: Histogram = (0..100).map(|i| 10_050_000 + i * 1000).collect();
        let n = NativeHistogram::from_histogram(&h, &NativeOptions { schema: 8, ..Default::default() });
        assert_eq!(n.count, 100);
        assert_eq!(n.zero_count, 0);
        assert!((n.sum - h.sum() as f64 * 1e-9).abs() < 1e-12);
        let b = n.buckets();
        assert_eq!(b.iter().map(|x| x.1).sum::<u64>(), 100);
        // Every bucket's range overlaps 10.05 ms ..= 10.15 ms (give or take half a source bucket).
        for &(upper, _) in &b {
            let lower = upper / n.base();
            assert!(lower < 0.01015 * 1.004 && upper >= 0.01005 / 1.004, "({lower}, {upper}]");
        }
    }

    #[test]
    fn max_buckets_lowers_the_schema() {
        let h: Histogram = (0..40).map(|e| 1u64 << e).collect();
        let fine =
            NativeHistogram::from_histogram(&h, &NativeOptions { schema: 8, max_buckets: 0, ..Default::default() });
        assert_eq!(fine.bucket_count(), 40);
        let few =
            NativeHistogram::from_histogram(&h, &NativeOptions { schema: 8, max_buckets: 10, ..Default::default() });
        assert!(few.bucket_count() <= 10, "{}", few.bucket_count());
        assert!(few.schema < 0);
        assert_eq!(few.buckets().iter().map(|b| b.1).sum::<u64>(), 40);
    }

    #[test]
    fn zero_threshold_takes_small_values() {
        let h: Histogram = [0u64, 500, 2_000, 1_000_000].into_iter().collect();
        let o = NativeOptions { zero_threshold: 1e-6, schema: 3, ..Default::default() };
        let n = NativeHistogram::from_histogram(&h, &o);
        assert_eq!(n.zero_count, 2); // 0 and 500 ns are at most 1 µs
        assert_eq!(n.buckets().iter().map(|b| b.1).sum::<u64>(), 2);
        assert!(n.buckets()[0].0 > 1e-6);
        let empty = NativeHistogram::from_histogram(&Histogram::new(), &NativeOptions::default());
        assert_eq!((empty.count, empty.spans.len()), (0, 0));
    }
}
