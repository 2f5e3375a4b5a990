//! The JSON behind the store pages: every series with its latest hour and its p50/p99 trend
//! ([`overview`]), and one series hour by hour with its peaks explained ([`detail`]).

use crate::params::{ParamError, Params};
use latscope_hist::Histogram;
use latscope_store::{Hour, HourStats, Series, SeriesId, Store, StoreError, HOUR_SECS};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Most hours of history in an overview trend (31 days).
pub const MAX_TREND_HOURS: i64 = 31 * 24;
/// Most hours one detail page shows.
pub const MAX_DETAIL_HOURS: i64 = 31 * 24;
/// Most bins of one detail histogram.
pub const MAX_BUCKETS: usize = 1000;
/// Most numbers in one detail page's per-hour bins (hours x buckets).
pub const MAX_DETAIL_CELLS: usize = 200_000;
/// Entries of the per-hour summary cache (about 100 bytes each).
const CACHE_ENTRIES: usize = 200_000;

/// What a store page failed on.
#[derive(Debug, thiserror::Error)]
pub enum StoredError {
    /// The server has no store.
    #[error("no store: start latscope serve with --store FILE ('latscope bench --store FILE' writes one)")]
    NoStore,
    /// The store could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A parameter is wrong.
    #[error(transparent)]
    Param(#[from] ParamError),
    /// The series asked for does not exist.
    #[error("no series {0} in the store")]
    NoSeries(String),
}

/// The count and percentiles of one stored hour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HourSummary {
    /// Values recorded.
    pub count: u64,
    /// Median (see `Histogram::value_at_quantile`).
    pub p50: Option<u64>,
    /// 99th percentile.
    pub p99: Option<u64>,
}

impl HourSummary {
    fn of(h: &Histogram) -> HourSummary {
        HourSummary { count: h.count(), p50: h.value_at_quantile(0.5), p99: h.value_at_quantile(0.99) }
    }
}

/// Read-only access to a store file from many request threads: a pool of connections (one
/// `Store` per thread at a time) and a cache of hourly percentiles, checked against each hour's
/// last update so that a writer's merges are seen at once.
pub struct StoreReader {
    path: PathBuf,
    idle: Mutex<Vec<Store>>,
    cache: Mutex<HashMap<(i64, i64), (i64, HourSummary)>>,
    rows: Mutex<HashMap<SeriesId, (Fingerprint, Value, Value)>>,
}

/// What identifies the data of a series: merges only add values (so its count grows) and
/// retention drops hours (so its extent changes). Unchanged, its overview row is too.
type Fingerprint = (Option<Hour>, Option<Hour>, u64, u64, i64);

fn fingerprint(s: &Series, trend_hours: i64) -> Fingerprint {
    (s.first_hour, s.last_hour, s.hours, s.count, trend_hours)
}

impl StoreReader {
    /// Checks that `path` opens as a store (read-only) and keeps that connection.
    pub fn open(path: &Path) -> Result<StoreReader, StoreError> {
        let first = Store::open_read_only(path)?;
        Ok(StoreReader {
            path: path.to_path_buf(),
            idle: Mutex::new(vec![first]),
            cache: Mutex::default(),
            rows: Mutex::default(),
        })
    }

    /// The store file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` with a connection of the pool (opening one if all are in use).
    pub fn with<T>(&self, f: impl FnOnce(&Store) -> Result<T, StoredError>) -> Result<T, StoredError> {
        let store = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let store = match store {
            Some(s) => s,
            None => Store::open_read_only(&self.path)?,
        };
        let r = f(&store);
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < 8 {
            idle.push(store);
        }
        r
    }

