//! `latscope replay run --graphite`: the live metrics of the run, pushed every interval.

use anyhow::{bail, Result};
use latscope_export::graphite::{metric_path, GraphiteClient, GraphiteOptions};
use latscope_replay::metrics::check_prefix;
use latscope_replay::{Live, LiveMetrics};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Metrics of a running replay on their way to a carbon server.
pub struct Push {
    addr: String,
    prefix: String,
    metrics: LiveMetrics,
    client: GraphiteClient,
    last_ts: i64,
}

impl Push {
    /// Checks the options and starts the client (connecting in the background).
    pub fn new(addr: &str, interval_ns: u64, prefix: Option<&str>, test_name: &str) -> Result<Push> {
        if interval_ns < 1_000_000_000 {
            bail!("--graphite-interval: give 1s or more (Graphite stores at most one value per second)");
        }
        let prefix = match prefix {
            Some(p) => {
                check_prefix(p).map_err(|e| anyhow::anyhow!("--graphite-prefix: {e}"))?;
                p.to_string()
            }
            None => metric_path(&["latscope", "replay", test_name]),
        };
        let client =
            GraphiteClient::new(addr, GraphiteOptions::default()).map_err(|e| anyhow::anyhow!("--graphite: {e}"))?;
        Ok(Push { addr: addr.to_string(), prefix, metrics: LiveMetrics::new(interval_ns), client, last_ts: 0 })
    }

    /// One tick of the run: queues the interval's metrics when it has ended (never waits for
    /// the network).
    pub fn tick(&mut self, l: &Live) {
        if let Some(ms) = self.metrics.tick(l) {
            let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
            // Graphite keeps one value per second: the last, partial interval may end in the
            // same second as the one before, and goes one second later rather than replace it.
            let now = now.max(self.last_ts + 1);
            self.last_ts = now;
            for m in ms {
                self.client.send(&format!("{}.{}", self.prefix, m.name), m.value, now);
            }
        }
    }

    /// Sends what is left (waiting up to 5 s); a warning on stderr if some of it did not go.
    pub fn finish(self) {
        let st = self.client.close(Duration::from_secs(5));
        if st.dropped > 0 || st.sent == 0 {
            eprintln!(
                "latscope: Graphite {}: {} lines sent under {}, {} dropped ({} failed connection attempts or writes)",
                self.addr, st.sent, self.prefix, st.dropped, st.failures
            );
        }
    }
}
