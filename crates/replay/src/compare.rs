//! Two replays side by side, and whether each difference is beyond run-to-run noise, judged by
//! the statistics `latscope diff` uses (`latscope_stats`, docs/DIFF.md):
//!
//! * per metric, an interval of the change B / A - 1: with one run per side from the spread
//!   inside the runs (the distribution-free interval of each latency percentile; the throughput
//!   windows' batch means for ops/s), with two or more from the scatter of the runs (never
//!   below the spread inside them), so run-to-run noise is in it;
//! * a change is declared when its interval lies wholly beyond `--min-change` (5 %), after the
//!   correction for the number of metrics compared (Benjamini-Hochberg); a percentile resting
//!   on fewer than 10 operations beyond it is "too few to tell";
//! * a timed run that fell behind its pace is marked, and its rates are not compared (its
//!   throughput is the machine's, not the plan's);
//! * the runs must differ in one thing only; a setting the kernel derives from another
//!   (`nr_requests`, reset when the scheduler changes) is said as derived, not as a second
//!   difference.

use crate::stats::Stats;
use latscope_stats::{judge, quantile, value, windows as window_rate, Estimate, Outcome, Settings, Verdict};
use serde::{Deserialize, Serialize};
use std::fmt::Write;

/// Percentiles compared per operation kind.
const PERCENTILES: [(&str, f64); 4] = [("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p99.9", 0.999)];

/// One side of a comparison: a name and its runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Side {
    /// Shown in the table (a file name, a setting).
    pub name: String,
    /// Runs of the same plan under the same conditions.
    pub runs: Vec<Stats>,
    /// Settings the kernel changed by itself when this side's setting was made (`nr_requests=64`
    /// after `scheduler=mq-deadline`): derived, not set by the user.
    #[serde(default)]
    pub derived: Vec<String>,
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
    /// Settings that differ because the kernel derived them from the one compared (not a
    /// second difference).
    #[serde(default)]
    pub derived: Vec<String>,
    /// Timed runs that fell behind their pace (their rates are not compared).
    #[serde(default)]
    pub behind: Vec<String>,
    /// Metrics compared (the number the verdicts are corrected for).
    #[serde(default)]
    pub comparisons: usize,
    /// One row per metric.
    pub rows: Vec<Row>,
}

/// One metric on both sides.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// `ops/s`, `<op> p50`, `<op> p99`, ...
    pub metric: String,
    /// Unit: `ops/s`, `ns`.
    pub unit: String,
    /// Value of side A (the geometric mean over its runs).
    pub a: f64,
    /// Value of side B.
    pub b: f64,
    /// (B - A) / A in percent.
    pub change_pct: f64,
    /// Whether the difference is a change beyond noise and the threshold; `None` when it cannot
    /// be told (too few operations, not compared).
    pub beyond_noise: Option<bool>,
    /// The evidence (interval, adjusted p-value) or why there is no verdict.
    pub evidence: String,
    /// The verdict.
    #[serde(default)]
    pub verdict: Option<Verdict>,
    /// The 95 % interval of the change, in percent.
    #[serde(default)]
    pub ci_pct: Option<(f64, f64)>,
    /// The p-value adjusted for the number of metrics compared.
    #[serde(default)]
    pub q: Option<f64>,
}

