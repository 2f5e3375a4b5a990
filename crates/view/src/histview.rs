//! High-resolution histograms: terminal, SVG and JSON, with every peak pointed out.
//!
//! The distribution is a [`latscope_hist::Histogram`] (buckets 1/128 wide, so percentiles are
//! within 0.78 % and features like a 1 us clock granularity or a doubled peak at 500 us stay
//! visible). What is shown:
//!
//! * count, exact min, mean and max, and p50/p90/p99/p99.9/p99.99;
//! * the distribution in bins: logarithmic (`per_decade` bins per decade on a global grid, so
//!   1 us, 10 us ... are bin edges), linear (bins of a 1-2-5 width), or every non-empty bucket of
//!   the histogram (`Full`). A bucket goes whole to the bin holding its midpoint;
//! * the peaks ([`Histogram::peaks`]): where each mode is, the share of events in it and how wide
//!   it is, so that each can be explained (a cache tier, a device, a retry timeout, a clock).

use crate::group::{GroupBy, Grouper};
use crate::heatmap::{EventPoints, YField, YUnit};
use crate::svg::{self, Svg, SERIES_COLORS};
use crate::waits::{Counted, LeftOut};
use latscope_event::source::{Chunk, ZonePlan};
use latscope_event::{EventKind, TraceHeader};
use latscope_hist::{Histogram, LogGrid, Peak, PeakOptions};
use serde_json::{json, Value};
use std::fmt::Write;

/// How to bin the value axis.
#[derive(Debug, Clone, PartialEq)]
pub enum HistScale {
    /// Logarithmic bins, this many per decade.
    Log {
        /// Bins per decade (1 ..= 1000).
        per_decade: u32,
    },
    /// Linear bins of a 1-2-5 width, about `bins` of them over `[min, max]` (default: the data's).
    Linear {
        /// Bins wanted.
        bins: usize,
        /// Smallest value shown.
        min: Option<u64>,
        /// Largest value shown.
        max: Option<u64>,
    },
    /// Every non-empty bucket of the histogram (1/128 wide).
    Full,
}

/// Display options.
#[derive(Debug, Clone)]
pub struct HistOptions {
    /// Bins.
    pub scale: HistScale,
    /// Unit of the values.
    pub unit: YUnit,
    /// Width of the longest bar in characters.
    pub bar_width: usize,
    /// Peak finding.
    pub peaks: PeakOptions,
    /// What the values are (`syscall latency`).
    pub what: String,
    /// The filter the events were selected with, named in headings and titles.
    pub filter: Option<String>,
    /// What was left out of the histograms (blocking waits), under the SVG's title.
    pub note: Option<String>,
    /// SVG: one value axis for all panels (the default), or each panel its own.
    pub shared_x: bool,
    /// SVG: counts on a logarithmic axis, so that tails of a few events stay visible.
    pub log_y: bool,
    /// SVG: the picture's width in pixels (at least 400).
    pub svg_width: f64,
}

impl Default for HistOptions {
    fn default() -> Self {
        HistOptions {
            scale: HistScale::Log { per_decade: 20 },
            unit: YUnit::Nanos,
            bar_width: 40,
            peaks: PeakOptions::default(),
            what: "latency".into(),
            filter: None,
            note: None,
            shared_x: true,
            log_y: false,
            svg_width: 900.0,
        }
    }
}

/// One displayed bin: `lo <= v < hi`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bin {
    /// Lower bound (inclusive).
    pub lo: f64,
    /// Upper bound (exclusive).
    pub hi: f64,
    /// Events.
    pub count: u64,
}

/// Percentiles reported everywhere.
pub const PERCENTILES: [f64; 5] = [50.0, 90.0, 99.0, 99.9, 99.99];

/// Names of [`PERCENTILES`].
pub const PERCENTILE_NAMES: [&str; 5] = ["p50", "p90", "p99", "p99.9", "p99.99"];

/// The bins of `h` for `scale`; the second value counts events outside a linear range.
pub fn bins(h: &Histogram, scale: &HistScale) -> (Vec<Bin>, u64) {
    let (Some(min), Some(max)) = (h.min(), h.max()) else { return (Vec::new(), 0) };
    match *scale {
        HistScale::Full => {
            (h.iter().map(|(lo, hi, c)| Bin { lo: lo as f64, hi: hi as f64 + 1.0, count: c }).collect(), 0)
        }
        HistScale::Log { per_decade } => {
            let b = h
                .regroup(per_decade.max(1), min, max)
                .into_iter()
                .map(|(lo, hi, c)| Bin { lo, hi, count: c })
                .collect();
            (b, 0)
        }
        HistScale::Linear { bins, min: lo, max: hi } => {
            let lo = lo.unwrap_or(min);
            let hi = hi.unwrap_or(max).max(lo);
            let width = svg::nice_step((hi - lo) as f64 / bins.max(1) as f64).max(1.0).round();
            let start = (lo as f64 / width).floor() * width;
            let n = (((hi as f64 - start) / width).floor() as usize + 1).min(100_000);
            let mut out: Vec<Bin> = (0..n)
                .map(|k| Bin { lo: start + k as f64 * width, hi: start + (k + 1) as f64 * width, count: 0 })
                .collect();
            let mut outside = 0;
            for (blo, bhi, c) in h.iter() {
                let mid = (blo as f64 + bhi as f64) / 2.0;
                if mid < lo as f64 || mid > hi as f64 + 0.5 {
                    outside += c;
                    continue;
                }
                let k = (((mid - start) / width).floor().max(0.0) as usize).min(n - 1);
                out[k].count += c;
            }
            (out, outside)
        }
    }
}

/// The summary numbers as `(name, value)`: count, min, mean, percentiles, max.
pub fn stats(h: &Histogram) -> Vec<(&'static str, Option<f64>)> {
    let mut v = vec![("min", h.min().map(|x| x as f64)), ("mean", h.mean())];
    for (name, p) in PERCENTILE_NAMES.iter().zip(h.percentiles(&PERCENTILES)) {
        v.push((name, p.map(|x| x as f64)));
    }
    v.push(("max", h.max().map(|x| x as f64)));
    v
}

