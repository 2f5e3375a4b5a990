//! The spectrogram as a standalone SVG image (`--svg FILE`): time down, latency across on a log
//! axis, one rectangle per non-empty cell with a tooltip giving its time, latency range and count.

use super::color::{color, legend_steps, Palette};
use super::model::{MapCache, Spectrogram};
use super::render::fmt_rel;
use super::scale::{decade_label, Axis};
use crate::svg::esc;
use latscope_event::units::fmt_ns;
use std::fmt::Write as _;

/// Options of [`svg`].
#[derive(Debug, Clone)]
pub struct SvgOptions {
    /// Left edge of the latency axis (ns).
    pub min_ns: u64,
    /// Right edge (ns, excluded).
    pub max_ns: u64,
    /// Latency columns.
    pub cols: usize,
    /// Colours (`Mono` is drawn as true colour: an image has colours).
    pub palette: Palette,
    /// Title.
    pub title: String,
    /// One strip per group (stacked), or `None` for one strip of everything.
    pub groups: Option<Vec<u32>>,
    /// Start the axis at the decade below the fastest event instead of `min_ns` (when that is
    /// higher): no empty band at the left.
    pub fit_min: bool,
    /// End the axis at the decade above the slowest event instead of `max_ns` (when that is
    /// lower).
    pub fit_max: bool,
}

impl Default for SvgOptions {
    fn default() -> Self {
        SvgOptions {
            min_ns: 1,
            max_ns: 10_000_000_000,
            cols: 200,
            palette: Palette::TrueColor,
            title: "latscope spectrogram".into(),
            groups: None,
            fit_min: false,
            fit_max: false,
        }
    }
}

fn hex(c: super::color::Color) -> String {
    let (r, g, b) = c.rgb();
    format!("#{r:02x}{g:02x}{b:02x}")
}

/// The latency range drawn: `min_ns..max_ns`, narrowed to the decades holding events where
/// `fit_min`/`fit_max` ask for it (at least two decades wide).
pub fn axis_range(spec: &Spectrogram, o: &SvgOptions) -> (u64, u64) {
    let (mut lo, mut hi) = (o.min_ns.max(1), o.max_ns.max(o.min_ns.max(1) + 1));
    if let Some((dlo, dhi)) = spec.lat_span() {
        let floor = |v: u64| 10u64.pow(v.max(1).ilog10());
        let ceil = |v: u64| {
            let f = floor(v);
            if f == v {
                v
            } else {
                f.saturating_mul(10)
            }
        };
        if o.fit_min {
            lo = lo.max(floor(dlo).min(hi / 100).max(1));
        }
        if o.fit_max {
            hi = hi.min(ceil(dhi.max(1)).max(lo.saturating_mul(100)));
        }
    }
    (lo, hi.max(lo + 1))
}

/// Height of a row in pixels: the strip about 360 px high whatever the number of rows (whole
/// pixels, at most 24 a row, at least 1).
pub fn row_height(nrows: usize) -> f64 {
    (360.0 / nrows.max(1) as f64).floor().clamp(1.0, 24.0)
}

/// Rows between two row labels: at least `min_rows`, and as few more as make the time between
/// labels a 1-2-5 multiple of a power of ten (`min_rows` when none within ten times as many).
fn label_rows(min_rows: u64, interval_ns: u64) -> u64 {
    (min_rows..=min_rows * 10).find(|&k| round_ns(k * interval_ns)).unwrap_or(min_rows)
}

/// Whether `ns` is 1, 2 or 5 times a power of ten.
fn round_ns(ns: u64) -> bool {
    let p = 10u64.pow(ns.max(1).ilog10());
    ns.is_multiple_of(p) && matches!(ns / p, 1 | 2 | 5)
}

/// A latency at an end of the axis: `100ns`, `1s` for a decade, `300ms` otherwise.
fn edge_label(p: u64) -> String {
    if 10u64.pow(p.max(1).ilog10()) == p {
        decade_label(p)
    } else {
        fmt_ns(p)
    }
}

