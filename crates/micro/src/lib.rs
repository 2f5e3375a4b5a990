//! latscope's micro-benchmark probes: small operations measured continuously, each sample
//! recorded into a [`latscope_hist::Histogram`], and explanations of the histograms they make.
//!
//! A histogram of a simple operation, at high resolution and over many samples, shows things no
//! average does: the granularity of the clock that timed it (values that are all multiples of a
//! step), cache tiers (one peak per place the data came from), the share of each tier (for random
//! reads over a file of known size, the cached share times the size estimates the cache).
//!
//! # Probes
//!
//! | kind | one sample | unit |
//! |---|---|---|
//! | `clock` | the difference between two consecutive reads of a clock (`monotonic`, `monotonic_coarse`, `monotonic_raw`, `realtime`, `realtime_coarse`, `boottime`, `tsc`) | ns |
//! | `call` | an empty function call timed with a clock | ns |
//! | `muladd` | a dependent multiply-add loop's time divided by its repetitions | ps |
//! | `sin` | a libm `sin` loop's time divided by its repetitions | ps |
//! | `read` | one random aligned block read from a file's region, page cache or `O_DIRECT` | ns |
//! | `fsync` | a small write then `fsync` | ns |
//! | `command` | the wall time of `sh -c COMMAND` | ns |
//!
//! Probes are defined in flag syntax ([`parse_probe`]: `read:/data/f,file_size=8GiB,region=512KiB`)
//! or in a TOML file ([`load_config`]) with the same keys, and built with [`ProbeSpec::build`]. A
//! [`Runner`] runs them on one thread (back to back in ~10 ms batches, or one sample every
//! `every`), and hands out interval histograms (cut at every UTC hour, for a store) and report
//! points (for a live summary, [`summarize`] and [`render_text`]); [`StoreSink`] writes the
//! intervals into a `latscope-store` file, one series per probe.
//!
//! [`explain`] works on any histogram with its series' unit and parameters, so a dashboard reading
//! a store gets the same explanations as `latscope bench`.
//!
//! # Example
//!
//! ```
//! use latscope_hist::Histogram;
//! use latscope_micro::{explain, parse_probe};
//!
//! let spec = parse_probe("clock:monotonic_coarse").unwrap().remove(0);
//! let mut probe = spec.build(&mut |_| {}).unwrap();
//! let mut h = Histogram::new();
//! probe.sample(&mut h, 1000).unwrap();
//! assert_eq!(h.count(), 1000);
//! let info = probe.info();
//! let e = explain(&h, "microbench", info.unit.as_str(), &info.params);
//! println!("{:?}", e.notes);
//! ```

#![warn(missing_docs)]

pub mod clock;
mod config;
mod error;
pub mod explain;
mod probe;
mod probes;
mod runner;
mod sink;
mod summary;

pub use clock::ClockId;
pub use config::{check_unique_names, load_config, parse_config, parse_probe, BenchConfig, PROBE_SYNTAX};
pub use error::{ConfigError, ProbeError};
pub use explain::{explain, granularity, CacheEstimate, Explanation, Granularity, PeakHint, Tier};
pub use probe::{
    Probe, ProbeInfo, ProbeKind, ProbeSpec, Unit, BLOCK_SIZE, FSYNC_FILE_SIZE, MULADD_REPETITIONS, SIN_REPETITIONS,
};
pub use runner::{Event, ProbeState, RunOptions, Runner};
pub use sink::{series_spec, StoreSink};
pub use summary::{render_text, summarize, ProbeSummary};
