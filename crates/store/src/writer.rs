//! [`HourlyWriter`]: accumulate in memory, merge into the store every interval.

use crate::error::Result;
use crate::hour::Hour;
use crate::series::{SeriesId, SeriesSpec};
use crate::store::Store;
use latscope_hist::Histogram;
use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime};

/// How often a writer merges what it accumulated into the file by default: what a killed writer
/// can lose at most.
pub const DEFAULT_FLUSH_INTERVAL: Duration = Duration::from_secs(10);

/// What one flush wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlushStats {
    /// Hourly histograms merged into (one per series and hour that had new values).
    pub histograms: usize,
    /// Values added.
    pub values: u64,
    /// Old hours dropped by the retention.
    pub pruned: u64,
}

/// Collects values per series and hour in memory and merges them into the store at each flush, in
/// one transaction. Values not yet flushed are what a crash loses: with a flush every
/// [`flush_interval`](Self::flush_interval), at most that much. A flush that fails (the disk is
/// full, another writer holds the lock too long) keeps its values for the next one.
///
/// The retention stored in the file ([`Store::retention_days`]) is applied at the first flush of
/// every hour.
#[derive(Debug)]
pub struct HourlyWriter {
    store: Store,
    pending: BTreeMap<(SeriesId, Hour), Histogram>,
    interval: Duration,
    last_flush: Instant,
    pruned_in: Option<Hour>,
}

impl HourlyWriter {
    /// A writer into `store` flushing every `interval` (when [`flush_if_due`](Self::flush_if_due)
    /// is called).
    pub fn new(store: Store, interval: Duration) -> HourlyWriter {
        HourlyWriter { store, pending: BTreeMap::new(), interval, last_flush: Instant::now(), pruned_in: None }
    }

    /// Declares a series (see [`Store::ensure_series`]).
    pub fn series(&mut self, spec: &SeriesSpec) -> Result<SeriesId> {
        self.store.ensure_series(spec)
    }

    /// Records one value measured at `at`.
    pub fn record(&mut self, id: SeriesId, at: SystemTime, value: u64) {
        self.pending.entry((id, Hour::containing(at))).or_default().record(value);
    }

    /// Adds a histogram of values measured during `hour`.
    pub fn add(&mut self, id: SeriesId, hour: Hour, h: &Histogram) {
        if h.is_empty() {
            return;
        }
        match self.pending.get_mut(&(id, hour)) {
            Some(p) => p.merge(h),
            None => {
                self.pending.insert((id, hour), h.clone());
            }
        }
    }

    /// Values recorded and not yet flushed.
    pub fn pending_values(&self) -> u64 {
        self.pending.values().map(Histogram::count).sum()
    }

    /// The flush interval.
    pub fn flush_interval(&self) -> Duration {
        self.interval
    }

    /// Flushes if the interval has passed since the last flush.
    pub fn flush_if_due(&mut self) -> Result<Option<FlushStats>> {
        if self.last_flush.elapsed() < self.interval {
            return Ok(None);
        }
        self.flush().map(Some)
    }

    /// Merges everything pending into the store now (one transaction), then applies the
    /// retention if this is the first flush of the hour.
    pub fn flush(&mut self) -> Result<FlushStats> {
        let mut stats = FlushStats::default();
        if !self.pending.is_empty() {
            let items: Vec<(SeriesId, Hour, &Histogram)> =
                self.pending.iter().map(|(&(id, hour), h)| (id, hour, h)).collect();
            self.store.merge(&items)?;
            stats.histograms = items.len();
            stats.values = self.pending_values();
            self.pending.clear();
        }
        self.last_flush = Instant::now();
        let hour = Hour::now();
        if self.pruned_in != Some(hour) {
            stats.pruned = self.store.prune(SystemTime::now())?;
            self.pruned_in = Some(hour);
        }
        Ok(stats)
    }

    /// The store written to (for reads on the same connection).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The store, for writes other than histograms (retention, series).
    pub fn store_mut(&mut self) -> &mut Store {
        &mut self.store
    }
}

impl Drop for HourlyWriter {
    /// A writer dropped with values pending tries a last flush; an error then cannot be reported
    /// (those values are lost): call [`flush`](HourlyWriter::flush) before to see it.
    fn drop(&mut self) {
        if !self.pending.is_empty() {
            let _ = self.flush();
        }
    }
}
