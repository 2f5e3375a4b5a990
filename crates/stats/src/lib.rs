//! Did it change? Comparing two sides of measurements (recordings, replay runs), metric by
//! metric, with an interval and a verdict that hold up.
//!
//! Every metric is a positive quantity (a latency percentile, a rate, a throughput) and every
//! comparison is of its **ratio** B / A, worked on the log scale: a change is a percentage.
//!
//! # Estimates: what one run says
//!
//! An [`Estimate`] is one run's value of a metric, the sampling variance of its logarithm within
//! the run, and the number of operations it rests on:
//!
//! * [`quantile`]: a percentile of a [`Histogram`]. Its spread comes from the distribution-free
//!   confidence interval of a quantile (the order statistics of ranks `nq ± z sqrt(nq(1-q))`, as
//!   in Conover, *Practical Nonparametric Statistics*, §3.2), turned into a standard error of the
//!   log quantile: `(ln X(u) - ln X(l)) / (2 z)` (the approach of Price and Bonett, "Estimating
//!   the variance of the sample median", 2001), never below the histogram's resolution (1/128).
//!   It rests on the operations beyond the quantile (`n (1 - q)`, or `n q` below a median).
//! * [`rate`]: events per second. Counts are over-dispersed (calls come in bursts): the variance
//!   is the Poisson one, `1 / count`, times the dispersion `var / mean` of the counts in equal
//!   windows of the run (at least 1).
//! * [`windows`]: a throughput from per-window completions (batch means).
//! * [`value`]: a number a run gives without a spread of its own.
//!
//! # Sides: what several runs say
//!
//! One run per side: the side's variance is the run's sampling variance plus an assumed
//! run-to-run noise ([`Settings::run_noise`], 10 %: two recordings of one workload differ by
//! more than their sampling noise, and one run cannot show by how much), with infinite degrees
//! of freedom. Two or more: the variance of the runs' log values around their mean (run-to-run
//! noise, which includes the sampling noise), never below their mean sampling variance, divided
//! by the number of runs, with `runs - 1` degrees of freedom.
//!
//! # The comparison of one metric
//!
//! `d = mean ln B - mean ln A` with standard error `se = sqrt(var A + var B)` and Welch's degrees
//! of freedom. The interval is `d ± t(1 - alpha/2, df) se`, shown as percentages. The test is
//! a **minimum-effect test** (Murphy and Myors, *Statistical Power Analysis*, ch. 3): the null
//! hypothesis is that the change is within `±min_change` (a practical threshold: two recordings
//! of one workload differ by more than their sampling noise), and its p-value is
//! `2 P(T > (|d| - ln(1 + min_change)) / se)` (capped at 1), so that a metric is declared changed
//! exactly when its interval lies wholly beyond the threshold. With `min_change` 0 this is the
//! usual two-sided t-test. A metric whose interval lies wholly within the threshold is the
//! **same** (an equivalence test, Schuirmann's two one-sided tests at the interval's level).
//!
//! # Many comparisons
//!
//! [`judge`] adjusts the p-values of all metrics compared together, by Benjamini and Hochberg's
//! step-up procedure (the false discovery rate, "Controlling the false discovery rate", 1995) or
//! Holm's step-down one (the family-wise error rate, 1979), and declares a change where the
//! adjusted p-value is at most `alpha`. When nothing changed (an A/A comparison) both keep the
//! chance of any verdict of change at `alpha` or less.
//!
//! # Too few to tell
//!
//! An estimate that rests on fewer than [`Settings::min_support`] operations (a p99.9 of 2 000
//! calls rests on 2) gives no verdict: "too few".
//!
//! ```
//! use latscope_hist::Histogram;
//! use latscope_stats::{compare, judge, quantile, Settings, Verdict};
//!
//! let a: Histogram = (0..10_000u64).map(|i| 1_000 + i % 1000).collect();
//! let b: Histogram = (0..10_000u64).map(|i| 2_000 + 2 * (i % 1000)).collect();
//! let s = Settings { run_noise: 0.0, ..Settings::default() }; // synthetic: no run-to-run noise
//! let mut o = compare(&[quantile(&a, 0.5).unwrap()], &[quantile(&b, 0.5).unwrap()], &s);
//! judge(&mut [&mut o], &s);
//! assert_eq!(o.verdict, Verdict::Increase);
//! assert!((o.change - 1.0).abs() < 0.02); // +100 %
//! ```

#![warn(missing_docs)]

pub mod dist;