/// Draw every sealed row of `spec`.
pub fn svg(spec: &Spectrogram, o: &SvgOptions) -> String {
    let pal = if o.palette == Palette::Mono { Palette::TrueColor } else { o.palette };
    let cols = o.cols.max(10);
    let (min_ns, max_ns) = axis_range(spec, o);
    let axis = Axis::new(min_ns, max_ns, cols);
    let mut maps = MapCache::new(axis.clone());
    let (first, end) = (spec.first_index(), spec.sealed());
    let nrows = (end - first) as usize;
    let cw = (800 / cols).max(2) as f64;
    let ch = row_height(nrows);
    let strips: Vec<Option<u32>> = match &o.groups {
        Some(g) if !g.is_empty() => g.iter().map(|&g| Some(g)).collect(),
        _ => vec![None],
    };
    let title_lines: Vec<&str> = o.title.lines().collect();
    let extra = title_lines.len().saturating_sub(1) as f64 * 16.0;
    let (left, top, label_h) = (80.0, 44.0 + extra, if o.groups.is_some() { 18.0 } else { 0.0 });
    let plot_w = cw * cols as f64;
    let strip_h = ch * nrows.max(1) as f64;
    let height = top + strips.len() as f64 * (label_h + strip_h + 8.0) + 80.0;
    let width = left + plot_w + 30.0;
    let mut s = String::with_capacity(64 * 1024);
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="monospace" font-size="11">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    // Monospace: a character is 0.6 em wide (0.65 bold); text longer than the picture is cut
    // in the middle, whole in a tooltip.
    let fit = |l: &str, size: f64, bold: bool| {
        let chars = ((width - left - 10.0) / (size * if bold { 0.65 } else { 0.61 })).floor() as usize;
        let cut = super::render::fit_middle(l, chars);
        if cut == l {
            esc(l)
        } else {
            format!("{}<title>{}</title>", esc(&cut), esc(l))
        }
    };
    for (i, l) in title_lines.iter().enumerate() {
        let (size, weight) = if i == 0 { (14, "bold") } else { (11, "normal") };
        let _ = writeln!(
            s,
            r#"<text x="{left}" y="{}" font-size="{size}" font-weight="{weight}">{}</text>"#,
            18 + 16 * i,
            fit(l, f64::from(size), i == 0)
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{left}" y="{:.0}">{} per row, {} rows; latency {}..{} (log); cell colour: events per cell per row</text>"#,
        34.0 + extra,
        fmt_ns(spec.interval_ns()),
        nrows,
        edge_label(axis.min_ns()),
        edge_label(axis.max_ns())
    );
    let mut y = top;
    // Row labels at least 24 px apart, on round times (every 25 rows of 4 ms: 0.1s, 0.2s, ...).
    let label_every = label_rows(((24.0 / ch).ceil() as u64).max(1), spec.interval_ns());
    // Decimals for the label step when it is round, else for the rows (0.099s, not 0.10s).
    let label_step = label_every * spec.interval_ns();
    let label_step = if round_ns(label_step) { label_step } else { spec.interval_ns() };
    for g in &strips {
        if let Some(g) = g {
            let _ = writeln!(
                s,
                r#"<text x="{left}" y="{:.1}" font-weight="bold">{}</text>"#,
                y + 13.0,
                fit(&spec.group_name(*g), 11.0, true)
            );
            y += label_h;
        }
        let _ = writeln!(s, r#"<rect x="{left}" y="{y:.1}" width="{plot_w:.1}" height="{strip_h:.1}" fill="black"/>"#);
        for (k, idx) in (first..end).enumerate() {
            let ry = y + k as f64 * ch;
            // Centred on its row; none so low that it would touch the axis labels below.
            let label_y = ry + ch / 2.0 + 4.0;
            if idx % label_every == 0 && label_y <= y + strip_h - 1.0 + ch.min(8.0) / 2.0 {
                let _ = writeln!(
                    s,
                    r#"<text x="{:.1}" y="{:.1}" text-anchor="end" class="rowlabel">{}</text>"#,
                    left - 4.0,
                    label_y,
                    fmt_rel(idx * spec.interval_ns(), label_step)
                );
            }
            let (counts, _, _) = spec.columns(idx, *g, &mut maps);
            for (c, &n) in counts.iter().enumerate() {
                let Some(col) = color(n, pal) else { continue };
                let (lo, hi) = axis.col_bounds(c);
                let _ = writeln!(
                    s,
                    r#"<rect x="{:.1}" y="{ry:.1}" width="{cw:.1}" height="{ch:.1}" fill="{}"><title>{} +{}: {}..{}: {}</title></rect>"#,
                    left + c as f64 * cw,
                    hex(col),
                    fmt_rel(idx * spec.interval_ns(), spec.interval_ns()),
                    fmt_ns(spec.interval_ns()),
                    fmt_ns(lo as u64),
                    fmt_ns(hi as u64),
                    crate::text::plural(n, "event")
                );
            }
        }
        // Decade grid, and the right edge labelled too (unless a decade's label is too near).
        let mut ticks: Vec<(f64, String)> =
            axis.decades().into_iter().map(|(c, p)| (left + c as f64 * cw, decade_label(p))).collect();
        let edge = left + plot_w;
        if ticks.last().is_none_or(|&(x, _)| edge - x >= 48.0) {
            ticks.push((edge, edge_label(axis.max_ns())));
        }
        for (x, label) in ticks {
            let _ = writeln!(
                s,
                r##"<line x1="{x:.1}" y1="{y:.1}" x2="{x:.1}" y2="{:.1}" stroke="#666" stroke-width="0.5" stroke-dasharray="2,3"/>"##,
                y + strip_h
            );
            let _ = writeln!(
                s,
                r#"<text x="{x:.1}" y="{:.1}" text-anchor="middle" class="tick xtick">{label}</text>"#,
                y + strip_h + 12.0,
            );
        }
        y += strip_h + 8.0 + 14.0;
    }
    // Legend.
    let ly = y + 10.0;
    let _ = writeln!(
        s,
        r#"<text x="{left}" y="{:.1}">events per cell per {}:</text>"#,
        ly + 9.0,
        fmt_ns(spec.interval_ns())
    );
    let mut x = left + 190.0;
    for (label, n) in legend_steps(Palette::Ansi256) {
        if let Some(col) = color(n, pal) {
            let _ = writeln!(s, r#"<rect x="{x:.1}" y="{ly:.1}" width="12" height="12" fill="{}"/>"#, hex(col));
            let _ = writeln!(s, r#"<text x="{:.1}" y="{:.1}">{}</text>"#, x + 15.0, ly + 10.0, esc(&label));
            x += 24.0 + 7.0 * label.len() as f64;
        }
    }
    let _ = writeln!(
        s,
        r#"<text x="{left}" y="{:.1}">{} in all</text>"#,
        ly + 30.0,
        crate::text::plural(spec.events, "event")
    );
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_axis_and_legend() {
        let mut sp = Spectrogram::new(500_000_000, 0, 100);
        for i in 0..150u64 {
            sp.add(i * 1_000_000, 100_000, 0);
        }
        sp.add(1_200_000_000, 11_000_000, 0);
        sp.seal_until(3);
        let out = svg(&sp, &SvgOptions { cols: 100, ..Default::default() });
        assert!(out.starts_with("<svg") && out.trim_end().ends_with("</svg>"));
        assert!(out.contains("0.0s +500ms: 100us..126us: 150 events"), "{out}");
        assert!(out.contains("1.0s +500ms: 10.0ms..12.6ms: 1 event<"));
        assert!(out.contains(">100us</text>") && out.contains(">1s</text>"));
        assert_eq!(out.matches("<title>").count(), 2);
        assert!(out.contains("151 events in all"));
        assert!(out.contains(">1k</text>") && !out.contains("1.00k"), "{out}");
    }
}
