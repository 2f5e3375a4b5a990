//! High-resolution latency histograms for latscope.
//!
//! [`Histogram`] counts `u64` values (nanoseconds, or bytes) in log-linear buckets, HdrHistogram-style.
//! It is the one aggregate every latscope view is built from: terminal histograms and heat maps
//! ([`Histogram::regroup`]), peak explanations ([`Histogram::peaks`]), stored traces
//! ([`Histogram::to_bytes`]) and metrics export ([`Histogram::to_exponential`], [`Histogram::to_exponential_scaled`],
//! [`Histogram::to_prometheus_native`], [`Histogram::to_cumulative_le`]).
//!
//! # Bucket scheme
//!
//! With `S = 7` ([`SUB_BUCKET_BITS`]) and `M = 2^S = 128` ([`SUB_BUCKETS`]):
//!
//! * values `0 ..= 255` each have their own bucket (width 1, exact; value 0 is a bucket like any other);
//! * every octave `[2^k, 2^(k+1))` with `k >= 8` is split into `M = 128` linear sub-buckets of width
//!   `2^(k-7)`.
//!
//! The index of value `v` is computed without branches or loops:
//!
//! ```text
//! k     = 63 - leading_zeros(v | 128)      // octave, at least 7
//! shift = k - 7
//! index = shift * 128 + (v >> shift)
//! ```
//!
//! Bucket `index` covers the inclusive range `[low, low + 2^shift - 1]` with
//! `shift = max(index / 128, 1) - 1` and `low = (index - shift * 128) << shift`; see
//! [`Histogram::bucket_bounds`].
//!
//! By default values up to `2^40 - 1` (about 1099.5 s, or 1 TiB) are tracked: 4352 buckets, 34 KiB,
//! allocated once in [`Histogram::new`]. [`Histogram::with_max_value`] chooses another top (up to
//! `u64::MAX`, 7424 buckets). Larger values are recorded in the top bucket and counted in
//! [`Histogram::clamped_high`]; negative inputs to [`Histogram::record_signed`] /
//! [`Histogram::record_interval`] are recorded as 0 and counted in [`Histogram::clamped_low`].
//! Recording never fails and never panics.
//!
//! # Error bound
//!
//! A bucket is at most `1/128` of its lowest value wide (`2^(k-7) / 2^k`), and values below 256 are
//! exact. Any value reported for a bucket — its highest value, as [`Histogram::value_at_quantile`]
//! does — is therefore within **`1/128 = 0.78125 %`** relative error ([`MAX_RELATIVE_ERROR`]) of every
//! value recorded in it, never below it. This is the same resolution as HdrHistogram with 2 significant
//! digits. Values that were clamped high carry no bound. `min`, `max`, `sum` and `count` are exact.
//!
//! # Quantile semantics
//!
//! [`Histogram::value_at_quantile`]`(q)` takes the rank `r = ceil(q * count)` (at least 1) of the sorted
//! recorded values and returns the highest value of the bucket that holds that rank, clamped to the
//! exact `[min, max]`. The result `x` satisfies `exact <= x <= exact * (1 + 1/128)` where `exact` is
//! the `r`-th smallest recorded value. `q = 0` returns the exact minimum, `q = 1` the exact maximum,
//! an empty histogram or a NaN `q` returns `None`.
//!
//! # Example
//!
//! ```
//! use latscope_hist::Histogram;
//!
//! let mut h = Histogram::new();
//! for v in [50_000u64, 51_000, 49_000, 5_000_000] {
//!     h.record(v);
//! }
//! assert_eq!(h.count(), 4);
//! assert_eq!(h.min(), Some(49_000));
//! let median = h.value_at_quantile(0.5).unwrap();
//! assert!((50_000..=50_000 + 50_000 / 128).contains(&median));
//! let bytes = h.to_bytes();
//! assert_eq!(Histogram::from_bytes(&bytes).unwrap(), h);
//! ```

#![warn(missing_docs)]

mod encode;
mod export;
mod histogram;
mod peaks;
mod regroup;
#[cfg(test)]
mod testutil;

pub use encode::DecodeError;
pub use export::{ExponentialHistogram, PrometheusSpan, MAX_EXPORT_SCALE, MIN_OTEL_SCALE, MIN_PROMETHEUS_SCHEMA};
pub use histogram::{
    bucket_index_of, quantile_of_sorted, Histogram, Iter, DEFAULT_MAX_BITS, MAX_RELATIVE_ERROR, SUB_BUCKETS,
    SUB_BUCKET_BITS,
};
pub use peaks::{Peak, PeakOptions};
pub use regroup::LogGrid;
