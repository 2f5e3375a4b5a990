//! A diff's pictures: overlaid histograms, heat maps side by side on one colour scale with their
//! difference, and a differential flame graph of blocked (or on-CPU) time.

use super::{Run, PERCENTILES};
use crate::heatmap::{HeatMap, LogStream, YUnit};
use crate::histview::{bins, HistScale};
use crate::svg::{self, esc, fmt_secs, heat_color, Svg};
use latscope_hist::Histogram;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Side A's colour and side B's (a colour-blind-safe pair: blue and orange).
pub const COLORS: [&str; 2] = ["#1f77b4", "#e6550d"];

/// One panel of overlaid histograms: a name and each side's latencies (runs merged).
pub struct Panel {
    /// Shown above the panel (`syscall pread64`).
    pub name: String,
    /// Side A's latencies.
    pub a: Histogram,
    /// Side B's.
    pub b: Histogram,
}

/// The latencies of group `name` of every run of a side, merged (`pick` chooses the grouping).
pub fn merged(runs: &[Run], pick: &dyn Fn(&Run) -> Option<&super::DimRun>, name: &str) -> Histogram {
    let mut h = Histogram::new();
    for r in runs {
        if let Some(g) = pick(r).and_then(|d| d.groups.iter().find(|g| g.name == name)) {
            h.merge(&g.lat);
        }
    }
    h
}

