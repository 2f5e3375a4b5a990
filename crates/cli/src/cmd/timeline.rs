//! `latscope timeline`: events -> operations/s, throughput and p50/p99/max latency per interval;
//! with `--threads`, every thread's calls over a window (`timeline_threads.rs`).

use crate::args::{finish_scan, refuse_terminal, shown, write_output, JsonArg, ReadArgs, ScanPlan};
use anyhow::{bail, Result};
use latscope_event::units::parse_duration_secs_default;
use latscope_event::EventKind;
use latscope_view::svg::{fmt_secs, fmt_wall};
use latscope_view::timeline::Timeline;
use std::path::PathBuf;
use std::process::ExitCode;

/// Operations/s, throughput and p50/p99/max latency per interval ("was it load?").
///
/// Operations per second, throughput and p50, p99, max (and mean) latency per interval. A
/// latency change with no change in load is not explained by load. An event counts in the
/// interval in which it completed; rates divide by the time an interval covers (the last one of a
/// recording, or the edges of a filter's time window, only in part). Idle waits (sleeps, polls,
/// futex and child waits), whose length the caller chooses, are left out unless --waits, as in
/// every view. Text table on stdout, an SVG line chart with -o, or JSON.
///
/// With --threads: every thread's story over a window instead, one row per thread, each call a
/// bar coloured by the part of its latency that took most of it (record --why: on CPU, run
/// queue, block I/O, lock, pipe/socket, ...), and the wake-ups: which thread's call woke which.
/// Text in the terminal (a letter per column of time), SVG or HTML (-o FILE.svg, FILE.html; the
/// bars' tooltips name each call, arrows draw the wake-ups), or JSON. --from/--to choose the
/// window, and every call running in it is drawn, also one that began before --from (a thread
/// blocked when the window opens); default: the whole recording. At most 200,000 calls: beyond
/// them the window ends early, where the calls left out begin.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  latscope timeline -r trace.lst                         # table, 1 s intervals
  latscope timeline -r trace.lst --block -o load.svg     # next to: latscope heatmap --block
  latscope timeline -r trace.lst 'fd.type = file' --interval 100ms -o io.svg
  latscope timeline --input perf -r out.blockio -o load.svg
  latscope timeline -r trace.lst --json | jq '.points[] | .p99_ns'
  latscope timeline -r slow.lst --threads --from 10s --to 10.5s        # who waited for whom
  latscope timeline -r slow.lst --threads --from 10:32:00 --to 10:32:01 -o threads.html 'proc.name = app'")]
pub struct Args {
    #[command(flatten)]
    pub read: ReadArgs,
    /// Interval length (1s, 100ms; a bare number is seconds).
    #[arg(short = 'i', long, default_value = "1s", value_parser = parse_duration_secs_default, value_name = "DURATION")]
    pub interval: u64,
    /// Block requests instead of syscalls (implied by --input perf).
    #[arg(long)]
    pub block: bool,
    /// Write an SVG chart to this file (or JSON with --json).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub json: JsonArg,
    /// Title of the chart.
    #[arg(long)]
    pub title: Option<String>,
    /// Count idle waits (nanosleep, poll, select, futex, epoll_wait, wait4, ...) too: in the
    /// operations, rates and latency; by default they are left out and counted apart.
    #[arg(long)]
    pub waits: bool,
    /// Every thread's calls over a window, and who woke whom, instead of the load per interval.
    #[arg(long)]
    pub threads: bool,
    #[command(flatten)]
    pub window: crate::args::WindowArgs,
    /// With --threads: most threads shown (the busiest: the most time in calls other than idle
    /// waits, then the most calls).
    #[arg(long, value_name = "N", default_value_t = 40)]
    pub rows: usize,
    /// With --threads: width of the text rows in characters (default: the terminal's, or
    /// $COLUMNS, or 120).
    #[arg(long, value_name = "COLUMNS")]
    pub width: Option<usize>,
}

/// Most intervals a timeline may have.
const MAX_INTERVALS: usize = 100_000;

pub fn run(a: Args) -> Result<ExitCode> {
    crate::args::check_output(Some(&a.read.file), a.output.as_deref())?;
    if a.threads {
        return super::timeline_threads::run(&a);
    }
    if a.window.is_set() {
        bail!("--from and --to go with --threads (for the load per interval, filter: 'evt.reltime >= 10s')");
    }
    if a.interval == 0 {
        bail!("--interval must be positive");
    }
    if !a.json.json && a.output.is_some() {
        refuse_terminal(a.output.as_deref(), "the timeline chart", "-o FILE (or --json)")?;
    }
    let kind = a.read.kind(a.block);
    let mut cols = vec!["kind", "ts", "lat", "bytes", "nr", "ret"];
    cols.extend(latscope_view::waits::columns());
    let mut scan = a.read.open("timeline", ScanPlan { columns: &cols, zone: None })?;
    let header = scan.header().clone();
    let mut tl = Timeline::new(header.start_ns, a.interval, MAX_INTERVALS).with_waits(a.waits);
    scan.set_zone(Some(tl.zone_plan(kind)));
    scan.for_each(|c| {
        tl.add_chunk(c, kind);
        Ok::<(), anyhow::Error>(())
    })?;
    let covered = scan.covered(tl.span());
    tl.set_covered(covered);
    if tl.dropped > 0 {
        bail!("{} events fall after the first {MAX_INTERVALS} intervals: use a longer --interval", tl.dropped);
    }
    let wall = (header.realtime_offset_ns != 0).then(|| header.wall_ns(header.start_ns));
    let out = a.output.as_deref();
    if a.json.json {
        write_output(
            out,
            format!("{}\n", latscope_event::escape::json_ascii_controls(serde_json::to_string(&tl.to_json(wall))?))
                .as_bytes(),
        )?;
    } else if out.is_some() {
        let noun = if kind == EventKind::Block { "Block I/O" } else { "Syscall" };
        let title = a.title.clone().unwrap_or_else(|| format!("{noun} load and latency"));
        let mut sub =
            format!("{}; {}; {} intervals", a.read.file.display(), tl.headline(kind), fmt_secs(tl.interval_secs()));
        if !scan.filter().is_match_all() {
            sub.push_str(&format!("; filter: {}", scan.filter().source()));
        }
        if let Some(w) = wall {
            sub.push_str(&format!("; t=0 at {}", fmt_wall(w)));
        }
        write_output(out, tl.render_svg(&title, Some(&sub)).as_bytes())?;
        eprintln!("latscope: wrote {} ({} intervals)", shown(out), tl.points().len());
    } else {
        let secs = covered.map_or(String::new(), |c| format!(" in {:.3} s", c.secs()));
        let f = scan.filter();
        let matching = if f.is_match_all() { String::new() } else { format!(" matching '{}'", f.source()) };
        let head = format!("{}{secs} from {}{matching}\n", tl.headline(kind), a.read.file.display());
        write_output(None, (head + &tl.render_text()).as_bytes())?;
    }
    Ok(finish_scan(&scan.report()))
}
