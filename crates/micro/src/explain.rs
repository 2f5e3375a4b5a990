//! Explanations computed from a histogram alone (plus its series' parameters): what a person
//! would point out looking at it. Used by `latscope bench` and by dashboards over a store.
//!
//! * **Granularity**: values that are all (near) multiples of one step were measured with a clock
//!   of that granularity; `0` then means "less than one step", not "free".
//! * **Peaks** ([`latscope_hist::Histogram::peaks`]) by position; for I/O, labelled as the tier
//!   their position suggests: memory (the page cache: microseconds), a device (about 100 µs to
//!   milliseconds), or slower (queues, remote storage, timeouts).
//! * **Cache size**: random reads over a region of known size hit the cache in proportion to the
//!   part of it that is cached, so the memory tier's share times the region's size estimates how
//!   much of it is cached.

use crate::probe::Unit;
use latscope_event::units::fmt_bytes;
use latscope_hist::{Histogram, PeakOptions};
use serde::Serialize;
use serde_json::{Map, Value};

/// Below this, an I/O latency is a memory (page cache) hit.
pub const MEMORY_TIER_MAX_NS: f64 = 30_000.0;
/// Below this (and above [`MEMORY_TIER_MAX_NS`]), an I/O latency is a device's.
pub const DEVICE_TIER_MAX_NS: f64 = 30_000_000.0;

/// Fewest non-zero values from which a granularity is claimed.
const MIN_GRANULARITY_VALUES: u64 = 20;

/// The step all values are multiples of.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Granularity {
    /// The step, in the histogram's unit: the roundest number in `step_low ..= step_high`. 1 means
    /// no quantisation is visible (a fine-grained clock).
    pub step: u64,
    /// Lowest step the buckets allow.
    pub step_low: u64,
    /// Highest step the buckets allow.
    pub step_high: u64,
    /// The step is a sizeable part of the values (more than a quarter of their median, zeros
    /// included): values say how many steps passed rather than how long something took.
    pub coarse: bool,
    /// Share of values that are exactly 0 (less than one step).
    pub zero_share: f64,
}

/// The tier a latency's position suggests (I/O only).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    /// Below 30 µs: served from memory (the page cache).
    Memory,
    /// 30 µs to 30 ms: a device (flash ~100 µs, a disk's seek ~ms, a network volume).
    Device,
    /// 30 ms and above: queueing, remote storage, retries and timeouts.
    Slow,
}

impl Tier {
    /// The tier of a latency in ns.
    pub fn of_ns(ns: f64) -> Tier {
        if ns < MEMORY_TIER_MAX_NS {
            Tier::Memory
        } else if ns < DEVICE_TIER_MAX_NS {
            Tier::Device
        } else {
            Tier::Slow
        }
    }

    /// Words for people.
    pub fn label(self) -> &'static str {
        match self {
            Tier::Memory => "memory (page cache)",
            Tier::Device => "device",
            Tier::Slow => "slow (queueing, remote or timeouts)",
        }
    }
}

/// One peak of a histogram, with its tier when the values are I/O latencies.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PeakHint {
    /// Where the peak's maximum is: `mode_low ..= mode_high`, in the histogram's unit.
    pub mode_low: u64,
    /// See `mode_low`.
    pub mode_high: u64,
    /// Range of its basin.
    pub low: u64,
    /// See `low`.
    pub high: u64,
    /// Share of all values in its basin (the shares of all peaks add up to 1).
    pub share: f64,
    /// Values in its basin.
    pub count: u64,
    /// The tier its mode suggests (I/O latencies only).
    pub tier: Option<Tier>,
}

/// How much of a read region the page cache holds, from the share of memory-fast reads.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct CacheEstimate {
    /// Share of reads in memory-tier peaks.
    pub hit_share: f64,
    /// Bytes the reads were spread over.
    pub region_bytes: u64,
    /// `hit_share * region_bytes`.
    pub cached_bytes: u64,
}

