//! Small helpers shared by the SVG renderers: escaping, number formatting, axis ticks, colours.
//!
//! Every SVG latscope writes is a standalone file (no external fonts, scripts or styles) that a
//! browser opens directly; interactive ones carry their script inline.

use std::fmt::Write;

/// Escape text for XML content and attribute values: control characters as visible escapes, as
/// terminals show them ([`latscope_event::escape::escape_controls`]: XML 1.0 forbids most C0
/// characters even as character references, and the others would act in a viewer), then XML's
/// five special characters as entities.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => latscope_event::escape::push_escaped(&mut out, c),
        }
    }
    out
}

/// A JSON string literal safe to embed in an XML CDATA section (no `]]>`, no `<`, no character
/// XML forbids: control characters as `\u` escapes, the same string to the script).
pub fn js_str(s: &str) -> String {
    let j = serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into());
    latscope_event::escape::json_ascii_controls(j)
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

/// Check that `doc` is well-formed XML 1.0 without a character XML forbids (C0 controls other
/// than tab, newline and carriage return, U+FFFE, U+FFFF), raw or as a character reference; the
/// error says where. Every SVG written from names the traced system chose can be checked.
pub fn check_xml(doc: &[u8]) -> Result<(), String> {
    let text = std::str::from_utf8(doc).map_err(|e| format!("not UTF-8 at byte {}", e.valid_up_to()))?;
    let allowed = |u: u32| {
        matches!(u, 0x9 | 0xa | 0xd) || (0x20..=0xd7ff).contains(&u) || (0xe000..=0xfffd).contains(&u) || u >= 0x10000
    };
    if let Some((at, c)) = text.char_indices().find(|&(_, c)| !allowed(c as u32)) {
        return Err(format!("character U+{:04X} at byte {at}, which XML forbids", c as u32));
    }
    let mut rest = text;
    while let Some(i) = rest.find("&#") {
        let after = &rest[i + 2..];
        let end = after
            .find(';')
            .ok_or_else(|| format!("an unterminated character reference at byte {}", text.len() - rest.len() + i))?;
        let r = &after[..end];
        let v = match r.strip_prefix('x').or_else(|| r.strip_prefix('X')) {
            Some(h) => u32::from_str_radix(h, 16).ok(),
            None => r.parse::<u32>().ok(),
        };
        if !v.is_some_and(allowed) {
            return Err(format!(
                "the character reference &#{r}; at byte {}, which XML forbids",
                text.len() - rest.len() + i
            ));
        }
        rest = &after[end..];
    }
    let mut reader = quick_xml::Reader::from_str(text);
    let mut depth = 0i64;
    let mut roots = 0;
    loop {
        match reader.read_event() {
            Ok(quick_xml::events::Event::Start(_)) => {
                if depth == 0 {
                    roots += 1;
                }
                depth += 1;
            }
            Ok(quick_xml::events::Event::End(_)) => depth -= 1,
            Ok(quick_xml::events::Event::Empty(_)) if depth == 0 => roots += 1,
            Ok(quick_xml::events::Event::GeneralRef(r)) => {
                // Every entity must be one XML predefines (character references are checked above).
                let name = String::from_utf8_lossy(&r).into_owned();
                if !name.starts_with('#') && !matches!(name.as_str(), "lt" | "gt" | "amp" | "quot" | "apos") {
                    return Err(format!(
                        "the entity &{name}; at byte {}, which XML does not define",
                        reader.buffer_position()
                    ));
                }
            }
            Ok(quick_xml::events::Event::Eof) => break,
            Ok(_) => {}
            Err(e) => return Err(format!("not well-formed XML at byte {}: {e}", reader.error_position())),
        }
    }
    if depth != 0 || roots != 1 {
        return Err(format!("not well-formed XML: {roots} root elements, {depth} left open at the end"));
    }
    Ok(())
}

/// A number for labels: integers as they are (`1200`), others with 4 significant digits and no
/// trailing zeros (`0.5`, `2.25`, `199.5`, `1.235e-7`).
pub fn fmt_num(v: f64) -> String {
    if !v.is_finite() {
        return format!("{v}");
    }
    if v == v.trunc() && v.abs() < 1e15 {
        return format!("{}", v as i64);
    }
    let mag = v.abs().log10().floor() as i32;
    if !(-4..15).contains(&mag) {
        return format!("{v:.3e}");
    }
    let decimals = (3 - mag).max(0) as usize;
    let t = format!("{v:.decimals$}");
    if t.contains('.') {
        t.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        t
    }
}

