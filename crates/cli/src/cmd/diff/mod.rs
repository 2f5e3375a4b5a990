//! `latscope diff`: two sides of recordings (or of replay statistics) compared, with intervals
//! and verdicts (docs/DIFF.md).

mod pictures;
mod read;

use crate::args::{check_output, refuse_terminal, write_output, JsonArg};
use anyhow::{bail, Context, Result};
use latscope_stats::{Correction, Settings};
use latscope_view::diff::{self, text, DiffOptions, Dim};
use pictures::pictures;
use read::{is_json, read_runs};
use std::path::PathBuf;
use std::process::ExitCode;

/// Did it get worse? Two recordings (or two sets of repeats) compared, per syscall, process,
/// file, disk and cause, and per percentile (p50, p90, p99, p99.9) and rate: what moved, by how
/// much, with a 95 % interval and a verdict.
///
/// A change is declared only when its interval lies wholly beyond --min-change (5 %), after the
/// correction for the number of comparisons (Benjamini-Hochberg: a false discovery rate of 5 %);
/// a percentile resting on fewer than --min-ops operations beyond it on a side is "too few to
/// tell". Rates are per second of each recording. Groups on one side only are listed. With one
/// recording per side the intervals hold the noise inside each recording only: give several per
/// side (--a A1 A2 --b B1 B2) to put run-to-run noise in them. Statistics of replay runs
/// ('replay run --json --stats FILE') are compared as 'replay compare' does.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  latscope diff before.lst after.lst
  latscope diff before.lst after.lst 'proc.name = postgres' --by syscall,file -n 5
  latscope diff --a a1.lst a2.lst a3.lst --b b1.lst b2.lst b3.lst    # repeats: run-to-run noise measured
  latscope diff a1.lst,a2.lst b1.lst,b2.lst --by all --json | jq '.changes'
  latscope diff before.lst after.lst --svg hist.svg --heatmap heat.svg
  latscope diff slow-before.lst slow-after.lst --by cause --flame blocked.svg   # traces recorded with --why --stacks
  latscope diff run1.json run2.json                                   # replay statistics")]
pub struct Args {
    /// Side A, side B (several recordings of a side: comma-separated), then a filter; with --a
    /// and --b, only the filter.
    #[arg(value_name = "A B [FILTER]", num_args = 0..=3)]
    pub args: Vec<String>,
    /// Side A's recordings (repeats of one workload).
    #[arg(long = "a", value_name = "FILE", num_args = 1.., requires = "b")]
    pub a: Vec<PathBuf>,
    /// Side B's recordings.
    #[arg(long = "b", value_name = "FILE", num_args = 1.., requires = "a")]
    pub b: Vec<PathBuf>,
    /// Groupings compared (comma-separated): syscall, proc, file, disk, cause (with --why
    /// traces), or all. All syscalls and all block requests are always compared.
    #[arg(long, default_value = "syscall,disk", value_name = "LIST")]
    pub by: String,
    /// Groups compared per grouping: those with the most events on both sides.
    #[arg(short = 'n', long, default_value_t = 10)]
    pub limit: usize,
    /// The smallest change that counts, in percent.
    #[arg(long, default_value = "5%", value_name = "PERCENT")]
    pub min_change: String,
    /// Error rate of the verdicts (the intervals are 1 - alpha).
    #[arg(long, default_value_t = 0.05, value_name = "P")]
    pub alpha: f64,
    /// Correction for the number of comparisons: bh (false discovery rate), holm (family-wise
    /// error rate) or none.
    #[arg(long, default_value = "bh", value_parser = Correction::parse)]
    pub correction: Correction,
    /// The run-to-run noise assumed for a side of one recording (or run), in percent: two
    /// recordings of one workload differ by more than the noise inside each; measure yours with
    /// an A/A comparison. Sides of several recordings measure it instead.
    #[arg(long, default_value = "10%", value_name = "PERCENT")]
    pub run_noise: String,
    /// Operations an estimate must rest on (beyond a percentile, or counted) to be judged.
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub min_ops: u64,
    /// Count blocking waits (futex, poll, epoll_wait, sleeps, wait4, ...) with the work.
    #[arg(long)]
    pub waits: bool,
    /// Draw A's and B's latency histograms overlaid to FILE (SVG): all syscalls and the groups of
    /// the first grouping.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Draw A's and B's latency heat maps on one colour scale, and their difference, to FILE (SVG).
    #[arg(long, value_name = "FILE")]
    pub heatmap: Option<PathBuf>,
    /// Pictures of block requests instead of syscalls.
    #[arg(long)]
    pub block: bool,
    /// Write a differential flame graph of blocked time by stack to FILE (SVG; traces recorded
    /// with --why --stacks): red where B blocked more, blue less, stacks on one side only too.
    #[arg(long, value_name = "FILE")]
    pub flame: Option<PathBuf>,
    /// The same of the calls' time on CPU, by user stack and call.
    #[arg(long, value_name = "FILE")]
    pub flame_cpu: Option<PathBuf>,
    /// Write blocked time by stack as differential folded stacks ("stack A B", microseconds per
    /// recording of B's length; what inferno-diff-folded writes) to FILE.
    #[arg(long, value_name = "FILE")]
    pub folded: Option<PathBuf>,
    /// Look up the recorded binaries under DIR to name user frames.
    #[arg(long, value_name = "DIR")]
    pub binaries: Option<PathBuf>,
    #[command(flatten)]
    pub json: JsonArg,
}