/// Everything [`explain`] found.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Explanation {
    /// The quantisation step, if the values show one.
    pub granularity: Option<Granularity>,
    /// Peaks, fastest first.
    pub peaks: Vec<PeakHint>,
    /// Cache-size estimate (buffered reads of a region of known size).
    pub cache: Option<CacheEstimate>,
    /// The findings as sentences, with units.
    pub notes: Vec<String>,
}

/// Explains a histogram of a series of `kind` (`microbench`, `syscall`, `block`, ...) whose values
/// are in `unit` (`ns`, `ps`) and whose parameters are `params` (as stored with the series:
/// `probe`, `region`, `direct`, ...; `"io": true` marks other I/O latencies for tier labels).
pub fn explain(h: &Histogram, kind: &str, unit: &str, params: &Map<String, Value>) -> Explanation {
    let mut e = Explanation::default();
    let Some(unit) = Unit::parse(unit) else { return e };
    if h.is_empty() {
        return e;
    }
    let probe = params.get("probe").and_then(Value::as_str).unwrap_or("");
    let io = matches!(probe, "read" | "fsync") || kind == "block" || params.get("io") == Some(&Value::Bool(true));
    e.granularity = granularity(h);
    e.peaks = peaks(h, io.then_some(unit));
    if probe == "read" && params.get("direct") != Some(&Value::Bool(true)) {
        let region = params.get("region").or_else(|| params.get("file_size")).and_then(Value::as_u64);
        e.cache = region.and_then(|r| cache_estimate(&e.peaks, r));
    }
    let f = |v: u64| unit.format(v as f64);
    if let Some(g) = &e.granularity {
        if g.step > 1 {
            e.notes.push(format!(
                "values are multiples of {} ({}), the clock's granularity{}",
                f(g.step),
                if g.coarse { "coarse: they count steps" } else { "quantised" },
                if g.zero_share > 0.0 {
                    format!("; {} % read 0, less than one step", percent(g.zero_share))
                } else {
                    String::new()
                }
            ));
        } else if probe == "clock" {
            e.notes.push(format!("no quantisation above {}: a fine-grained clock", f(1)));
        }
    }
    if probe == "clock" {
        if let Some(mean) = h.mean() {
            e.notes.push(format!(
                "{} between consecutive reads on average (read cost, with recording)",
                unit.format(mean)
            ));
        }
    }
    if e.peaks.len() > 1 || e.peaks.iter().any(|p| p.tier.is_some()) {
        for p in &e.peaks {
            let tier = p.tier.map(|t| format!(": {}", t.label())).unwrap_or_default();
            e.notes.push(format!("peak at {} ({} % of values){tier}", f(p.mode_high), percent(p.share)));
        }
    }
    if let Some(c) = &e.cache {
        e.notes.push(format!(
            "{} % of reads came from memory: about {} of the {} read are cached",
            percent(c.hit_share),
            fmt_bytes(c.cached_bytes),
            fmt_bytes(c.region_bytes)
        ));
    }
    e
}

/// The peaks of `h` by position, with tiers if `io_unit` is given (the values are I/O latencies).
pub fn peaks(h: &Histogram, io_unit: Option<Unit>) -> Vec<PeakHint> {
    let mut out: Vec<PeakHint> = h
        .peaks(&PeakOptions::default())
        .into_iter()
        .map(|p| PeakHint {
            tier: io_unit.map(|u| Tier::of_ns(p.mode_high as f64 * u.ns())),
            mode_low: p.mode_low,
            mode_high: p.mode_high,
            low: p.low,
            high: p.high,
            share: p.share,
            count: p.count,
        })
        .collect();
    out.sort_by_key(|p| p.mode_low);
    out
}

/// The cache-size estimate from peaks labelled with tiers, for reads spread over `region` bytes.
pub fn cache_estimate(peaks: &[PeakHint], region_bytes: u64) -> Option<CacheEstimate> {
    if peaks.is_empty() || peaks.iter().any(|p| p.tier.is_none()) {
        return None;
    }
    let hit_share: f64 = peaks.iter().filter(|p| p.tier == Some(Tier::Memory)).map(|p| p.share).sum();
    Some(CacheEstimate { hit_share, region_bytes, cached_bytes: (hit_share * region_bytes as f64).round() as u64 })
}

