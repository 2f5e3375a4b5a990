//! Fleet export: latscope data in the formats other systems query.
//!
//! Exporters, each usable alone:
//!
//! * [`parquet_export`]: traces (one or many, from many hosts) to Parquet for query engines
//!   (DuckDB, Spark, Trino, pandas). One row per event with typed columns: wall-clock time as
//!   `TIMESTAMP(MICROS, UTC)` and as exact nanoseconds, latency in nanoseconds, operation names as
//!   strings next to their numbers, signed integers only (Spark and Trino read unsigned Parquet
//!   types badly), the host. The processes, disks and traces tables go alongside. zstd pages;
//!   row groups of 1 Mi events ([`parquet_export::DEFAULT_ROW_GROUP_ROWS`] says why). Output is
//!   one file or a directory partitioned Hive-style,
//!   `events/host=H/date=YYYY-MM-DD/hour=0..23/part-N.parquet`. Memory is bounded whatever the
//!   trace size; the Parquet encoding runs on a second thread while the trace is read. The
//!   columns are listed in [`parquet_export::EVENT_COLUMNS`] and `docs/EXPORT.md`.
//! * [`prometheus`]: a latscope [`Histogram`](latscope_hist::Histogram) as a Prometheus native
//!   histogram ([`prometheus::NativeHistogram`]: schema chosen from the resolution wanted, bucket
//!   limit, zero threshold, spans and deltas), sets of counters, gauges and histograms
//!   ([`prometheus::Metrics`]) encoded as the scraper asks (`Accept` negotiation: Prometheus
//!   protobuf with native histograms, else OpenMetrics text with classic buckets), and a small
//!   HTTP server for `/metrics` ([`prometheus::ExpositionServer`]).
//! * [`graphite`]: a plaintext-protocol client ([`graphite::GraphiteClient`]) that queues lines
//!   without ever waiting for the network, reconnects with exponential backoff and drops the
//!   oldest lines when its bounded queue is full; count, p50, p90, p99 and max of a histogram
//!   per interval; path sanitising.
//! * [`otlp`]: OpenTelemetry metrics: histograms as cumulative exponential histograms (scale 4)
//!   and counters as sums in an OTLP `ExportMetricsServiceRequest` ([`otlp::Batch`], messages
//!   generated from the official `.proto` files), pushed over OTLP/HTTP by a client that never
//!   blocks its caller and counts its failures by kind ([`otlp::OtlpClient`]).
//!
//! Traces are read in one place (a private `source::scan`) through the shared filtered scan
//! ([`latscope_scan::Scan`]), which applies a [`Filter`](latscope_filter::Filter) and hands over
//! blocks of events.
//!
//! # Exposing live histograms
//!
//! ```no_run
//! use latscope_export::prometheus::{ExpositionServer, HistogramOptions, Metrics, SharedMetrics};
//! use latscope_hist::Histogram;
//!
//! # fn main() -> Result<(), latscope_export::ExportError> {
//! let shared = SharedMetrics::default();
//! let server = ExpositionServer::start("127.0.0.1:9464", shared.clone())?;
//! let mut read_latency = Histogram::new();
//! read_latency.record(10_250_000); // ns
//! let mut m = Metrics::new();
//! m.histogram("latscope_syscall_latency_seconds", "Syscall latency.", &[("syscall", "read")],
//!             &read_latency, &HistogramOptions::default(), None)?;
//! m.counter("latscope_events", "Events seen.", &[], 1.0)?;
//! shared.set(m); // scrapes of server.metrics_url() now see it
//! # drop(server);
//! # Ok(())
//! # }
//! ```
//!
//! # Pushing to Graphite
//!
//! ```no_run
//! use latscope_export::graphite::{metric_path, GraphiteClient, GraphiteOptions};
//! use latscope_hist::Histogram;
//!
//! # fn main() -> Result<(), latscope_export::ExportError> {
//! let g = GraphiteClient::new("localhost:2003", GraphiteOptions::default())?;
//! let interval: Histogram = [120_000u64, 95_000, 4_000_000].into_iter().collect();
//! let prefix = metric_path(&["latscope", "web01.example.com", "syscall", "read"]);
//! g.send_histogram(&prefix, &interval, 1_700_000_000); // .count .p50 .p90 .p99 .max (seconds)
//! g.send("latscope.web01_example_com.lost", 0.0, 1_700_000_000);
//! let stats = g.close(std::time::Duration::from_secs(2));
//! println!("{} lines sent, {} dropped", stats.sent, stats.dropped);
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

mod error;
pub mod graphite;
pub mod otlp;
pub mod parquet_export;
pub mod perfetto;
pub mod prometheus;
mod source;

pub use error::ExportError;
