//! `latscope diff`: two sides of recordings (or of replay statistics) compared, with intervals
//! and verdicts (docs/DIFF.md).

use crate::args::{check_output, finish_scan, parse_filter, refuse_terminal, write_output, JsonArg};
use anyhow::{bail, Context, Result};
use latscope_scan::{InputFormat, Scan, ScanOptions};
use latscope_stats::{Correction, Settings};
use latscope_view::diff::{self, svg, text, DiffOptions, Dim, Run, RunAgg};
use std::path::{Path, PathBuf};
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

/// Whether a file holds replay statistics (JSON) rather than a trace.
fn is_json(p: &Path) -> bool {
    use std::io::Read;
    let mut buf = [0u8; 64];
    let n = std::fs::File::open(p).and_then(|mut f| f.read(&mut buf)).unwrap_or(0);
    buf[..n].iter().find(|c| !c.is_ascii_whitespace()).is_some_and(|c| *c == b'{' || *c == b'[')
}

/// One recording's run, once a reader thread has read it.
type Slot = std::sync::Mutex<Option<Result<(Run, ExitCode)>>>;

/// Reads every recording (several at once), each into a run.
fn read_runs(
    files: &[&PathBuf],
    filter: &str,
    o: &DiffOptions,
    binaries: Option<&Path>,
) -> Result<(Vec<Run>, ExitCode)> {
    let filter = parse_filter(filter)?;
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()).min(files.len()).max(1);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<Slot> = files.iter().map(|_| Default::default()).collect();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(path) = files.get(k) else { break };
                let r = (|| -> Result<(Run, ExitCode)> {
                    let probe = RunAgg::new(o, &Default::default());
                    let opts = ScanOptions {
                        filter: filter.clone(),
                        columns: Some(crate::args::columns(&probe.columns())),
                        zone: None,
                    };
                    let mut scan = Scan::open(path, InputFormat::Trace, opts)?;
                    let mut agg = RunAgg::new(o, scan.header());
                    scan.for_each_with_header(|c, h| {
                        agg.add(c, h);
                        Ok::<(), anyhow::Error>(())
                    })?;
                    let report = scan.report();
                    let code = finish_scan(&report);
                    let name = path.display().to_string();
                    Ok((agg.finish(&name, report.summary.map(|s| s.duration_ns), binaries), code))
                })();
                *results[k].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
            });
        }
    });
    let mut runs = Vec::new();
    let mut code = ExitCode::SUCCESS;
    for (r, path) in results.into_iter().zip(files) {
        let r = r.into_inner().unwrap_or_else(|e| e.into_inner()).context("a reader thread stopped")?;
        let (run, c) = r.with_context(|| format!("cannot read {}", path.display()))?;
        if c != ExitCode::SUCCESS {
            code = c;
        }
        runs.push(run);
    }
    Ok((runs, code))
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

/// Writes the pictures asked for.
fn pictures(a: &Args, ra: &[Run], rb: &[Run], o: &DiffOptions, d: &diff::Diff, sub: &str) -> Result<()> {
    let noun = if a.block { "Block I/O" } else { "Syscall" };
    if let Some(p) = &a.svg {
        let (k, first) = if a.block {
            (1, o.dims.iter().position(|d| *d == Dim::Disk))
        } else {
            (0, (!o.dims.is_empty() && o.dims[0] != Dim::Cause && o.dims[0] != Dim::Disk).then_some(0))
        };
        let mut panels = vec![svg::Panel {
            name: format!("all {}", noun.to_lowercase()),
            a: svg::merged(ra, &|r| Some(&r.totals[k]), "all"),
            b: svg::merged(rb, &|r| Some(&r.totals[k]), "all"),
        }];
        if let Some(di) = first {
            let by = o.dims[di].name();
            if let Some(dd) = d.dims.iter().find(|x| x.by == by) {
                for g in dd.groups.iter().take(6) {
                    panels.push(svg::Panel {
                        name: format!("{by} {}", g.name),
                        a: svg::merged(ra, &|r| r.dims.get(di), &g.name),
                        b: svg::merged(rb, &|r| r.dims.get(di), &g.name),
                    });
                }
            }
        }
        write_output(Some(p), svg::histograms(&panels, &format!("{noun} latency, A and B"), sub).as_bytes())?;
        eprintln!("latscope: wrote {}", p.display());
    }
    if let Some(p) = &a.heatmap {
        let (ma, mb) = svg::heat_maps(ra, rb).map_err(anyhow::Error::msg)?.context("no heat map was kept")?;
        let title = format!("{noun} latency heat maps: A, B and B - A");
        write_output(Some(p), svg::heat_svg(&ma, &mb, &title, sub).as_bytes())?;
        eprintln!("latscope: wrote {}", p.display());
    }
    let folded = |cpu: bool, runs: &[Run]| -> Vec<(String, f64)> {
        let pick = |r: &Run| r.stacks.as_ref().map(|s| if cpu { s.1.clone() } else { s.0.clone() });
        runs.iter().map(|r| (pick(r).unwrap_or_default(), r.secs)).collect()
    };
    // (on CPU, file, drawn as a flame graph rather than written as folded stacks)
    for (cpu, file, draw) in [(false, &a.flame, true), (true, &a.flame_cpu, true), (false, &a.folded, false)] {
        let Some(p) = file else { continue };
        let (fa, fb) = (folded(cpu, ra), folded(cpu, rb));
        let ta: Vec<(&str, f64)> = fa.iter().map(|(s, t)| (s.as_str(), *t)).collect();
        let tb: Vec<(&str, f64)> = fb.iter().map(|(s, t)| (s.as_str(), *t)).collect();
        let df = svg::diff_folded(&ta, &tb);
        if draw {
            let (title, count) = if cpu {
                ("On-CPU time in calls by stack, B against A", "us on CPU")
            } else {
                ("Blocked time by stack, B against A", "us blocked")
            };
            let svg =
                svg::diff_flame(&df, title, count).map_err(|e| anyhow::anyhow!("cannot draw the flame graph: {e}"))?;
            write_output(Some(p), &svg)?;
        } else {
            write_output(Some(p), df.as_bytes())?;
        }
        if df.is_empty() {
            eprintln!("latscope: no call carries a stack on either side: record with `latscope record --why --stacks`");
        }
        eprintln!("latscope: wrote {}", p.display());
    }
    Ok(())
}