/// The step all non-zero values of `h` are multiples of, if the buckets show one.
///
/// Takes the first bucket holding at least 1 % of the non-zero values as `k` steps (k = 1, 2,
/// ... 256, largest step first) and accepts the first step that every bucket narrow enough to tell
/// (narrower than half a step) fits, but for at most 1 % of their values, when such buckets hold at
/// least half of the values. Exact buckets (values below 256) give steps down to 1.
pub fn granularity(h: &Histogram) -> Option<Granularity> {
    let buckets: Vec<(u64, u64, u64)> = h.iter().collect();
    let zeros = buckets.first().filter(|b| b.1 == 0).map_or(0, |b| b.2);
    let positive: Vec<(u64, u64, u64)> = buckets.into_iter().filter(|b| b.1 > 0).collect();
    let n: u64 = positive.iter().map(|b| b.2).sum();
    if n < MIN_GRANULARITY_VALUES {
        return None;
    }
    let &(first_low, first_high, _) = positive.iter().find(|b| b.2 * 100 >= n)?;
    for k in 1..=256u64 {
        let (s_lo, s_hi) = (first_low as f64 / k as f64, first_high as f64 / k as f64);
        if s_hi < 1.0 {
            break;
        }
        let (mut informative, mut misfit) = (0u64, 0u64);
        for &(low, high, c) in &positive {
            // A little tolerance for a step that drifts (a tick slewed by NTP).
            let tol = low as f64 * 1e-3;
            let (lo, hi) = (low as f64 - tol, high as f64 + tol);
            let m = ((lo + hi) / (s_lo + s_hi)).round().max(1.0);
            if (hi - lo) + m * (s_hi - s_lo) >= s_lo / 2.0 {
                continue; // too wide to tell multiples of this step apart
            }
            informative += c;
            let fits = [m - 1.0, m, m + 1.0].iter().any(|&m| m >= 1.0 && m * s_lo <= hi && m * s_hi >= lo);
            if !fits {
                misfit += c;
            }
        }
        if informative * 2 >= n && misfit * 100 <= informative {
            let (step_low, step_high) = (s_lo.ceil().max(1.0) as u64, s_hi.floor().max(1.0) as u64);
            let step = roundest(step_low, step_high.max(step_low));
            // The median of all values, zeros included: a clock that mostly reads 0 is coarse
            // however long the rare non-zero differences (a descheduled thread) are.
            let median = h.value_at_quantile(0.5).unwrap_or(0);
            return Some(Granularity {
                step,
                step_low,
                step_high: step_high.max(step_low),
                coarse: step > 1 && step * 4 > median,
                zero_share: zeros as f64 / h.count() as f64,
            });
        }
    }
    None
}

/// A share as a percentage with one decimal, or as many as it takes not to show 0 or 100 for a
/// share that is neither (99.998 % is not 100 %).
fn percent(share: f64) -> String {
    let pct = share * 100.0;
    let gap = pct.min(100.0 - pct);
    let decimals = if gap <= 0.0 || gap >= 0.05 { 1 } else { (-gap.log10()).ceil().clamp(1.0, 6.0) as usize + 1 };
    format!("{pct:.decimals$}")
}

