//! Heat maps as interactive SVG.
//!
//! The document works in any browser without network access: cells are plain `<rect>`s (only
//! non-empty ones are drawn), and an inline script finds the cell under the mouse from its position,
//! so empty cells answer too. Hovering shows, in a box that follows the cursor and in the line at the
//! bottom: the column's time range (and wall-clock time when known), the row's value range, the
//! count, its share of the column, and the accumulated share from the bottom row up to this one
//! (the column's percentile).
//!
//! Each cell rect carries `data-c`/`data-r`/`data-n` (column, row, count) so that tests and scripts
//! can read the cells back; each map's `<g class="heatmap">` carries its size.
//!
//! Test hook: opening `file.svg#hover=COL,ROW` (or `#hover=COL,ROW,MAP`) runs the hover handler on
//! that cell at load, so `chromium --headless --dump-dom file.svg#hover=3,7` prints the hover text.

use super::{HeatMap, YScale};
use crate::svg::{self, fmt_num, fmt_secs, heat_color, js_str, Svg};
use std::fmt::Write;

/// How counts become colours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColorScale {
    /// trace2heatmap.pl's: `count / largest count`.
    Linear,
    /// `ln(1 + count) / ln(1 + largest)`: cells with few events stay visible next to a hot one.
    Log,
    /// Log for a map where one cell would wash out the rest ([`HeatMap::washes_out`]), else
    /// linear.
    Auto,
}

impl ColorScale {
    /// Parses `linear`, `log` or `auto`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "linear" => Ok(Self::Linear),
            "log" => Ok(Self::Log),
            "auto" => Ok(Self::Auto),
            _ => Err(format!("unknown colour scale '{s}' (use auto, linear or log)")),
        }
    }

    /// Whether map `m` is coloured on the log scale.
    pub fn is_log(self, m: &HeatMap) -> bool {
        match self {
            Self::Linear => false,
            Self::Log => true,
            Self::Auto => m.washes_out(),
        }
    }
}

/// How to draw.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderOptions {
    /// Title at the top (`--title`).
    pub title: String,
    /// A line under the title (input, filter, grid), if any.
    pub subtitle: Option<String>,
    /// Cell size in pixels (`--boxsize`).
    pub boxsize: f64,
    /// Draw grid lines at the ticks (`--grid`).
    pub grid: bool,
    /// Base font size.
    pub font_size: f64,
    /// How counts become colours.
    pub color: ColorScale,
    /// The font (`--fonttype`); `None` for the default list (Verdana first).
    pub font: Option<String>,
}

impl Default for RenderOptions {
    fn default() -> Self {
        RenderOptions {
            title: "Latency Heat Map".into(),
            subtitle: None,
            boxsize: 8.0,
            grid: false,
            font_size: 12.0,
            color: ColorScale::Auto,
            font: None,
        }
    }
}

const LEFT: f64 = 90.0;
const RIGHT: f64 = 110.0;
/// Room above and below each map (its title; tick labels and axis title), in font sizes.
const MAP_TOP: f64 = 2.8;
const MAP_BOTTOM: f64 = 4.0;
const MIN_WIDTH: f64 = 640.0;
/// A map with few columns gets wider cells, up to this plot width: its time axis gets room for
/// ticks (cells stay at most 8 times as wide as high).
const MIN_PLOT_WIDTH: f64 = 480.0;

/// Width of a map's cells: the box size, or wider for a map with few columns.
fn cell_width(cols: usize, b: f64) -> f64 {
    let cols = cols.max(1) as f64;
    if cols * b >= MIN_PLOT_WIDTH {
        b
    } else {
        (MIN_PLOT_WIDTH / cols).floor().clamp(b, b * 8.0)
    }
}

struct Placed<'a> {
    map: &'a HeatMap,
    /// Top-left corner of the plot area.
    px: f64,
    py: f64,
    w: f64,
    h: f64,
}

