//! The OpenTelemetry push (`[otlp]`): every few intervals, the series' cumulative histograms and
//! counters as one OTLP request, sent by [`OtlpClient`] from a thread of its own.

use std::time::{Duration, SystemTime};

use latscope_event::EventKind;
use latscope_export::otlp::{Batch, OtlpClient, OtlpOptions, OtlpStats};
use latscope_export::prometheus::names;
use latscope_hist::Histogram;

use crate::config::OtlpConfig;
use crate::series::SeriesRun;

/// The `service.name` resource attribute.
pub const SERVICE_NAME: &str = "latscope-agent";
/// The instrumentation scope's name.
pub const SCOPE: &str = "latscope";

/// A configured push: its client and when it is due.
pub(crate) struct OtlpPush {
    pub cfg: OtlpConfig,
    client: OtlpClient,
    /// Push every this many refreshes.
    every: u64,
    /// Refreshes since the last push.
    since: u64,
}

impl OtlpPush {
    /// Starts the client of `cfg`; the agent reads its counts every `interval`.
    pub fn new(cfg: OtlpConfig, interval: Duration) -> OtlpPush {
        let client = OtlpClient::new(OtlpOptions {
            endpoint: cfg.endpoint.clone(),
            headers: cfg.headers.clone(),
            timeout: cfg.timeout,
        });
        let every = (cfg.interval.as_nanos() / interval.as_nanos().max(1)).max(1) as u64;
        OtlpPush { cfg, client, every, since: 0 }
    }

    /// After a refresh: queues the series' counts when a push is due (or `force`d). Returns the
    /// client's lines worth logging.
    pub fn after_refresh(&mut self, host: &str, series: &[SeriesRun], force: bool) -> Vec<String> {
        self.since += 1;
        if force || self.since >= self.every {
            self.since = 0;
            self.client.send(batch(host, series, SystemTime::now()).encode());
        }
        self.client.take_log()
    }

    /// What the client has done.
    pub fn stats(&self) -> OtlpStats {
        self.client.stats()
    }

    /// Stops, waiting up to `wait` for the last request to go.
    pub fn close(self, wait: Duration) -> OtlpStats {
        self.client.close(wait)
    }
}

/// The series' counts as one OTLP request: per series and label value, the latency as an
/// exponential histogram in seconds, labelled as in Prometheus (`host`, `series`, the grouping's
/// label), with failed syscalls, or block queue times, sizes and bytes per operation, beside it;
/// per series, the events the probes lost. Everything cumulative since the series started.
pub(crate) fn batch(host: &str, series: &[SeriesRun], now: SystemTime) -> Batch {
    let mut b =
        Batch::new(&[("service.name", SERVICE_NAME), ("host.name", host)], SCOPE, env!("CARGO_PKG_VERSION"), now);
    let empty = Histogram::new();
    for s in series {
        let name = s.cfg.name.as_str();
        let block = s.cfg.kind == EventKind::Block;
        let (family, help) = if block {
            (names::BLOCK_LATENCY, "Block request latency (issue to completion), seconds.")
        } else {
            (names::SYSCALL_LATENCY, "Syscall latency (entry to exit), seconds.")
        };
        let mut values: Vec<(&str, Option<&crate::groups::Group>)> =
            s.groups.iter().map(|(l, g)| (l, Some(g))).collect();
        if s.cfg.by.label().is_none() && values.is_empty() {
            values.push(("", None));
        }
        values.sort_by(|a, b| a.0.cmp(b.0));
        for (label, g) in values {
            let mut attrs = vec![(names::LABEL_HOST, host), (crate::names::LABEL_SERIES, name)];
            if let Some(l) = s.cfg.by.label() {
                attrs.push((l, label));
            }
            b.histogram(family, help, "s", &attrs, g.map_or(&empty, |g| &g.total), 1e-9, s.created);
            if !block {
                let errors = g.map_or(0, |g| g.extras.errors);
                b.counter(
                    names::SYSCALL_ERRORS,
                    "Syscalls that failed (returned a negative value).",
                    "1",
                    &attrs,
                    errors,
                    s.created,
                );
                continue;
            }
            for (i, op) in latscope_probe::AGG_OPS.iter().enumerate() {
                let mut l = attrs.clone();
                l.push((names::LABEL_OP, op));
                let o = g.and_then(|g| g.extras.ops.get(i));
                b.histogram(
                    names::BLOCK_QUEUE,
                    "Block request queue time (insert to issue; 0 when issued directly), seconds.",
                    "s",
                    &l,
                    o.map_or(&empty, |o| &o.queue),
                    1e-9,
                    s.created,
                );
                b.histogram(
                    names::BLOCK_SIZE,
                    "Block request size, bytes.",
                    "By",
                    &l,
                    o.map_or(&empty, |o| &o.size),
                    1.0,
                    s.created,
                );
                b.counter(
                    names::BLOCK_BYTES,
                    "Bytes moved by block requests.",
                    "By",
                    &l,
                    o.map_or(0, |o| o.bytes),
                    s.created,
                );
            }
        }
        let l = [(names::LABEL_HOST, host), (crate::names::LABEL_SERIES, name)];
        b.counter(names::LOST_EVENTS, "Events the probes lost (ring buffer full).", "1", &l, s.lost(), s.created);
    }
    b
}