/// The number in `lo ..= hi` with the most trailing decimal zeros.
fn roundest(lo: u64, hi: u64) -> u64 {
    let mut unit = 10u64.pow(19);
    loop {
        let c = lo.div_ceil(unit) * unit;
        if c <= hi || unit == 1 {
            return c.min(hi).max(lo);
        }
        unit /= 10;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_write_ups_null_benchmark_is_a_1us_clock() {
        // 0, 1 µs and 2 µs, and one 15 µs outlier: all multiples of 1 µs.
        let mut h = Histogram::new();
        h.record_n(0, 8_000);
        h.record_n(1_000, 27_000);
        h.record_n(2_000, 8_000);
        h.record(15_000);
        let g = granularity(&h).unwrap();
        assert_eq!((g.step, g.coarse), (1_000, true), "{g:?}");
        assert!((g.zero_share - 8_000.0 / 43_001.0).abs() < 1e-12);
        let e = explain(&h, "microbench", "ns", &Map::new());
        assert!(e.notes[0].contains("multiples of 1.00us"), "{:?}", e.notes);
    }

    #[test]
    fn a_coarse_tick_with_jitter_and_missed_ticks() {
        let mut h = Histogram::new();
        h.record_n(0, 1_000_000);
        for i in 0..300u64 {
            h.record(4_000_000 + (i % 3) - 1);
        }
        h.record_n(8_000_001, 5);
        let g = granularity(&h).unwrap();
        assert_eq!((g.step, g.coarse), (4_000_000, true), "{g:?}");
        assert!(g.step_low <= 4_000_000 && g.step_high >= 4_000_000);
    }

    #[test]
    fn fine_clocks_have_step_1_and_smooth_latencies_none() {
        let mut fine = Histogram::new();
        for v in 14..60u64 {
            fine.record_n(v, 1000 + v * 10);
        }
        fine.record_n(1_234_567, 3); // preemption
        assert_eq!(granularity(&fine).map(|g| (g.step, g.coarse)), Some((1, false)));
        let smooth: Histogram = (0..50_000u64).map(|i| 900 + (i * 7919) % 2000).collect();
        assert_eq!(granularity(&smooth), None);
        let few: Histogram = [1_000u64, 2_000, 3_000].into_iter().collect();
        assert_eq!(granularity(&few), None, "three values prove nothing");
        let two_tiers: Histogram = (0..20_000u64)
            .map(|i| if i % 3 == 0 { 150_000 + (i * 31) % 90_000 } else { 1_200 + (i * 7) % 600 })
            .collect();
        assert_eq!(granularity(&two_tiers), None);
    }

    #[test]
    fn read_peaks_are_tiers_and_the_memory_share_estimates_the_cache() {
        let mut h = Histogram::new();
        for i in 0..3_000u64 {
            h.record(1_300 + (i * 37) % 400); // page cache hits
        }
        for i in 0..7_000u64 {
            h.record(120_000 + (i * 7919) % 80_000); // device reads
        }
        let mut params = Map::new();
        params.insert("probe".into(), "read".into());
        params.insert("region".into(), (256u64 << 20).into());
        let e = explain(&h, "microbench", "ns", &params);
        assert_eq!(e.peaks.len(), 2, "{e:?}");
        assert_eq!((e.peaks[0].tier, e.peaks[1].tier), (Some(Tier::Memory), Some(Tier::Device)));
        let c = e.cache.unwrap();
        assert!((c.hit_share - 0.3).abs() < 0.01, "{c:?}");
        assert!((c.cached_bytes as f64 - 0.3 * (256 << 20) as f64).abs() < 0.01 * (256 << 20) as f64);
        assert!(e.notes.iter().any(|n| n.contains("are cached")), "{:?}", e.notes);
        // O_DIRECT reads bypass the cache: no estimate. Loops are not I/O: no tiers.
        params.insert("direct".into(), true.into());
        assert!(explain(&h, "microbench", "ns", &params).cache.is_none());
        params.insert("probe".into(), "sin".into());
        assert!(explain(&h, "microbench", "ps", &params).peaks.iter().all(|p| p.tier.is_none()));
        assert_eq!(explain(&h, "x", "bytes", &params), Explanation::default());
    }

    #[test]
    fn percentages_are_never_rounded_to_0_or_100() {
        assert_eq!(percent(0.313), "31.3");
        assert_eq!(percent(1.0), "100.0");
        assert_eq!(percent(0.999_985), "99.9985");
        assert_eq!(percent(0.000_2), "0.020");
        assert_eq!(percent(0.0), "0.0");
    }

    #[test]
    fn roundest_numbers() {
        assert_eq!(roundest(3_997_696, 4_014_079), 4_000_000);
        assert_eq!(roundest(1_000, 1_003), 1_000);
        assert_eq!(roundest(1, 1), 1);
        assert_eq!(roundest(17, 19), 17); // no multiple of 10 inside: the lowest
    }
}