/// Renders one or more heat maps (sharing a grid, e.g. one per disk) into one SVG document, stacked
/// from top to bottom.
pub fn render_svg(maps: &[HeatMap], o: &RenderOptions) -> String {
    let fs = o.font_size;
    let b = o.boxsize.max(1.0);
    let mut width = MIN_WIDTH;
    for m in maps {
        width = width.max(LEFT + m.bins.cols as f64 * cell_width(m.bins.cols, b) + RIGHT);
    }
    // The subtitle's parts, on as many lines (at most 3) as the width needs.
    let sub_size = fs - 1.0;
    let sub_lines = o.subtitle.as_deref().map(|t| svg::wrap(t, "; ", sub_size, width - 20.0, 3)).unwrap_or_default();
    let head = fs * 3.2 + sub_lines.len() as f64 * fs * 1.3;
    let foot = fs * 4.0;
    let mut placed = Vec::new();
    let mut y = head;
    for m in maps {
        let w = m.bins.cols as f64 * cell_width(m.bins.cols, b);
        let h = m.rows as f64 * b;
        let block = h.max(legend_size(h, fs).1);
        placed.push(Placed { map: m, px: LEFT, py: y + MAP_TOP * fs, w, h });
        y += (MAP_TOP + MAP_BOTTOM) * fs + block;
    }
    let height = y + foot;
    let mut s = Svg::with_font(width, height, "init(evt)", o.font.as_deref());
    s.raw(style());
    s.raw(&script(&placed, width - LEFT - 10.0));
    s.text_fit(width / 2.0, fs * 1.8, fs + 5.0, "middle", "black", &o.title, r#"class="title""#, width - 20.0);
    for (k, line) in sub_lines.iter().enumerate() {
        let yy = fs * 3.2 + k as f64 * fs * 1.3;
        s.text_fit(width / 2.0, yy, sub_size, "middle", "#555", line, r#"class="subtitle""#, width - 20.0);
    }
    for (k, p) in placed.iter().enumerate() {
        draw_map(&mut s, k, p, o, width);
    }
    // The details line (trace2heatmap.pl's) and a hint.
    s.text(LEFT, height - fs * 2.2, fs, "start", "black", " ", r#"id="details""#);
    s.text_fit(
        LEFT,
        height - fs * 0.8,
        fs - 2.0,
        "start",
        "#777",
        "Mouse over a cell for its time, range, count and percentile.",
        "",
        width - LEFT - 10.0,
    );
    // The floating tooltip, last so that it is drawn on top.
    s.raw(concat!(
        r#"<g id="tip" visibility="hidden" pointer-events="none">"#,
        r##"<rect id="tipbg" x="0" y="0" width="10" height="10" rx="3" fill="#ffffe8" stroke="#444" stroke-width="0.8" opacity="0.95"/>"##,
        r#"<text id="tiptext" x="0" y="0" font-size="11" fill="black"></text></g>"#,
        "\n"
    ));
    s.finish()
}

/// The style sheet: no font sizes (a style rule would override every text's own `font-size`,
/// which layout relies on).
fn style() -> &'static str {
    "<style type=\"text/css\">\n.heatmap .plot { cursor: crosshair; }\n</style>\n"
}

fn draw_map(s: &mut Svg, k: usize, p: &Placed, o: &RenderOptions, width: f64) {
    let m = p.map;
    let bins = &m.bins;
    let fs = o.font_size;
    let b = o.boxsize.max(1.0);
    let bw = cell_width(bins.cols, b);
    let (px, py, w, h) = (p.px, p.py, p.w, p.h);
    let _ = writeln!(
        s,
        r#"<g class="heatmap" id="map{k}" data-cols="{}" data-rows="{}" data-max="{}" data-total="{}">"#,
        bins.cols, m.rows, m.max_count, m.total
    );
    // Map title: the group and its count.
    let mut mt = match &m.group {
        Some(g) => format!("{g}: {} events", m.total),
        None => format!("{} events", m.total),
    };
    if let Some(ns) = m.not_shown() {
        let _ = write!(mt, " ({ns})");
    }
    s.text_fit(px, py - fs * 0.9, fs, "start", "black", &mt, r#"class="maptitle""#, width - px - 10.0);

    // Plot background (answers the mouse on empty cells).
    s.rect(px, py, w, h, "white", r##"class="plot" stroke="#bbb" stroke-width="0.5""##);

    // Axis ticks and labels.
    let yt = thin(y_ticks(m, h), |_| fs * 1.1);
    for &(v, yy) in &yt {
        let yy = py + yy;
        s.line(px - 4.0, yy, px, yy, "#333", "");
        if o.grid {
            s.line(px, yy, px + w, yy, "#e6e6e6", r#"class="grid""#);
        }
        s.text(px - 6.0, yy + fs * 0.35, fs - 2.0, "end", "#333", &bins.unit.fmt_short(v), r#"class="tick ytick""#);
    }
    let xt = thin(x_ticks(m, bw), |t| svg::text_width(&fmt_secs(t), fs - 2.0) + 8.0);
    for &(t, xx) in &xt {
        let xx = px + xx;
        s.line(xx, py + h, xx, py + h + 4.0, "#333", "");
        if o.grid {
            s.line(xx, py, xx, py + h, "#e6e6e6", r#"class="grid""#);
        }
        s.text(xx, py + h + fs * 1.45, fs - 2.0, "middle", "#333", &fmt_secs(t), r#"class="tick xtick""#);
    }
    s.line(px, py, px, py + h, "#333", "");
    s.line(px, py + h, px + w, py + h, "#333", "");
    // Axis titles.
    // The ticks carry their unit (ms, s): the title names the origin.
    s.text(px + w / 2.0, py + h + fs * 2.9, fs, "middle", "black", "Time since the start", r#"class="xlabel""#);
    let yl = format!("{}{}", bins.label, if bins.scale == YScale::Log { " (log)" } else { "" });
    let (lx, ly) = (fs * 1.1, py + h / 2.0);
    let rotate = format!(r#"class="ylabel" transform="rotate(-90 {lx:.1} {ly:.1})""#);
    s.text_fit(lx, ly, fs, "middle", "black", &yl, &rotate, h.max(40.0));

    // Cells.
    let log = o.color.is_log(m);
    let mut buf = String::with_capacity(64 * m.counts.iter().filter(|&&c| c > 0).count());
    for c in 0..bins.cols {
        let col = m.column(c);
        let x = px + c as f64 * bw;
        for (r, &n) in col.iter().enumerate() {
            if n == 0 {
                continue;
            }
            let y = py + (m.rows - 1 - r) as f64 * b;
            let _ = writeln!(
                buf,
                r#"<rect x="{x:.1}" y="{y:.1}" width="{bw}" height="{b}" fill="{}" data-c="{c}" data-r="{r}" data-n="{n}"/>"#,
                heat_color(ratio(n, m.max_count, log))
            );
        }
    }
    s.raw(r#"<g class="cells" pointer-events="none">"#);
    s.raw("\n");
    s.raw(&buf);
    s.raw("</g>\n");
    // Highlight of the hovered cell.
    let _ = writeln!(
        s,
        r#"<rect class="hl" id="hl{k}" x="0" y="0" width="{bw}" height="{b}" fill="none" stroke="black" stroke-width="1.2" visibility="hidden" pointer-events="none"/>"#
    );
    draw_legend(s, m, px + w + 24.0, py, h, fs, log);
    s.raw("</g>\n");
}

/// Legend: the colour ramp from 1 to the largest count.
/// Colour ratio of a count: linear (trace2heatmap.pl's) or logarithmic.
fn ratio(n: u64, max: u64, log: bool) -> f64 {
    let max = max.max(1) as f64;
    if log {
        (n as f64).ln_1p() / max.ln_1p()
    } else {
        n as f64 / max
    }
}

/// The height of the legend's colour ramp next to a map `h` pixels high, and of the whole legend
/// (ramp, the swatch of 0, its title).
fn legend_size(h: f64, fs: f64) -> (f64, f64) {
    let lh = h.clamp(40.0, 160.0);
    (lh, lh + fs * 3.0)
}

fn draw_legend(s: &mut Svg, m: &HeatMap, x: f64, py: f64, h: f64, fs: f64, log: bool) {
    let lh = legend_size(h, fs).0;
    let y0 = py;
    let steps = 24;
    // Labels (font fs - 2) at least this far apart.
    let gap = (fs - 2.0) * 1.2;
    s.raw(r#"<g class="legend">"#);
    for i in 0..steps {
        // Top is the largest count.
        let ratio = 1.0 - i as f64 / steps as f64;
        let yy = y0 + i as f64 * lh / steps as f64;
        s.rect(x, yy, 14.0, lh / steps as f64 + 0.3, &heat_color(ratio), "");
    }
    s.rect(x, y0, 14.0, lh, "none", r##"stroke="#999" stroke-width="0.5""##);
    let max = m.max_count.max(1);
    let label =
        |v: f64| if v >= 10_000.0 { latscope_event::units::fmt_count(v).replace(".00", "") } else { fmt_num(v) };
    let top = y0 + fs * 0.7;
    s.text(x + 18.0, top, fs - 2.0, "start", "#333", &label(max as f64), r#"class="legend legendmax""#);
    let (mid_y, one_y) = (y0 + lh / 2.0 + 4.0, y0 + lh);
    if max > 2 && mid_y - top >= gap && one_y - mid_y >= gap {
        let mid = if log { ((max as f64).ln_1p() / 2.0).exp_m1().round() } else { (max as f64 / 2.0).round() };
        s.text(x + 18.0, mid_y, fs - 2.0, "start", "#333", &label(mid), r#"class="legend""#);
    }
    if max > 1 && one_y - top >= gap {
        s.text(x + 18.0, one_y, fs - 2.0, "start", "#333", "1", r#"class="legend""#);
    }
    let zero_y = y0 + lh + fs * 1.25;
    s.rect(x, zero_y - 8.0, 14.0, 8.0, "white", r##"stroke="#999" stroke-width="0.5""##);
    s.text(x + 18.0, zero_y, fs - 2.0, "start", "#333", "0", r#"class="legend""#);
    let title = if log { "count (log)" } else { "count" };
    s.text(x, zero_y + fs * 1.3, fs - 2.0, "start", "#333", title, r#"class="legendtitle""#);
    s.raw("</g>\n");
}

impl std::fmt::Write for Svg {
    fn write_str(&mut self, x: &str) -> std::fmt::Result {
        self.raw(x);
        Ok(())
    }
}

/// The ticks (value, position in pixels) that keep at least `gap(value)` pixels from the last one
/// kept, so that their labels do not touch.
fn thin(ticks: Vec<(f64, f64)>, gap: impl Fn(f64) -> f64) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = Vec::with_capacity(ticks.len());
    for (v, p) in ticks {
        if out.last().is_none_or(|&(lv, lp)| (p - lp).abs() >= gap(v).max(gap(lv))) {
            out.push((v, p));
        }
    }
    out
}

/// Y ticks as (value, pixel offset from the plot top).
fn y_ticks(m: &HeatMap, h: f64) -> Vec<(f64, f64)> {
    let e = &m.bins.edges;
    let (lo, hi) = (e[0], e[e.len() - 1]);
    let target = ((h / 40.0).floor() as usize).clamp(2, 12);
    let log = m.bins.scale == YScale::Log;
    let pos = |v: f64| {
        if log {
            h - (v.ln() - lo.ln()) / (hi.ln() - lo.ln()).max(f64::MIN_POSITIVE) * h
        } else {
            h - (v - lo) / (hi - lo).max(f64::MIN_POSITIVE) * h
        }
    };
    m.bins.unit.ticks(lo, hi, target, log).into_iter().map(|v| (v, pos(v))).collect()
}

/// X ticks as (seconds label, pixel offset from the plot left).
fn x_ticks(m: &HeatMap, b: f64) -> Vec<(f64, f64)> {
    let bins = &m.bins;
    let w = bins.cols as f64 * b;
    let s0 = bins.col_start_sec(0);
    let s1 = bins.col_start_sec(bins.cols);
    // About one tick per 60 px, at least two; `thin` drops those whose labels would touch.
    let target = ((w / 60.0).floor() as usize).clamp(2, 20);
    let step = svg::nice_step((s1 - s0) / target as f64);
    let first = (s0 / step).ceil() as i64;
    let last = (s1 / step).floor() as i64;
    (first..=last).map(|k| k as f64 * step).map(|t| (t, (t - s0) / bins.step_sec * b)).collect()
}

/// The hover script and each map's data; the details line is kept within `details_max` pixels.
fn script(placed: &[Placed], details_max: f64) -> String {
    let mut d = format!("var DETAILS_MAX = {details_max:.0};\nvar MAPS = [\n");
    for p in placed {
        let m = p.map;
        let bins = &m.bins;
        let rl: Vec<String> = (0..m.rows)
            .map(|r| {
                let (lo, hi) = m.row_bounds(r);
                js_str(&bins.unit.fmt_range(lo, hi))
            })
            .collect();
        let mut cells = String::new();
        for c in 0..bins.cols {
            let col = m.column(c);
            if col.iter().all(|&n| n == 0) {
                continue;
            }
            let _ = write!(cells, "[{c},[");
            let mut first = true;
            for (r, &n) in col.iter().enumerate() {
                if n > 0 {
                    if !first {
                        cells.push(',');
                    }
                    first = false;
                    let _ = write!(cells, "{r},{n}");
                }
            }
            cells.push_str("]],");
        }
        let wall = match bins.col_start_wall_ns(0) {
            Some(w) => format!("{}", w as f64 / 1e6),
            None => "null".into(),
        };
        let _ = writeln!(
            d,
            "{{px:{:.1},py:{:.1},b:{},bh:{},cols:{},rows:{},s0:{},st:{},wall0:{},ylabel:{},group:{},rl:[{}],cells:[{}]}},",
            p.px,
            p.py,
            p.w / bins.cols.max(1) as f64,
            p.h / m.rows.max(1) as f64,
            bins.cols,
            m.rows,
            bins.col_start_sec(0),
            bins.step_sec,
            wall,
            js_str(&bins.label),
            m.group.as_deref().map(js_str).unwrap_or_else(|| "null".into()),
            rl.join(","),
            cells
        );
    }
    d.push_str("];\n");
    format!("<script type=\"text/ecmascript\"><![CDATA[\n{d}{HOVER_JS}]]></script>\n")
}

const HOVER_JS: &str = r#"
var svgroot, details, tip, tipbg, tiptext;
function init(evt) {
  svgroot = document.documentElement;
  details = document.getElementById("details");
  tip = document.getElementById("tip");
  tipbg = document.getElementById("tipbg");
  tiptext = document.getElementById("tiptext");
  for (var k = 0; k < MAPS.length; k++) {
    var m = MAPS[k];
    m.n = new Array(m.cols * m.rows);
    for (var i = 0; i < m.n.length; i++) m.n[i] = 0;
    for (var j = 0; j < m.cells.length; j++) {
      var c = m.cells[j][0], rc = m.cells[j][1];
      for (var q = 0; q < rc.length; q += 2) m.n[c * m.rows + rc[q]] = rc[q + 1];
    }
    m.tot = new Array(m.cols);
    for (var c2 = 0; c2 < m.cols; c2++) {
      var t = 0;
      for (var r = 0; r < m.rows; r++) t += m.n[c2 * m.rows + r];
      m.tot[c2] = t;
    }
  }
  svgroot.addEventListener("mousemove", move);
  svgroot.addEventListener("mouseleave", clear);
  var h = /hover=(\d+),(\d+)(?:,(\d+))?/.exec(window.location.hash || "");
  if (h) {
    var mk = h[3] ? parseInt(h[3], 10) : 0;
    var mm = MAPS[mk];
    if (mm) {
      var col = parseInt(h[1], 10), row = parseInt(h[2], 10);
      show(mk, col, row, mm.px + (col + 0.5) * mm.b, mm.py + (mm.rows - row - 0.5) * mm.bh);
    }
  }
}
function secs(v) {
  var r = Math.round(v * 1e6) / 1e6;
  if (r !== 0 && Math.abs(r) < 1) return (Math.round(r * 1e6) / 1e3) + "ms";
  return r + "s";
}
function wall(ms) {
  return new Date(ms).toISOString().replace("T", " ").replace("Z", " UTC");
}
function pct(a, b) {
  if (b <= 0) return "0%";
  var p = a / b * 100;
  return (p >= 10 ? p.toFixed(1) : p.toFixed(2)) + "%";
}
function show(k, c, r, x, y) {
  var m = MAPS[k];
  if (!m || c < 0 || r < 0 || c >= m.cols || r >= m.rows) { clear(); return; }
  var n = m.n[c * m.rows + r], tot = m.tot[c], acc = 0;
  for (var i = 0; i <= r; i++) acc += m.n[c * m.rows + i];
  var t0 = m.s0 + c * m.st;
  var lines = [];
  lines.push((m.group !== null ? m.group + ": " : "") + "time " + secs(t0) + " - " + secs(t0 + m.st));
  if (m.wall0 !== null) lines.push("  at " + wall(m.wall0 + c * m.st * 1000));
  lines.push(m.ylabel.toLowerCase() + " " + m.rl[r]);
  lines.push("count " + n + " (" + pct(n, tot) + " of the column's " + tot + ")");
  lines.push("accumulated " + acc + " (" + pct(acc, tot) + ", percentile)");
  fit(details, lines.join(", ").replace(",   at", " at"), DETAILS_MAX);
  while (tiptext.firstChild) tiptext.removeChild(tiptext.firstChild);
  for (var j = 0; j < lines.length; j++) {
    var ts = document.createElementNS("http://www.w3.org/2000/svg", "tspan");
    ts.setAttribute("x", "8");
    ts.setAttribute("dy", j === 0 ? "15" : "14");
    ts.textContent = lines[j];
    tiptext.appendChild(ts);
  }
  var tw = 0;
  try { tw = tiptext.getBBox().width; } catch (e) { tw = 0; }
  if (!(tw > 0)) tw = 7 * Math.max.apply(null, lines.map(function (l) { return l.length; }));
  var th = 14 * lines.length + 8;
  tipbg.setAttribute("width", tw + 16);
  tipbg.setAttribute("height", th);
  var vb = svgroot.viewBox.baseVal;
  var W = vb && vb.width ? vb.width : 1000, H = vb && vb.height ? vb.height : 1000;
  var tx = x + 14, ty = y + 14;
  if (tx + tw + 16 > W) tx = Math.max(0, x - tw - 30);
  if (ty + th > H) ty = Math.max(0, y - th - 10);
  tip.setAttribute("transform", "translate(" + tx + "," + ty + ")");
  tip.setAttribute("visibility", "visible");
  tip.setAttribute("data-map", k);
  tip.setAttribute("data-col", c);
  tip.setAttribute("data-row", r);
  for (var q = 0; q < MAPS.length; q++) {
    var hl = document.getElementById("hl" + q);
    if (q === k) {
      hl.setAttribute("x", m.px + c * m.b);
      hl.setAttribute("y", m.py + (m.rows - 1 - r) * m.bh);
      hl.setAttribute("visibility", "visible");
    } else {
      hl.setAttribute("visibility", "hidden");
    }
  }
}
// Sets `el`'s text, smaller (to 75 %) or cut with an ellipsis when it is wider than `max`.
function fit(el, text, max) {
  if (!el.base) el.base = parseFloat(el.getAttribute("font-size")) || 12;
  el.setAttribute("font-size", el.base);
  el.textContent = text;
  var w = 0;
  try { w = el.getComputedTextLength(); } catch (e) { return; }
  if (!(w > max)) return;
  var size = Math.floor(el.base * max / w * 10) / 10;
  if (size >= el.base * 0.75) { el.setAttribute("font-size", size); return; }
  el.setAttribute("font-size", el.base * 0.75);
  var lo = 0, hi = text.length;
  while (lo < hi) {
    var mid = (lo + hi + 1) >> 1;
    el.textContent = text.slice(0, mid) + "\u2026";
    if (el.getComputedTextLength() <= max) lo = mid; else hi = mid - 1;
  }
  el.textContent = text.slice(0, lo) + "\u2026";
}
function clear() {
  if (!tip) return;
  tip.setAttribute("visibility", "hidden");
  details.textContent = " ";
  for (var q = 0; q < MAPS.length; q++) document.getElementById("hl" + q).setAttribute("visibility", "hidden");
}
function move(evt) {
  var p = svgroot.createSVGPoint();
  p.x = evt.clientX; p.y = evt.clientY;
  var ctm = svgroot.getScreenCTM();
  if (ctm) p = p.matrixTransform(ctm.inverse());
  for (var k = 0; k < MAPS.length; k++) {
    var m = MAPS[k];
    if (p.x >= m.px && p.x < m.px + m.cols * m.b && p.y >= m.py && p.y < m.py + m.rows * m.bh) {
      var c = Math.floor((p.x - m.px) / m.b), r = m.rows - 1 - Math.floor((p.y - m.py) / m.bh);
      show(k, c, r, p.x, p.y);
      return;
    }
  }
  clear();
}
"#;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::heatmap::{Binning, Points, XSpec, YSpec, YUnit};

    fn sample() -> HeatMap {
        let mut p = Points::default();
        for (t, v) in [(0.0, 5.0), (0.5, 5.0), (1.2, 50.0), (2.9, 100.0)] {
            p.push(t, v);
        }
        let y = YSpec { rows: 10, unit: YUnit::Raw("us".into()), ..Default::default() };
        let b = Binning::plan(&[&p], &XSpec::default(), &y).unwrap();
        b.build(&p, "t", Some("vda".into()))
    }

    #[test]
    fn svg_has_cells_ticks_legend_and_script() {
        let m = sample();
        let out = render_svg(&[m], &RenderOptions { grid: true, ..Default::default() });
        assert!(out.contains(r#"data-c="0" data-r="0" data-n="2""#));
        assert!(out.contains(r#"data-c="2" data-r="10" data-n="1""#), "top row and last column drawn");
        assert!(out.contains(r#"fill="rgb(255,0,0)" data-c="0""#));
        assert!(out.contains("class=\"tick ytick\""));
        assert!(out.contains(">100us</text>"));
        assert!(out.contains(">0s</text>"));
        assert!(out.contains("legendmax"));
        assert!(out.contains("vda: 4 events"));
        assert!(out.contains("\"0-10us\""));
        assert!(out.contains("class=\"grid\""));
        let log = render_svg(&[sample()], &RenderOptions { color: ColorScale::Log, ..Default::default() });
        // 1 of a largest 2: ln 2 / ln 3 = 0.63 instead of 0.5.
        assert!(log.contains(r#"fill="rgb(255,89,81)" data-c="1""#), "{log}");
        // Well-formed enough: one root, script in CDATA.
        assert_eq!(out.matches("<svg ").count(), 1);
        assert!(out.contains("<![CDATA["));
        assert!(!out[out.find("]]>").unwrap() + 3..].contains("]]>"));
    }
}