/// For each peak, the displayed bin holding its mode: where its marker goes, so that the marker,
/// the mode the peak line gives and the dashed line of the SVG describe one bar. The mode is
/// found on the peak finder's grid (`opts.bins_per_decade`, 8 % steps by default), so a mode
/// closer than one step to the edge of a wide bin belongs to either side: then the side holding
/// more of the peak's events, the bar an eye takes for the peak. When the mode lies outside the
/// bins shown (`--linear --min/--max`), the bin holding most of the peak's events (`None` when
/// none of them is shown). A bin is never marked for the events of a neighbouring peak.
pub fn peak_bins(h: &Histogram, bins: &[Bin], peaks: &[Peak], opts: &PeakOptions) -> Vec<Option<usize>> {
    let step = 10f64.powf(1.0 / f64::from(opts.bins_per_decade.clamp(1, 1000))) - 1.0;
    let (Some(first), Some(last)) = (bins.first(), bins.last()) else { return vec![None; peaks.len()] };
    let bin_of = |mid: f64| {
        (mid >= first.lo && mid < last.hi).then(|| bins.partition_point(|b| b.hi <= mid).min(bins.len() - 1))
    };
    // Events of each peak in each bin: buckets lie wholly in one basin and go whole to the bin of
    // their midpoint, as in `bins`.
    let mut per = vec![vec![0u64; bins.len()]; peaks.len()];
    for (lo, hi, c) in h.iter() {
        let (Some(k), Some(b)) = (
            peaks.iter().position(|p| hi >= p.low && lo <= p.high),
            bin_of(if hi == 0 { 0.0 } else { (lo as f64 + hi as f64 + 1.0) / 2.0 }),
        ) else {
            continue;
        };
        per[k][b] += c;
    }
    peaks
        .iter()
        .zip(&per)
        .map(|(p, counts)| {
            // The mode bucket's midpoint: the bin a bucket of the mode is counted in.
            let mode = if p.mode_high == 0 { 0.0 } else { (p.mode_low as f64 + p.mode_high as f64 + 1.0) / 2.0 };
            let at_edge = |b: usize, edge: f64| {
                let bin = &bins[b];
                // Only bins wider than the grid's step: every bucket (`--full`) is narrower.
                bin.hi - bin.lo > step * bin.lo.max(1.0) && (mode - edge).abs() <= step * edge
            };
            let side = |b: usize| {
                let mut best = b;
                if b > 0 && at_edge(b, bins[b].lo) && counts[b - 1] > counts[best] {
                    best = b - 1;
                }
                if b + 1 < bins.len() && at_edge(b, bins[b].hi) && counts[b + 1] > counts[best] {
                    best = b + 1;
                }
                best
            };
            bin_of(mode).filter(|&b| counts[b] > 0).map(side).or_else(|| {
                (0..bins.len()).filter(|&b| counts[b] > 0).max_by_key(|&b| (counts[b], std::cmp::Reverse(b)))
            })
        })
        .collect()
}

/// Labels of the bins' bounds, with as many significant digits (3 to 7) as it takes for
/// neighbouring bounds to read differently (a full-resolution histogram's buckets are 0.78 % wide).
pub fn bin_labels(bins: &[Bin], u: &YUnit) -> Vec<(String, String)> {
    let mut digits = 3;
    loop {
        let labels: Vec<(String, String)> =
            bins.iter().map(|b| (u.fmt_digits(b.lo, digits), u.fmt_digits(b.hi, digits))).collect();
        let distinct = labels.iter().all(|(a, b)| a != b) && labels.windows(2).all(|w| w[0].0 != w[1].0);
        if distinct || digits >= 7 {
            return labels;
        }
        digits += 1;
    }
}

/// One line per peak: mode, share, where most of it lies and how wide that is, and its basin.
pub fn describe_peak(k: usize, p: &Peak, u: &YUnit) -> String {
    let mode = if p.mode_low == p.mode_high {
        u.fmt(p.mode_low as f64)
    } else {
        let (lo, hi) = distinct_pair(u, p.mode_low as f64, p.mode_high as f64);
        format!("{lo}..{hi}")
    };
    let (a, b) = (p.core_low, p.core_high);
    let width = if a == 0 {
        "from 0".to_string()
    } else if b as f64 >= 2.0 * a as f64 {
        format!("{:.1}x wide", b as f64 / a as f64)
    } else {
        format!("{:.0}% wide", (b as f64 / a as f64 - 1.0) * 100.0)
    };
    let (ca, cb) = distinct_pair(u, a as f64, b as f64);
    let mut s = format!(
        "peak {}: mode {mode}, {}% of events ({}); 80% of it within {ca} .. {cb} ({width}); basin {} .. {}",
        k + 1,
        fmt_share(p.share),
        p.count,
        u.fmt(p.low as f64),
        u.fmt(p.high as f64)
    );
    if let Some(v) = p.unresolved {
        let _ = write!(
            s,
            "; with a smaller cluster near {} in that range, too few events to tell from noise",
            u.fmt(v as f64)
        );
    }
    s
}

/// A share as a percentage without the `%`: one decimal, but two significant digits for a tiny one
/// (`0.0024`) and as many as it takes for nearly all not to read as all (`99.998`, not `100.0`).
pub fn fmt_share(share: f64) -> String {
    let p = share * 100.0;
    if p > 0.0 && p < 0.1 {
        let digits = (-p.log10()).ceil() as usize + 1;
        format!("{p:.digits$}")
    } else if (99.95..100.0).contains(&p) {
        let digits = ((-(100.0 - p).log10()).ceil() as usize + 1).min(8);
        format!("{p:.digits$}")
    } else {
        format!("{p:.1}")
    }
}

/// Two values with enough digits to tell them apart (when they differ).
fn distinct_pair(u: &YUnit, a: f64, b: f64) -> (String, String) {
    let mut digits = 3;
    loop {
        let (x, y) = (u.fmt_digits(a, digits), u.fmt_digits(b, digits));
        if x != y || a == b || digits >= 7 {
            return (x, y);
        }
        digits += 1;
    }
}

