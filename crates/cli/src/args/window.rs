//! A window of a recording: `--from TIME --to TIME`, as CLOCK_MONOTONIC bounds or a filter clause.

use anyhow::{anyhow, bail, Result};

/// A window of a recording: `--from TIME --to TIME`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct WindowArgs {
    /// Only events that began at or after TIME: time into the recording (10s, 1m30s, 2.5), or
    /// a wall-clock time in UTC (2026-11-22T10:32:00Z, or 10:32:00 on the recording's first day).
    #[arg(long, value_name = "TIME")]
    pub from: Option<String>,
    /// Only events that began before TIME (as --from).
    #[arg(long, value_name = "TIME")]
    pub to: Option<String>,
}

impl WindowArgs {
    /// Whether a bound was given.
    pub fn is_set(&self) -> bool {
        self.from.is_some() || self.to.is_some()
    }

    /// The window as CLOCK_MONOTONIC ns (`from..to`, each `None` when not given), checked.
    pub fn resolve(&self, h: &latscope_event::TraceHeader) -> Result<(Option<u64>, Option<u64>)> {
        let from = self.from.as_deref().map(|v| time_bound("--from", v, h)).transpose()?;
        let to = self.to.as_deref().map(|v| time_bound("--to", v, h)).transpose()?;
        if let (Some(t), Some(v)) = (to, self.to.as_deref()) {
            // Checked before clamping: two times before the recording would both become its
            // start, and be told apart as an empty window.
            if t <= i128::from(h.start_ns) {
                let start = chrono::DateTime::from_timestamp_nanos(h.wall_ns(h.start_ns));
                bail!(
                    "--to {v} is not after the recording's start ({} UTC): no event of it began before then; give a time \
                     into the recording (10s) or a later time of day",
                    start.format("%Y-%m-%dT%H:%M:%S%.3f")
                );
            }
        }
        let clamp = |t: i128| u64::try_from(t.max(0)).unwrap_or(u64::MAX);
        let (from, to) = (from.map(clamp), to.map(clamp));
        if let (Some(a), Some(b)) = (from, to) {
            if a >= b {
                bail!(
                    "--from {} is not before --to {}: the window is empty",
                    self.from.as_deref().unwrap_or(""),
                    self.to.as_deref().unwrap_or("")
                );
            }
        }
        Ok((from, to))
    }

    /// The window as a filter clause on the start time (`evt.reltime`), `None` without bounds:
    /// what `events` takes to print the same events.
    pub fn clause(&self, h: &latscope_event::TraceHeader) -> Result<Option<String>> {
        let (from, to) = self.resolve(h)?;
        let rel = |t: u64| t.saturating_sub(h.start_ns);
        let mut c = Vec::new();
        if let Some(f) = from {
            c.push(format!("evt.reltime >= {}ns", rel(f)));
        }
        if let Some(t) = to {
            c.push(format!("evt.reltime < {}ns", rel(t)));
        }
        Ok((!c.is_empty()).then(|| c.join(" and ")))
    }
}

/// A `--from`/`--to` TIME as CLOCK_MONOTONIC ns: time into the recording, a time of day on the
/// recording's first day (UTC), or a date and time; not clamped to the clock's range (a time
/// before its origin is negative).
fn time_bound(flag: &str, v: &str, h: &latscope_event::TraceHeader) -> Result<i128> {
    let t = v.trim();
    let bad = || anyhow!("{flag} {v}: not a time (10s, 2.5, 10:32:00, 2026-11-22T10:32:00Z)");
    if let Ok(ns) = latscope_event::units::parse_duration_secs_default(t) {
        return Ok(i128::from(h.start_ns) + i128::from(ns));
    }
    let wall_ns = if !t.contains('-') && t.contains(':') {
        let tod = chrono::NaiveTime::parse_from_str(t, "%H:%M:%S%.f")
            .or_else(|_| chrono::NaiveTime::parse_from_str(t, "%H:%M"))
            .map_err(|_| anyhow!("{flag} {v}: not a time of day (HH:MM:SS, UTC)"))?;
        let start = h.wall_ns(h.start_ns);
        let day = start - start.rem_euclid(86_400_000_000_000);
        use chrono::Timelike;
        day + i64::from(tod.num_seconds_from_midnight()) * 1_000_000_000 + i64::from(tod.nanosecond())
    } else {
        let d = chrono::DateTime::parse_from_rfc3339(t).map(|d| d.to_utc()).or_else(|_| {
            ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f"]
                .iter()
                .find_map(|f| chrono::NaiveDateTime::parse_from_str(t, f).ok())
                .map(|d| d.and_utc())
                .ok_or_else(bad)
        })?;
        d.timestamp_nanos_opt().ok_or_else(bad)?
    };
    Ok(i128::from(wall_ns) - i128::from(h.realtime_offset_ns))
}