    /// Summaries of the hours of `s` in `range`: from the cache when an hour was not updated since,
    /// else decoded (and cached).
    fn summaries(
        &self,
        store: &Store,
        s: &Series,
        range: std::ops::Range<Hour>,
    ) -> Result<Vec<(Hour, HourSummary)>, StoredError> {
        let stats: Vec<HourStats> = store.hour_stats(s.id, range.clone())?;
        let mut out: Vec<Option<HourSummary>> = Vec::with_capacity(stats.len());
        let mut stale = 0;
        {
            let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            for st in &stats {
                let hit = cache.get(&(s.id.0, st.hour.start_unix_secs())).filter(|(u, _)| *u == st.updated_ms);
                stale += usize::from(hit.is_none());
                out.push(hit.map(|(_, v)| *v));
            }
        }
        if stale > 0 {
            let decoded = store.hours(s.id, range)?;
            let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            if cache.len() + decoded.len() > CACHE_ENTRIES {
                cache.clear();
            }
            let by_hour: HashMap<i64, HourSummary> = decoded
                .iter()
                .map(|h| {
                    let sum = HourSummary::of(&h.histogram);
                    cache.insert((s.id.0, h.hour.start_unix_secs()), (h.updated_ms, sum));
                    (h.hour.start_unix_secs(), sum)
                })
                .collect();
            // Rows decoded now are the truth (a merge may have landed between the two reads).
            return Ok(decoded.iter().map(|h| (h.hour, by_hour[&h.hour.start_unix_secs()])).collect());
        }
        Ok(stats.iter().zip(out).map(|(st, sum)| (st.hour, sum.expect("all cached"))).collect())
    }
}

fn series_json(s: &Series) -> Value {
    json!({
        "id": s.id,
        "host": s.spec.host,
        "name": s.spec.name,
        "kind": s.spec.kind,
        "unit": s.spec.unit,
        "description": s.spec.description,
        "params": s.spec.params,
        "first_hour": s.first_hour,
        "last_hour": s.last_hour,
        "hours": s.hours,
        "count": s.count,
    })
}

/// The overview: every series, its latest hour (count, p50, p99, max and the histogram regrouped
/// into 10 bins per decade for a sparkline) and, per stored hour, count, p50 and p99 (at most the
/// last `hours`, default [`MAX_TREND_HOURS`]). Rows of series whose data did not change since the
/// last overview (same extent and count) are reused.
pub fn overview(r: &StoreReader, p: &Params) -> Result<Value, StoredError> {
    let hours = p.int("hours", 1, MAX_TREND_HOURS)?.unwrap_or(MAX_TREND_HOURS);
    r.with(|store| {
        let series = store.series()?;
        let mut out = Vec::with_capacity(series.len());
        for s in &series {
            let fp = fingerprint(s, hours);
            let cached = r.rows.lock().unwrap_or_else(|e| e.into_inner()).get(&s.id).filter(|c| c.0 == fp).cloned();
            let (latest, trend) = match cached {
                Some((_, l, t)) => (l, t),
                None => {
                    let latest = match store.latest(s.id)? {
                        Some(h) => latest_json(h.hour, &h.histogram),
                        None => Value::Null,
                    };
                    let trend = match s.last_hour {
                        Some(last) => {
                            let from = s.first_hour.unwrap_or(last).max(last.plus(1 - hours));
                            let sums = r.summaries(store, s, from..last.next())?;
                            Value::Array(sums.iter().map(|(h, x)| json!([h, x.count, x.p50, x.p99])).collect())
                        }
                        None => json!([]),
                    };
                    r.rows.lock().unwrap_or_else(|e| e.into_inner()).insert(s.id, (fp, latest.clone(), trend.clone()));
                    (latest, trend)
                }
            };
            let mut v = series_json(s);
            v["latest"] = latest;
            v["trend"] = trend;
            out.push(v);
        }
        Ok(json!({
            "store": r.path().display().to_string(),
            "now_hour": Hour::now(),
            "trend_columns": ["hour", "count", "p50", "p99"],
            "series": out,
        }))
    })
}

fn latest_json(hour: Hour, h: &Histogram) -> Value {
    let bins: Vec<Value> = match (h.min(), h.max()) {
        (Some(lo), Some(hi)) => h.regroup(10, lo, hi).iter().map(|&(a, b, c)| json!([a, b, c])).collect(),
        _ => Vec::new(),
    };
    json!({
        "hour": hour,
        "count": h.count(),
        "min": h.min(),
        "max": h.max(),
        "p50": h.value_at_quantile(0.5),
        "p99": h.value_at_quantile(0.99),
        "bins": bins,
    })
}