/// `2.00ms` as `2ms`, `1.50us` as `1.5us`, `10.0MiB` as `10MiB`: the zeros after a decimal point
/// of the number at the start of `s` are dropped.
pub fn trim_zeros(s: &str) -> String {
    let end = s.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-')).unwrap_or(s.len());
    let (num, rest) = s.split_at(end);
    if !num.contains('.') {
        return s.to_string();
    }
    format!("{}{rest}", num.trim_end_matches('0').trim_end_matches('.'))
}

/// Seconds as a short label: `0s`, `1.5s`, `90s`, `250ms`, `10ms`.
pub fn fmt_secs(s: f64) -> String {
    if s != 0.0 && s.abs() < 1.0 {
        return trim_zeros(&latscope_event::units::fmt_ns_f(s * 1e9));
    }
    format!("{}s", fmt_num((s * 1e6).round() / 1e6))
}

/// Wall-clock ns since the epoch as `2024-05-01 10:01:02.123 UTC`.
pub fn fmt_wall(ns: i64) -> String {
    // Every i64 of ns is within chrono's range; the milliseconds are cut, not rounded.
    chrono::DateTime::from_timestamp_nanos(ns).format("%Y-%m-%d %H:%M:%S%.3f UTC").to_string()
}

/// Ticks for a linear axis over `[lo, hi]`: about `target` values at a 1-2-5 step, all inside.
pub fn linear_ticks(lo: f64, hi: f64, target: usize) -> Vec<f64> {
    if !(lo.is_finite() && hi.is_finite()) || hi < lo {
        return Vec::new();
    }
    if hi == lo {
        return vec![lo];
    }
    let step = nice_step((hi - lo) / target.max(1) as f64);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    (first..=last).map(|k| k as f64 * step).collect()
}

/// Ticks from 0 to `hi` for a byte axis: 1-2-5 steps of the binary unit that fits (KiB, MiB, ...),
/// so that labels read `100MiB`, not `95.4MiB`.
pub fn bytes_ticks(hi: f64, target: usize) -> Vec<f64> {
    let mut unit = 1.0;
    while hi / unit >= 1024.0 && unit < 1024f64.powi(5) {
        unit *= 1024.0;
    }
    linear_ticks(0.0, hi / unit, target).into_iter().map(|t| t * unit).collect()
}

/// The 1-2-5 multiple of a power of ten at or above `raw`.
pub fn nice_step(raw: f64) -> f64 {
    if !(raw > 0.0 && raw.is_finite()) {
        return 1.0;
    }
    let p = 10f64.powf(raw.log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if m * p >= raw * (1.0 - 1e-9) {
            return m * p;
        }
    }
    10.0 * p
}

/// A "nice" step for durations in ns (1-2-5 of powers of ten, which also suits seconds).
pub fn nice_time_step_ns(raw: f64) -> f64 {
    nice_step(raw)
}

/// Ticks for a log axis over `[lo, hi]` (both > 0): every decade, plus 2 and 5 when the range is
/// under three decades.
pub fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    if !(lo > 0.0 && hi >= lo && hi.is_finite()) {
        return Vec::new();
    }
    let d0 = lo.log10().floor() as i32;
    let d1 = hi.log10().ceil() as i32;
    let mults: &[f64] = if d1 - d0 <= 3 { &[1.0, 2.0, 5.0] } else { &[1.0] };
    let mut out = Vec::new();
    for d in d0..=d1 {
        for m in mults {
            let v = m * 10f64.powi(d);
            if v >= lo * (1.0 - 1e-12) && v <= hi * (1.0 + 1e-12) {
                out.push(v);
            }
        }
    }
    out
}

/// trace2heatmap.pl's colour for a cell holding `ratio` (count / largest count, `0..=1`): white for
/// empty, then from pale yellow `rgb(255,240,220)` to red `rgb(255,0,0)`.
pub fn heat_rgb(ratio: f64) -> (u8, u8, u8) {
    if ratio <= 0.0 || ratio.is_nan() {
        return (255, 255, 255);
    }
    let r = ratio.min(1.0);
    (255, (240.0 - 240.0 * r).round() as u8, (220.0 - 220.0 * r).round() as u8)
}

/// [`heat_rgb`] as an SVG colour.
pub fn heat_color(ratio: f64) -> String {
    let (r, g, b) = heat_rgb(ratio);
    format!("rgb({r},{g},{b})")
}

