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
        }
    }
}

fn hex(c: super::color::Color) -> String {
    let (r, g, b) = c.rgb();
    format!("#{r:02x}{g:02x}{b:02x}")
}

/// Draw every sealed row of `spec`.
pub fn svg(spec: &Spectrogram, o: &SvgOptions) -> String {
    let pal = if o.palette == Palette::Mono { Palette::TrueColor } else { o.palette };
    let cols = o.cols.max(10);
    let axis = Axis::new(o.min_ns, o.max_ns, cols);
    let mut maps = MapCache::new(axis.clone());
    let (first, end) = (spec.first_index(), spec.sealed());
    let nrows = (end - first) as usize;
    let cw = (800 / cols).max(2) as f64;
    let ch: f64 = match nrows {
        0..=100 => 6.0,
        101..=300 => 3.0,
        301..=1200 => 2.0,
        _ => 1.0,
    };
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
        fmt_ns(axis.min_ns()),
        fmt_ns(axis.max_ns())
    );
    let mut y = top;
    let label_every = ((24.0 / ch).ceil() as usize).max(1);
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
            if k % label_every == 0 {
                let _ = writeln!(
                    s,
                    r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
                    left - 4.0,
                    ry + ch.max(8.0) - 1.0,
                    fmt_rel(idx * spec.interval_ns(), spec.interval_ns())
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
        // Decade grid.
        for (c, p) in axis.decades() {
            let x = left + c as f64 * cw;
            let _ = writeln!(
                s,
                r##"<line x1="{x:.1}" y1="{y:.1}" x2="{x:.1}" y2="{:.1}" stroke="#666" stroke-width="0.5" stroke-dasharray="2,3"/>"##,
                y + strip_h
            );
            let _ = writeln!(
                s,
                r#"<text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                y + strip_h + 12.0,
                decade_label(p)
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