/// Finds the series a detail request names: `id=N`, or `op=NAME` (the name, as in the write-up's
/// `op_detail` page) with an optional `host`.
fn find(store: &Store, p: &Params) -> Result<Series, StoredError> {
    if let Some(id) = p.int("id", 0, i64::MAX)? {
        return store.series_by_id(SeriesId(id)).map_err(|e| match e {
            StoreError::NoSuchSeries { .. } => StoredError::NoSeries(format!("with id {id}")),
            e => e.into(),
        });
    }
    let Some(name) = p.str("op", 256)?.or(p.str("name", 256)?) else {
        return Err(ParamError::Missing("id (or op, the series name)".into()).into());
    };
    let host = p.str("host", 256)?;
    let mut matches: Vec<Series> = store
        .series()?
        .into_iter()
        .filter(|s| s.spec.name == name && host.as_deref().is_none_or(|h| s.spec.host == h))
        .collect();
    match matches.len() {
        0 => Err(StoredError::NoSeries(format!("named '{name}'"))),
        1 => Ok(matches.remove(0)),
        _ => Err(ParamError::Invalid("host".into(), format!("several hosts have a series '{name}': add host=")).into()),
    }
}

/// The scale of a detail page's x axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// Bins of equal width.
    Linear,
    /// Bins of equal ratio.
    Log,
}

/// Bin edges: `n + 1` increasing values from `lo` to `hi`.
pub fn edges(lo: f64, hi: f64, n: usize, scale: Scale) -> Vec<f64> {
    let n = n.max(1);
    let hi = if hi > lo { hi } else { lo + 1.0 };
    (0..=n)
        .map(|i| {
            let f = i as f64 / n as f64;
            match scale {
                Scale::Linear => lo + (hi - lo) * f,
                Scale::Log => lo * (hi / lo).powf(f),
            }
        })
        .collect()
}

/// Counts of `h` in the bins of `edges`: each bucket goes whole to the bin of its middle (so the
/// counts add up to the histogram's), buckets beyond the ends to the first or last bin. With a log
/// scale, zeros have no place on the axis: they are returned apart.
pub fn bin(h: &Histogram, edges: &[f64], scale: Scale) -> (Vec<u64>, u64) {
    let n = edges.len().saturating_sub(1).max(1);
    let mut counts = vec![0u64; n];
    let mut zeros = 0;
    for (low, high, c) in h.iter() {
        if scale == Scale::Log && high == 0 {
            zeros += c;
            continue;
        }
        let mid = (low as f64 + high as f64) / 2.0;
        let i = edges.partition_point(|&e| e <= mid).saturating_sub(1).min(n - 1);
        counts[i] += c;
    }
    (counts, zeros)
}