use latscope_hist::Histogram;
use serde::{Deserialize, Serialize};

/// z of the rank interval used to measure a quantile's spread (95 %).
const Z_RANKS: f64 = 1.959_963_984_540_054;

/// How comparisons are judged.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// Error rate of the verdicts: the false discovery rate (Benjamini-Hochberg), the family-wise
    /// error rate (Holm) or each test's (none); the intervals are `1 - alpha`.
    pub alpha: f64,
    /// The smallest change that counts (0.05: 5 %): a verdict of change needs the interval wholly
    /// beyond it, a verdict of "same" wholly within it.
    pub min_change: f64,
    /// Operations an estimate must rest on to be judged.
    pub min_support: u64,
    /// How the p-values of the metrics compared together are adjusted.
    pub correction: Correction,
    /// The run-to-run noise assumed for a side of one run (the standard deviation of a metric's
    /// log between runs, 0.1: 10 %), added to its variance: one run cannot show it, and two
    /// runs of one workload differ by more than their sampling noise. Sides of several runs
    /// measure it instead.
    pub run_noise: f64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            alpha: 0.05,
            min_change: 0.05,
            min_support: 10,
            correction: Correction::BenjaminiHochberg,
            run_noise: 0.1,
        }
    }
}

/// Adjustment for the number of comparisons.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Correction {
    /// Benjamini and Hochberg's step-up procedure: the false discovery rate.
    BenjaminiHochberg,
    /// Holm's step-down procedure: the family-wise error rate.
    Holm,
    /// None: each comparison at `alpha` on its own.
    None,
}

impl Correction {
    /// Parses `bh`, `fdr`, `holm`, `none`.
    pub fn parse(s: &str) -> Result<Correction, String> {
        match s {
            "bh" | "fdr" | "benjamini-hochberg" => Ok(Correction::BenjaminiHochberg),
            "holm" | "fwer" => Ok(Correction::Holm),
            "none" => Ok(Correction::None),
            _ => Err(format!("unknown correction '{s}' (use bh, holm or none)")),
        }
    }

    /// How a person reads it.
    pub fn describe(self) -> &'static str {
        match self {
            Correction::BenjaminiHochberg => "false discovery rate (Benjamini-Hochberg)",
            Correction::Holm => "family-wise error rate (Holm)",
            Correction::None => "each comparison on its own (no correction)",
        }
    }
}

/// One run's estimate of a positive metric.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// The value, in the metric's unit.
    pub value: f64,
    /// The sampling variance of `ln(value)` within the run.
    pub var_log: f64,
    /// Operations the estimate rests on (beyond a quantile; counted for a rate).
    pub support: u64,
}

/// The log of a value, values below 1 (a 0 ns latency) taken as 1.
fn ln1(v: f64) -> f64 {
    v.max(1.0).ln()
}

/// The value at 1-based rank `k` of `h`.
fn at_rank(h: &Histogram, k: u64) -> Option<u64> {
    let n = h.count();
    // `value_at_quantile` takes rank ceil(q n): (k - 0.5) / n lands on k exactly.
    h.value_at_quantile(((k.clamp(1, n) as f64) - 0.5) / n as f64)
}

/// Quantile `q` (0..1) of `h` with its spread (see the crate docs); `None` when empty.
pub fn quantile(h: &Histogram, q: f64) -> Option<Estimate> {
    let n = h.count();
    if n == 0 || !(0.0..=1.0).contains(&q) {
        return None;
    }
    let value = h.value_at_quantile(q)? as f64;
    let nf = n as f64;
    let half = Z_RANKS * (nf * q * (1.0 - q)).sqrt();
    let lo = ((nf * q - half).floor().max(1.0)) as u64;
    let hi = ((nf * q + half).ceil() + 1.0).min(nf) as u64;
    let (xl, xu) = (at_rank(h, lo)? as f64, at_rank(h, hi)? as f64);
    let se = (ln1(xu) - ln1(xl)) / (2.0 * Z_RANKS);
    // The histogram's resolution: a bucket is at most 1/128 of its value wide (values below
    // 256 exact, to 1): a uniform error over it.
    let idx = h.bucket_index(value as u64);
    let width = h.bucket_bounds(idx).map_or(1.0, |(l, u)| (u - l + 1) as f64);
    let floor = width / value.max(1.0) / 12f64.sqrt();
    let rank = (q * nf).ceil();
    let support = (nf - rank).min(rank - 1.0).max(0.0) as u64;
    Some(Estimate { value, var_log: se.max(floor).powi(2), support })
}

