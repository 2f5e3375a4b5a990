//! Live metrics of a running replay, one set per interval, for a time-series store (Graphite).
//!
//! [`LiveMetrics`] is fed every tick of [`crate::run`] ([`crate::Live`], about ten a second)
//! and hands back, once per interval and on the last tick, the values of that interval:
//!
//! | name | value |
//! |---|---|
//! | `ops_per_sec` | operations completed in the interval / its length (s) |
//! | `ops_done` | operations completed since the start |
//! | `lateness.p50`, `lateness.p99`, `lateness.max` | lateness of the operations started in the interval, seconds (timed runs, intervals with operations; 1/128 relative resolution) |
//! | `divergences` | divergences since the start |
//! | `errors` | failed operations since the start (recorded failures included) |
//!
//! Counts since the start rather than per interval, so that a lost line loses nothing (a
//! store derives rates from them, e.g. Graphite's `nonNegativeDerivative`).

use crate::run::Live;
use latscope_hist::Histogram;

/// One value of an interval: its name under the prefix (`ops_per_sec`, `lateness.p99`, ...).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Metric {
    /// Name under the metric prefix.
    pub name: &'static str,
    /// Value (operations, operations per second, or seconds).
    pub value: f64,
}

/// Cuts a running replay's ticks into intervals (see the module docs).
#[derive(Debug)]
pub struct LiveMetrics {
    interval_ns: u64,
    /// `elapsed_ns` and `done` at the end of the previous interval.
    last_ns: u64,
    last_done: u64,
    late: Histogram,
    emitted: bool,
}

impl LiveMetrics {
    /// Metrics every `interval_ns` nanoseconds of the run (at least one tick, 100 ms, apart).
    pub fn new(interval_ns: u64) -> LiveMetrics {
        LiveMetrics {
            interval_ns: interval_ns.max(1),
            last_ns: 0,
            last_done: 0,
            late: Histogram::new(),
            emitted: false,
        }
    }

    /// Takes one tick; the interval's metrics when it has ended (or the run has: the last tick
    /// gives the partial interval, if anything happened in it or nothing was given yet).
    pub fn tick(&mut self, l: &Live) -> Option<Vec<Metric>> {
        if let Some(h) = &l.lateness {
            self.late.merge(h);
        }
        let span = l.elapsed_ns.saturating_sub(self.last_ns);
        let due = span >= self.interval_ns;
        let last = l.finished && (l.done > self.last_done || !self.late.is_empty() || !self.emitted);
        if !due && !last {
            return None;
        }
        let secs = span as f64 * 1e-9;
        let mut m = vec![
            Metric {
                name: "ops_per_sec",
                value: if secs > 0.0 { l.done.saturating_sub(self.last_done) as f64 / secs } else { 0.0 },
            },
            Metric { name: "ops_done", value: l.done as f64 },
        ];
        if !self.late.is_empty() {
            let q = |q: f64| self.late.value_at_quantile(q).unwrap_or(0) as f64 / 1e9;
            m.push(Metric { name: "lateness.p50", value: q(0.5) });
            m.push(Metric { name: "lateness.p99", value: q(0.99) });
            m.push(Metric { name: "lateness.max", value: self.late.max().unwrap_or(0) as f64 / 1e9 });
        }
        m.push(Metric { name: "divergences", value: l.divergences as f64 });
        m.push(Metric { name: "errors", value: l.errors as f64 });
        self.last_ns = l.elapsed_ns;
        self.last_done = l.done;
        self.late.reset();
        self.emitted = true;
        Some(m)
    }
}

/// Checks a user-given metric prefix: dot-separated components, none empty, no whitespace or
/// control characters (they would break the plaintext protocol's line apart).
pub fn check_prefix(prefix: &str) -> Result<(), String> {
    if prefix.is_empty() || prefix.split('.').any(str::is_empty) {
        return Err(format!("metric prefix '{prefix}': give dot-separated names, none empty (e.g. team.replay.db)"));
    }
    if prefix.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("metric prefix '{prefix}' holds a space or a control character"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(elapsed_ms: u64, done: u64, late_us: &[u64], finished: bool) -> Live {
        let lateness = Some(late_us.iter().map(|v| v * 1000).collect::<Histogram>());
        Live { elapsed_ns: elapsed_ms * 1_000_000, done, total: 1000, lateness, finished, ..Default::default() }
    }

    fn get(m: &[Metric], name: &str) -> Option<f64> {
        m.iter().find(|x| x.name == name).map(|x| x.value)
    }

    #[test]
    fn intervals_carry_their_own_rate_and_lateness() {
        let mut lm = LiveMetrics::new(1_000_000_000);
        assert!(lm.tick(&live(500, 100, &[10, 20], false)).is_none());
        let m = lm.tick(&live(1000, 300, &[30], false)).expect("one second has passed");
        assert_eq!(get(&m, "ops_per_sec"), Some(300.0));
        assert_eq!(get(&m, "ops_done"), Some(300.0));
        assert_eq!(get(&m, "lateness.max"), Some(30e-6));
        let p50 = get(&m, "lateness.p50").unwrap();
        assert!((p50 - 20e-6).abs() <= 20e-6 / 128.0, "{p50}");
        // The next interval forgets the previous lateness; the last tick gives the rest.
        assert!(lm.tick(&live(1500, 350, &[5], false)).is_none());
        let m = lm.tick(&live(1600, 400, &[], true)).expect("the last tick");
        assert!((get(&m, "ops_per_sec").unwrap() - 100.0 / 0.6).abs() < 1e-6);
        assert_eq!(get(&m, "lateness.max"), Some(5e-6));
        assert_eq!(get(&m, "errors"), Some(0.0));
    }

    #[test]
    fn untimed_runs_have_no_lateness_and_short_runs_one_set() {
        let mut lm = LiveMetrics::new(10_000_000_000);
        let mut l = live(50, 7, &[], true);
        l.lateness = None;
        let m = lm.tick(&l).expect("a run shorter than the interval still reports");
        assert_eq!(get(&m, "ops_done"), Some(7.0));
        assert_eq!(get(&m, "lateness.p99"), None);
    }

    #[test]
    fn prefixes() {
        assert!(check_prefix("a.b").is_ok());
        assert!(check_prefix("a..b").is_err() && check_prefix("").is_err() && check_prefix("a b").is_err());
    }
}
