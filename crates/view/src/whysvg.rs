//! The breakdown as a picture (`top --by cause --svg`, `why --svg`): time by cause as a stacked
//! bar per operation (and over all of them), blocked time by waker, with a time axis and a
//! legend. Every text is laid out from its measured width, so that none overlaps another or
//! runs off the drawing.

use crate::svg::{esc, linear_ticks, text_width, Svg};
use crate::why::{WhyAgg, PART_LABELS};
use latscope_event::units::fmt_ns;
use latscope_event::WHY_PARTS;

/// The colour of each part, in the order of [`PART_LABELS`]: CPU greens, waits in distinct hues,
/// unknown grey.
pub const PART_COLORS: [&str; WHY_PARTS] =
    ["#2ca02c", "#98df8a", "#1f77b4", "#d62728", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"];

const W: f64 = 960.0;
const PAD: f64 = 16.0;
const LABEL_W: f64 = 190.0;
const VALUE_W: f64 = 200.0;
const BAR_H: f64 = 20.0;
const ROW_H: f64 = 28.0;
const FONT: f64 = 12.0;

/// One bar: its label, its segments (part index, ns), and the text at its end.
struct Bar {
    label: String,
    segments: Vec<(usize, u64)>,
    value: String,
    tip: String,
}

/// The breakdown of `agg` as an SVG document: `title` on top, the `n` operations with the most
/// time, the `n` wakers with the most blocked time.
pub fn render_svg(agg: &WhyAgg, n: usize, title: &str) -> String {
    let bar_x = PAD + LABEL_W + 8.0;
    let bar_w = W - bar_x - VALUE_W - PAD;
    let mut ops: Vec<Bar> = Vec::new();
    let all = |parts: &[u64; WHY_PARTS]| -> Vec<(usize, u64)> {
        parts.iter().copied().enumerate().filter(|&(_, v)| v > 0).collect()
    };
    if agg.calls > 0 {
        ops.push(Bar {
            label: "all operations".into(),
            segments: all(&agg.parts),
            value: format!("{} in {} calls", fmt_ns(agg.total_ns), agg.calls),
            tip: String::new(),
        });
    }
    for (op, o) in agg.ranked_ops(n) {
        ops.push(Bar {
            label: op.to_string(),
            segments: all(&o.parts),
            value: format!("{} in {} calls", fmt_ns(o.total_ns), o.calls),
            tip: op.to_string(),
        });
    }
    let wakers: Vec<Bar> = agg
        .ranked_wakers(n)
        .into_iter()
        .map(|(w, k, t)| Bar {
            label: w.to_string(),
            segments: vec![(k, t)],
            value: format!("{} blocked", fmt_ns(t)),
            tip: w.to_string(),
        })
        .collect();

    // Legend: the parts with time, wrapped into rows as wide as the drawing.
    let used: Vec<usize> = (0..WHY_PARTS).filter(|&k| agg.parts[k] > 0).collect();
    let mut legend_rows: Vec<Vec<(usize, f64)>> = vec![Vec::new()];
    let mut x = PAD;
    for &k in &used {
        let w = 14.0 + 4.0 + text_width(PART_LABELS[k], FONT) + 18.0;
        if x + w > W - PAD && !legend_rows.last().is_some_and(Vec::is_empty) {
            legend_rows.push(Vec::new());
            x = PAD;
        }
        if let Some(r) = legend_rows.last_mut() {
            r.push((k, x));
        }
        x += w;
    }

    let mut y = PAD;
    let title_y = y + 16.0;
    y = title_y + 10.0;
    let legend_y = y + 8.0;
    y = legend_y + legend_rows.len() as f64 * 20.0 + 8.0;
    let ops_head = y + 14.0;
    let ops_top = ops_head + 10.0;
    let ops_bottom = ops_top + ops.len().max(1) as f64 * ROW_H;
    let axis_y = ops_bottom + 16.0;
    let axis_title_y = axis_y + 18.0;
    let mut wak_head = axis_title_y + 30.0;
    let wak_top = wak_head + 10.0;
    let wak_bottom = wak_top + wakers.len() as f64 * ROW_H;
    if wakers.is_empty() {
        wak_head = axis_title_y;
    }
    let note_y = if wakers.is_empty() { axis_title_y + 26.0 } else { wak_bottom + 20.0 };
    let h = note_y + PAD;

    let mut s = Svg::new(W, h, "");
    s.text_fit(PAD, title_y, 16.0, "start", "#000", title, r#"font-weight="bold""#, W - 2.0 * PAD);
    if agg.calls == 0 {
        s.text(
            PAD,
            ops_head,
            FONT,
            "start",
            "#000",
            "no call carries a breakdown: record with `latscope record --why`",
            "",
        );
    }
    s.raw(r#"<g class="legend">"#);
    for (r, row) in legend_rows.iter().enumerate() {
        let ly = legend_y + r as f64 * 20.0;
        for &(k, lx) in row {
            s.rect(lx, ly, 14.0, 14.0, PART_COLORS[k], "");
            s.text(lx + 18.0, ly + 11.5, FONT, "start", "#000", PART_LABELS[k], "");
        }
    }
    s.raw("</g>\n");

    let max_ops = agg.by_op.values().map(|o| o.total_ns).max().unwrap_or(0).max(agg.total_ns).max(1) as f64;
    if !ops.is_empty() {
        let head = "Time by cause, per operation (the calls' latency, summed)";
        s.text_fit(PAD, ops_head, 13.0, "start", "#000", head, r#"font-weight="bold""#, W - 2.0 * PAD);
        draw_bars(&mut s, &ops, ops_top, bar_x, bar_w, max_ops);
        // The time axis under the bars, with its unit in each label.
        s.line(bar_x, ops_bottom, bar_x + bar_w, ops_bottom, "#000", "");
        let ticks = linear_ticks(0.0, max_ops, 5);
        for t in &ticks {
            let tx = bar_x + t / max_ops * bar_w;
            s.line(tx, ops_bottom, tx, ops_bottom + 4.0, "#000", "");
            s.text(tx, axis_y, 11.0, "middle", "#000", &fmt_ns(t.round() as u64), "");
        }
        s.text(bar_x + bar_w / 2.0, axis_title_y, 11.0, "middle", "#444", "time, summed over the calls", "");
    }
    if !wakers.is_empty() {
        let max_w = wakers.iter().map(|b| b.segments[0].1).max().unwrap_or(1).max(1) as f64;
        let head = "Blocked time by waker (who ended each call's longest wait; colour: its cause)";
        s.text_fit(PAD, wak_head, 13.0, "start", "#000", head, r#"font-weight="bold""#, W - 2.0 * PAD);
        draw_bars(&mut s, &wakers, wak_top, bar_x, bar_w, max_w);
    }
    let mut notes = Vec::new();
    if agg.without > 0 {
        notes.push(format!("{} calls without a breakdown left out", agg.without));
    }
    if agg.waits_left_out > 0 {
        notes.push(format!("{} idle waits left out (--waits counts them)", agg.waits_left_out));
    }
    if !notes.is_empty() {
        s.text_fit(PAD, note_y, 11.0, "start", "#444", &notes.join("; "), "", W - 2.0 * PAD);
    }
    s.finish()
}

/// Horizontal stacked bars from `top`, `max` ns wide at `bar_w` pixels, each with its label on
/// the left, its value on the right, a share inside each segment wide enough for it, and a
/// tooltip per segment.
fn draw_bars(s: &mut Svg, bars: &[Bar], top: f64, bar_x: f64, bar_w: f64, max: f64) {
    for (i, b) in bars.iter().enumerate() {
        let y = top + i as f64 * ROW_H;
        let mid = y + BAR_H / 2.0 + 4.0;
        s.text_fit(bar_x - 8.0, mid, FONT, "end", "#000", &b.label, "", LABEL_W);
        let total: u64 = b.segments.iter().map(|x| x.1).sum();
        let mut x = bar_x;
        for &(k, v) in &b.segments {
            let w = v as f64 / max * bar_w;
            let share = v as f64 * 100.0 / total.max(1) as f64;
            let tip = format!(
                "{}{}: {} ({share:.1}%)",
                if b.tip.is_empty() { String::new() } else { format!("{}, ", b.tip) },
                PART_LABELS[k],
                fmt_ns(v)
            );
            s.raw(&format!(
                r#"<rect x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{BAR_H}" fill="{}"><title>{}</title></rect>
"#,
                PART_COLORS[k],
                esc(&tip)
            ));
            let label = format!("{share:.0}%");
            if b.segments.len() > 1 && w >= text_width(&label, 10.0) + 6.0 && share >= 1.0 {
                let fill = if matches!(k, 1 | 8) { "#000" } else { "#fff" };
                s.text(x + w / 2.0, y + BAR_H / 2.0 + 3.5, 10.0, "middle", fill, &label, "");
            }
            x += w;
        }
        s.text_fit(bar_x + bar_w + 8.0, mid, FONT, "start", "#000", &b.value, "", VALUE_W - 8.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use latscope_event::{comm_to_words, Event, EventBatch};

    #[test]
    fn bars_legend_and_axis_are_drawn() {
        let (lo, hi) = comm_to_words("writer");
        let mut b = EventBatch::default();
        b.push(&Event {
            nr: latscope_event::syscall_nr("read").unwrap(),
            lat: 4_000_000,
            why_cpu: 1_000_000,
            why_ipc: 3_000_000,
            waker_ctx: 1,
            waker_tid: 42,
            waker_comm_lo: lo,
            waker_comm_hi: hi,
            ..Default::default()
        });
        let mut a = WhyAgg::default();
        a.add(&b, &[0]);
        let svg = render_svg(&a, 5, "t <x>");
        for want in
            ["t &lt;x&gt;", "pipe/socket", "on CPU", "writer/42", "75%", "4.00ms in 1 calls", r#"class="legend""#]
        {
            assert!(svg.contains(want), "{want} in {svg}");
        }
        assert!(!svg.contains("run queue"), "parts without time stay out of the legend");
    }
}
