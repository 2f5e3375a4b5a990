//! [`StoreSink`]: a run's interval histograms into a store, one series per probe.

use crate::probe::ProbeInfo;
use latscope_hist::Histogram;
use latscope_store::{kind, FlushStats, Hour, HourlyWriter, SeriesId, SeriesSpec, Store, StoreError};
use std::path::Path;
use std::time::{Duration, SystemTime};

/// The series a probe writes: kind `microbench`, the probe's name, unit, description and
/// parameters, on `host`.
pub fn series_spec(info: &ProbeInfo, host: &str) -> SeriesSpec {
    SeriesSpec {
        host: host.to_string(),
        name: info.name.clone(),
        kind: kind::MICROBENCH.into(),
        unit: info.unit.as_str().into(),
        description: info.description.clone(),
        params: info.params.clone(),
    }
}

/// Writes each interval of a [`Runner`](crate::Runner) into a store: the interval's histogram of
/// probe `i` is merged into the hour it was measured in, one flush (one transaction) per interval.
#[derive(Debug)]
pub struct StoreSink {
    writer: HourlyWriter,
    ids: Vec<SeriesId>,
    written: u64,
}

impl StoreSink {
    /// Opens (or creates) the store at `path`, sets its retention if `retention_days` is given, and
    /// declares one series per probe.
    pub fn open(
        path: &Path,
        host: &str,
        retention_days: Option<u32>,
        probes: &[ProbeInfo],
        flush: Duration,
    ) -> Result<StoreSink, StoreError> {
        let mut writer = HourlyWriter::new(Store::open(path)?, flush);
        if let Some(days) = retention_days {
            writer.store_mut().set_retention_days(Some(days))?;
        }
        let ids = probes.iter().map(|p| writer.series(&series_spec(p, host))).collect::<Result<_, _>>()?;
        Ok(StoreSink { writer, ids, written: 0 })
    }

    /// Adds the interval that started at `start` (`deltas[i]` for probe `i`) and flushes. A failed
    /// flush keeps its values for the next one.
    pub fn interval(&mut self, start: SystemTime, deltas: &[Histogram]) -> Result<FlushStats, StoreError> {
        let hour = Hour::containing(start);
        for (id, h) in self.ids.iter().zip(deltas) {
            self.writer.add(*id, hour, h);
        }
        let stats = self.writer.flush()?;
        self.written += stats.values;
        Ok(stats)
    }

    /// Values written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Values waiting for a successful flush.
    pub fn pending(&self) -> u64 {
        self.writer.pending_values()
    }

    /// Flushes what is pending (after failed flushes).
    pub fn flush(&mut self) -> Result<FlushStats, StoreError> {
        let stats = self.writer.flush()?;
        self.written += stats.values;
        Ok(stats)
    }

    /// The store's file.
    pub fn path(&self) -> &Path {
        self.writer.store().path()
    }
}