const EIGHTHS: [&str; 9] = ["", "▏", "▎", "▍", "▌", "▋", "▊", "▉", "█"];

fn bar(count: u64, max: u64, width: usize) -> String {
    if max == 0 || count == 0 {
        return String::new();
    }
    let eighths = ((count as f64 / max as f64) * width as f64 * 8.0).round().max(1.0) as usize;
    let mut s = "█".repeat(eighths / 8);
    s.push_str(EIGHTHS[eighths % 8]);
    s
}

/// The heading of one group: what, the filter, the group (unless it is the one group `all`) and
/// its count.
fn heading(name: &str, h: &Histogram, o: &HistOptions) -> String {
    let filter = o.filter.as_deref().map(|f| format!(" of '{f}'")).unwrap_or_default();
    let group = if name == "all" { String::new() } else { format!(" — {name}") };
    format!("{}{filter}{group}: {} events", o.what, h.count())
}

/// The terminal histogram of one group.
pub fn render_text(name: &str, h: &Histogram, o: &HistOptions) -> String {
    let mut s = String::new();
    let u = &o.unit;
    let _ = writeln!(s, "{}", crate::text::clean(&heading(name, h, o)));
    if h.is_empty() {
        return s;
    }
    let st = stats(h);
    let fmt = |v: Option<f64>| v.map(|x| u.fmt(x)).unwrap_or_else(|| "-".into());
    let line1: Vec<String> = st.iter().map(|(n, v)| format!("{n} {}", fmt(*v))).collect();
    let _ = writeln!(s, "  {}", line1.join("  "));
    if h.clamped_high() > 0 {
        let _ = writeln!(
            s,
            "  ({} values above {} counted in the top bucket)",
            h.clamped_high(),
            u.fmt(h.max_trackable() as f64)
        );
    }
    let peaks = h.peaks(&o.peaks);
    let (bins, outside) = bins(h, &o.scale);
    let labels = bin_labels(&bins, u);
    let marks = peak_bins(h, &bins, &peaks, &o.peaks);
    let maxc = bins.iter().map(|b| b.count).max().unwrap_or(0);
    let total = h.count().max(1) as f64;
    let _ = writeln!(s, "  {:>10}   {:<10} {:>10} {:>7}", "from", "to", "count", "share");
    let mut k = 0;
    while k < bins.len() {
        // Collapse runs of 3 or more near-empty bins (each under 0.5 % of the events and a bar
        // under one character, none a peak's) into a line saying how many events they hold: a
        // sparse tail takes a line, not fifty.
        let near_empty = |j: usize| {
            let c = bins[j].count;
            c as f64 * 200.0 < total && (c as f64 * o.bar_width as f64) < maxc as f64 && !marks.contains(&Some(j))
        };
        if near_empty(k) {
            // Empty bins and near-empty ones make separate runs: a run never joins the sparse
            // edges of two populations across the gap between them.
            let empty = bins[k].count == 0;
            let mut e = k;
            while e < bins.len() && near_empty(e) && (bins[e].count == 0) == empty {
                e += 1;
            }
            if e - k >= 3 {
                let n: u64 = bins[k..e].iter().map(|b| b.count).sum();
                let what = if n == 0 {
                    format!("({} empty)", e - k)
                } else {
                    format!("({} bins, {n} events, each under 0.5%)", e - k)
                };
                let _ = writeln!(s, "  {:>10} - {:<10} {what}", labels[k].0, labels[e - 1].1);
                k = e;
                continue;
            }
        }
        let b = &bins[k];
        let bar = bar(b.count, maxc, o.bar_width);
        let mut line = format!(
            "  {:>10} - {:<10} {:>10} {:>6.2}% {bar}",
            labels[k].0,
            labels[k].1,
            b.count,
            b.count as f64 / total * 100.0,
        );
        if let Some(p) = marks.iter().position(|&m| m == Some(k)) {
            let pad = o.bar_width.saturating_sub(bar.chars().count());
            let _ = write!(line, "{} ◀ peak {}", " ".repeat(pad), p + 1);
        }
        let _ = writeln!(s, "{}", line.trim_end());
        k += 1;
    }
    if outside > 0 {
        let _ = writeln!(s, "  ({outside} events outside the range shown)");
    }
    if !peaks.is_empty() {
        let _ = writeln!(
            s,
            "  {} — explain each: a cache tier, a device, a lock, a retry or timeout, a clock's granularity?",
            if peaks.len() == 1 { "1 peak".to_string() } else { format!("{} peaks", peaks.len()) }
        );
        for (i, p) in peaks.iter().enumerate() {
            let _ = writeln!(s, "    {}", describe_peak(i, p, u));
        }
    }
    s
}

/// The JSON of one group: stats, peaks, displayed bins and every non-empty bucket.
pub fn to_json(name: &str, h: &Histogram, o: &HistOptions) -> Value {
    let mut stats_obj = serde_json::Map::new();
    stats_obj.insert("count".into(), json!(h.count()));
    // Named with their unit, as every JSON of latscope does (`p50_ns`, `max_bytes`).
    let suffix = match o.unit {
        YUnit::Nanos => "_ns",
        YUnit::Bytes => "_bytes",
        YUnit::Raw(_) | YUnit::Scaled(..) => "",
    };
    // Values in the unit named: text input with fractions is counted in 10^-k steps and given
    // back as the input wrote it.
    let per = match o.unit {
        YUnit::Scaled(_, k) => Some(10f64.powi(k)),
        _ => None,
    };
    let val = |x: f64| match per {
        Some(per) => json!(x / per),
        None => json!(x as u64),
    };
    for (n, v) in stats(h) {
        // Whole values stay integers (as `top` and `timeline` write them); the mean is a fraction.
        let v = match (n, v) {
            ("mean", Some(m)) => json!(per.map_or(m, |per| m / per)),
            (_, Some(x)) => val(x),
            (_, None) => Value::Null,
        };
        stats_obj.insert(format!("{n}{suffix}"), v);
    }
    let peaks: Vec<Value> = h
        .peaks(&o.peaks)
        .iter()
        .map(|p| {
            let v = |x: u64| val(x as f64);
            json!({"mode_low": v(p.mode_low), "mode_high": v(p.mode_high), "share": p.share, "count": p.count,
                   "p10": v(p.core_low), "p90": v(p.core_high), "basin_low": v(p.low), "basin_high": v(p.high),
                   "unresolved_cluster": p.unresolved.map(v)})
        })
        .collect();
    let (bins, outside) = bins(h, &o.scale);
    let edge = |x: f64| per.map_or(x, |per| x / per);
    json!({
        "group": name,
        "what": o.what,
        "unit": o.unit.name(),
        "stats": stats_obj,
        "clamped_high": h.clamped_high(),
        "peaks": peaks,
        "bins": bins.iter().map(|b| json!([edge(b.lo), edge(b.hi), b.count])).collect::<Vec<_>>(),
        "bins_rule": "each bin is [lo, hi): a histogram bucket is counted whole in the bin of its midpoint",
        "outside_range": outside,
        "buckets": h.iter().map(|(lo, hi, c)| json!([val(lo as f64), val(hi as f64), c])).collect::<Vec<_>>(),
        "buckets_rule": "every non-empty histogram bucket, [low, high] inclusive, at most 1/128 of low wide",
    })
}

