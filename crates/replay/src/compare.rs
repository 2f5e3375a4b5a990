//! Two replays side by side, and whether each difference is beyond run-to-run noise.
//!
//! How a difference is judged (also in docs/REPLAY.md):
//!
//! * With two or more runs on each side (the matrix's repeats, or files holding several runs),
//!   every metric is compared across runs with Welch's t-test; a difference is beyond noise when
//!   the two-sided p-value is below 0.01. This is the honest measure: it sees everything that
//!   varies between runs (caches, other tenants, placement).
//! * With one run on each side, there is no run-to-run spread to measure, so the spread inside
//!   the runs stands in for it: throughput (ops/s, total time) by Welch's t-test over the
//!   completions per 10 ms window (the first and last windows left out), latency percentiles by
//!   distribution-free 99% confidence intervals of each quantile (the ranks `nq ± 2.576
//!   sqrt(nq(1-q))` of each histogram) that must not overlap. Windows of one run are not
//!   independent, so this under-states noise: repeat runs for a verdict that matters.

use crate::stats::Stats;
use latscope_hist::Histogram;
use serde::{Deserialize, Serialize};
use std::fmt::Write;

/// p-value below which a difference is reported as beyond noise.
pub const ALPHA: f64 = 0.01;
/// z of a two-sided 99% interval.
const Z99: f64 = 2.576;

/// One side of a comparison: a name and its runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Side {
    /// Shown in the table (a file name, a setting).
    pub name: String,
    /// Runs of the same plan under the same conditions.
    pub runs: Vec<Stats>,
}

/// The comparison of two sides.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// First side's name.
    pub a: String,
    /// Second side's name.
    pub b: String,
    /// Runs per side.
    pub runs: (usize, usize),
    /// How significance was decided.
    pub method: String,
    /// What differs between the runs other than what is compared (plan, speed, kernel, sandbox
    /// file system, block settings, ...): when not empty, the runs are not comparable and the
    /// differences below mix those in.
    #[serde(default)]
    pub differences: Vec<String>,
    /// One row per metric.
    pub rows: Vec<Row>,
}

/// One metric on both sides.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// `ops/s`, `total time`, `<op> p50`, `<op> p99`.
    pub metric: String,
    /// Unit: `ops/s`, `ns`.
    pub unit: String,
    /// Value of side A (mean over its runs).
    pub a: f64,
    /// Value of side B.
    pub b: f64,
    /// (B - A) / A in percent.
    pub change_pct: f64,
    /// Whether the difference is beyond run-to-run noise; `None` when it cannot be told.
    pub beyond_noise: Option<bool>,
    /// The evidence (p-value, intervals).
    pub evidence: String,
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

fn var(v: &[f64]) -> f64 {
    let m = mean(v);
    v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (v.len().max(2) - 1) as f64
}

/// Welch's t-test: the two-sided p-value of a difference of means (`None` without spread).
pub fn welch_p(a: &[f64], b: &[f64]) -> Option<f64> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let (va, vb) = (var(a) / a.len() as f64, var(b) / b.len() as f64);
    let se2 = va + vb;
    if se2 <= 0.0 || !se2.is_finite() {
        return Some(if mean(a) == mean(b) { 1.0 } else { 0.0 });
    }
    let t = (mean(a) - mean(b)) / se2.sqrt();
    let df = se2 * se2 / (va * va / (a.len() as f64 - 1.0) + vb * vb / (b.len() as f64 - 1.0));
    Some(student_t_two_sided(t, df))
}

/// P(|T| >= |t|) for Student's t with `df` degrees of freedom.
pub fn student_t_two_sided(t: f64, df: f64) -> f64 {
    let x = df / (df + t * t);
    inc_beta(df / 2.0, 0.5, x).clamp(0.0, 1.0)
}

/// The regularised incomplete beta function I_x(a, b) (continued fraction, Numerical Recipes).
fn inc_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let ln_front = ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln();
    let front = ln_front.exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_cf(a, b, x) / a
    } else {
        1.0 - front * beta_cf(b, a, 1.0 - x) / b
    }
}