/// Events per second: `count` over `secs`, over-dispersed as the `windows` (counts in equal
/// windows of the run; fewer than 8: Poisson) say; `None` without events or time.
pub fn rate(count: u64, secs: f64, windows: &[u64]) -> Option<Estimate> {
    if count == 0 || secs <= 0.0 {
        return None;
    }
    let mut dispersion = 1.0;
    if windows.len() >= 8 {
        let m = windows.iter().sum::<u64>() as f64 / windows.len() as f64;
        if m > 0.0 {
            let v = windows.iter().map(|&w| (w as f64 - m).powi(2)).sum::<f64>() / (windows.len() - 1) as f64;
            dispersion = (v / m).max(1.0);
        }
    }
    Some(Estimate { value: count as f64 / secs, var_log: dispersion / count as f64, support: count })
}

/// A throughput from completions per window (`per_window`, already in the metric's unit: ops/s
/// of each window): their mean, with the batch-means variance; `None` with fewer than 5 windows.
pub fn windows(per_window: &[f64], support: u64) -> Option<Estimate> {
    let k = per_window.len();
    if k < 5 {
        return None;
    }
    let m = per_window.iter().sum::<f64>() / k as f64;
    if m <= 0.0 {
        return None;
    }
    let v = per_window.iter().map(|&w| (w - m).powi(2)).sum::<f64>() / (k - 1) as f64;
    Some(Estimate { value: m, var_log: v / (k as f64 * m * m), support })
}

/// A value a run gives without a spread of its own (its runs' scatter is the noise).
pub fn value(v: f64, support: u64) -> Estimate {
    Estimate { value: v, var_log: 0.0, support }
}

/// What a comparison concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// B is larger, beyond the threshold, after the correction for many comparisons.
    Increase,
    /// B is smaller, beyond the threshold.
    Decrease,
    /// The interval lies within ±min_change.
    Same,
    /// Neither: the data cannot tell.
    Unclear,
    /// An estimate rests on too few operations.
    TooFew,
    /// Not compared (said why in the note).
    NotCompared,
}

impl Verdict {
    /// Whether this is a verdict of change.
    pub fn changed(self) -> bool {
        matches!(self, Verdict::Increase | Verdict::Decrease)
    }
}

/// The comparison of one metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// Side A's value (the geometric mean of its runs).
    pub a: f64,
    /// Side B's value.
    pub b: f64,
    /// B / A - 1.
    pub change: f64,
    /// The `1 - alpha` interval of the change, as B / A - 1 (`None` when not compared).
    pub ci: Option<(f64, f64)>,
    /// The minimum-effect test's p-value, before adjustment.
    pub p: Option<f64>,
    /// The p-value adjusted for the number of comparisons ([`judge`]).
    pub q: Option<f64>,
    /// Degrees of freedom of the interval (infinite: one run per side).
    pub df: f64,
    /// The verdict.
    pub verdict: Verdict,
    /// Why there is no verdict (too few operations, not compared).
    pub note: String,
    /// Operations the estimates rest on, per side (their smallest per run).
    pub support: (u64, u64),
}

impl Outcome {
    /// An outcome without a test.
    pub fn not_compared(a: f64, b: f64, verdict: Verdict, note: impl Into<String>) -> Outcome {
        Outcome {
            a,
            b,
            change: if a > 0.0 { b / a - 1.0 } else { 0.0 },
            ci: None,
            p: None,
            q: None,
            df: f64::INFINITY,
            verdict,
            note: note.into(),
            support: (0, 0),
        }
    }

    /// Whether this outcome takes part in the correction (it was tested).
    pub fn tested(&self) -> bool {
        self.p.is_some()
    }
}

/// A side's runs: mean log, variance of that mean, degrees of freedom; `run_noise` is added to
/// the variance of a single run.
fn side(runs: &[Estimate], run_noise: f64) -> (f64, f64, f64) {
    let k = runs.len() as f64;
    let ys: Vec<f64> = runs.iter().map(|e| ln1(e.value)).collect();
    let mean = ys.iter().sum::<f64>() / k;
    let within = runs.iter().map(|e| e.var_log).sum::<f64>() / k;
    if runs.len() == 1 {
        return (mean, within + run_noise * run_noise, f64::INFINITY);
    }
    let between = ys.iter().map(|y| (y - mean).powi(2)).sum::<f64>() / (k - 1.0);
    (mean, between.max(within) / k, k - 1.0)
}

