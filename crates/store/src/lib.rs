//! latscope's store: hourly latency histograms in one SQLite file.
//!
//! A store keeps **one histogram per (host, series, hour)**: every value a series recorded during
//! that UTC hour, at the full resolution of [`latscope_hist::Histogram`] (1/128 buckets), with its
//! exact count, sum, min and max. Hourly histograms are what a dashboard shows over days and
//! weeks, and what explains a latency distribution: clock granularity, cache tiers, peaks that come
//! and go. `docs/STORE.md` documents the file (tables, columns, encodings) for other tools.
//!
//! # Model
//!
//! * A **series** ([`SeriesSpec`]) is something measured on a host: a micro-benchmark probe, one
//!   syscall, one block device, a class of events. It has a name unique per host, a kind
//!   ([`kind`]), a unit ([`unit`]), a description, and parameters as a JSON object (for example
//!   the `file_size` a read probe used, which turns a cache-hit share into a cache-size estimate).
//! * An **hour** ([`Hour`]) is identified by its start in seconds since the Unix epoch.
//! * Writers **merge** into an hour: [`Store::merge`] adds histograms into the stored ones in one
//!   transaction. [`HourlyWriter`] accumulates values in memory and merges every flush interval
//!   (10 s by default), so a killed writer loses at most the values of its current interval.
//!   Several writers may write the same store, even the same series: merges are serialised.
//! * **Retention**: [`Store::set_retention_days`] keeps N days; writers drop older hours at the
//!   first flush of every hour.
//!
//! # Guarantees
//!
//! * **Crash safety.** SQLite's write-ahead log makes each merge atomic: after `kill -9` of a
//!   writer (or a crash of the machine) the file holds every merge committed before, and nothing of
//!   the one in progress. Reopening needs no repair.
//! * **Concurrency.** One writer and any number of readers at once, in threads or processes; a
//!   read sees a consistent snapshot and never waits for the writer. Writers queue for up to
//!   [`DEFAULT_BUSY_TIMEOUT`], then fail with [`StoreError::Busy`].
//! * **Bad files.** Opening checks, before anything is read or written, that the file is SQLite,
//!   that it is a latscope store (its application id), that its schema version is one this build
//!   reads ([`SCHEMA_VERSION`]; a newer one is refused, not misread), that its tables are exactly
//!   the ones of that version, and that it is not shorter than its header says. Every histogram is
//!   decoded with its checksum and cross-checked with its row's count, sum, min and max when read.
//!   A problem is a [`StoreError`] naming the file and what is wrong; nothing panics. SQLite's
//!   pages carry no checksums, so damage elsewhere (a series name) can go unnoticed;
//!   [`Store::verify`] checks every page and every histogram.
//!
//! # Example
//!
//! ```
//! use latscope_hist::Histogram;
//! use latscope_store::{kind, unit, Hour, HourlyWriter, SeriesSpec, Store};
//! use std::time::Duration;
//!
//! # fn main() -> Result<(), latscope_store::StoreError> {
//! # let dir = std::env::temp_dir().join(format!("latscope-store-doc-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir).unwrap();
//! # let path = dir.join("bench.db");
//! let store = Store::open(&path)?;
//! let mut w = HourlyWriter::new(store, Duration::from_secs(10));
//! let mut spec = SeriesSpec::new("read-4k", kind::MICROBENCH, unit::NANOSECONDS);
//! spec.params.insert("file_size".into(), (256u64 << 20).into());
//! let id = w.series(&spec)?;
//! let h: Histogram = [1_200u64, 1_300, 95_000].into_iter().collect();
//! w.add(id, Hour::now(), &h);
//! w.flush()?;
//!
//! // A reader (another thread or process) opens the file on its own.
//! let r = Store::open_read_only(&path)?;
//! for s in r.series()? {
//!     let latest = r.latest(s.id)?.expect("one hour stored");
//!     println!("{} {}: {} values, p50 {:?}", s.spec.name, latest.hour, latest.histogram.count(),
//!              latest.histogram.value_at_quantile(0.5));
//! }
//! # std::fs::remove_dir_all(&dir).unwrap();
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

mod error;
mod hour;
mod schema;
mod series;
mod store;
mod writer;

pub use error::{Result, StoreError};
pub use hour::{Hour, HOUR_SECS};
pub use schema::{APPLICATION_ID, SCHEMA_VERSION};
pub use series::{kind, local_host, unit, Series, SeriesId, SeriesSpec};
pub use store::{HourHistogram, HourStats, OpenOptions, Store, VerifyReport, DEFAULT_BUSY_TIMEOUT};
pub use writer::{FlushStats, HourlyWriter, DEFAULT_FLUSH_INTERVAL};