/// Widths of the printable ASCII characters in Verdana, the widest of the fonts the documents ask
/// for, in thousandths of an em (from the space, 0x20, to the tilde, 0x7e).
const VERDANA_WIDTHS: [u16; 95] = [
    352, 394, 459, 818, 636, 1076, 727, 269, 454, 454, 636, 818, 364, 454, 364, 454, // space to /
    636, 636, 636, 636, 636, 636, 636, 636, 636, 636, 454, 454, 818, 818, 818, 545, // 0 to ?
    1000, 684, 686, 698, 771, 632, 575, 775, 751, 421, 455, 693, 557, 843, 748, 787, // @ to O
    603, 787, 695, 684, 616, 732, 684, 989, 685, 615, 685, 454, 454, 454, 818, 636, // P to _
    636, 601, 623, 521, 623, 596, 352, 623, 633, 274, 344, 592, 274, 973, 633, 607, // ` to o
    623, 623, 427, 521, 394, 633, 592, 818, 592, 592, 525, 635, 454, 635, 818, // p to ~
];

/// The width of `s` in pixels at font size `size`, as Verdana draws it (other fonts the documents
/// fall back to are narrower): a bound for laying text out without a font at hand.
pub fn text_width(s: &str, size: f64) -> f64 {
    let em: u32 = s
        .chars()
        .map(|c| match c as u32 {
            u @ 0x20..=0x7e => u32::from(VERDANA_WIDTHS[(u - 0x20) as usize]),
            0x2e80.. => 1000,
            _ => 800,
        })
        .sum();
    f64::from(em) / 1000.0 * size
}

/// `s` cut in the middle with `…` so that it is at most `max` pixels wide at `size` (unchanged
/// when it fits).
pub fn fit(s: &str, size: f64, max: f64) -> String {
    if text_width(s, size) <= max {
        return s.to_string();
    }
    let chars: Vec<char> = s.chars().collect();
    // Keep more of the start (what it is) than of the end (a file name).
    let mut keep = chars.len();
    while keep > 1 {
        keep -= 1;
        let head = (keep * 3).div_ceil(5);
        let cut: String =
            chars[..head].iter().chain(['…'].iter()).chain(&chars[chars.len() - (keep - head)..]).collect();
        if text_width(&cut, size) <= max {
            return cut;
        }
    }
    "…".into()
}

/// `s` split at `sep` into lines at most `max` pixels wide at `size` (parts too wide for a line
/// of their own are cut by [`fit`]), at most `lines` of them: what is left goes to the last.
pub fn wrap(s: &str, sep: &str, size: f64, max: f64, lines: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for part in s.split(sep) {
        let full = out.len() >= lines.max(1);
        match out.last_mut() {
            Some(l) if full || text_width(&format!("{l}{sep}{part}"), size) <= max => {
                l.push_str(sep);
                l.push_str(part);
            }
            _ => out.push(part.to_string()),
        }
    }
    out.into_iter().map(|l| fit(&l, size, max)).collect()
}

/// Colours of chart series, distinguishable and readable on white.
pub const SERIES_COLORS: [&str; 8] =
    ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];

/// An SVG document being written.
pub struct Svg {
    buf: String,
}

impl Svg {
    /// Starts a document of `w` x `h` pixels with a white background. `onload` names a script
    /// function to run on load (interactive documents), or is empty.
    pub fn new(w: f64, h: f64, onload: &str) -> Self {
        Self::with_font(w, h, onload, None)
    }

