//! `latscope timeline`: events -> operations/s, throughput and mean/p99 latency per interval.

use crate::cmd::viewinput::{columns, shown, write_output, InputFormat, Kinds, Source, Zone};
use anyhow::{bail, Result};
use latscope_event::units::parse_duration_secs_default;
use latscope_trace::BlockMeta;
use latscope_view::timeline::Timeline;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Operations/s, throughput and mean/p99 latency per interval ("was it load?").
///
/// Operations per second, throughput and mean and p99 latency per interval. A
/// latency change with no change in load is not explained by load. An event counts in the
/// interval in which it completed. Text table on stdout, an SVG line chart with -o, or JSON.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  latscope timeline -r trace.lst                         # table, 1 s intervals
  latscope timeline -r trace.lst --block -o load.svg     # next to: latscope heatmap --block
  latscope timeline -r trace.lst 'fd.type = file' --interval 100ms -o io.svg
  latscope timeline --input perf -r out.blockio -o load.svg
  latscope timeline -r trace.lst --json | jq '.points[] | .p99_ns'")]
pub struct Args {
    /// Trace file (or perf script text with --input perf).
    #[arg(short = 'r', long = "read", value_name = "FILE")]
    pub file: PathBuf,
    /// Filter expression (see 'latscope fields').
    #[arg(value_name = "FILTER")]
    pub filter: Option<String>,
    /// Input format.
    #[arg(long, value_enum, default_value = "trace")]
    pub input: InputFormat,
    /// Interval length (1s, 100ms; a bare number is seconds).
    #[arg(short = 'i', long, default_value = "1s", value_parser = parse_duration_secs_default, value_name = "DURATION")]
    pub interval: u64,
    /// Block requests instead of syscalls (implied by --input perf).
    #[arg(long)]
    pub block: bool,
    /// Write an SVG chart to this file (or JSON with --json).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// JSON instead of text or SVG.
    #[arg(long)]
    pub json: bool,
    /// Title of the chart.
    #[arg(long)]
    pub title: Option<String>,
}

/// Most intervals a timeline may have.
const MAX_INTERVALS: usize = 100_000;

pub fn run(a: Args) -> Result<ExitCode> {
    if a.input == InputFormat::Text {
        bail!("timeline needs events: a trace, or --input perf");
    }
    if a.interval == 0 {
        bail!("--interval must be positive");
    }
    let kinds = Kinds::new(a.block, a.input);
    let cols = ["kind", "ts", "lat", "bytes", "nr", "ret"];
    let mut src = Source::open(&a.file, a.input, a.filter.as_deref(), &columns(&cols))?;
    let header = src.header().clone();
    let mut tl = Timeline::new(header.start_ns, a.interval, MAX_INTERVALS);
    // Zone maps: a block whose events all complete in one interval is added without `ts`, and
    // without `kind` when it holds the wanted kind only.
    let kind = kinds.code();
    let probe = Timeline::new(header.start_ns, a.interval, MAX_INTERVALS);
    let zone = |m: &BlockMeta| Zone::of(m, kind, true, false, |end| Some(probe.interval_of(end)));
    src.for_each_zoned(zone, |b, rows, _, z| {
        if z.empty {
            return Ok(());
        }
        match (z.at, z.all_kind) {
            (Some(end), true) => (0..b.len()).for_each(|i| tl.add_at(end, kind, b, i)),
            (Some(end), false) => {
                for i in 0..b.len() {
                    if b.kind[i] == kind {
                        tl.add_at(end, kind, b, i);
                    }
                }
            }
            (None, true) => (0..b.len()).for_each(|i| tl.add_at(b.end(i), kind, b, i)),
            (None, false) => {
                for &i in rows {
                    if kinds.takes(b, i as usize) {
                        tl.add(b, i as usize);
                    }
                }
            }
        }
        Ok(())
    })?;
    if tl.dropped > 0 {
        bail!("{} events fall after the first {MAX_INTERVALS} intervals: use a longer --interval", tl.dropped);
    }
    let wall = (header.realtime_offset_ns != 0).then(|| header.wall_ns(header.start_ns));
    if a.json {
        let mut s = serde_json::to_string(&tl.to_json(wall))?;
        s.push('\n');
        write_output(a.output.as_ref(), s.as_bytes())?;
    } else if a.output.is_some() {
        let title = a.title.clone().unwrap_or_else(|| {
            let k = kinds.noun();
            format!("{}{} load and latency", k[..1].to_uppercase(), &k[1..])
        });
        let mut sub = format!("{}; {} intervals", a.file.display(), latscope_view::svg::fmt_secs(tl.interval_secs()));
        if let Some(f) = src.filter_text() {
            sub.push_str(&format!("; filter: {f}"));
        }
        if let Some(w) = wall {
            sub.push_str(&format!("; t=0 at {}", latscope_view::svg::fmt_wall(w)));
        }
        write_output(a.output.as_ref(), tl.render_svg(&title, Some(&sub)).as_bytes())?;
        eprintln!("latscope: wrote {} ({} intervals)", shown(a.output.as_ref()), tl.points().len());
    } else {
        let mut o = std::io::stdout().lock();
        write!(o, "{}", tl.render_text())?;
        o.flush()?;
    }
    Ok(src.finish())
}
