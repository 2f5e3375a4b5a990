//! The latscope agent: named latency series measured unattended and exposed to a fleet's
//! monitoring (`latscope agent --config FILE.toml`).
//!
//! A configuration ([`AgentConfig`], TOML, see `docs/AGENT.md`) names **series**, each a filter
//! (sysdig syntax) and a grouping ([`By`]: disk, syscall, fd class, process, or none):
//!
//! - when the kernel can apply the filter exactly and has the grouping (disk, syscall, class,
//!   all), latencies are **counted in the kernel** (per-CPU log-linear histograms, 16 buckets per
//!   power of two); nothing is copied per event. Such series with the same process filter and
//!   minimum latency **share one probe set** ([`latscope_live::SharedCounter`]): the programs
//!   run once per event whatever the number of series, each series being a sum of composite
//!   in-kernel groups; [`Agent::probe_sets`] lists them;
//! - otherwise (grouping by process, filters the kernel cannot test exactly) the series runs a
//!   live session of its own ([`latscope_live::SessionBuilder`]) that streams events, grouped in
//!   user space; [`Agent::streaming`] and [`Agent::own_probes`] say which series do and why.
//!
//! Every interval ([`AgentConfig::interval`]) the agent reads the counts into cumulative
//! [`latscope_hist::Histogram`]s per label value and rebuilds the metric set:
//!
//! - **`/metrics`** on [`AgentConfig::listen`] (loopback by default), served by
//!   [`latscope_export::prometheus::ExpositionServer`]: Prometheus native histograms over
//!   protobuf when the scraper asks for them, classic buckets in OpenMetrics text otherwise. The
//!   histograms are `latscope_syscall_latency_seconds` and `latscope_block_latency_seconds`
//!   with labels `host`, `series` and the grouping's label, their sums exact (kept by the
//!   probes); beside them `latscope_syscall_errors_total` (failed calls) and, per operation
//!   (label `op`), `latscope_block_queue_seconds`, `latscope_block_size_bytes` and
//!   `latscope_block_bytes_total`; the agent's own counters are in [`names`];
//! - **Graphite** (optional): per series and per label value, the interval's count, p50, p90,
//!   p99 and max ([`latscope_export::graphite::GraphiteClient`]);
//! - **OpenTelemetry** (optional, `[otlp]`): the same histograms and counters, cumulative, as one
//!   OTLP/HTTP request to a collector ([`latscope_export::otlp`]): exponential histograms at
//!   scale 4, the counters as monotonic sums, resource `service.name = latscope-agent` and
//!   `host.name`, scope `latscope`; failures are counted in [`names::OTLP_ERRORS`].
//!
//! Memory is bounded whatever the label cardinality: a series keeps at most
//! [`SeriesConfig::max_labels`] label values (default [`DEFAULT_MAX_LABELS`]); latencies of
//! further values are counted under the value [`OTHER`] and in the counter
//! [`names::FOLDED`]. A label value costs one histogram (34 KiB), two with Graphite; a block
//! series' value six more (queue time and size per operation).
//!
//! [`Agent::reload`] applies a new configuration (the CLI does so on SIGHUP): unchanged series
//! keep running with their counts; new and changed ones start from zero; removed ones stop; a
//! configuration that does not parse, or whose series cannot start, changes nothing. A series
//! whose probes fail is restarted on the next interval (its counts kept, [`names::RESTARTS`]
//! counts it).
//!
//! ```no_run
//! use latscope_agent::{Agent, AgentConfig};
//! use std::sync::atomic::AtomicBool;
//!
//! let cfg = AgentConfig::parse(r#"
//!     listen = "127.0.0.1:9465"
//!     [[series]]
//!     name = "db_files"
//!     filter = "proc.name = postgres and fd.type = file"
//!     by = "syscall"
//! "#, "agent.toml".as_ref())?;
//! let mut agent = Agent::start(cfg)?;
//! let (stop, hup) = (AtomicBool::new(false), AtomicBool::new(false));
//! let mut load = || AgentConfig::load("agent.toml".as_ref()).map_err(|e| e.to_string());
//! agent.run(&mut load, &stop, &hup, &mut |line| eprintln!("{line}"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs)]

mod agent;
mod config;
mod groups;
mod otlp;
mod recorders;
mod series;
mod sets;

