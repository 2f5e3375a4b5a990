//! Summaries of a run's probes: statistics with units and explanations, as text or JSON.

use crate::explain::{explain, Explanation};
use crate::probe::Unit;
use crate::runner::ProbeState;
use latscope_event::units::fmt_count;
use latscope_hist::Histogram;
use serde::Serialize;

/// One probe's statistics and explanation.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProbeSummary {
    /// The probe's name.
    pub name: String,
    /// Its kind.
    pub probe: &'static str,
    /// Unit of every value below.
    pub unit: Unit,
    /// What it measures.
    pub description: String,
    /// Values recorded.
    pub count: u64,
    /// Samples that failed (commands exiting non-zero); recorded too.
    pub failures: u64,
    /// Why the probe stopped, if it did.
    pub error: Option<String>,
    /// Smallest value.
    pub min: Option<u64>,
    /// Median.
    pub p50: Option<u64>,
    /// 90th percentile.
    pub p90: Option<u64>,
    /// 99th percentile.
    pub p99: Option<u64>,
    /// 99.9th percentile.
    pub p999: Option<u64>,
    /// Largest value.
    pub max: Option<u64>,
    /// Mean.
    pub mean: Option<f64>,
    /// Loop repetitions per sample (loops only).
    pub repetitions: Option<u64>,
    /// Granularity, peaks, tiers, cache estimate.
    pub explanation: Explanation,
}

impl ProbeSummary {
    /// The summary of `h`, the values of the probe `s` (its total, or its recent values).
    pub fn of(s: &ProbeState, h: &Histogram) -> ProbeSummary {
        let p = h.percentiles(&[50.0, 90.0, 99.0, 99.9]);
        ProbeSummary {
            name: s.info.name.clone(),
            probe: s.info.probe,
            unit: s.info.unit,
            description: s.info.description.clone(),
            count: h.count(),
            failures: s.failures,
            error: s.error.clone(),
            min: h.min(),
            p50: p[0],
            p90: p[1],
            p99: p[2],
            p999: p[3],
            max: h.max(),
            mean: h.mean(),
            repetitions: s.info.params.get("repetitions").and_then(|v| v.as_u64()),
            explanation: explain(h, "microbench", s.info.unit.as_str(), &s.info.params),
        }
    }
}

/// Summaries of every probe's total.
pub fn summarize(probes: &[ProbeState]) -> Vec<ProbeSummary> {
    probes.iter().map(|s| ProbeSummary::of(s, &s.total)).collect()
}

/// The summaries as text: one line of statistics per probe, then its explanations indented.
pub fn render_text(summaries: &[ProbeSummary]) -> String {
    let width = summaries.iter().map(|s| s.name.chars().count()).max().unwrap_or(0).min(48);
    let mut out = String::new();
    for s in summaries {
        let f = |v: Option<u64>| v.map_or("-".to_string(), |v| s.unit.format(v as f64));
        let mut line = format!(
            "  {:<width$}  {:>7} values  p50 {:>7}  p99 {:>7}  max {:>7}",
            s.name,
            fmt_count(s.count as f64),
            f(s.p50),
            f(s.p99),
            f(s.max)
        );
        if let Some(r) = s.repetitions {
            line += &format!("  (per iteration, {} iterations a sample)", fmt_count(r as f64));
        }
        if s.failures > 0 {
            line += &format!("  {} failed", s.failures);
        }
        out += &line;
        out.push('\n');
        for note in &s.explanation.notes {
            out += &format!("  {:width$}    {note}\n", "");
        }
        if let Some(e) = &s.error {
            out += &format!("  {:width$}    STOPPED: {e}\n", "");
        }
    }
    out
}