/// The title of an SVG of histograms of `source`: what, the filter, the file.
pub fn svg_title(o: &HistOptions, source: &str) -> String {
    let filter = o.filter.as_deref().map(|f| format!(" of '{f}'")).unwrap_or_default();
    format!("{} histogram{filter} — {source}", capitalize(&o.what))
}

/// Where each peak's label goes: `(row, anchored at its end)`, one row per label (row 0 on top),
/// such that no label crosses another peak's dashed line. A peak's line starts just below its
/// own label, so a label may only extend over the lines of labels in lower rows: choose each
/// label's side (right of its line, or left of it) so that "extends over" has no cycle and the
/// labels stay within `[left, right]`, then give rows in that order. `xs` are the lines' x,
/// `widths` the labels' widths; with no such choice (a crowd of peaks), labels go right where
/// they fit, in order of x.
fn place_peak_labels(xs: &[f64], widths: &[f64], left: f64, right: f64) -> Vec<(usize, bool)> {
    let n = xs.len();
    let extent =
        |k: usize, end: bool| if end { (xs[k] - 3.0 - widths[k], xs[k]) } else { (xs[k], xs[k] + 3.0 + widths[k]) };
    let fits = |k: usize, end: bool| {
        let (a, b) = extent(k, end);
        a >= left && b <= right
    };
    // Rows for a choice of sides, if one exists: a label above every line it extends over (a
    // margin of 2 px each side), in topological order (Kahn).
    let rows_for = |end: &dyn Fn(usize) -> bool| -> Option<Vec<(usize, bool)>> {
        if !(0..n).all(|k| fits(k, end(k))) {
            return None;
        }
        let over: Vec<Vec<usize>> = (0..n)
            .map(|a| {
                let (x1, x2) = extent(a, end(a));
                (0..n).filter(|&b| b != a && xs[b] >= x1 - 2.0 && xs[b] <= x2 + 2.0).collect()
            })
            .collect();
        let mut indeg: Vec<usize> = vec![0; n];
        for v in over.iter().flatten() {
            indeg[*v] += 1;
        }
        let mut ready: Vec<usize> = (0..n).filter(|&k| indeg[k] == 0).collect();
        let mut order = Vec::new();
        while let Some(k) = ready.pop() {
            order.push(k);
            for &v in &over[k] {
                indeg[v] -= 1;
                if indeg[v] == 0 {
                    ready.push(v);
                }
            }
        }
        (order.len() == n).then(|| {
            let mut out = vec![(0, false); n];
            for (row, &k) in order.iter().enumerate() {
                out[k] = (row, end(k));
            }
            out
        })
    };
    // Brute force over sides for a handful of peaks (at most 2^10 choices tried); for a crowd,
    // right of the line where it fits, else left.
    if n <= 10 {
        for mask in 0..1u32 << n {
            if let Some(out) = rows_for(&|k| mask & (1 << k) != 0) {
                return out;
            }
        }
    } else if let Some(out) = rows_for(&|k| !fits(k, false)) {
        return out;
    }
    let mut by_x: Vec<usize> = (0..n).collect();
    by_x.sort_by(|&a, &b| xs[a].total_cmp(&xs[b]));
    let mut out = vec![(0, false); n];
    for (row, &k) in by_x.iter().enumerate() {
        out[k] = (row, !fits(k, false));
    }
    out
}

