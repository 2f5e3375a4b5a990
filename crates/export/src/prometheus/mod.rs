//! Prometheus: latscope histograms as native histograms, metric sets encoded for scrapes
//! (protobuf with native histograms, or OpenMetrics text with classic buckets), and an HTTP
//! server to scrape them from.

mod exposition;
pub mod names;
mod native;
mod server;

pub use exposition::{
    label_value, sanitize_name, Format, HistogramOptions, Metrics, SharedMetrics, LATENCY_BOUNDS_SECONDS,
    OPENMETRICS_CONTENT_TYPE, PROTOBUF_CONTENT_TYPE, SIZE_BOUNDS_BYTES, TEXT_CONTENT_TYPE,
};
pub use native::{
    schema_for_resolution, schema_resolution, NativeHistogram, NativeOptions, DEFAULT_ZERO_THRESHOLD, NS_TO_SECONDS,
};
pub use server::{ExpositionServer, Scrapes};