    /// [`Svg::new`] with the text in `font` (`None`: Verdana, else Helvetica, Arial, sans-serif).
    pub fn with_font(w: f64, h: f64, onload: &str, font: Option<&str>) -> Self {
        let font = esc(font.unwrap_or("Verdana, Helvetica, Arial, sans-serif"));
        let mut buf = String::with_capacity(64 * 1024);
        let _ = writeln!(buf, r#"<?xml version="1.0" standalone="no"?>"#);
        let onload = if onload.is_empty() { String::new() } else { format!(r#" onload="{onload}""#) };
        let _ = writeln!(
            buf,
            r#"<svg version="1.1" width="{w:.0}" height="{h:.0}" viewBox="0 0 {w:.0} {h:.0}"{onload} xmlns="http://www.w3.org/2000/svg" font-family="{font}">"#
        );
        let _ = writeln!(buf, r#"<rect x="0" y="0" width="{w:.0}" height="{h:.0}" fill="white"/>"#);
        Svg { buf }
    }

    /// Appends raw markup.
    pub fn raw(&mut self, s: &str) {
        self.buf.push_str(s);
    }

    /// A text element; `anchor` is `start`, `middle` or `end`; `extra` is added as attributes.
    #[allow(clippy::too_many_arguments)]
    pub fn text(&mut self, x: f64, y: f64, size: f64, anchor: &str, fill: &str, s: &str, extra: &str) {
        let _ = writeln!(
            self.buf,
            r#"<text x="{x:.1}" y="{y:.1}" font-size="{size}" text-anchor="{anchor}" fill="{fill}" {extra}>{}</text>"#,
            esc(s)
        );
    }

    /// A text element at most `max` pixels wide: drawn smaller (down to 80 % of `size`) when that
    /// makes it fit, else cut in the middle with `…`; a cut text keeps the whole in a tooltip.
    #[allow(clippy::too_many_arguments)]
    pub fn text_fit(&mut self, x: f64, y: f64, size: f64, anchor: &str, fill: &str, s: &str, extra: &str, max: f64) {
        let w = text_width(s, size);
        if w <= max {
            return self.text(x, y, size, anchor, fill, s, extra);
        }
        let smaller = (size * max / w * 10.0).floor() / 10.0;
        if smaller >= size * 0.8 {
            return self.text(x, y, smaller, anchor, fill, s, extra);
        }
        let small = (size * 0.8 * 10.0).round() / 10.0;
        let _ = writeln!(
            self.buf,
            r#"<text x="{x:.1}" y="{y:.1}" font-size="{small}" text-anchor="{anchor}" fill="{fill}" {extra}>{}<title>{}</title></text>"#,
            esc(&fit(s, small, max)),
            esc(s)
        );
    }

    /// A line of items (`p99 8.06ms`) joined by `sep`: when it is wider than `max` even at 0.8 of
    /// `size`, whole items are left out, in `drop_order` (indices into `items`), until it fits,
    /// the full line in its tooltip; an item is never cut (a cut number reads as another number).
    #[allow(clippy::too_many_arguments)]
    pub fn text_items(
        &mut self,
        x: f64,
        y: f64,
        size: f64,
        fill: &str,
        items: &[String],
        sep: &str,
        drop_order: &[usize],
        extra: &str,
        max: f64,
    ) {
        let full = items.join(sep);
        let small = (size * 0.8 * 10.0).round() / 10.0;
        let mut keep = vec![true; items.len()];
        let line = |keep: &[bool]| -> String {
            let kept: Vec<&str> = items.iter().zip(keep).filter(|(_, k)| **k).map(|(i, _)| i.as_str()).collect();
            kept.join(sep)
        };
        for &i in drop_order {
            if text_width(&line(&keep), small) <= max {
                break;
            }
            if let Some(k) = keep.get_mut(i) {
                *k = false;
            }
        }
        let shown = line(&keep);
        if shown == full {
            return self.text_fit(x, y, size, "start", fill, &full, extra, max);
        }
        // Narrower than the fewest items: only then cut.
        let shown = fit(&shown, small, max);
        let _ = writeln!(
            self.buf,
            r#"<text x="{x:.1}" y="{y:.1}" font-size="{small}" text-anchor="start" fill="{fill}" {extra}>{}<title>{}</title></text>"#,
            esc(&shown),
            esc(&full)
        );
    }

    /// A line.
    pub fn line(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, stroke: &str, extra: &str) {
        let _ = writeln!(
            self.buf,
            r#"<line x1="{x1:.1}" y1="{y1:.1}" x2="{x2:.1}" y2="{y2:.1}" stroke="{stroke}" stroke-width="1" {extra}/>"#
        );
    }

    /// A filled rectangle.
    pub fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: &str, extra: &str) {
        let _ =
            writeln!(self.buf, r#"<rect x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{h:.1}" fill="{fill}" {extra}/>"#);
    }

    /// A polyline through `points`.
    pub fn polyline(&mut self, points: &[(f64, f64)], stroke: &str, extra: &str) {
        let mut p = String::with_capacity(points.len() * 14);
        for (x, y) in points {
            let _ = write!(p, "{x:.1},{y:.1} ");
        }
        let _ = writeln!(
            self.buf,
            r#"<polyline points="{}" fill="none" stroke="{stroke}" stroke-width="1.5" {extra}/>"#,
            p.trim_end()
        );
    }

    /// Closes the document and returns it.
    pub fn finish(mut self) -> String {
        self.buf.push_str("</svg>\n");
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping() {
        assert_eq!(esc("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
        assert_eq!(
            esc("lib/\x1b[31mEVIL\x1b]0;t\x07\nname.so\u{fffe}"),
            "lib/\\x1b[31mEVIL\\x1b]0;t\\x07\\nname.so\\u{fffe}"
        );
        assert!(
            check_xml(format!("<svg><text>{}</text></svg>", esc("a\x1b\u{9b}\u{202e}<&\u{ffff}")).as_bytes()).is_ok()
        );
        assert!(!js_str("a\u{ffff}\u{9b}").contains('\u{ffff}'));
        for bad in [
            "<svg><text>a\x1bb</text></svg>",
            "<svg><text>&#27;</text></svg>",
            "<svg><a></svg>",
            "<svg/><svg/>",
            "<svg>&#xfffe;</svg>",
            "<svg>\u{ffff}</svg>",
        ] {
            assert!(check_xml(bad.as_bytes()).is_err(), "{bad}");
        }
        assert_eq!(js_str("]]></script>"), r#""]]\u003e\u003c/script\u003e""#);
    }

    #[test]
    fn numbers() {
        assert_eq!(fmt_num(1200.0), "1200");
        assert_eq!(fmt_num(0.5), "0.5");
        assert_eq!(fmt_num(-3.0), "-3");
        assert_eq!(fmt_num(199.526231), "199.5");
        assert_eq!(fmt_num(7364.5577), "7365");
        assert_eq!(fmt_num(0.02), "0.02");
        assert_eq!(fmt_num(1.5e-7), "1.500e-7");
        assert_eq!(fmt_secs(10.0), "10s");
        assert_eq!(fmt_secs(0.25), "250ms");
        assert_eq!(fmt_secs(0.01), "10ms");
        assert_eq!(trim_zeros("2.00ms"), "2ms");
        assert_eq!(trim_zeros("1.50us"), "1.5us");
        assert_eq!(trim_zeros("100us"), "100us");
        assert_eq!(trim_zeros("47.7MiB"), "47.7MiB");
        assert_eq!(fmt_secs(1.5), "1.5s");
    }

    #[test]
    fn wall_clock() {
        assert_eq!(fmt_wall(0), "1970-01-01 00:00:00.000 UTC");
        assert_eq!(fmt_wall(1_709_251_262_123_000_000), "2024-03-01 00:01:02.123 UTC");
        assert_eq!(fmt_wall(951_782_400_000_000_000), "2000-02-29 00:00:00.000 UTC");
    }

    #[test]
    fn ticks() {
        assert_eq!(linear_ticks(0.0, 100.0, 5), vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]);
        assert_eq!(linear_ticks(3.0, 3.0, 5), vec![3.0]);
        assert_eq!(nice_step(3.0), 5.0);
        assert_eq!(bytes_ticks(250.0 * 1048576.0, 3), vec![0.0, 100.0 * 1048576.0, 200.0 * 1048576.0]);
        assert_eq!(nice_step(0.7), 1.0);
        assert_eq!(log_ticks(1e3, 1e9), vec![1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9]);
        assert_eq!(log_ticks(15.0, 600.0), vec![20.0, 50.0, 100.0, 200.0, 500.0]);
    }

    #[test]
    fn fitting() {
        assert_eq!(text_width("mm", 10.0), 2.0 * 9.73);
        assert_eq!(fit("short", 12.0, 500.0), "short");
        let long = "Syscall latency histogram of 'proc.name = x' — /tmp/a/very/long/path/to/the/trace.lst";
        let cut = fit(long, 12.0, 300.0);
        assert!(text_width(&cut, 12.0) <= 300.0 && cut.contains('…') && cut.ends_with(".lst"), "{cut}");
        let mut d = Svg::new(100.0, 100.0, "");
        d.text_fit(0.0, 10.0, 12.0, "start", "black", long, "", 200.0);
        let out = d.finish();
        assert!(out.contains("<title>Syscall latency histogram"), "{out}");
    }

    #[test]
    fn wrapping() {
        let s = "trace.lst; 12345 syscall events; filter: proc.name = postgres; 50 log rows, 120 columns of 50ms";
        assert_eq!(wrap(s, "; ", 11.0, 2000.0, 3), vec![s.to_string()]);
        let w = wrap(s, "; ", 11.0, 300.0, 3);
        assert!(w.len() > 1 && w.len() <= 3 && w.iter().all(|l| text_width(l, 11.0) <= 300.0), "{w:?}");
        assert_eq!(w.join("; "), s);
    }

    #[test]
    fn colours() {
        assert_eq!(heat_color(0.0), "rgb(255,255,255)");
        assert_eq!(heat_color(1.0), "rgb(255,0,0)");
        assert_eq!(heat_color(0.5), "rgb(255,120,110)");
    }

    #[test]
    fn document() {
        let mut s = Svg::new(10.0, 10.0, "");
        s.text(1.0, 2.0, 12.0, "start", "black", "a<b", "");
        let out = s.finish();
        assert!(out.starts_with("<?xml"));
        assert!(out.contains("a&lt;b"));
        assert!(out.ends_with("</svg>\n"));
    }
}
