//! `latscope spectrogram`: live (in-kernel histograms when the filter allows, the event stream
//! otherwise) or from a trace file, drawn by `latscope_view::spectrogram`.

mod feeds;
mod options;

pub use options::{Drawing, LiveRun, Pacing, View};

use crate::args::{check_range, parse_filter, LiveArgs};
use anyhow::{bail, Context, Result};
use feeds::{file_feed, live_feed, svg_unpaced, SVG_UNPACED};
use latscope_event::EventKind;
use latscope_view::group::GroupBy;
use latscope_view::heatmap::YUnit;
use latscope_view::spectrogram::render::{DrawOptions, Split};
use latscope_view::spectrogram::svg::{svg, SvgOptions};
use latscope_view::spectrogram::tui::{run_plain, run_tui, terminal_width, RunOptions};
use latscope_view::spectrogram::{Feed, Palette, Spectrogram};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Draw latency as a spectrogram: one row per interval, one column per latency range on a log
/// scale (1 ns to 10 s by default), each cell coloured by how many calls of that latency ended in
/// that interval: black none, greens up to 99, yellows hundreds, reds thousands and more.
///
/// Live, latency is measured in the kernel, and when the whole filter can be tested there the
/// histograms are also built there (nothing is copied per event); otherwise events are streamed
/// and filtered in user space. On a terminal the view is interactive (space freezes it, arrows
/// or the mouse select a time x latency rectangle, enter lists its events); piped, it prints
/// plain rows.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  latscope spectrogram                                   # every syscall, 500 ms per row
  latscope spectrogram 200 proc.name=httpd               # 5 rows per second, one process
  latscope spectrogram 'proc.name=httpd and fd.type=file and evt.latency > 1ms'
  latscope spectrogram 'proc.name=test and evt.is_io_write=true and fd.name contains /mnt'
  latscope spectrogram --by class --min 1us --max 1s     # file vs net vs ipc, zoomed
  latscope spectrogram --block --by disk                 # block request latency per disk
  latscope spectrogram -p \"$(pgrep -o nginx)\" -f        # a service's processes, forks followed
  latscope spectrogram --cgroup nginx.service --by class # a systemd unit's cgroup
  latscope spectrogram -r trace.lst --no-pace --svg trace.svg 'evt.type=fsync'
  latscope spectrogram -d 10s --plain --colors none > rows.txt

Keys: space freeze/resume, arrows move, v mark a corner, enter list events, s keep events
(live in-kernel mode), n draw a paced file at once, ? help, q quit. See docs/SPECTROGRAM.md.")]
pub struct Args {
    /// Draw this trace file (from 'latscope record') instead of the live system.
    #[arg(short = 'r', long = "read", value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// [INTERVAL_MS] [FILTER]: milliseconds per row (default 500), then a filter expression
    /// (sysdig syntax, see 'latscope fields'; several words are joined).
    #[arg(value_name = "INTERVAL_MS] [FILTER")]
    pub words: Vec<String>,
    #[command(flatten)]
    pub view: View,
    #[command(flatten)]
    pub draw: Drawing,
    #[command(flatten)]
    pub trace: Pacing,
    #[command(flatten)]
    pub run: LiveRun,
    #[command(flatten)]
    pub live: LiveArgs,
}

/// Interval (ms) and filter text from the positional words.
pub fn split_words(words: &[String]) -> Result<(u64, String)> {
    let mut rest = words;
    let mut ms = 500;
    if let Some(first) = words.first() {
        if !first.is_empty() && first.chars().all(|c| c.is_ascii_digit()) {
            ms = first.parse().context("the interval is not a number of milliseconds")?;
            if ms == 0 {
                bail!("the interval must be at least 1 ms");
            }
            rest = &words[1..];
        }
    }
    Ok((ms, rest.join(" ")))
}

