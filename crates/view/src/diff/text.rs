//! A diff as text (what changed first, then every group compared) and as JSON.

use super::{Diff, DimDiff, MetricDiff, OneSide, SideInfo};
use crate::text::clean;
use latscope_event::units::{fmt_count, fmt_ns_f};
use latscope_stats::{Correction, Verdict};
use serde_json::{json, Value};
use std::fmt::Write;

/// A value with its unit.
fn fmt_value(v: f64, unit: &str) -> String {
    match unit {
        "ns" => fmt_ns_f(v),
        "ns/s" => format!("{}/s", fmt_ns_f(v)),
        _ => format!("{}/s", fmt_count(v)),
    }
}

/// The verdict in words: `slower`, `fewer`, `same (within ±5%)`, `unclear`, `too few to tell`.
pub fn verdict_word(m: &MetricDiff, min_change: f64) -> String {
    let (up, down) = match m.unit {
        "ns" => ("slower", "faster"),
        "ns/s" => ("more", "less"),
        _ => ("more", "fewer"),
    };
    match m.outcome.verdict {
        Verdict::Increase => up.into(),
        Verdict::Decrease => down.into(),
        Verdict::Same => format!("same (within ±{}%)", crate::svg::fmt_num(min_change * 100.0)),
        Verdict::Unclear => "unclear".into(),
        Verdict::TooFew => "too few to tell".into(),
        Verdict::NotCompared => "not compared".into(),
    }
}

fn interval(m: &MetricDiff) -> String {
    match m.outcome.ci {
        Some((lo, hi)) => format!("{:+.1}% .. {:+.1}%", lo * 100.0, hi * 100.0),
        None => "-".into(),
    }
}

fn side_line(tag: &str, s: &SideInfo) -> String {
    let runs = s.files.len();
    let secs: f64 = s.secs.iter().sum::<f64>() / runs.max(1) as f64;
    let sys: u64 = s.events.iter().map(|e| e.0).sum();
    let blk: u64 = s.events.iter().map(|e| e.1).sum();
    let mut what = format!("{sys} syscalls");
    if blk > 0 {
        let _ = write!(what, ", {blk} block requests");
    }
    if runs == 1 {
        format!("{tag}: {} ({:.1} s, {what})", clean(&s.files[0]), secs)
    } else {
        format!(
            "{tag}: {runs} recordings, {} ({:.1} s each on average; {what} in all)",
            clean(&s.files.join(", ")),
            secs
        )
    }
}

/// The method, in one paragraph.
pub fn method(d: &Diff) -> String {
    let s = &d.settings;
    let runs = (d.a.files.len(), d.b.files.len());
    let noise = if runs.0 >= 2 && runs.1 >= 2 {
        "intervals from the scatter of the recordings of each side (run-to-run noise included)".to_string()
    } else {
        format!(
            "one recording on a side: its interval holds the noise inside it and an assumed run-to-run noise of {}% (--run-noise); \
             give several recordings per side (--a A1 A2 --b B1 B2) to measure it instead",
            crate::svg::fmt_num(s.run_noise * 100.0)
        )
    };
    format!(
        "{}% intervals; a change is one whose interval lies beyond ±{}% (--min-change), at a {} of {}% over {} comparisons; \
         a percentile needs {} operations beyond it on each side; {noise}",
        crate::svg::fmt_num((1.0 - s.alpha) * 100.0),
        crate::svg::fmt_num(s.min_change * 100.0),
        match s.correction {
            Correction::BenjaminiHochberg => "false discovery rate (Benjamini-Hochberg)",
            Correction::Holm => "family-wise error rate (Holm)",
            Correction::None => "per-comparison error rate (no correction)",
        },
        crate::svg::fmt_num(s.alpha * 100.0),
        d.comparisons,
        s.min_support
    )
}

fn group_label(d: &DimDiff, name: &str) -> String {
    match d.by.as_str() {
        "all syscalls" | "all block I/O" => d.by.clone(),
        "cause" => name.to_string(),
        by => format!("{by} {name}"),
    }
}

fn only_line(s: &mut String, tag: &str, v: &[OneSide], unit: &str) {
    if v.is_empty() {
        return;
    }
    let shown: Vec<String> = v
        .iter()
        .take(10)
        .map(|o| {
            if unit == "ns/s" {
                format!("{} ({})", clean(&o.name), fmt_value(o.rate, unit))
            } else {
                format!("{} ({} per recording, {})", clean(&o.name), fmt_count(o.count), fmt_value(o.rate, "/s"))
            }
        })
        .collect();
    let more = if v.len() > 10 { format!(" and {} more", v.len() - 10) } else { String::new() };
    let _ = writeln!(s, "  only in {tag}: {}{more}", shown.join(", "));
}