pub use agent::{Agent, AgentError, ReloadSummary};
pub use config::{
    host_name, AgentConfig, By, ConfigError, GraphiteConfig, OtlpConfig, RecorderConfig, SeriesConfig,
    DEFAULT_INTERVAL, DEFAULT_LISTEN, DEFAULT_MAX_LABELS, DEFAULT_OTLP_TIMEOUT, OTHER,
};

/// The agent's own metric and label names (the latency histograms use
/// [`latscope_export::prometheus::names`]). Counters are exposed with `_total` appended.
pub mod names {
    /// Label: the series name.
    pub const LABEL_SERIES: &str = "series";
    /// Counter: events counted by a series, all label values; labels `host`, `series`.
    pub const EVENTS: &str = "latscope_agent_events";
    /// Counter: events counted under `other` because the series reached its `max_labels`.
    pub const FOLDED: &str = "latscope_agent_folded_events";
    /// Gauge: label values a series exposes a histogram for, `other` included (at most its
    /// `max_labels` + 1).
    pub const LABEL_VALUES: &str = "latscope_agent_label_values";
    /// Gauge: series counted by the probes a series uses (1: probes of its own).
    pub const PROBE_SET_SERIES: &str = "latscope_agent_probe_set_series";
    /// Counter: CPU time the series' eBPF programs ran in the kernel, seconds (the kernel's
    /// BPF run-time statistics, on while the agent runs); exposed only with `probe_cpu = true`.
    pub const PROBE_CPU: &str = "latscope_agent_probe_cpu_seconds";
    /// Counter: restarts of a series' probes after a failure.
    pub const RESTARTS: &str = "latscope_agent_probe_restarts";
    /// Gauge: 1 when a series counts in the kernel, 0 when it streams events.
    pub const IN_KERNEL: &str = "latscope_agent_series_in_kernel";
    /// Counter: configuration reloads; labels `host`, `result` (`ok`, `failed`).
    pub const RELOADS: &str = "latscope_agent_reloads";
    /// Counter: intervals the agent has read its series.
    pub const REFRESHES: &str = "latscope_agent_refreshes";
    /// Counter: pushes the OpenTelemetry collector accepted (with `[otlp]`).
    pub const OTLP_PUSHES: &str = "latscope_agent_otlp_pushes";
    /// Counter: pushes to the OpenTelemetry collector that failed; labels `host`, `kind`
    /// (`connect`, `timeout`, `http_4xx`, `http_5xx`, `rejected`, `other`).
    pub const OTLP_ERRORS: &str = "latscope_agent_otlp_errors";
    /// Label: the flight recorder's name (`[[recorder]]`).
    pub const LABEL_RECORDER: &str = "recorder";
    /// Counter: a flight recorder's triggers fired; labels `host`, `recorder`.
    pub const FLIGHT_FIRED: &str = "latscope_agent_flight_triggers_fired";
    /// Counter: dumps a flight recorder wrote (complete files).
    pub const FLIGHT_DUMPS: &str = "latscope_agent_flight_dumps";
    /// Counter: bytes of those dumps.
    pub const FLIGHT_DUMP_BYTES: &str = "latscope_agent_flight_dump_bytes";
    /// Counter: triggers that wrote nothing (no disk space; one within the minimum gap is
    /// dumped when it ends).
    pub const FLIGHT_SUPPRESSED: &str = "latscope_agent_flight_dumps_suppressed";
    /// Counter: dumps that stopped on an error (a full disk).
    pub const FLIGHT_FAILED: &str = "latscope_agent_flight_dumps_failed";
    /// Counter: old dumps deleted (`keep`, `disk_budget`).
    pub const FLIGHT_DELETED: &str = "latscope_agent_flight_dumps_deleted";
    /// Gauge: dumps in the recorder's directory now.
    pub const FLIGHT_KEPT: &str = "latscope_agent_flight_dumps_kept";
    /// Counter: events that went through the ring.
    pub const FLIGHT_EVENTS: &str = "latscope_agent_flight_events";
    /// Gauge: memory the ring's blocks take, bytes.
    pub const FLIGHT_RING_BYTES: &str = "latscope_agent_flight_ring_bytes";
    /// Gauge: the time the ring covers, seconds.
    pub const FLIGHT_RING_SECONDS: &str = "latscope_agent_flight_ring_seconds";
    /// Counter: restarts of a recorder after a failure.
    pub const FLIGHT_RESTARTS: &str = "latscope_agent_flight_restarts";
}