/// One series hour by hour (the write-up's op_detail page): the hours from `hoursAgo` hours
/// before the current hour (default 24; or before `end`, an hour in seconds since the epoch), `hours`
/// of them (default: up to the end), each as `buckets` bins (default 100) on a `scale=log|linear`
/// axis shared by all hours (`min`, `max` in the series' unit narrow it), with count, p50, p99 and
/// its peaks; and the whole window merged, with its explanation (granularity, peaks as tiers,
/// cache-size estimate when the file size is known).
pub fn detail(r: &StoreReader, p: &Params) -> Result<Value, StoredError> {
    let hours_ago = p.int("hoursAgo", 1, MAX_DETAIL_HOURS)?.unwrap_or(24);
    let hours = p.int("hours", 1, MAX_DETAIL_HOURS)?;
    let buckets = p.int("buckets", 1, MAX_BUCKETS as i64)?.unwrap_or(100) as usize;
    let scale = match p.str("scale", 16)?.as_deref() {
        None | Some("log") => Scale::Log,
        Some("linear") => Scale::Linear,
        Some(other) => return Err(ParamError::Invalid("scale".into(), format!("'{other}': use log or linear")).into()),
    };
    let end = match p.int("end", -(1 << 40), 1 << 40)? {
        Some(secs) => Hour::from_unix_secs(secs),
        None => Hour::now().next(),
    };
    let from = end.plus(-hours_ago);
    let to = match hours {
        Some(h) => from.plus(h).min(end),
        None => end,
    };
    let n_hours = ((to.start_unix_secs() - from.start_unix_secs()) / HOUR_SECS).max(0) as usize;
    if n_hours * buckets > MAX_DETAIL_CELLS {
        return Err(ParamError::Invalid(
            "buckets".into(),
            format!("{n_hours} hours x {buckets} buckets is more than {MAX_DETAIL_CELLS} bins: ask for fewer"),
        )
        .into());
    }
    let min = p.int("min", 0, i64::MAX)?;
    let max = p.int("max", 0, i64::MAX)?;
    r.with(|store| {
        let s = find(store, p)?;
        let stored = store.hours(s.id, from..to)?;
        let mut merged = Histogram::new();
        for h in &stored {
            merged.merge(&h.histogram);
        }
        let (spec, unit) = (&s.spec, s.spec.unit.as_str());
        let explanation = latscope_micro::explain(&merged, &spec.kind, unit, &spec.params);
        let positive_min = merged.iter().find(|b| b.1 > 0).map(|b| b.0.max(1));
        let lo = match (min, scale) {
            (Some(m), Scale::Log) => (m as f64).max(1.0),
            (Some(m), Scale::Linear) => m as f64,
            (None, Scale::Log) => positive_min.unwrap_or(1) as f64,
            (None, Scale::Linear) => merged.min().unwrap_or(0) as f64,
        };
        let hi = max.map(|m| m as f64).or(merged.max().map(|m| m as f64)).unwrap_or(lo + 1.0).max(lo + 1.0);
        let e = edges(lo, hi, buckets, scale);
        let hist_json = |h: &Histogram, ex: &latscope_micro::Explanation| {
            let (counts, zeros) = bin(h, &e, scale);
            json!({
                "count": h.count(),
                "min": h.min(),
                "max": h.max(),
                "mean": h.mean(),
                "p50": h.value_at_quantile(0.5),
                "p90": h.value_at_quantile(0.9),
                "p99": h.value_at_quantile(0.99),
                "bins": counts,
                "zeros": zeros,
                "peaks": ex.peaks,
                "notes": ex.notes,
            })
        };
        // Each hour's peaks, tiered like the window's (the window's notes say the rest; finding a
        // clock's granularity in every hour would cost more than everything else here).
        let io_unit =
            explanation.peaks.iter().any(|p| p.tier.is_some()).then(|| latscope_micro::Unit::parse(unit)).flatten();
        let hours_json: Vec<Value> = stored
            .iter()
            .map(|h| {
                let ex = latscope_micro::Explanation {
                    peaks: latscope_micro::explain::peaks(&h.histogram, io_unit),
                    ..Default::default()
                };
                let mut v = hist_json(&h.histogram, &ex);
                v["hour"] = json!(h.hour);
                v
            })
            .collect();
        let mut m = hist_json(&merged, &explanation);
        m["explanation"] = json!(explanation);
        Ok(json!({
            "series": series_json(&s),
            "window": {"from": from, "to": to, "hours": n_hours, "hours_ago": hours_ago, "end": end},
            "scale": match scale { Scale::Log => "log", Scale::Linear => "linear" },
            "buckets": buckets,
            "edges": e,
            "merged": m,
            "hours": hours_json,
        }))
    })
}

/// The series list (ids, names, extents).
pub fn series_list(r: &StoreReader) -> Result<Value, StoredError> {
    r.with(|store| Ok(json!({ "series": store.series()?.iter().map(series_json).collect::<Vec<_>>() })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_conserve_counts_on_both_scales() {
        let mut h = Histogram::new();
        h.record_n(0, 5);
        for v in [1u64, 10, 999, 1_000, 1_001, 50_000, 1 << 30] {
            h.record_n(v, 3);
        }
        for scale in [Scale::Log, Scale::Linear] {
            let lo = if scale == Scale::Log { 1.0 } else { 0.0 };
            let e = edges(lo, (1u64 << 30) as f64, 37, scale);
            assert_eq!(e.len(), 38);
            assert!(e.windows(2).all(|w| w[0] < w[1]));
            let (c, zeros) = bin(&h, &e, scale);
            assert_eq!(c.iter().sum::<u64>() + zeros, h.count(), "{scale:?}");
            assert_eq!(zeros, if scale == Scale::Log { 5 } else { 0 });
            assert_eq!(*c.last().unwrap(), 3, "the largest value is in the last bin");
        }
        // A narrowed range puts what is outside into the end bins. Edges 100, 316, 1000, 3162,
        // 10000: 999 is in bucket 996..=999 (below 1000), 1000 and 1001 in 1000..=1003.
        let e = edges(100.0, 10_000.0, 4, Scale::Log);
        let (c, _) = bin(&h, &e, Scale::Log);
        assert_eq!(c, vec![3 + 3, 3, 6, 6]);
    }
}