/// Bar charts of the groups, stacked, with statistics and peaks marked. The value axis is
/// logarithmic for `Log`/`Full` scales, linear for `Linear`; with [`HistOptions::shared_x`] every
/// panel has the same one (so that panels compare at a glance), and with
/// [`HistOptions::log_y`] counts are on a log axis (tails stay visible). Bars are one colour:
/// the panels are the same measure of different groups.
pub fn render_svg(groups: &[(String, &Histogram)], o: &HistOptions, title: &str) -> String {
    let (w, ph, left, right) = (o.svg_width.max(400.0), 220.0, 70.0, 30.0);
    let top = 50.0;
    let block = ph + 110.0;
    let height = top + block * groups.len().max(1) as f64 + 10.0;
    let mut s = Svg::new(w, height, "");
    s.text_fit(w / 2.0, 24.0, 17.0, "middle", "black", title, r#"class="title""#, w - 20.0);
    if let Some(n) = &o.note {
        s.text_fit(w / 2.0, 41.0, 11.0, "middle", "#444", n, r#"class="note""#, w - 20.0);
    }
    let pw = w - left - right;
    let log = !matches!(o.scale, HistScale::Linear { .. });
    // The panels' bins: with a shared axis, linear bins are cut from one range for all.
    let scale = match (&o.scale, o.shared_x) {
        (HistScale::Linear { bins: n, min, max }, true) => HistScale::Linear {
            bins: *n,
            min: min.or_else(|| groups.iter().filter_map(|(_, h)| h.min()).min()),
            max: max.or_else(|| groups.iter().filter_map(|(_, h)| h.max()).max()),
        },
        (sc, _) => sc.clone(),
    };
    let all_bins: Vec<Vec<Bin>> = groups.iter().map(|(_, h)| bins(h, &scale).0).collect();
    // The x range of a set of bins: on a log axis a bin starting at 0 is drawn from a tenth of
    // the next edge.
    let range = |bins: &[Bin]| -> Option<(f64, f64, f64)> {
        let lo = bins.first()?.lo;
        let hi = bins.last()?.hi;
        let lo_log = if lo <= 0.0 { bins.get(1).map(|b| b.lo / 10.0).unwrap_or(0.1).max(1e-3) } else { lo };
        Some((lo, lo_log, hi))
    };
    let shared = all_bins.iter().filter_map(|b| range(b)).reduce(|a, b| (a.0.min(b.0), a.1.min(b.1), a.2.max(b.2)));
    for (gi, ((name, h), bins)) in groups.iter().zip(&all_bins).enumerate() {
        let y0 = top + gi as f64 * block + 40.0;
        let color = SERIES_COLORS[0];
        let _ = writeln!(s, r#"<g class="hist" data-group="{}" data-count="{}">"#, svg::esc(name), h.count());
        s.text_fit(left, y0 - 26.0, 13.0, "start", "black", &format!("{name}: {} events", h.count()), "", pw);
        let st: Vec<String> = stats(h)
            .iter()
            .map(|(n, v)| format!("{n} {}", v.map(|x| o.unit.fmt(x)).unwrap_or_else(|| "-".into())))
            .collect();
        // Narrow: the tail's far percentiles and the mean go first; min, p50, p99 and max stay.
        let order: Vec<usize> = ["p99.99", "p90", "mean", "p99.9"]
            .iter()
            .filter_map(|d| st.iter().position(|x| x.split(' ').next() == Some(*d)))
            .collect();
        s.text_items(left, y0 - 10.0, 10.0, "#444", &st, "   ", &order, r#"class="stats""#, pw);
        s.rect(left, y0, pw, ph, "white", r##"stroke="#bbb" stroke-width="0.5""##);
        let own = range(bins);
        let Some((lo, lo_log, hi)) = (if o.shared_x { shared } else { own }) else {
            s.raw("</g>\n");
            continue;
        };
        if own.is_none() {
            s.raw("</g>\n");
            continue;
        }
        let xpos = |v: f64| -> f64 {
            if log {
                let v = v.max(lo_log);
                left + (v.ln() - lo_log.ln()) / (hi.ln() - lo_log.ln()).max(1e-12) * pw
            } else {
                left + (v - lo) / (hi - lo).max(1e-12) * pw
            }
        };
        let maxc = bins.iter().map(|b| b.count).max().unwrap_or(1).max(1) as f64;
        // Bar heights: linear in the count, or on a log axis from 1 (a bar of one event is a
        // sliver above the baseline, not nothing).
        let height_of = |c: f64| -> f64 {
            if o.log_y {
                (1.0 + c.max(0.0)).log10() / (1.0 + maxc).log10().max(1e-12) * (ph - 10.0)
            } else {
                c / maxc * (ph - 10.0)
            }
        };
        let labels = bin_labels(bins, &o.unit);
        for (b, (blo, bhi)) in bins.iter().zip(&labels) {
            if b.count == 0 {
                continue;
            }
            let (x1, x2) = (xpos(b.lo), xpos(b.hi));
            let bh = height_of(b.count as f64);
            let tip = format!("{blo}-{bhi}: {} ({:.2}%)", b.count, b.count as f64 / h.count().max(1) as f64 * 100.0);
            let _ = writeln!(
                s,
                r#"<rect x="{x1:.2}" y="{:.2}" width="{:.2}" height="{bh:.2}" fill="{color}" class="bar" data-lo="{}" data-hi="{}" data-n="{}"><title>{}</title></rect>"#,
                y0 + ph - bh,
                (x2 - x1).max(0.6),
                b.lo,
                b.hi,
                b.count,
                svg::esc(&tip)
            );
        }
        // Axes.
        let ticks = if log { o.unit.ticks(lo_log, hi, 10, true) } else { o.unit.ticks(lo, hi, 8, false) };
        for t in ticks {
            let x = xpos(t);
            s.line(x, y0 + ph, x, y0 + ph + 4.0, "#333", "");
            s.text(x, y0 + ph + 15.0, 10.0, "middle", "#333", &o.unit.fmt_short(t), r#"class="tick""#);
        }
        let yticks: Vec<f64> = if o.log_y {
            let mut t = vec![1.0];
            while t[t.len() - 1] * 10.0 <= maxc {
                let next = t[t.len() - 1] * 10.0;
                t.push(next);
            }
            t
        } else {
            svg::linear_ticks(0.0, maxc, 4)
        };
        for t in yticks {
            let y = y0 + ph - height_of(t);
            s.line(left - 4.0, y, left, y, "#333", "");
            s.text(left - 6.0, y + 3.5, 10.0, "end", "#333", &svg::fmt_num(t), r#"class="tick""#);
        }
        s.text(
            left + pw / 2.0,
            y0 + ph + 32.0,
            11.0,
            "middle",
            "black",
            &format!(
                "{}{}{}",
                o.what,
                if log { " (log)" } else { "" },
                if o.log_y { ", events on a log axis" } else { "" }
            ),
            "",
        );
        // Peaks: a dashed line through the bar holding each peak's mode, at the mode, from just
        // below its label down.
        let peaks = h.peaks(&o.peaks);
        let marks = peak_bins(h, bins, &peaks, &o.peaks);
        let xs: Vec<f64> = peaks
            .iter()
            .zip(&marks)
            .map(|(p, bar)| {
                let mode = (p.mode_low as f64 + p.mode_high as f64 + 1.0) / 2.0;
                let x = xpos(mode.max(lo_log));
                match bar.map(|i| &bins[i]) {
                    Some(b) if !(xpos(b.lo)..=xpos(b.hi)).contains(&x) => (xpos(b.lo) + xpos(b.hi)) / 2.0,
                    _ => x,
                }
            })
            .collect();
        let texts: Vec<String> = peaks
            .iter()
            .enumerate()
            .map(|(k, p)| format!("peak {}: {} ({}%)", k + 1, o.unit.fmt(p.mode_low as f64), fmt_share(p.share)))
            .collect();
        // Measured wide: a browser's font may be a little wider than Verdana's metrics, and a
        // label that spills over another peak's line is the collision this placement avoids.
        let widths: Vec<f64> = texts.iter().map(|t| svg::text_width(t, 10.0) * 1.08 + 4.0).collect();
        let places = place_peak_labels(&xs, &widths, left + 1.0, left + pw - 1.0);
        for (k, ((x, text), (row, end))) in xs.iter().zip(&texts).zip(places).enumerate() {
            let ty = y0 + 12.0 + 12.0 * row as f64;
            let _ = writeln!(
                s,
                r##"<line x1="{x:.2}" y1="{:.1}" x2="{x:.2}" y2="{:.1}" stroke="#222" stroke-width="1" stroke-dasharray="3,3" class="peak" data-peak="{}" data-bar="{}"/>"##,
                ty + 3.0,
                y0 + ph,
                k + 1,
                marks[k].map(|b| b.to_string()).unwrap_or_default()
            );
            let (anchor, dx) = if end { ("end", -3.0) } else { ("start", 3.0) };
            // A white halo keeps a label readable where it passes over a bar.
            let halo = r#"class="peaklabel" stroke="white" stroke-width="3" paint-order="stroke""#;
            s.text(x + dx, ty, 10.0, anchor, "#222", text, halo);
        }
        s.raw("</g>\n");
    }
    s.finish()
}

/// Histograms of events: chunks from any source in, one [`Histogram`] per group out.
#[derive(Debug)]
pub struct HistBuilder {
    kind: EventKind,
    field: YField,
    grouper: Grouper,
    hists: Vec<Histogram>,
    /// What the histograms count ([`crate::waits`]).
    counted: Counted,
    /// The idle waits left out, by group (shown only when nothing else matched).
    wait_hists: Vec<Histogram>,
}

/// What [`HistBuilder::finish`] gives: the histograms by group, and the blocking waits left out.
#[derive(Debug)]
pub struct Hists {
    /// The histograms with their group names (one named `all` when nothing was counted).
    pub groups: Vec<(String, Histogram)>,
    /// What they count: the idle waits left out of them.
    pub counted: Counted,
    /// The groups are the idle waits, because nothing else matched.
    pub only_waits: bool,
}

impl Hists {
    /// What was left out and how to include it, if anything: the line under the histograms.
    pub fn note(&self) -> Option<String> {
        if self.only_waits {
            return Some("only idle waits matched: shown (time the callers chose to wait, not work)".into());
        }
        self.counted.left_out().note()
    }

    /// The idle waits left out.
    pub fn left_out(&self) -> &LeftOut {
        self.counted.left_out()
    }

    /// The header line: what the histograms counted and left out, for events of `kind`.
    pub fn headline(&self, kind: EventKind) -> String {
        let n = self.groups.iter().map(|(_, h)| h.count()).sum();
        if self.only_waits {
            return format!("{n} syscall events, all idle waits (nothing else matched)");
        }
        self.counted.headline(n, kind)
    }
}

impl HistBuilder {
    /// Histograms of `field` of the events of `kind`, one per group of `by`; blocking waits
    /// ([`crate::waits`]) are left out unless [`HistBuilder::with_waits`].
    pub fn new(kind: EventKind, field: YField, by: GroupBy) -> Self {
        HistBuilder {
            kind,
            field,
            grouper: Grouper::new(by),
            hists: Vec::new(),
            counted: Counted::new(false),
            wait_hists: Vec::new(),
        }
    }

    /// Counts idle waits with the work.
    pub fn with_waits(mut self, yes: bool) -> Self {
        self.counted = Counted::new(yes);
        self
    }

    /// The columns read (by `EventBatch` field name).
    pub fn columns(&self) -> Vec<&'static str> {
        let mut c = vec!["kind"];
        c.extend(self.field.columns());
        c.extend(self.grouper.by().columns());
        if self.kind == EventKind::Syscall {
            c.extend(crate::waits::columns());
        }
        c.sort_unstable();
        c.dedup();
        c
    }

    fn fast(&self) -> bool {
        // Syscalls are classified (idle or not, and the kinds of waits counted) even with --waits.
        self.grouper.by() == GroupBy::All && self.field == YField::Latency && self.kind != EventKind::Syscall
    }

    /// What a source with zone maps may skip: a block of the kind only is counted from `lat`
    /// alone, a block without it not at all (a histogram has no time axis).
    pub fn zone_plan(&self) -> Option<ZonePlan> {
        self.fast().then(|| ZonePlan::timeless(self.kind))
    }

    /// Count a chunk.
    pub fn add(&mut self, c: Chunk<'_>, h: &TraceHeader) {
        let b = c.batch;
        let kind = self.kind as u8;
        if self.fast() {
            // One latency histogram: two columns touched.
            if self.hists.is_empty() {
                self.hists.push(Histogram::new());
                self.grouper.group(b, 0, h);
            }
            let hist = &mut self.hists[0];
            if c.zone.empty {
                return;
            }
            if c.zone.all_kind {
                hist.record_slice(&b.lat);
            } else if c.all_rows() {
                for (&k, &lat) in b.kind.iter().zip(&b.lat) {
                    if k == kind {
                        hist.record(lat);
                    }
                }
            } else {
                for &i in c.rows {
                    if b.kind[i as usize] == kind {
                        hist.record(b.lat[i as usize]);
                    }
                }
            }
            return;
        }
        let rule = crate::waits::BatchRule::of(b);
        for &i in c.rows {
            let i = i as usize;
            if b.kind[i] != kind {
                continue;
            }
            let Some(v) = EventPoints::value(self.field, b, i, h) else { continue };
            let g = self.grouper.group(b, i, h);
            let wait = self.kind == EventKind::Syscall && !self.counted.counts_in(rule, b, i);
            let hists = if wait { &mut self.wait_hists } else { &mut self.hists };
            while hists.len() <= g {
                hists.push(Histogram::new());
            }
            hists[g].record(v as u64);
        }
    }

    /// The histograms with their group names (one named `all` when nothing was counted), and
    /// the blocking waits left out; when nothing but waits matched, the waits' histograms.
    pub fn finish(self) -> Hists {
        let names = self.grouper.names().to_vec();
        let only_waits = !self.hists.iter().any(|h| h.count() > 0) && self.wait_hists.iter().any(|h| h.count() > 0);
        let hists = if only_waits { self.wait_hists } else { self.hists };
        let mut v: Vec<(String, Histogram)> = hists
            .into_iter()
            .enumerate()
            .filter(|(_, h)| h.count() > 0)
            .map(|(g, h)| (names.get(g).cloned().unwrap_or_default(), h))
            .collect();
        if v.is_empty() {
            v.push(("all".into(), Histogram::new()));
        }
        Hists { groups: v, counted: self.counted, only_waits }
    }
}

/// A histogram of the values (second column) of trace2heatmap.pl's two-column text, with the
/// unit to print them in. In a time unit (`label` s, ms, us or ns) the values are recorded in ns
/// and printed as times (`784us` for `0.784` ms); otherwise, in the input's own unit, multiplied
/// by the power of ten that keeps their decimals (up to 6 places, within the histogram's range),
/// so that `0.784` is never rounded to `1`.
pub fn from_pairs(values: &[f64], label: &str) -> (Histogram, YUnit) {
    let record = |scale: f64| {
        let mut h = Histogram::new();
        for &v in values {
            h.record_signed((v * scale).round() as i64);
        }
        h
    };
    if let Ok(per_sec) = crate::heatmap::text::units_per_sec(label) {
        return (record(1e9 / per_sec), YUnit::Nanos);
    }
    let largest = values.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let exact = |scale: f64| values.iter().all(|v| ((v * scale) - (v * scale).round()).abs() < 1e-4);
    let mut k = 0;
    while k < 6 && !exact(10f64.powi(k)) && largest * 10f64.powi(k + 1) < (1u64 << 40) as f64 {
        k += 1;
    }
    let scale = 10f64.powi(k);
    let unit = if k == 0 { YUnit::Raw(label.to_string()) } else { YUnit::Scaled(label.to_string(), k) };
    (record(scale), unit)
}

/// Sorts groups by count (then name) and keeps at most `limit`; returns how many were left out.
pub fn keep_largest(groups: &mut Vec<(String, Histogram)>, limit: usize) -> usize {
    groups.sort_by(|x, y| y.1.count().cmp(&x.1.count()).then_with(|| x.0.cmp(&y.0)));
    let hidden = groups.len().saturating_sub(limit.max(1));
    groups.truncate(limit.max(1));
    hidden
}

/// Bins per decade of a log grid, clamped like [`LogGrid`].
pub fn clamp_per_decade(n: u32) -> u32 {
    n.clamp(1, LogGrid::MAX_PER_DECADE)
}

/// `Syscall latency` from `syscall latency`, for titles.
pub fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bimodal() -> (Histogram, Vec<u64>) {
        let mut vals = Vec::new();
        let mut x: u64 = 7;
        for i in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = if i % 5 == 0 { 1_000_000 + x % 200_000 } else { 15_000 + x % 3_000 };
            vals.push(v);
        }
        (vals.iter().copied().collect(), vals)
    }

    #[test]
    fn percentiles_match_exact_sorted_values() {
        let (h, mut vals) = bimodal();
        vals.sort_unstable();
        let st = stats(&h);
        for (i, p) in PERCENTILES.iter().enumerate() {
            let rank = ((p / 100.0 * vals.len() as f64).ceil() as usize).max(1);
            let exact = vals[rank - 1] as f64;
            let got = st[2 + i].1.unwrap();
            assert!(got >= exact && got <= exact * (1.0 + 1.0 / 128.0), "p{p}: {got} vs {exact}");
        }
        assert_eq!(st[0].1, Some(vals[0] as f64));
        assert_eq!(st.last().unwrap().1, Some(*vals.last().unwrap() as f64));
    }

    #[test]
    fn text_shows_stats_bins_and_both_peaks() {
        let (h, _) = bimodal();
        let t = render_text("all", &h, &HistOptions::default());
        eprintln!("{t}");
        assert!(t.contains("20000 events"), "{t}");
        assert!(t.contains("p99.99"), "{t}");
        assert!(t.contains("◀ peak 1"), "{t}");
        assert!(t.contains("◀ peak 2"), "{t}");
        assert!(t.contains("2 peaks"), "{t}");
        assert!(t.contains("peak 1: mode 1"), "{t}");
        assert!(t.contains("80.0% of events"), "{t}");
        assert!(t.contains("empty)"), "{t}");
    }

    /// A peak whose densest bucket lies at the top edge of one log bar while the next bar holds
    /// more of its events (100 us sleeps on a busy host): the marker is on the taller bar, the
    /// one an eye takes for the peak, in text and SVG alike.
    #[test]
    fn a_mode_at_the_edge_of_a_bar_marks_the_taller_side() {
        let mut h = Histogram::new();
        for v in (127_000..139_000).step_by(190) {
            h.record(v);
        }
        for _ in 0..300 {
            h.record(140_500);
        }
        for i in 0..568u64 {
            h.record(141_500 + i * 28);
        }
        let o = HistOptions::default();
        let peaks = h.peaks(&o.peaks);
        assert_eq!(peaks.len(), 1, "{peaks:#?}");
        let (b, _) = bins(&h, &o.scale);
        let m = peak_bins(&h, &b, &peaks, &o.peaks)[0].expect("the peak is marked");
        let tallest = b.iter().map(|x| x.count).max().unwrap();
        let mode = (peaks[0].mode_low + peaks[0].mode_high) / 2;
        assert!(b.iter().any(|x| x.lo <= mode as f64 && (mode as f64) < x.hi && x.count < tallest), "{b:?} {peaks:?}");
        assert_eq!(b[m].count, tallest, "marked {:?} of {b:?}, mode {mode}", b[m]);
        let t = render_text("all", &h, &o);
        let line = t.lines().find(|l| l.contains("◀ peak 1")).unwrap();
        assert_eq!(line.split_whitespace().nth(3).unwrap(), tallest.to_string(), "{t}");
    }

    /// Like 1000 sleeps of 100 us and 1000 of 1 ms: each peak sharp, with a tail to the right, and
    /// the density bin of its maximum straddling two display bins.
    fn sleeps() -> Histogram {
        let mut h = Histogram::new();
        let mut rng = 11u64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng % 1_000_000) as f64 / 1_000_000.0
        };
        for (n, base, spread, tail) in
            [(1000u64, 107_000.0, 4_000.0, 40_000.0), (1000, 1_008_000.0, 25_000.0, 90_000.0)]
        {
            for i in 0..n {
                let v = if i % 20 == 0 { base + next() * tail } else { base + spread * next() * next() * 2.0 };
                h.record(v as u64);
            }
        }
        h
    }

    #[test]
    fn peak_marks_sit_on_the_bar_holding_the_mode_and_modes_inside_cores() {
        let h = sleeps();
        let peaks = h.peaks(&PeakOptions::default());
        assert_eq!(peaks.len(), 2, "{peaks:#?}");
        for p in &peaks {
            assert!(p.core_low <= p.mode_low && p.mode_high <= p.core_high, "{p:?}");
        }
        for scale in [HistScale::Full, HistScale::Log { per_decade: 20 }, HistScale::Log { per_decade: 7 }] {
            let (b, _) = bins(&h, &scale);
            let marks = peak_bins(&h, &b, &peaks, &PeakOptions::default());
            for (p, m) in peaks.iter().zip(&marks) {
                let m = m.expect("each peak is marked");
                // The bar holding the mode, which the peak line names (or, for a mode at the
                // edge of a wide bar, the taller side of that edge).
                let mode = (p.mode_low as f64 + p.mode_high as f64 + 1.0) / 2.0;
                let near = |x: f64| (mode - x).abs() <= 0.08 * x;
                assert!(
                    b[m].lo <= mode && mode < b[m].hi || near(b[m].lo) || near(b[m].hi),
                    "{scale:?}: {p:?} marked on {:?}",
                    b[m]
                );
                // And with these sharp peaks, it is the tallest bar of the peak too.
                let tallest =
                    b.iter().filter(|x| x.hi > p.low as f64 && x.lo <= p.high as f64).map(|x| x.count).max().unwrap();
                assert!(b[m].count * 2 >= tallest, "{scale:?}: {p:?} marked on {:?}", b[m]);
            }
            let t = render_text("all", &h, &HistOptions { scale: scale.clone(), ..Default::default() });
            for line in t.lines().filter(|l| l.contains("◀ peak")) {
                let count: u64 = line.split_whitespace().nth(3).unwrap().parse().unwrap();
                assert!(b.iter().any(|x| x.count == count), "{line}");
            }
        }
        // Every bucket's label differs from its neighbours'.
        let (b, _) = bins(&h, &HistScale::Full);
        let labels = bin_labels(&b, &YUnit::Nanos);
        assert!(labels.windows(2).all(|w| w[0].0 != w[1].0), "{labels:?}");
        assert!(labels.iter().all(|(lo, hi)| lo != hi), "{labels:?}");
        assert_eq!(YUnit::Nanos.fmt_digits(1_020_000.0, 4), "1.020ms");
        assert_eq!(YUnit::Nanos.fmt_digits(108.0, 5), "108ns");
        assert_eq!(YUnit::Bytes.fmt_digits(4096.0 + 512.0, 4), "4.500KiB");
    }

    #[test]
    fn nearly_all_never_reads_as_all_and_a_sliver_never_as_none() {
        assert_eq!(fmt_share(0.999_997_6), "99.99976");
        assert_eq!(fmt_share(0.000_002_4), "0.00024");
        assert_eq!(fmt_share(0.5), "50.0");
        assert_eq!(fmt_share(1.0), "100.0");
    }

    #[test]
    fn titles_name_the_filter() {
        let h = sleeps();
        let o = HistOptions { filter: Some("evt.type = nanosleep".into()), ..Default::default() };
        assert!(render_text("all", &h, &o).starts_with("latency of 'evt.type = nanosleep': 2000 events\n"));
        assert!(svg_title(&o, "t.lst").contains("of 'evt.type = nanosleep'"));
    }

    #[test]
    fn bins_conserve_counts() {
        let (h, _) = bimodal();
        for scale in
            [HistScale::Full, HistScale::Log { per_decade: 10 }, HistScale::Linear { bins: 50, min: None, max: None }]
        {
            let (b, out) = bins(&h, &scale);
            assert_eq!(b.iter().map(|b| b.count).sum::<u64>() + out, 20_000, "{scale:?}");
            assert!(b.windows(2).all(|w| w[0].hi <= w[1].lo + 1e-9), "{scale:?}");
        }
        // Known values, exact buckets (below 256): linear bins of width 10.
        let h: Histogram = [3u64, 5, 12, 19, 25, 25, 25].into_iter().collect();
        let (b, _) = bins(&h, &HistScale::Linear { bins: 3, min: Some(0), max: Some(29) });
        assert_eq!(b.iter().map(|b| b.count).collect::<Vec<_>>(), vec![2, 2, 3]);
        assert_eq!((b[0].lo, b[0].hi), (0.0, 10.0));
    }

    #[test]
    fn json_and_svg() {
        let (h, _) = bimodal();
        let j = to_json("all", &h, &HistOptions::default());
        assert_eq!(j["stats"]["count"], 20_000);
        assert_eq!(j["peaks"].as_array().unwrap().len(), 2);
        assert!(j["buckets"].as_array().unwrap().len() > 50);
        let svg = render_svg(&[("all".into(), &h)], &HistOptions::default(), "t");
        assert!(svg.contains("class=\"bar\""));
        assert!(svg.contains("peak 2:"));
        let empty = Histogram::new();
        assert!(render_text("x", &empty, &HistOptions::default()).contains("0 events"));
        assert!(render_svg(&[("x".into(), &empty)], &HistOptions::default(), "t").contains("</svg>"));
    }
}