/// A timed run that fell behind its pace: its lateness p99 exceeds 5 % of its schedule (and
/// 1 ms). Says how far.
pub fn behind(s: &Stats) -> Option<String> {
    let l = s.lateness.as_ref()?;
    if s.speed <= 0.0 {
        return None;
    }
    let schedule = s.recorded_ns as f64 / s.speed;
    let limit = (0.05 * schedule).max(1e6);
    (l.p99_ns as f64 > limit).then(|| {
        format!(
            "lateness p99 {} against a {} schedule (more than 5 %)",
            latscope_event::units::fmt_ns(l.p99_ns),
            latscope_event::units::fmt_ns(schedule as u64)
        )
    })
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
/// `what: A-value vs B-value` (one line per thing; empty when the runs are comparable), and the
/// settings the kernel derived from another that differs (`nr_requests` with the scheduler).
pub fn differences(a: &Side, b: &Side) -> Vec<String> {
    differences_and_derived(a, b).0
}

fn differences_and_derived(a: &Side, b: &Side) -> (Vec<String>, Vec<String>) {
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
        if all.len() > 1 {
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
    // A setting a side says the kernel derived, or `nr_requests` where the disk's scheduler
    // differs too (the kernel resets it to the new scheduler's depth): derived, not a second
    // difference.
    let said: Vec<&str> =
        a.derived.iter().chain(&b.derived).filter_map(|d| d.split_once('=').map(|(k, _)| k)).collect();
    let schedulers: Vec<String> = out
        .iter()
        .filter_map(|d| d.strip_prefix("block ")?.split_once(" scheduler:").map(|(disk, _)| disk.to_string()))
        .collect();
    let (derived, kept): (Vec<String>, Vec<String>) = out.into_iter().partition(|d| {
        let Some(rest) = d.strip_prefix("block ") else { return false };
        let Some((disk, setting)) = rest.split_once(' ') else { return false };
        let setting = setting.split(':').next().unwrap_or("");
        said.contains(&setting) || (setting == "nr_requests" && schedulers.iter().any(|s| s == disk))
    });
    let derived = derived.into_iter().map(|d| format!("{d} (the kernel sets it with the scheduler)")).collect();
    (kept, derived)
}

fn or_none(s: &str) -> &str {
    if s.is_empty() {
        "(none)"
    } else {
        s
    }
}

/// Compare two sides with the default [`Settings`].
pub fn compare(a: &Side, b: &Side) -> Comparison {
    compare_with(a, b, &Settings::default())
}

/// Compare two sides.
pub fn compare_with(a: &Side, b: &Side, s: &Settings) -> Comparison {
    let repeated = a.runs.len() >= 2 && b.runs.len() >= 2;
    let (differences, derived) = differences_and_derived(a, b);
    let mut c = Comparison {
        a: a.name.clone(),
        b: b.name.clone(),
        runs: (a.runs.len(), b.runs.len()),
        method: if repeated {
            format!(
                "across runs: 95% intervals from the runs' scatter; a change is beyond {:.0}% at a {} of {}%",
                s.min_change * 100.0,
                s.correction.describe(),
                s.alpha * 100.0
            )
        } else {
            format!(
                "one run per side: 95% intervals from the spread inside each run (percentiles: order statistics; ops/s: throughput windows) and an assumed run-to-run noise of {:.0}% per side (--run-noise); a change is beyond {:.0}% at a {} of {}%; repeat runs to measure the run-to-run noise instead",
                s.run_noise * 100.0,
                s.min_change * 100.0,
                s.correction.describe(),
                s.alpha * 100.0
            )
        },
        differences,
        derived,
        ..Default::default()
    };
    for (side, tag) in [(a, "A"), (b, "B")] {
        for (i, r) in side.runs.iter().enumerate() {
            if let Some(why) = behind(r) {
                c.behind.push(format!("{tag} run {} fell behind its pace: {why}", i + 1));
            }
        }
    }
    let mut outs: Vec<(String, String, Outcome)> = Vec::new();
    // Throughput: not compared when a run fell behind its pace.
    let tp =
        |side: &Side| -> Option<Vec<Estimate>> {
            side.runs
                .iter()
                .map(|r| {
                    if side.runs.len() >= 2 {
                        Some(value(r.ops_per_sec, r.ops))
                    } else {
                        window_rate(&windows(r), r.ops)
                    }
                })
                .collect()
        };
    let mean = |side: &Side| side.runs.iter().map(|r| r.ops_per_sec).sum::<f64>() / side.runs.len().max(1) as f64;
    let o = if !c.behind.is_empty() {
        Outcome::not_compared(mean(a), mean(b), Verdict::NotCompared, "a run fell behind its pace: rates not compared")
    } else {
        match (tp(a), tp(b)) {
            (Some(ea), Some(eb)) => latscope_stats::compare(&ea, &eb, s),
            _ => Outcome::not_compared(
                mean(a),
                mean(b),
                Verdict::TooFew,
                "runs too short for a noise estimate (fewer than 5 throughput windows): repeat runs",
            ),
        }
    };
    outs.push(("ops/s".into(), "ops/s".into(), o));
    // Latency percentiles per kind present in every run of both sides.
    let kinds: Vec<String> = a
        .runs
        .first()
        .map(|s| {
            s.by_kind
                .keys()
                .filter(|k| {
                    a.runs.iter().chain(&b.runs).all(|r| r.by_kind.get(*k).is_some_and(|x| x.latency.count() > 0))
                })
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    for k in kinds {
        for (label, q) in PERCENTILES {
            let est = |side: &Side| -> Vec<Estimate> {
                side.runs.iter().filter_map(|r| quantile(&r.by_kind[&k].latency, q)).collect()
            };
            outs.push((format!("{k} {label}"), "ns".into(), latscope_stats::compare(&est(a), &est(b), s)));
        }
    }
    let mut refs: Vec<&mut Outcome> = outs.iter_mut().map(|(_, _, o)| o).collect();
    c.comparisons = judge(&mut refs, s);
    for (metric, unit, o) in outs {
        let evidence = match (o.ci, o.q) {
            (Some((lo, hi)), Some(q)) => format!("{:+.1}% .. {:+.1}%, p = {q:.3}", lo * 100.0, hi * 100.0),
            _ => o.note.clone(),
        };
        c.rows.push(Row {
            metric,
            unit,
            a: o.a,
            b: o.b,
            change_pct: o.change * 100.0,
            beyond_noise: match o.verdict {
                Verdict::Increase | Verdict::Decrease => Some(true),
                Verdict::Same | Verdict::Unclear => Some(false),
                Verdict::TooFew | Verdict::NotCompared => None,
            },
            evidence,
            verdict: Some(o.verdict),
            ci_pct: o.ci.map(|(l, h)| (l * 100.0, h * 100.0)),
            q: o.q,
        });
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
        for d in &self.derived {
            let _ = writeln!(o, "derived: {d}");
        }
        for d in &self.behind {
            let _ = writeln!(o, "BEHIND ITS PACE: {d}");
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
            let verdict = match r.verdict {
                Some(Verdict::Increase | Verdict::Decrease) => "yes",
                Some(Verdict::Same) => "no (same)",
                Some(Verdict::Unclear) => "no",
                Some(Verdict::TooFew) => "too few to tell",
                Some(Verdict::NotCompared) | None => "not compared",
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
        let _ = writeln!(o, "{} metrics compared; method: {}", self.comparisons, self.method);
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
    Ok(Side { name: path.display().to_string(), runs, derived: Vec::new() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use latscope_hist::Histogram;

    /// splitmix64: runs drawn from known distributions.
    struct Rng(u64);
    impl Rng {
        fn unit(&mut self) -> f64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            (((z ^ (z >> 31)) >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        }
        fn normal(&mut self) -> f64 {
            (-2.0 * self.unit().ln()).sqrt() * (2.0 * std::f64::consts::PI * self.unit()).cos()
        }
    }

    /// A run of a plan: `n` preads of lognormal latency (median `lat` ns), `n` completions over
    /// 10 ms windows at `ops_s` with Poisson-like scatter.
    fn run(r: &mut Rng, ops_s: f64, lat: f64, n: usize) -> Stats {
        let h: Histogram = (0..n).map(|_| (lat * (0.4 * r.normal()).exp()) as u64).collect();
        let per_window = ops_s / 100.0;
        let windows: Vec<u64> = (0..((n as f64 / per_window) as usize + 2))
            .map(|_| (per_window + per_window.sqrt() * r.normal()) as u64)
            .collect();
        let mut s = Stats {
            ops: n as u64,
            ops_per_sec: ops_s,
            wall_ns: (n as f64 / ops_s * 1e9) as u64,
            window_ns: 10_000_000,
            windows,
            ..Default::default()
        };
        s.by_kind.insert("pread".into(), crate::stats::KindStats { latency: h, ..Default::default() });
        s
    }

    fn side(name: &str, runs: Vec<Stats>) -> Side {
        Side { name: name.into(), runs, derived: Vec::new() }
    }

    #[test]
    fn a_a_runs_of_one_plan_are_not_flagged() {
        // Twenty pairs of runs of one plan (one run per side, then three), each run's speed
        // scattered by 2 % as runs of one plan are: nothing is flagged, and every percentile
        // rests on enough operations to be judged.
        let mut r = Rng(11);
        let mut flagged = 0;
        for _ in 0..20 {
            let one = |r: &mut Rng| {
                let f = (0.02 * r.normal()).exp();
                run(r, 50_000.0 * f, 20_000.0 / f, 20_000)
            };
            let (a, b) = (one(&mut r), one(&mut r));
            let c = compare(&side("a", vec![a]), &side("b", vec![b]));
            assert_eq!(c.comparisons, 5, "{}", c.text());
            flagged += usize::from(c.rows.iter().any(|x| x.beyond_noise == Some(true)));
            let (a, b): (Vec<Stats>, Vec<Stats>) =
                ((0..3).map(|_| one(&mut r)).collect(), (0..3).map(|_| one(&mut r)).collect());
            let c = compare(&side("a", a), &side("b", b));
            assert!(c.method.contains("across runs"));
            flagged += usize::from(c.rows.iter().any(|x| x.beyond_noise == Some(true)));
        }
        assert!(flagged <= 2, "{flagged} of 40 A/A comparisons flagged");
        // A plan 30 % slower, run three times on each side, is found at every percentile with
        // its size.
        let a = side("a", (0..3).map(|_| run(&mut r, 50_000.0, 20_000.0, 20_000)).collect());
        let b = side("b", (0..3).map(|_| run(&mut r, 50_000.0, 26_000.0, 20_000)).collect());
        let c = compare(&a, &b);
        for row in c.rows.iter().filter(|x| x.metric.starts_with("pread p") && !x.metric.ends_with("p99.9")) {
            assert_eq!(row.beyond_noise, Some(true), "{}", c.text());
            let tol = if row.metric.ends_with("p99.9") { 15.0 } else { 5.0 };
            assert!((row.change_pct - 30.0).abs() < tol, "{}", c.text());
        }
    }

    #[test]
    fn a_percentile_from_one_operation_is_too_few_to_tell() {
        let mut r = Rng(12);
        let mut a = run(&mut r, 50_000.0, 20_000.0, 20_000);
        let mut b = run(&mut r, 50_000.0, 20_000.0, 20_000);
        for (s, v) in [(&mut a, 3003u64), (&mut b, 2777)] {
            let h: Histogram = [v].into_iter().collect();
            s.by_kind.insert("lseek".into(), crate::stats::KindStats { latency: h, ..Default::default() });
        }
        let c = compare(&side("a", vec![a]), &side("b", vec![b]));
        let row = c.rows.iter().find(|x| x.metric == "lseek p99").unwrap();
        assert_eq!((row.beyond_noise, row.verdict), (None, Some(Verdict::TooFew)), "{}", c.text());
        assert!(row.evidence.contains("A: 0 operations"), "{}", row.evidence);
        assert!(c.text().contains("too few to tell"));
    }

    #[test]
    fn a_run_that_fell_behind_its_pace_is_marked_and_its_rates_not_compared() {
        let mut r = Rng(13);
        let mut a = run(&mut r, 1_000.0, 20_000.0, 2_000);
        let mut b = run(&mut r, 3_260.0, 20_000.0, 2_000);
        for s in [&mut a, &mut b] {
            s.speed = 1.0;
            s.recorded_ns = 2_000_000_000;
        }
        let lateness = |p99_ns| Some(crate::stats::Lateness { p99_ns, ..Default::default() });
        (a.lateness, b.lateness) = (lateness(2_100_000_000), lateness(50_000));
        let c = compare(&side("a", vec![a]), &side("b", vec![b]));
        assert_eq!(c.behind.len(), 1, "{:?}", c.behind);
        assert!(c.behind[0].starts_with("A run 1 fell behind its pace: lateness p99 2.10s"), "{:?}", c.behind);
        let ops = &c.rows[0];
        assert_eq!((ops.metric.as_str(), ops.beyond_noise), ("ops/s", None));
        assert_eq!(ops.verdict, Some(Verdict::NotCompared));
        let t = c.text();
        assert!(t.contains("BEHIND ITS PACE") && t.contains("not compared"), "{t}");
    }

    #[test]
    fn nr_requests_reset_by_a_scheduler_change_is_derived_not_a_second_difference() {
        let mut r = Rng(14);
        let mut ra = run(&mut r, 50_000.0, 20_000.0, 20_000);
        ra.env.block.insert("vda scheduler".into(), "none".into());
        ra.env.block.insert("vda nr_requests".into(), "256".into());
        let mut rb = run(&mut r, 50_000.0, 20_000.0, 20_000);
        rb.env.block.insert("vda scheduler".into(), "mq-deadline".into());
        rb.env.block.insert("vda nr_requests".into(), "64".into());
        let c = compare(&side("a", vec![ra.clone()]), &side("b", vec![rb.clone()]));
        assert_eq!(c.differences, ["block vda scheduler: none vs mq-deadline"]);
        assert_eq!(c.derived, ["block vda nr_requests: 256 vs 64 (the kernel sets it with the scheduler)"]);
        // The same scheduler, another nr_requests: the user set it, a difference.
        rb.env.block.insert("vda scheduler".into(), "none".into());
        let c = compare(&side("a", vec![ra]), &side("b", vec![rb]));
        assert_eq!(c.differences, ["block vda nr_requests: 256 vs 64"]);
    }

    #[test]
    fn runs_that_differ_in_more_than_one_thing_are_not_comparable() {
        let mut ra = run(&mut Rng(15), 1e6, 1000.0, 10_000);
        ra.env.kernel = "6.1.0".into();
        ra.env.sandbox_fs = vec!["ext4".into()];
        ra.env.block.insert("vda scheduler".into(), "mq-deadline".into());
        let mut rb = ra.clone();
        rb.speed = 1.0;
        rb.env.kernel = "6.12.0".into();
        rb.env.sandbox_fs = vec!["xfs".into()];
        rb.env.block.insert("vda scheduler".into(), "none".into());
        let c = compare(&side("a", vec![ra.clone()]), &side("b", vec![rb]));
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
        let c = compare(&side("a", vec![ra]), &side("b", vec![old]));
        assert!(c.differences.is_empty(), "{:?}", c.differences);
    }
}