/// Histograms of A and B overlaid, one panel per group: the share of each side's events in each
/// bin (so sides of different sizes compare), on one logarithmic latency axis for all panels,
/// with each side's p50 and p99 marked.
pub fn histograms(panels: &[Panel], title: &str, subtitle: &str) -> String {
    let (w, ph, left, right, top) = (900.0, 200.0, 70.0, 30.0, 70.0);
    let block = ph + 80.0;
    let height = top + block * panels.len().max(1) as f64 + 10.0;
    let mut s = Svg::new(w, height, "");
    s.text_fit(w / 2.0, 24.0, 17.0, "middle", "black", title, r#"class="title""#, w - 20.0);
    s.text_fit(w / 2.0, 42.0, 11.0, "middle", "#444", subtitle, r#"class="note""#, w - 20.0);
    // Legend.
    for (k, name) in ["A", "B"].iter().enumerate() {
        let x = w / 2.0 - 60.0 + k as f64 * 80.0;
        s.rect(x, 52.0, 14.0, 10.0, COLORS[k], if k == 0 { r#"fill-opacity="0.35""# } else { r#"fill-opacity="0.9""# });
        s.text(x + 18.0, 61.0, 11.0, "start", "black", name, r#"class="legend""#);
    }
    let scale = HistScale::Log { per_decade: 20 };
    let pw = w - left - right;
    let all: Vec<Vec<crate::histview::Bin>> =
        panels.iter().flat_map(|p| [bins(&p.a, &scale).0, bins(&p.b, &scale).0]).collect();
    let lo = all.iter().filter_map(|b| b.first()).map(|b| b.lo.max(1.0)).fold(f64::INFINITY, f64::min);
    let hi = all.iter().filter_map(|b| b.last()).map(|b| b.hi).fold(0.0, f64::max);
    let (lo, hi) = if lo.is_finite() && hi > lo { (lo, hi) } else { (1.0, 10.0) };
    let xpos = |v: f64| left + (v.max(lo).ln() - lo.ln()) / (hi.ln() - lo.ln()).max(1e-12) * pw;
    let unit = YUnit::Nanos;
    for (pi, p) in panels.iter().enumerate() {
        let y0 = top + pi as f64 * block + 30.0;
        let _ = writeln!(
            s,
            r#"<g class="panel" data-group="{}" data-a="{}" data-b="{}">"#,
            esc(&p.name),
            p.a.count(),
            p.b.count()
        );
        s.text_fit(
            left,
            y0 - 12.0,
            13.0,
            "start",
            "black",
            &format!("{}: A {} events, B {} events", p.name, p.a.count(), p.b.count()),
            "",
            pw,
        );
        s.rect(left, y0, pw, ph, "white", r##"stroke="#bbb" stroke-width="0.5""##);
        let shares: Vec<Vec<(f64, f64, f64)>> = [&p.a, &p.b]
            .iter()
            .map(|h| {
                let n = h.count().max(1) as f64;
                bins(h, &scale).0.iter().map(|b| (b.lo, b.hi, b.count as f64 / n)).collect()
            })
            .collect();
        let maxs = shares.iter().flatten().map(|x| x.2).fold(0.0, f64::max).max(1e-12);
        for (k, sh) in shares.iter().enumerate() {
            // A filled, B as an outline on top: both readable where they overlap.
            let mut pts = vec![(xpos(sh.first().map_or(lo, |b| b.0)), y0 + ph)];
            for &(blo, bhi, f) in sh {
                let y = y0 + ph - f / maxs * (ph - 10.0);
                pts.push((xpos(blo), y));
                pts.push((xpos(bhi), y));
            }
            pts.push((xpos(sh.last().map_or(lo, |b| b.1)), y0 + ph));
            let d: Vec<String> = pts.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
            let style = if k == 0 {
                format!(r#"fill="{}" fill-opacity="0.35" stroke="{}" stroke-width="0.8""#, COLORS[0], COLORS[0])
            } else {
                format!(r#"fill="none" stroke="{}" stroke-width="1.6""#, COLORS[1])
            };
            let _ = writeln!(s, r#"<polygon class="side{k}" points="{}" {style}/>"#, d.join(" "));
            // Percentile marks: a short line at the top of the panel.
            let h = if k == 0 { &p.a } else { &p.b };
            for (name, q) in [PERCENTILES[0], PERCENTILES[2]] {
                if let Some(v) = h.value_at_quantile(q) {
                    let x = xpos(v as f64);
                    let yy = y0 + 2.0 + k as f64 * 11.0;
                    let _ = writeln!(
                        s,
                        r#"<line class="pct" x1="{x:.1}" y1="{yy:.1}" x2="{x:.1}" y2="{:.1}" stroke="{}" stroke-width="2" data-side="{k}" data-q="{name}" data-v="{v}"><title>{} {name} {}</title></line>"#,
                        yy + 9.0,
                        COLORS[k],
                        ["A", "B"][k],
                        unit.fmt(v as f64)
                    );
                    s.text(x + 3.0, yy + 8.0, 9.0, "start", COLORS[k], name, r#"class="pctlabel""#);
                }
            }
        }
        for t in unit.ticks(lo, hi, 10, true) {
            let x = xpos(t);
            s.line(x, y0 + ph, x, y0 + ph + 4.0, "#333", "");
            s.text(x, y0 + ph + 15.0, 10.0, "middle", "#333", &unit.fmt_short(t), r#"class="tick""#);
        }
        s.text(
            left + pw / 2.0,
            y0 + ph + 30.0,
            11.0,
            "middle",
            "black",
            "latency (log); height: share of the side's events",
            "",
        );
        s.raw("</g>\n");
    }
    s.finish()
}

/// The heat maps of both sides (each side's runs summed and divided by their number), on one
/// grid; `None` when the runs kept none.
pub fn heat_maps(a: &[Run], b: &[Run]) -> Result<Option<(HeatMap, HeatMap)>, String> {
    let streams: Vec<(&LogStream, Option<String>)> =
        a.iter().chain(b).filter_map(|r| r.heat.as_ref().map(|h| (h, None))).collect();
    if streams.len() != a.len() + b.len() || streams.is_empty() {
        return Ok(None);
    }
    let mut maps = LogStream::finish(&streams, 40, None, None, YUnit::Nanos, "Latency", "", None)?;
    let mut bm = maps.split_off(a.len());
    let mean = |mut ms: Vec<HeatMap>| -> HeatMap {
        let n = ms.len() as u64;
        let mut m = ms.remove(0);
        for o in &ms {
            for (x, y) in m.counts.iter_mut().zip(&o.counts) {
                *x += y;
            }
            m.total += o.total;
        }
        if n > 1 {
            for x in m.counts.iter_mut() {
                *x = x.div_ceil(n);
            }
            m.total = m.total.div_ceil(n);
        }
        m.max_count = m.counts.iter().copied().max().unwrap_or(0);
        m
    };
    let bmap = mean(std::mem::take(&mut bm));
    Ok(Some((mean(maps), bmap)))
}

/// Blue (A more) through white to red (B more): `ratio` in -1..1.
fn diverging(ratio: f64) -> String {
    let r = ratio.clamp(-1.0, 1.0);
    let (c1, c2) = if r >= 0.0 {
        ((255.0, 255.0, 255.0), (202.0, 0.0, 32.0))
    } else {
        ((255.0, 255.0, 255.0), (5.0, 113.0, 176.0))
    };
    let t = r.abs();
    let mix = |a: f64, b: f64| (a + (b - a) * t).round() as u8;
    format!("#{:02x}{:02x}{:02x}", mix(c1.0, c2.0), mix(c1.1, c2.1), mix(c1.2, c2.2))
}

/// A cell's colour and count, or nothing for an empty cell.
type CellFn<'a> = Box<dyn Fn(usize) -> Option<(String, String)> + 'a>;

/// Three heat maps side by side: A and B on one colour scale (events per cell per recording,
/// logarithmic), and B - A (red: more in B, blue: more in A).
pub fn heat_svg(a: &HeatMap, b: &HeatMap, title: &str, subtitle: &str) -> String {
    let bins = &a.bins;
    let (cols, rows) = (bins.cols, a.rows);
    let cw = (260.0 / cols.max(1) as f64).clamp(1.0, 12.0);
    let ch = (240.0 / rows.max(1) as f64).clamp(2.0, 8.0);
    let (pw, ph) = (cw * cols as f64, ch * rows as f64);
    let (left, gap, top) = (80.0, 50.0, 80.0);
    let width = left + 3.0 * pw + 2.0 * gap + 110.0;
    let height = top + ph + 90.0;
    let mut s = Svg::new(width, height, "");
    s.text_fit(width / 2.0, 24.0, 17.0, "middle", "black", title, r#"class="title""#, width - 20.0);
    s.text_fit(width / 2.0, 42.0, 11.0, "middle", "#444", subtitle, r#"class="note""#, width - 20.0);
    let max = a.max_count.max(b.max_count).max(1) as f64;
    let diffs: Vec<i64> = a.counts.iter().zip(&b.counts).map(|(&x, &y)| y as i64 - x as i64).collect();
    let dmax = diffs.iter().map(|d| d.unsigned_abs()).max().unwrap_or(0).max(1) as f64;
    let panels: [(&str, CellFn); 3] = [
        (
            "A",
            Box::new(|i| {
                (a.counts[i] > 0)
                    .then(|| (heat_color((a.counts[i] as f64).ln_1p() / max.ln_1p()), a.counts[i].to_string()))
            }),
        ),
        (
            "B",
            Box::new(|i| {
                (b.counts[i] > 0)
                    .then(|| (heat_color((b.counts[i] as f64).ln_1p() / max.ln_1p()), b.counts[i].to_string()))
            }),
        ),
        (
            "B - A",
            Box::new(|i| {
                let d = diffs[i];
                (d != 0).then(|| {
                    (diverging(d.signum() as f64 * (d.unsigned_abs() as f64).ln_1p() / dmax.ln_1p()), format!("{d:+}"))
                })
            }),
        ),
    ];
    for (k, (name, cell)) in panels.iter().enumerate() {
        let px = left + k as f64 * (pw + gap);
        let _ = writeln!(s, r#"<g class="heatmap" data-panel="{name}" data-cols="{cols}" data-rows="{rows}">"#);
        s.text(px, top - 8.0, 13.0, "start", "black", name, r#"class="maptitle""#);
        s.rect(px, top, pw, ph, "white", r##"stroke="#bbb" stroke-width="0.5""##);
        for c in 0..cols {
            for r in 0..rows {
                let i = c * rows + r;
                if let Some((fill, n)) = cell(i) {
                    let (x, y) = (px + c as f64 * cw, top + (rows - 1 - r) as f64 * ch);
                    let _ = writeln!(
                        s,
                        r#"<rect x="{x:.1}" y="{y:.1}" width="{cw:.2}" height="{ch:.2}" fill="{fill}" data-c="{c}" data-r="{r}" data-n="{n}"/>"#
                    );
                }
            }
        }
        // Axes: latency rows (log) and time since each recording's start.
        let (e0, e1) = (bins.edges[0], bins.edges[bins.edges.len() - 1]);
        for t in bins.unit.ticks(e0, e1, 6, true) {
            let y = top + ph - (t.ln() - e0.ln()) / (e1.ln() - e0.ln()).max(1e-12) * ph;
            s.line(px - 4.0, y, px, y, "#333", "");
            if k == 0 {
                s.text(px - 6.0, y + 3.5, 10.0, "end", "#333", &bins.unit.fmt_short(t), r#"class="tick""#);
            }
        }
        let span = bins.step_sec * cols as f64;
        for t in svg::linear_ticks(0.0, span, 4) {
            let x = px + t / span.max(1e-12) * pw;
            s.line(x, top + ph, x, top + ph + 4.0, "#333", "");
            s.text(x, top + ph + 15.0, 10.0, "middle", "#333", &fmt_secs(t), r#"class="tick""#);
        }
        s.raw("</g>\n");
    }
    s.text(left + pw * 1.5 + gap, top + ph + 34.0, 11.0, "middle", "black", "time since each recording's start", "");
    let (lx, ly) = (14.0, top + ph / 2.0);
    s.text(lx, ly, 11.0, "middle", "black", "latency (log)", &format!(r#"transform="rotate(-90 {lx} {ly})""#));
    // Legends: the shared scale, and the difference's.
    let lx = left + 3.0 * pw + 2.0 * gap + 12.0;
    for i in 0..20 {
        let t = 1.0 - i as f64 / 20.0;
        s.rect(lx, top + i as f64 * 6.0, 12.0, 6.3, &heat_color(t), "");
        s.rect(lx + 50.0, top + i as f64 * 6.0, 12.0, 6.3, &diverging(1.0 - 2.0 * i as f64 / 19.0), "");
    }
    s.text(lx + 15.0, top + 8.0, 9.0, "start", "#333", &svg::fmt_num(max), r#"class="legend""#);
    s.text(lx + 15.0, top + 120.0, 9.0, "start", "#333", "1", r#"class="legend""#);
    s.text(lx + 65.0, top + 8.0, 9.0, "start", "#333", &format!("+{}", svg::fmt_num(dmax)), r#"class="legend""#);
    s.text(lx + 65.0, top + 120.0, 9.0, "start", "#333", &format!("-{}", svg::fmt_num(dmax)), r#"class="legend""#);
    s.text(lx, top + 135.0, 9.0, "start", "#333", "events (log)", "");
    s.text(lx, top + 147.0, 9.0, "start", "#333", &format!("cells {}", fmt_secs(bins.step_sec)), "");
    s.finish()
}

/// Folded stacks (`frame;frame count`) summed.
fn parse_folded(texts: &[&str]) -> BTreeMap<String, f64> {
    let mut m = BTreeMap::new();
    for t in texts {
        for line in t.lines() {
            if let Some((stack, n)) = line.rsplit_once(' ') {
                if let Ok(n) = n.trim().parse::<f64>() {
                    *m.entry(stack.to_string()).or_default() += n;
                }
            }
        }
    }
    m
}

/// The differential folded stacks of two sides (`stack A B`, what inferno-diff-folded writes),
/// each side's time scaled to one recording of B's mean duration, so rates compare: the input
/// of Gregg's differential flame graphs.
pub fn diff_folded(a: &[(&str, f64)], b: &[(&str, f64)]) -> String {
    let mean = |v: &[(&str, f64)]| v.iter().map(|x| x.1).sum::<f64>() / v.len().max(1) as f64;
    let target = mean(b).max(1e-9);
    let scaled = |v: &[(&str, f64)]| -> BTreeMap<String, f64> {
        let mut out = BTreeMap::new();
        for (text, secs) in v {
            for (k, n) in parse_folded(&[text]) {
                *out.entry(k).or_default() += n * target / secs.max(1e-9) / v.len() as f64;
            }
        }
        out
    };
    let (ma, mb) = (scaled(a), scaled(b));
    let keys: std::collections::BTreeSet<&String> = ma.keys().chain(mb.keys()).collect();
    let mut out = String::new();
    for k in keys {
        let (x, y) =
            (ma.get(k).copied().unwrap_or(0.0).round() as u64, mb.get(k).copied().unwrap_or(0.0).round() as u64);
        if x > 0 || y > 0 {
            let _ = writeln!(out, "{k} {x} {y}");
        }
    }
    out
}

/// A differential flame graph (SVG, inferno) of differential folded stacks ([`diff_folded`]):
/// each frame as wide as the larger of its A and B times, so stacks that disappeared are drawn
/// too; red where B spent more, blue where it spent less (Gregg's colours), the deeper the
/// larger the change.
pub fn diff_flame(diff: &str, title: &str, count_name: &str) -> Result<Vec<u8>, String> {
    // inferno draws widths from the second count and colours from the second less the first:
    // give it (max - (b - a), max).
    let lines: Vec<String> = diff
        .lines()
        .filter_map(|l| {
            let mut it = l.rsplitn(3, ' ');
            let b: u64 = it.next()?.parse().ok()?;
            let a: u64 = it.next()?.parse().ok()?;
            let stack = it.next()?;
            let w = a.max(b);
            Some(format!("{stack} {} {w}", w + a - b))
        })
        .collect();
    let mut opt = inferno::flamegraph::Options::default();
    opt.title = title.to_string();
    opt.subtitle = Some("red: more in B, blue: less in B (width: the larger of A and B)".into());
    opt.count_name = count_name.to_string();
    opt.deterministic = true;
    let mut out = Vec::new();
    if lines.is_empty() {
        opt.title = format!("{title}: no stack on either side");
        inferno::flamegraph::from_lines(&mut opt, ["[no stacks] 1"], &mut out).map_err(|e| e.to_string())?;
        return Ok(out);
    }
    inferno::flamegraph::from_lines(&mut opt, lines.iter().map(String::as_str), &mut out).map_err(|e| e.to_string())?;
    Ok(out)
}