/// The two sides and the filter, from either syntax.
fn sides(a: &Args) -> Result<(Vec<PathBuf>, Vec<PathBuf>, String)> {
    let list = |s: &str| -> Vec<PathBuf> { s.split(',').filter(|x| !x.is_empty()).map(PathBuf::from).collect() };
    if !a.a.is_empty() {
        if a.args.len() > 1 {
            bail!("with --a and --b, give only a filter after them (got {:?})", a.args);
        }
        return Ok((a.a.clone(), a.b.clone(), a.args.first().cloned().unwrap_or_default()));
    }
    match a.args.as_slice() {
        [x, y] => Ok((list(x), list(y), String::new())),
        [x, y, f] => Ok((list(x), list(y), f.clone())),
        _ => bail!("give two sides: latscope diff A.lst B.lst [FILTER] (or --a FILE... --b FILE...)"),
    }
}

/// `5%` or `5` (percent), at least 0.
pub fn parse_percent(s: &str) -> Result<f64> {
    match s.trim().trim_end_matches('%').trim().parse::<f64>() {
        Ok(v) if v >= 0.0 && v.is_finite() => Ok(v / 100.0),
        _ => bail!("{s:?}: give a percentage such as 5% (0 for none)"),
    }
}

pub fn run(a: Args) -> Result<ExitCode> {
    let (fa, fb, filter) = sides(&a)?;
    if fa.is_empty() || fb.is_empty() {
        bail!("each side needs at least one recording");
    }
    let min_change = parse_percent(&a.min_change).context("--min-change")?;
    if !(a.alpha > 0.0 && a.alpha < 1.0) {
        bail!("--alpha must be between 0 and 1 (e.g. 0.05), not {}", a.alpha);
    }
    let run_noise = parse_percent(&a.run_noise).context("--run-noise")?;
    let settings = Settings { alpha: a.alpha, min_change, min_support: a.min_ops, correction: a.correction, run_noise };
    let inputs: Vec<&PathBuf> = fa.iter().chain(&fb).collect();
    let outputs = [&a.svg, &a.heatmap, &a.flame, &a.flame_cpu, &a.folded];
    for o in outputs.iter().copied().flatten() {
        for i in &inputs {
            check_output(Some(i), Some(o))?;
        }
    }
    for (o, what, how) in [
        (&a.svg, "the histograms", "--svg FILE"),
        (&a.heatmap, "the heat maps", "--heatmap FILE"),
        (&a.flame, "the flame graph", "--flame FILE"),
        (&a.flame_cpu, "the flame graph", "--flame-cpu FILE"),
    ] {
        if o.is_some() {
            refuse_terminal(o.as_deref(), what, how)?;
        }
    }
    let json: Vec<bool> = inputs.iter().map(|p| is_json(p)).collect();
    if json.iter().all(|j| *j) {
        return super::replay::compare::compare_files(&fa, &fb, &settings, a.json.json);
    }
    if json.iter().any(|j| *j) {
        bail!("mixing replay statistics (JSON) and recordings: compare recordings with recordings, statistics with statistics");
    }
    let dims = Dim::parse_list(&a.by).map_err(|e| anyhow::anyhow!("--by: {e}"))?;
    let o = DiffOptions {
        dims,
        waits: a.waits,
        limit: a.limit.max(1),
        settings,
        heatmap: a.heatmap.is_some(),
        block: a.block,
        stacks: a.flame.is_some() || a.flame_cpu.is_some() || a.folded.is_some(),
    };
    let (runs, code) = read_runs(&inputs, &filter, &o, a.binaries.as_deref())?;
    let (ra, rb) = runs.split_at(fa.len());
    let d = diff::diff(ra, rb, &o);
    let sub = format!(
        "A: {}; B: {}{}",
        fa.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "),
        fb.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "),
        if filter.trim().is_empty() { String::new() } else { format!("; filter: {filter}") }
    );
    pictures(&a, ra, rb, &o, &d, &sub)?;
    let out = if a.json.json { format!("{}\n", text::to_json(&d)) } else { text::render_text(&d) };
    write_output(None, out.as_bytes())?;
    Ok(code)
}
