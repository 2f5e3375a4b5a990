//! The spectrogram's options, grouped as its help shows them: what is drawn, how, at what pace
//! a trace file is drawn, and how long and how a live view runs.

use latscope_event::units::{parse_duration_ns, parse_duration_secs_default};
use latscope_view::group::GroupBy;
use std::path::PathBuf;

/// What is drawn: which events, which latencies, in which strips.
#[derive(clap::Args, Debug)]
#[command(next_help_heading = "What is drawn")]
pub struct View {
    /// Left edge of the latency axis (e.g. 1us) [default: 1ns; the --svg picture starts at the
    /// decade below the fastest event].
    #[arg(long, value_parser = parse_duration_ns, value_name = "LATENCY")]
    pub min: Option<u64>,
    /// Right edge of the latency axis (e.g. 100ms) [default: 10s; the --svg picture ends at the
    /// decade above the slowest event].
    #[arg(long, value_parser = parse_duration_ns, value_name = "LATENCY")]
    pub max: Option<u64>,
    /// Split the view into one strip per group: class (file, net, ipc, other; live: in the
    /// kernel), syscall (live: in the kernel), disk (implies --block; live: in the kernel, the
    /// devices present at start), proc (needs the event stream).
    #[arg(long, value_parser = parse_by)]
    pub by: Option<GroupBy>,
    /// Block requests (issue to completion) instead of syscalls.
    #[arg(long)]
    pub block: bool,
    /// Count idle waits (nanosleep, poll, select, futex, epoll_wait, wait4, ...) too; by default
    /// they are left out, as in every view (live, counted in the kernel: not traced at all).
    #[arg(long)]
    pub waits: bool,
    /// Most strips shown with --by (the busiest, or the fixed ones in order).
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub top: usize,
}

/// How it is drawn.
#[derive(clap::Args, Debug)]
#[command(next_help_heading = "Drawing")]
pub struct Drawing {
    /// Placement of the strips with --by: auto (side by side for classes and disks on a wide
    /// terminal), side, stack.
    #[arg(long, default_value = "auto", value_parser = ["auto", "side", "stack"])]
    pub layout: String,
    /// Colours: auto (true colour if COLORTERM says so, else 256; none when NO_COLOR is set or
    /// for plain rows), 256, truecolor, none (glyphs of increasing density).
    #[arg(long, default_value = "auto", value_parser = ["auto", "256", "truecolor", "none"])]
    pub colors: String,
    /// Same as --colors none.
    #[arg(long)]
    pub no_color: bool,
    /// Print plain rows (no cursor control) even on a terminal.
    #[arg(long)]
    pub plain: bool,
    /// Width of plain rows in characters (default: the terminal's, or $COLUMNS, or 120).
    #[arg(long, value_name = "COLUMNS")]
    pub width: Option<usize>,
    /// Also write the whole spectrogram as an SVG image to FILE when done.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
}

/// Trace files: at what pace.
#[derive(clap::Args, Debug)]
#[command(next_help_heading = "Trace files")]
pub struct Pacing {
    /// Trace files: draw everything at once instead of at the pace of the recording.
    #[arg(long)]
    pub no_pace: bool,
    /// Trace files: pace at this multiple of the recording's speed.
    #[arg(long, default_value_t = 1.0, value_name = "FACTOR")]
    pub speed: f64,
}

/// Live: how long, counted or streamed.
#[derive(clap::Args, Debug)]
#[command(next_help_heading = "Live")]
pub struct LiveRun {
    /// Live: stop after this long (e.g. 10s, 5m; a bare number is seconds).
    #[arg(short = 'd', long, value_parser = parse_duration_secs_default, value_name = "DURATION")]
    pub duration: Option<u64>,
    /// Live: stream events to user space even when the kernel could aggregate (keeps recent
    /// events for drill-down, costs more per syscall).
    #[arg(long)]
    pub stream: bool,
    /// Live, streaming: events kept for drill-down.
    #[arg(long, default_value_t = 1_000_000, value_name = "N")]
    pub keep: usize,
}

fn parse_by(s: &str) -> Result<GroupBy, String> {
    match GroupBy::parse(s)? {
        g @ (GroupBy::Class | GroupBy::Syscall | GroupBy::Disk | GroupBy::Proc) => Ok(g),
        _ => Err(format!("the spectrogram splits by class, syscall, disk or proc, not {s}")),
    }
}
