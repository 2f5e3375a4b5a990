//! The one rate rule of every view: a rate divides by the time actually covered.
//!
//! A view that prints a rate (events per second, bytes per second) divides what it counted by
//! the length of the [`Span`] its counts cover: the recording, from the moment the probes
//! attached to the moment it stopped ([`Span::recording`]), cut to the time window a filter
//! selects (`evt.time >= ... and evt.time < ...`), and, for a timeline, to each interval: the last,
//! partial interval of a recording divides by its real length, not by the interval's.

/// A stretch of CLOCK_MONOTONIC time, `start_ns .. end_ns` (the end excluded); empty when
/// `end_ns <= start_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// The first nanosecond covered.
    pub start_ns: u64,
    /// The first nanosecond after it.
    pub end_ns: u64,
}

impl Span {
    /// `start_ns .. end_ns` (empty when the end is not after the start).
    pub fn new(start_ns: u64, end_ns: u64) -> Span {
        Span { start_ns, end_ns: end_ns.max(start_ns) }
    }

    /// The duration of a recording: from `start_ns`, when the probes attached (the header's),
    /// to `end_ns`, when it stopped (the summary's); what `info` prints as its duration and every
    /// rate over a whole recording divides by.
    pub fn recording(start_ns: u64, end_ns: u64) -> Span {
        Span::new(start_ns, end_ns)
    }

    /// Its length in ns.
    pub fn ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }

    /// Its length in seconds.
    pub fn secs(&self) -> f64 {
        self.ns() as f64 / 1e9
    }

    /// Whether it covers no time.
    pub fn is_empty(&self) -> bool {
        self.ns() == 0
    }

    /// The part of it inside `lo ..= hi` (inclusive bounds, as a filter's range of start times).
    pub fn within(&self, lo: u64, hi: u64) -> Span {
        Span::new(self.start_ns.max(lo), self.end_ns.min(hi.saturating_add(1)))
    }

    /// The seconds of it inside `from_ns .. to_ns` (an interval of a timeline).
    pub fn overlap_secs(&self, from_ns: u64, to_ns: u64) -> f64 {
        Span::new(self.start_ns.max(from_ns), self.end_ns.min(to_ns)).secs()
    }

    /// `n` per second of it; 0 for an empty span.
    pub fn rate(&self, n: f64) -> f64 {
        per_sec(n, self.secs())
    }
}

/// `n` per second of `secs` seconds actually covered; 0 when none were.
pub fn per_sec(n: f64, secs: f64) -> f64 {
    if secs > 0.0 {
        n / secs
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_divides_by_the_time_covered() {
        let rec = Span::recording(1_000_000_000, 21_000_000_000);
        assert_eq!(rec.secs(), 20.0);
        assert_eq!(rec.rate(1032.0), 51.6);
        // A filter's window of one second inside it: 1032 calls are 1032/s.
        let w = rec.within(5_000_000_000, 5_999_999_999);
        assert_eq!((w.secs(), w.rate(1032.0)), (1.0, 1032.0));
        // A window reaching past the recording covers only the recording's part of it.
        assert_eq!(rec.within(20_500_000_000, u64::MAX).secs(), 0.5);
        // The last interval of a timeline, 0.208 s of a 1 s interval.
        let r = Span::recording(0, 19_208_000_000);
        assert!((r.overlap_secs(19_000_000_000, 20_000_000_000) - 0.208).abs() < 1e-12);
        assert_eq!(r.overlap_secs(25_000_000_000, 26_000_000_000), 0.0);
        assert_eq!(Span::new(5, 3).rate(10.0), 0.0);
        assert!(Span::new(5, 3).is_empty());
    }
}