fn beta_cf(a: f64, b: f64, x: f64) -> f64 {
    let tiny = 1e-300;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < tiny {
        d = tiny;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..300 {
        let m = m as f64;
        let m2 = 2.0 * m;
        let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 + aa * d;
        if d.abs() < tiny {
            d = tiny;
        }
        c = 1.0 + aa / c;
        if c.abs() < tiny {
            c = tiny;
        }
        d = 1.0 / d;
        h *= d * c;
        let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 + aa * d;
        if d.abs() < tiny {
            d = tiny;
        }
        c = 1.0 + aa / c;
        if c.abs() < tiny {
            c = tiny;
        }
        d = 1.0 / d;
        let del = d * c;
        h *= del;
        if (del - 1.0).abs() < 3e-14 {
            break;
        }
    }
    h
}

fn ln_gamma(x: f64) -> f64 {
    // Lanczos approximation (g = 7, n = 9).
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        return std::f64::consts::PI.ln() - (std::f64::consts::PI * x).sin().ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = G[0];
    let t = x + 7.5;
    for (i, g) in G.iter().enumerate().skip(1) {
        a += g / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// A 99% confidence interval of quantile `q` of the values in `h`.
fn quantile_ci(h: &Histogram, q: f64) -> Option<(u64, u64)> {
    let n = h.count() as f64;
    if n < 1.0 {
        return None;
    }
    let half = Z99 * (n * q * (1.0 - q)).sqrt();
    let lo = ((n * q - half).floor() / n).clamp(0.0, 1.0);
    let hi = ((n * q + half).ceil() / n).clamp(0.0, 1.0);
    Some((h.value_at_quantile(lo)?, h.value_at_quantile(hi)?))
}

/// The steady-state windows of a run (first and last left out), as ops per second.
fn windows(s: &Stats) -> Vec<f64> {
    let w = &s.windows;
    if w.len() <= 2 {
        return Vec::new();
    }
    let scale = 1e9 / s.window_ns.max(1) as f64;
    w[1..w.len() - 1].iter().map(|&n| n as f64 * scale).collect()
}

/// What differs between the runs of two sides that a comparison assumes equal, as
/// `what: A-value vs B-value` (one line per thing; empty when the runs are comparable).
pub fn differences(a: &Side, b: &Side) -> Vec<String> {
    let mut out = Vec::new();
    // `known`: a value a run does not have (statistics of an older version) is not a difference.
    let mut check = |what: &str, known: bool, f: &dyn Fn(&Stats) -> String| {
        let vals = |s: &Side| {
            let mut v: Vec<String> = s.runs.iter().map(f).collect();
            v.sort();
            v.dedup();
            v.join(" and ")
        };
        let (va, vb) = (vals(a), vals(b));
        let all: std::collections::BTreeSet<String> =
            a.runs.iter().chain(&b.runs).map(f).filter(|v| !known || !v.is_empty()).collect();
        let mixed = all.len() > 1;
        if mixed {
            out.push(format!("{what}: {} vs {}", or_none(&va), or_none(&vb)));
        }
    };
    check("plan", false, &|s| s.plan_id.clone());
    check("speed", false, &|s| if s.speed == 0.0 { "as fast as possible".into() } else { format!("{}x", s.speed) });
    check("page cache dropped", false, &|s| s.drop_caches.to_string());
    check("real-time workers", false, &|s| s.realtime.to_string());
    check("user", false, &|s| s.user.clone().unwrap_or_default());
    check("kernel", true, &|s| s.env.kernel.clone());
    check("sandbox file system", true, &|s| s.env.sandbox_fs.join(","));
    let keys: std::collections::BTreeSet<&String> =
        a.runs.iter().chain(&b.runs).flat_map(|s| s.env.block.keys()).collect();
    for k in keys {
        check(&format!("block {k}"), true, &|s| s.env.block.get(k).cloned().unwrap_or_default());
    }
    out
}

fn or_none(s: &str) -> &str {
    if s.is_empty() {
        "(none)"
    } else {
        s
    }
}

/// Compare two sides.
pub fn compare(a: &Side, b: &Side) -> Comparison {
    let repeated = a.runs.len() >= 2 && b.runs.len() >= 2;
    let mut c = Comparison {
        a: a.name.clone(),
        b: b.name.clone(),
        runs: (a.runs.len(), b.runs.len()),
        method: if repeated {
            format!("Welch's t-test across runs, beyond noise when p < {ALPHA}")
        } else {
            format!(
                "one run per side: Welch's t-test over the runs' throughput windows (p < {ALPHA}) and non-overlapping 99% confidence intervals of percentiles; repeat runs for a verdict that accounts for run-to-run variation"
            )
        },
        differences: differences(a, b),
        rows: Vec::new(),
    };
    let per_run = |side: &Side, f: &dyn Fn(&Stats) -> f64| -> Vec<f64> { side.runs.iter().map(f).collect() };
    let mut push = |metric: String, unit: &str, va: Vec<f64>, vb: Vec<f64>, single: Option<(Option<bool>, String)>| {
        let (ma, mb) = (mean(&va), mean(&vb));
        let change = if ma != 0.0 { 100.0 * (mb - ma) / ma } else { 0.0 };
        let (beyond, evidence) = if repeated {
            match welch_p(&va, &vb) {
                Some(p) => (Some(p < ALPHA), format!("p = {p:.3}")),
                None => (None, "no spread".into()),
            }
        } else {
            single.unwrap_or((None, "one run per side: repeat runs".into()))
        };
        c.rows.push(Row {
            metric,
            unit: unit.into(),
            a: ma,
            b: mb,
            change_pct: change,
            beyond_noise: beyond,
            evidence,
        });
    };
    // Throughput and total time.
    let single_tp = || -> (Option<bool>, String) {
        let (wa, wb) =
            (a.runs.first().map(windows).unwrap_or_default(), b.runs.first().map(windows).unwrap_or_default());
        if wa.len() < 5 || wb.len() < 5 {
            return (None, "runs too short for a noise estimate (fewer than 5 throughput windows): repeat runs".into());
        }
        match welch_p(&wa, &wb) {
            Some(p) => (Some(p < ALPHA), format!("p = {p:.3} over {} and {} windows", wa.len(), wb.len())),
            None => (None, "no spread".into()),
        }
    };
    let tp = single_tp();
    push("ops/s".into(), "ops/s", per_run(a, &|s| s.ops_per_sec), per_run(b, &|s| s.ops_per_sec), Some(tp.clone()));
    push("total time".into(), "ns", per_run(a, &|s| s.wall_ns as f64), per_run(b, &|s| s.wall_ns as f64), Some(tp));
    // Latency percentiles per kind present on both sides.
    let kinds: Vec<String> = a
        .runs
        .first()
        .map(|s| s.by_kind.keys().filter(|k| b.runs.iter().all(|r| r.by_kind.contains_key(*k))).cloned().collect())
        .unwrap_or_default();
    for k in kinds {
        for (label, q) in [("p50", 0.5), ("p99", 0.99)] {
            let f = |s: &Stats| s.by_kind.get(&k).and_then(|x| x.latency.value_at_quantile(q)).unwrap_or(0) as f64;
            let single = match (a.runs.first(), b.runs.first()) {
                (Some(ra), Some(rb)) => {
                    let (ha, hb) = (&ra.by_kind[&k].latency, &rb.by_kind[&k].latency);
                    match (quantile_ci(ha, q), quantile_ci(hb, q)) {
                        (Some((a0, a1)), Some((b0, b1))) => {
                            (Some(a1 < b0 || b1 < a0), format!("99% intervals {a0}-{a1} ns and {b0}-{b1} ns"))
                        }
                        _ => (None, "no samples".into()),
                    }
                }
                _ => (None, "no runs".into()),
            };
            push(format!("{k} {label}"), "ns", per_run(a, &f), per_run(b, &f), Some(single));
        }
    }
    c
}

impl Comparison {
    /// The comparison as a table.
    pub fn text(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(o, "A: {} ({} runs)   B: {} ({} runs)", self.a, self.runs.0, self.b, self.runs.1);
        if !self.differences.is_empty() {
            let _ =
                writeln!(o, "NOT COMPARABLE: the runs differ in more than one thing; every difference below mixes in:");
            for d in &self.differences {
                let _ = writeln!(o, "  {d}");
            }
        }
        let _ = writeln!(o, "{:<22} {:>12} {:>12} {:>9}  beyond noise?", "metric", "A", "B", "change");
        for r in &self.rows {
            let f = |v: f64| {
                if r.unit == "ns" {
                    latscope_event::units::fmt_ns(v.round() as u64)
                } else {
                    latscope_event::units::fmt_count(v)
                }
            };
            let verdict = match r.beyond_noise {
                Some(true) => "yes",
                Some(false) => "no",
                None => "?",
            };
            let _ = writeln!(
                o,
                "{:<22} {:>12} {:>12} {:>+8.1}%  {verdict} ({})",
                r.metric,
                f(r.a),
                f(r.b),
                r.change_pct,
                r.evidence
            );
        }
        let _ = writeln!(o, "method: {}", self.method);
        o
    }
}

/// Read a statistics file: one run (`latscope replay run --json`) or a list of runs.
pub fn read_side(path: &std::path::Path) -> crate::Result<Side> {
    let s = std::fs::read(path).map_err(|e| crate::ReplayError::io(path, e))?;
    let v: serde_json::Value = serde_json::from_slice(&s).map_err(|e| crate::ReplayError::PlanFile {
        path: path.to_path_buf(),
        detail: format!("not JSON ({e}): write statistics with 'latscope replay run --json --stats FILE'"),
    })?;
    let bad = |e: serde_json::Error| crate::ReplayError::PlanFile {
        path: path.to_path_buf(),
        detail: format!("not replay statistics: {e}"),
    };
    let runs: Vec<Stats> = match v {
        serde_json::Value::Array(_) => serde_json::from_value(v).map_err(bad)?,
        serde_json::Value::Object(ref m) if m.contains_key("runs") => {
            serde_json::from_value(v.get("runs").cloned().unwrap_or_default()).map_err(bad)?
        }
        _ => vec![serde_json::from_value(v).map_err(bad)?],
    };
    if runs.is_empty() {
        return Err(crate::ReplayError::PlanFile { path: path.to_path_buf(), detail: "holds no runs".into() });
    }
    Ok(Side { name: path.display().to_string(), runs })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_distribution_matches_tables() {
        // Two-sided critical values: t(0.05, 10) = 2.228, t(0.01, 30) = 2.750, t(0.05, inf) ~ 1.960.
        assert!((student_t_two_sided(2.228, 10.0) - 0.05).abs() < 1e-3);
        assert!((student_t_two_sided(2.750, 30.0) - 0.01).abs() < 1e-3);
        assert!((student_t_two_sided(1.960, 1e6) - 0.05).abs() < 1e-3);
        assert!((student_t_two_sided(0.0, 5.0) - 1.0).abs() < 1e-9);
    }

    #[test]
    fn welch_tells_shifts_from_noise() {
        let a = [100.0, 102.0, 98.0, 101.0, 99.0];
        let b = [110.0, 112.0, 108.0, 111.0, 109.0];
        assert!(welch_p(&a, &b).unwrap() < 0.001);
        let c = [101.0, 99.0, 100.5, 98.5, 101.5];
        assert!(welch_p(&a, &c).unwrap() > 0.5);
    }

    fn run_with(ops_s: f64, lat: u64, windows: Vec<u64>) -> Stats {
        let mut h = Histogram::new();
        for i in 0..10_000u64 {
            h.record(lat + i % 100);
        }
        let mut s = Stats { ops_per_sec: ops_s, wall_ns: (1e9 * 1e6 / ops_s) as u64, windows, ..Default::default() };
        s.by_kind.insert("pread".into(), crate::stats::KindStats { latency: h, ..Default::default() });
        s
    }

    #[test]
    fn single_runs_use_windows_and_quantile_intervals() {
        let a = Side { name: "a".into(), runs: vec![run_with(1e6, 1000, vec![100; 20])] };
        let mut wb = vec![100; 20];
        for (i, w) in wb.iter_mut().enumerate() {
            *w += (i % 3) as u64; // noise
        }
        let b = Side { name: "b".into(), runs: vec![run_with(1.01e6, 5000, wb)] };
        let c = compare(&a, &b);
        let row = |m: &str| c.rows.iter().find(|r| r.metric == m).unwrap().clone();
        assert_eq!(row("pread p50").beyond_noise, Some(true), "{:?}", row("pread p50"));
        assert!(row("ops/s").beyond_noise.is_some());
        let same = compare(&a, &a);
        assert!(same.rows.iter().all(|r| r.beyond_noise != Some(true)), "{}", same.text());
        assert!(same.differences.is_empty(), "{:?}", same.differences);
    }

    #[test]
    fn runs_that_differ_in_more_than_one_thing_are_not_comparable() {
        let mut ra = run_with(1e6, 1000, vec![100; 20]);
        ra.env.kernel = "6.1.0".into();
        ra.env.sandbox_fs = vec!["ext4".into()];
        ra.env.block.insert("vda scheduler".into(), "mq-deadline".into());
        let mut rb = ra.clone();
        rb.speed = 1.0;
        rb.env.kernel = "6.12.0".into();
        rb.env.sandbox_fs = vec!["xfs".into()];
        rb.env.block.insert("vda scheduler".into(), "none".into());
        let c = compare(&Side { name: "a".into(), runs: vec![ra.clone()] }, &Side { name: "b".into(), runs: vec![rb] });
        assert_eq!(
            c.differences,
            [
                "speed: as fast as possible vs 1x",
                "kernel: 6.1.0 vs 6.12.0",
                "sandbox file system: ext4 vs xfs",
                "block vda scheduler: mq-deadline vs none"
            ]
        );
        let t = c.text();
        assert!(t.find("NOT COMPARABLE").unwrap() < t.find("ops/s").unwrap(), "said before the verdicts:\n{t}");
        // Statistics without an environment (an older version) are not a difference.
        let mut old = ra.clone();
        old.env = Default::default();
        let c = compare(&Side { name: "a".into(), runs: vec![ra] }, &Side { name: "b".into(), runs: vec![old] });
        assert!(c.differences.is_empty(), "{:?}", c.differences);
    }
}