/// The diff for a terminal: both sides, what changed (largest first), then every grouping's
/// table, groups on one side only, and the method.
pub fn render_text(d: &Diff) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{}", side_line("A", &d.a));
    let _ = writeln!(s, "{}", side_line("B", &d.b));
    let changes = d.changes();
    let mc = d.settings.min_change;
    if changes.is_empty() {
        let _ = writeln!(
            s,
            "\nnothing changed beyond ±{}% that the data can tell ({} comparisons)",
            crate::svg::fmt_num(mc * 100.0),
            d.comparisons
        );
    } else {
        let _ = writeln!(s, "\nwhat changed ({} of {} comparisons):", changes.len(), d.comparisons);
        let mut cells = Vec::new();
        for (dim, g, m) in &changes {
            cells.push(vec![
                format!("{} {}", clean(&group_label(dim, &g.name)), m.metric),
                fmt_value(m.outcome.a, m.unit),
                "->".into(),
                fmt_value(m.outcome.b, m.unit),
                format!("{:+.1}%", m.outcome.change * 100.0),
                format!("({})", interval(m)),
                verdict_word(m, mc),
            ]);
        }
        let right = [false, true, false, true, true, false, false];
        for line in crate::text::table(&cells, &right, 2, 2).lines() {
            let _ = writeln!(s, "{line}");
        }
    }
    for dim in &d.dims {
        let _ = writeln!(s);
        let title = match dim.by.as_str() {
            "all syscalls" | "all block I/O" => dim.by.clone(),
            "cause" => "time by cause (per second of recording)".into(),
            by => format!("per {by}"),
        };
        let more = if dim.not_shown > 0 {
            format!(" ({} more on both sides: -n to compare more)", dim.not_shown)
        } else {
            String::new()
        };
        let _ = writeln!(s, "{title}{more}");
        let mut cells =
            vec![["GROUP", "METRIC", "A", "B", "CHANGE", "95% INTERVAL", "VERDICT"].map(String::from).to_vec()];
        let many = dim.by != "cause" && !dim.by.starts_with("all");
        for g in &dim.groups {
            for (k, m) in g.metrics.iter().enumerate() {
                let name = if k == 0 {
                    if many {
                        crate::top::shorten(&clean(&g.name), 32)
                    } else {
                        clean(&g.name).into_owned()
                    }
                } else {
                    String::new()
                };
                let name = if k == 0 && dim.by.starts_with("all") { String::new() } else { name };
                let word = match m.outcome.verdict {
                    Verdict::TooFew => format!("too few to tell ({})", m.outcome.note),
                    _ => verdict_word(m, mc),
                };
                cells.push(vec![
                    name,
                    m.metric.clone(),
                    fmt_value(m.outcome.a, m.unit),
                    fmt_value(m.outcome.b, m.unit),
                    format!("{:+.1}%", m.outcome.change * 100.0),
                    interval(m),
                    word,
                ]);
            }
        }
        if dim.groups.is_empty() {
            let _ = writeln!(s, "  no group on both sides");
        } else {
            let right = [false, false, true, true, true, true, false];
            for line in crate::text::table(&cells, &right, 2, 2).lines() {
                let _ = writeln!(s, "{}", line.trim_end());
            }
        }
        let unit = if dim.by == "cause" { "ns/s" } else { "/s" };
        only_line(&mut s, "A", &dim.only_a, unit);
        only_line(&mut s, "B", &dim.only_b, unit);
    }
    let _ = writeln!(s, "\nhow to read it: {}", method(d));
    s
}

fn metric_json(m: &MetricDiff, mc: f64) -> Value {
    let o = &m.outcome;
    json!({
        "metric": m.metric,
        "unit": m.unit,
        "a": o.a,
        "b": o.b,
        "change": o.change,
        "ci": o.ci.map(|(l, h)| [l, h]),
        "p": o.p,
        "q": o.q,
        "df": if o.df.is_finite() { json!(o.df) } else { Value::Null },
        "verdict": o.verdict,
        "verdict_text": verdict_word(m, mc),
        "support": [o.support.0, o.support.1],
        "note": (!o.note.is_empty()).then_some(&o.note),
    })
}

/// The diff as JSON: the sides, the settings, every grouping's groups and metrics (changes as
/// B / A - 1, intervals of them, raw and adjusted p-values, verdicts), and groups on one side
/// only.
pub fn to_json(d: &Diff) -> Value {
    let mc = d.settings.min_change;
    let side = |s: &SideInfo| {
        json!({
            "files": s.files,
            "seconds": s.secs,
            "syscalls": s.events.iter().map(|e| e.0).collect::<Vec<_>>(),
            "block_requests": s.events.iter().map(|e| e.1).collect::<Vec<_>>(),
        })
    };
    let one = |v: &[OneSide]| -> Vec<Value> {
        v.iter().map(|o| json!({"name": o.name, "count_per_recording": o.count, "rate_per_s": o.rate})).collect()
    };
    let dims: Vec<Value> = d
        .dims
        .iter()
        .map(|dim| {
            json!({
                "by": dim.by,
                "groups": dim.groups.iter().map(|g| json!({
                    "name": g.name,
                    "count_per_recording": [g.count.0, g.count.1],
                    "metrics": g.metrics.iter().map(|m| metric_json(m, mc)).collect::<Vec<_>>(),
                })).collect::<Vec<_>>(),
                "not_shown": dim.not_shown,
                "only_in_a": one(&dim.only_a),
                "only_in_b": one(&dim.only_b),
            })
        })
        .collect();
    let changes: Vec<Value> = d
        .changes()
        .into_iter()
        .map(|(dim, g, m)| {
            let mut v = metric_json(m, mc);
            v["by"] = json!(dim.by);
            v["group"] = json!(g.name);
            v
        })
        .collect();
    json!({
        "a": side(&d.a),
        "b": side(&d.b),
        "settings": {
            "alpha": d.settings.alpha,
            "min_change": d.settings.min_change,
            "min_support": d.settings.min_support,
            "correction": d.settings.correction,
        },
        "comparisons": d.comparisons,
        "changes": changes,
        "dims": dims,
        "method": method(d),
    })
}