/// Compares one metric: the runs of side A and of side B (see the crate docs). The verdict is
/// [`Verdict::Same`], [`Verdict::Unclear`] or [`Verdict::TooFew`] until [`judge`] declares the
/// changes.
pub fn compare(a: &[Estimate], b: &[Estimate], s: &Settings) -> Outcome {
    if a.is_empty() || b.is_empty() {
        return Outcome::not_compared(0.0, 0.0, Verdict::NotCompared, "no runs on one side");
    }
    let (ma, va, dfa) = side(a, s.run_noise);
    let (mb, vb, dfb) = side(b, s.run_noise);
    let support = (a.iter().map(|e| e.support).min().unwrap_or(0), b.iter().map(|e| e.support).min().unwrap_or(0));
    // A side's value: its run's, or the geometric mean of its runs.
    let val = |runs: &[Estimate], m: f64| if runs.len() == 1 { runs[0].value } else { m.exp() };
    let mut o = Outcome::not_compared(val(a, ma), val(b, mb), Verdict::Unclear, "");
    o.support = support;
    if support.0 < s.min_support || support.1 < s.min_support {
        o.verdict = Verdict::TooFew;
        let few = |side: &str, n: u64| format!("{side}: {n} operation{}", if n == 1 { "" } else { "s" });
        let mut parts = Vec::new();
        if support.0 < s.min_support {
            parts.push(few("A", support.0));
        }
        if support.1 < s.min_support {
            parts.push(few("B", support.1));
        }
        o.note = format!("rests on {}; {} needed", parts.join(", "), s.min_support);
        return o;
    }
    let d = mb - ma;
    let var = va + vb;
    let df = match (dfa.is_finite(), dfb.is_finite()) {
        (false, false) => f64::INFINITY,
        _ => {
            let term = |v: f64, df: f64| if df.is_finite() { v * v / df } else { 0.0 };
            let den = term(va, dfa) + term(vb, dfb);
            if den > 0.0 {
                var * var / den
            } else {
                dfa.min(dfb)
            }
        }
    };
    o.df = df;
    let delta = (1.0 + s.min_change.max(0.0)).ln();
    let se = var.sqrt();
    let (lo, hi, p) = if se > 0.0 && se.is_finite() {
        let t = dist::t_quantile(1.0 - s.alpha / 2.0, df);
        (d - t * se, d + t * se, (2.0 * dist::t_sf((d.abs() - delta) / se, df)).min(1.0))
    } else {
        (d, d, if d.abs() > delta { 0.0 } else { 1.0 })
    };
    o.ci = Some((lo.exp() - 1.0, hi.exp() - 1.0));
    o.p = Some(p);
    if lo > -delta && hi < delta {
        o.verdict = Verdict::Same;
    }
    o
}

/// Adjusts p-values for their number ([`Correction`]): the adjusted value of each, in order.
pub fn adjust(p: &[f64], c: Correction) -> Vec<f64> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&i, &j| p[i].total_cmp(&p[j]));
    let mut out = vec![0.0; m];
    match c {
        Correction::None => out.copy_from_slice(p),
        Correction::Holm => {
            let mut run = 0.0f64;
            for (k, &i) in order.iter().enumerate() {
                run = run.max(((m - k) as f64 * p[i]).min(1.0));
                out[i] = run;
            }
        }
        Correction::BenjaminiHochberg => {
            let mut run = 1.0f64;
            for (k, &i) in order.iter().enumerate().rev() {
                run = run.min((m as f64 * p[i] / (k + 1) as f64).min(1.0));
                out[i] = run;
            }
        }
    }
    out
}

/// Judges the outcomes compared together: adjusts their p-values for their number and declares
/// a change where the adjusted value is at most `alpha`. Returns the number of comparisons.
pub fn judge(outcomes: &mut [&mut Outcome], s: &Settings) -> usize {
    let idx: Vec<usize> = (0..outcomes.len()).filter(|&i| outcomes[i].tested()).collect();
    let ps: Vec<f64> = idx.iter().map(|&i| outcomes[i].p.unwrap_or(1.0)).collect();
    let qs = adjust(&ps, s.correction);
    for (&i, q) in idx.iter().zip(qs) {
        let o = &mut *outcomes[i];
        o.q = Some(q);
        if q <= s.alpha {
            o.verdict = if o.b > o.a { Verdict::Increase } else { Verdict::Decrease };
        }
    }
    idx.len()
}

#[cfg(test)]
mod tests;
