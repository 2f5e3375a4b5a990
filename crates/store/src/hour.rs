//! Hours: the store's unit of time.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Seconds in an hour.
pub const HOUR_SECS: i64 = 3600;

/// One UTC hour, identified by its start in seconds since the Unix epoch (always a multiple of
/// 3600). Serialized as that number; displayed as `2026-11-22T13:00Z`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Hour(i64);

impl Hour {
    /// The hour holding `unix_secs` (rounded down to a multiple of 3600, also for negative values).
    pub fn from_unix_secs(unix_secs: i64) -> Hour {
        Hour(unix_secs.div_euclid(HOUR_SECS) * HOUR_SECS)
    }

    /// The hour holding the instant `t`.
    pub fn containing(t: SystemTime) -> Hour {
        let secs = match t.duration_since(UNIX_EPOCH) {
            Ok(d) => d.as_secs().min(i64::MAX as u64) as i64,
            // Before 1970: round towards the earlier hour.
            Err(e) => {
                let d = e.duration();
                -(d.as_secs().min(i64::MAX as u64 - 1) as i64) - i64::from(d.subsec_nanos() > 0)
            }
        };
        Hour::from_unix_secs(secs)
    }

    /// The current hour by the system clock.
    pub fn now() -> Hour {
        Hour::containing(SystemTime::now())
    }

    /// Start of the hour, in seconds since the Unix epoch.
    pub fn start_unix_secs(self) -> i64 {
        self.0
    }

    /// Start of the hour as a `SystemTime`.
    pub fn start(self) -> SystemTime {
        if self.0 >= 0 {
            UNIX_EPOCH + Duration::from_secs(self.0 as u64)
        } else {
            UNIX_EPOCH - Duration::from_secs(self.0.unsigned_abs())
        }
    }

    /// The hour `n` hours later (earlier for negative `n`), saturating at the ends of time.
    pub fn plus(self, n: i64) -> Hour {
        Hour::from_unix_secs(self.0.saturating_add(n.saturating_mul(HOUR_SECS)))
    }

    /// The next hour.
    pub fn next(self) -> Hour {
        self.plus(1)
    }
}

impl fmt::Display for Hour {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match chrono::DateTime::from_timestamp(self.0, 0) {
            Some(t) => write!(f, "{}", t.format("%Y-%m-%dT%H:00Z")),
            // Past chrono's range (±262,000 years): the hours saturate there.
            None => write!(f, "{} s after 1970-01-01T00:00Z", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hours_round_down_and_print_as_utc() {
        assert_eq!(Hour::from_unix_secs(3599).start_unix_secs(), 0);
        assert_eq!(Hour::from_unix_secs(3600).start_unix_secs(), 3600);
        assert_eq!(Hour::from_unix_secs(-1).start_unix_secs(), -3600);
        assert_eq!(Hour::from_unix_secs(0).to_string(), "1970-01-01T00:00Z");
        // 2000-02-29 13:xx UTC (a leap day).
        assert_eq!(Hour::from_unix_secs(951_831_000).to_string(), "2000-02-29T13:00Z");
        assert_eq!(Hour::from_unix_secs(-1).to_string(), "1969-12-31T23:00Z");
        assert_eq!(
            Hour::from_unix_secs(i64::MAX).to_string(),
            format!("{} s after 1970-01-01T00:00Z", i64::MAX / 3600 * 3600)
        );
        let h = Hour::from_unix_secs(1_800_000_000);
        assert_eq!(Hour::containing(h.start()), h);
        assert_eq!(Hour::containing(h.start() - Duration::from_nanos(1)), h.plus(-1));
        assert_eq!(h.next().start_unix_secs() - h.start_unix_secs(), HOUR_SECS);
        assert_eq!(Hour::containing(UNIX_EPOCH - Duration::from_nanos(1)).start_unix_secs(), -3600);
    }
}