pub fn run(a: Args) -> Result<ExitCode> {
    crate::args::check_output(a.file.as_deref(), a.draw.svg.as_deref())?;
    let (interval_ms, filter_src) = split_words(&a.words)?;
    let filter = parse_filter(&filter_src)?;
    let ns = |v: u64| Some(v as f64);
    let (min_ns, max_ns) = (a.view.min.unwrap_or(1), a.view.max.unwrap_or(10_000_000_000));
    check_range(("--min", ns(min_ns)), ("--max", ns(max_ns)), true, |v| YUnit::Nanos.fmt_short(v))?;
    if a.trace.speed.is_nan() || a.trace.speed <= 0.0 {
        bail!("--speed must be a positive number");
    }
    let kinds = filter.needs_kinds();
    let block = a.view.block || a.view.by == Some(GroupBy::Disk) || (!kinds.syscall && kinds.block);
    if block && !kinds.block {
        bail!("the filter can only match syscalls, but --block (or --by disk) draws block requests: drop one of them");
    }
    if !block && !kinds.syscall {
        bail!("the filter matches no syscall and no block request (only process events have no latency)");
    }
    let kind = if block { EventKind::Block } else { EventKind::Syscall };
    let plain = a.draw.plain || !std::io::stdout().is_terminal();
    let palette = Palette::choose(if a.draw.no_color { "none" } else { &a.draw.colors }, plain);
    let width = a.draw.width.or_else(terminal_width).unwrap_or(120).max(30);
    let layout = Split::choose(&a.draw.layout, matches!(a.view.by, Some(GroupBy::Class | GroupBy::Disk)), width);
    let what = if block { "block request latency" } else { "syscall latency" };
    let draw = DrawOptions {
        min_ns,
        max_ns,
        palette,
        split: a.view.by.is_some(),
        layout,
        max_strips: a.view.top.max(1),
        title: format!("latscope spectrogram: {what}"),
    };
    let interval_ns = interval_ms * 1_000_000;
    let (mut spec, mut feed, stop): (Spectrogram, Box<dyn Feed>, _) = match &a.file {
        Some(path) => {
            let (spec, feed) = file_feed(path, &a, filter.clone(), kind, interval_ns, plain)?;
            let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
                signal_hook::flag::register(sig, stop.clone()).context("cannot install signal handlers")?;
            }
            (spec, feed, stop)
        }
        None => live_feed(&a, filter.clone(), kind, interval_ns)?,
    };
    let opts = RunOptions {
        draw,
        stop,
        duration: a.file.is_none().then_some(a.run.duration.map(Duration::from_nanos)).flatten(),
        drill_limit: 2_000,
    };
    if plain {
        run_plain(feed.as_mut(), &mut spec, &opts, width, &mut std::io::stdout().lock())
    } else {
        run_tui(feed.as_mut(), &mut spec, &opts)
    }
    .map_err(anyhow::Error::msg)?;
    if let Some(path) = &a.draw.svg {
        let st = feed.status(&spec);
        let mut title = format!("latscope spectrogram: {what}, {}; {}", st.source, st.headline(spec.events, kind));
        if !filter.is_match_all() {
            title.push_str(&format!("\nfilter: {}", filter.source()));
        }
        let groups = a.view.by.is_some().then(|| spec.top_groups(a.view.top.max(1)));
        let o = SvgOptions {
            min_ns,
            max_ns,
            cols: 200,
            palette,
            title,
            groups,
            fit_min: a.view.min.is_none(),
            fit_max: a.view.max.is_none(),
        };
        let s = svg(&spec, &o);
        crate::args::write_output(Some(path), s.as_bytes())?;
        eprintln!("latscope: wrote {}", path.display());
        if svg_unpaced(&a, plain) {
            eprintln!("latscope: note: the file was {SVG_UNPACED}");
        }
    }
    // What the file's reader met, said once the picture is done, as every reader says it.
    let damage = feed.damage();
    for d in &damage.skipped {
        eprintln!("latscope: error: {d} (skipped)");
    }
    for w in &damage.warnings {
        eprintln!("latscope: warning: {w}");
    }
    if !damage.skipped.is_empty() {
        eprintln!("latscope: {} corrupt block(s) skipped; the picture above is incomplete", damage.skipped.len());
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positional_words_are_an_optional_interval_then_the_filter() {
        let w = |v: &[&str]| split_words(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        assert_eq!(w(&[]), (500, String::new()));
        assert_eq!(w(&["200"]), (200, String::new()));
        assert_eq!(w(&["200", "proc.name=httpd"]), (200, "proc.name=httpd".into()));
        assert_eq!(w(&["proc.name=httpd", "and", "fd.type=file"]), (500, "proc.name=httpd and fd.type=file".into()));
        assert!(split_words(&["0".to_string()]).is_err());
    }
}
