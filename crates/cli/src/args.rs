//! Arguments every command of a kind shares, declared once and flattened into each command:
//! reading a recording (`-r FILE`, `--input`, FILTER), tracing live (`--syscalls`, `-p`,
//! `--follow`, `--cgroup`, `-c`, `--buffer-size`), printing (`--json`, `--time`), and turning
//! them into library options.

use anyhow::{anyhow, bail, Context, Result};
use latscope_event::units::parse_size;
use latscope_event::{EventKind, SyscallSet};
use latscope_filter::Filter;
use latscope_live::SessionBuilder;
use latscope_scan::{InputFormat, Scan, ScanOptions, ScanReport, ZonePlan};
use latscope_trace::Column;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Input formats of `-r`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputArg {
    /// A latscope trace file (latscope record).
    Trace,
    /// `perf script` output of block:block_rq_issue and block:block_rq_complete (and block_rq_insert).
    Perf,
    /// trace2heatmap.pl's two numeric columns "time value" (heatmap and hist only).
    Text,
}

/// A filter expression, the trailing argument of every command that reads events.
#[derive(clap::Args, Debug, Clone)]
pub struct FilterArg {
    /// Filter expression (sysdig syntax, see 'latscope fields'), e.g. 'proc.name = httpd and
    /// evt.latency > 1ms'.
    #[arg(value_name = "FILTER")]
    pub filter: Option<String>,
}

impl FilterArg {
    /// The parsed filter; the error shows the expression with a caret under the problem.
    pub fn parse(&self) -> Result<Filter> {
        parse_filter(self.filter.as_deref().unwrap_or(""))
    }
}

/// Parses a filter expression for the command line.
pub fn parse_filter(src: &str) -> Result<Filter> {
    Filter::parse(src).map_err(|err| anyhow!("invalid filter:\n{err}"))
}

/// Reading a recording: `-r FILE [--input FORMAT] [FILTER]`.
#[derive(clap::Args, Debug, Clone)]
pub struct ReadArgs {
    /// Input file: a trace, or text with --input ('-' reads standard input).
    #[arg(short = 'r', long = "read", value_name = "FILE")]
    pub file: PathBuf,
    /// Input format.
    #[arg(long, value_enum, default_value = "trace")]
    pub input: InputArg,
    #[command(flatten)]
    pub filter: FilterArg,
}

/// What a view scans.
pub struct ScanPlan<'a> {
    /// The columns the view reads (by `EventBatch` field name).
    pub columns: &'a [&'a str],
    /// What the view counts, for zone-map pruning.
    pub zone: Option<ZonePlan>,
}

impl ReadArgs {
    /// The scan's input format; two-column text has no events and is refused here.
    pub fn event_format(&self, command: &str) -> Result<InputFormat> {
        match self.input {
            InputArg::Trace => Ok(InputFormat::Trace),
            InputArg::Perf => Ok(InputFormat::Perf),
            InputArg::Text => bail!("{command} needs events: a trace, or --input perf (two-column text has none)"),
        }
    }

    /// Opens the scan a view needs.
    pub fn open(&self, command: &str, plan: ScanPlan<'_>) -> Result<Scan> {
        let format = self.event_format(command)?;
        let opts = ScanOptions { filter: self.filter.parse()?, columns: Some(columns(plan.columns)), zone: plan.zone };
        Ok(Scan::open(&self.file, format, opts)?)
    }

    /// Opens a scan of every column.
    pub fn open_all(&self, command: &str) -> Result<Scan> {
        let format = self.event_format(command)?;
        let opts = ScanOptions { filter: self.filter.parse()?, ..Default::default() };
        Ok(Scan::open(&self.file, format, opts)?)
    }

    /// The kind a view draws: block requests with `--block` or perf input, else syscalls.
    pub fn kind(&self, block: bool) -> EventKind {
        latscope_scan::view_kind(
            block,
            if self.input == InputArg::Perf { InputFormat::Perf } else { InputFormat::Trace },
        )
    }

    /// Refuses options that need events when the input is two-column text.
    pub fn text_takes_no_filter(&self) -> Result<()> {
        if self.filter.filter.is_some() {
            bail!("filters apply to events: two-column text input takes none (filter the text with awk or grep first)");
        }
        Ok(())
    }
}

/// Trace columns by `EventBatch` field name (unknown names are ignored).
pub fn columns(names: &[&str]) -> Vec<Column> {
    let mut v: Vec<Column> = names.iter().filter_map(|n| Column::from_name(n)).collect();
    v.sort();
    v.dedup();
    v
}

/// Prints what a scan met (notes, skipped corrupt blocks, warnings) and returns the exit code:
/// failure when part of the input could not be read.
pub fn finish_scan(report: &ScanReport) -> ExitCode {
    for n in &report.notes {
        eprintln!("latscope: {n}");
    }
    for c in &report.corrupt {
        eprintln!("latscope: error: {c} (skipped)");
    }
    for w in &report.warnings {
        eprintln!("latscope: warning: {w}");
    }
    if report.incomplete() {
        eprintln!("latscope: {} corrupt block(s) skipped; the output above is incomplete", report.corrupt.len());
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Refuses a value range whose lower end (`lo`, given by the flag `lo_flag`) lies above its upper
/// end (or at it, when `strict`), naming both flags and values with units.
pub fn check_range(
    (lo_flag, lo): (&str, Option<f64>),
    (hi_flag, hi): (&str, Option<f64>),
    strict: bool,
    fmt: impl Fn(f64) -> String,
) -> Result<()> {
    if let (Some(lo), Some(hi)) = (lo, hi) {
        if lo > hi || (strict && lo == hi) {
            let rel = if lo > hi { "is above" } else { "must be below" };
            let hint = if lo > hi { ": swap them" } else { "" };
            bail!("{lo_flag} ({}) {rel} {hi_flag} ({}){hint}", fmt(lo), fmt(hi));
        }
    }
    Ok(())
}

/// A window of a recording: `--from TIME --to TIME`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct WindowArgs {
    /// Only events that began at or after TIME: time into the recording (10s, 1m30s, 2.5), or
    /// a wall-clock time in UTC (2026-11-22T10:32:00Z, or 10:32:00 on the recording's first day).
    #[arg(long, value_name = "TIME")]
    pub from: Option<String>,
    /// Only events that began before TIME (as --from).
    #[arg(long, value_name = "TIME")]
    pub to: Option<String>,
}

impl WindowArgs {
    /// Whether a bound was given.
    pub fn is_set(&self) -> bool {
        self.from.is_some() || self.to.is_some()
    }

    /// The window as CLOCK_MONOTONIC ns (`from..to`, each `None` when not given), checked.
    pub fn resolve(&self, h: &latscope_event::TraceHeader) -> Result<(Option<u64>, Option<u64>)> {
        let from = self.from.as_deref().map(|v| time_bound("--from", v, h)).transpose()?;
        let to = self.to.as_deref().map(|v| time_bound("--to", v, h)).transpose()?;
        if let (Some(a), Some(b)) = (from, to) {
            if a >= b {
                bail!(
                    "--from {} is not before --to {}: the window is empty",
                    self.from.as_deref().unwrap_or(""),
                    self.to.as_deref().unwrap_or("")
                );
            }
        }
        Ok((from, to))
    }

    /// The window as a filter clause on the start time (`evt.reltime`), `None` without bounds:
    /// what `events` takes to print the same events.
    pub fn clause(&self, h: &latscope_event::TraceHeader) -> Result<Option<String>> {
        let (from, to) = self.resolve(h)?;
        let rel = |t: u64| t.saturating_sub(h.start_ns);
        let mut c = Vec::new();
        if let Some(f) = from {
            c.push(format!("evt.reltime >= {}ns", rel(f)));
        }
        if let Some(t) = to {
            c.push(format!("evt.reltime < {}ns", rel(t)));
        }
        Ok((!c.is_empty()).then(|| c.join(" and ")))
    }
}

/// A `--from`/`--to` TIME as CLOCK_MONOTONIC ns: time into the recording, a time of day on the
/// recording's first day (UTC), or a date and time.
pub fn time_bound(flag: &str, v: &str, h: &latscope_event::TraceHeader) -> Result<u64> {
    let t = v.trim();
    let bad = || anyhow!("{flag} {v}: not a time (10s, 2.5, 10:32:00, 2026-11-22T10:32:00Z)");
    if let Ok(ns) = latscope_event::units::parse_duration_secs_default(t) {
        return Ok(h.start_ns.saturating_add(ns));
    }
    let wall_ns = if !t.contains('-') && t.contains(':') {
        let tod = chrono::NaiveTime::parse_from_str(t, "%H:%M:%S%.f")
            .or_else(|_| chrono::NaiveTime::parse_from_str(t, "%H:%M"))
            .map_err(|_| anyhow!("{flag} {v}: not a time of day (HH:MM:SS, UTC)"))?;
        let start = h.wall_ns(h.start_ns);
        let day = start - start.rem_euclid(86_400_000_000_000);
        use chrono::Timelike;
        day + i64::from(tod.num_seconds_from_midnight()) * 1_000_000_000 + i64::from(tod.nanosecond())
    } else {
        let d = chrono::DateTime::parse_from_rfc3339(t).map(|d| d.to_utc()).or_else(|_| {
            ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f"]
                .iter()
                .find_map(|f| chrono::NaiveDateTime::parse_from_str(t, f).ok())
                .map(|d| d.and_utc())
                .ok_or_else(bad)
        })?;
        d.timestamp_nanos_opt().ok_or_else(bad)?
    };
    Ok(u64::try_from(wall_ns.saturating_sub(h.realtime_offset_ns)).unwrap_or(0))
}

/// Which syscalls to trace live.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyscallsArg {
    /// Every syscall.
    All,
    /// Syscalls that take, create or return a file descriptor, take a path, change the fd table
    /// (clone, fork, unshare) or sync: all a replay of file I/O needs.
    Io,
    /// No syscalls (block requests and processes only).
    None,
}

impl From<SyscallsArg> for SyscallSet {
    fn from(a: SyscallsArg) -> SyscallSet {
        match a {
            SyscallsArg::All => SyscallSet::All,
            SyscallsArg::Io => SyscallSet::Io,
            SyscallsArg::None => SyscallSet::None,
        }
    }
}

/// Tracing live: which syscalls, which processes, how large a ring buffer.
#[derive(clap::Args, Debug, Clone)]
pub struct LiveArgs {
    /// Which syscalls to trace.
    #[arg(long, value_enum, default_value = "all")]
    pub syscalls: SyscallsArg,
    /// Only these processes (repeatable). Block requests are traced for every process (their
    /// issuer is often a kernel thread): narrow them with a filter such as `blk.disk = sda`.
    #[arg(short = 'p', long = "pid", value_name = "PID")]
    pub pids: Vec<u32>,
    /// With -p: also every process below them, like strace -f: those running at the start and
    /// every child forked from then on (children of children too; threads always are). The
    /// kernel adds each child as it forks and drops it when it exits; children that do not fit
    /// (65536 processes at once) are counted and reported. E.g. `-p $(pgrep -o nginx) -f`.
    #[arg(short = 'f', long)]
    pub follow: bool,
    /// Only tasks in this cgroup v2 cgroup or below it (repeatable): a directory of the cgroup2
    /// file system, absolute or relative to its mount (`system.slice/nginx.service`), or a
    /// systemd unit name (`nginx.service`, `session-2.scope`). Block requests are traced for
    /// every process, as with -p. E.g. `--cgroup system.slice/postgresql.service`.
    #[arg(long = "cgroup", value_name = "PATH")]
    pub cgroups: Vec<String>,
    /// Only these command names (repeatable; the kernel keeps 15 characters).
    #[arg(short = 'c', long = "comm", value_name = "COMM")]
    pub comms: Vec<String>,
    /// Ring buffer size, 1MiB to 1GiB (e.g. 256MiB); larger absorbs longer bursts.
    #[arg(long, default_value = "64MiB", value_parser = parse_size, value_name = "SIZE")]
    pub buffer_size: u64,
}

impl LiveArgs {
    /// A session builder with these limits and `filter`.
    pub fn session(&self, filter: Filter) -> SessionBuilder {
        SessionBuilder::new()
            .syscalls(self.syscalls.into())
            .pids(self.pids.clone())
            .follow(self.follow)
            .cgroups(self.cgroups.clone())
            .comms(self.comms.clone())
            .ring_bytes(usize::try_from(self.buffer_size).unwrap_or(usize::MAX))
            .filter(filter)
    }
}

/// Prints the session's warnings (options the kernel cannot honour as given).
pub fn print_warnings(warnings: &[String]) {
    for w in warnings {
        eprintln!("latscope: warning: {w}");
    }
}

/// `--json`.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct JsonArg {
    /// Print JSON (for scripts) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// How to print times.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeArg {
    /// Wall-clock time of day (UTC).
    Wall,
    /// Seconds since the recording started.
    Rel,
    /// Raw CLOCK_MONOTONIC ns.
    Mono,
}

/// `--time`.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct TimeFormatArg {
    /// How to print times.
    #[arg(long, value_enum, default_value = "wall")]
    pub time: TimeArg,
}

impl TimeFormatArg {
    /// The view's time format.
    pub fn format(&self) -> latscope_view::events::TimeFormat {
        use latscope_view::events::TimeFormat;
        match self.time {
            TimeArg::Wall => TimeFormat::Wall,
            TimeArg::Rel => TimeFormat::Relative,
            TimeArg::Mono => TimeFormat::Monotonic,
        }
    }
}

/// Writes `data` to `out` (a file, or stdout for `None` or `-`).
pub fn write_output(out: Option<&Path>, data: &[u8]) -> Result<()> {
    use std::io::Write;
    match out {
        Some(p) if p.as_os_str() != "-" => {
            // A new file renamed over the old one when complete: an interrupted command never
            // leaves a half-written output over a good one.
            let mut f = latscope_trace::AtomicFile::create(p)?;
            f.write_all(data).with_context(|| format!("cannot write {}", p.display()))?;
            f.commit()?;
            Ok(())
        }
        _ => {
            let mut o = std::io::stdout().lock();
            o.write_all(data)?;
            o.flush()?;
            Ok(())
        }
    }
}

/// Refuses to write `what` (an SVG document) to standard output when that is a terminal, where
/// it would be a screenful of markup: says to use `how` instead.
pub fn refuse_terminal(out: Option<&Path>, what: &str, how: &str) -> Result<()> {
    use std::io::IsTerminal;
    if out.is_none_or(|p| p.as_os_str() == "-") && std::io::stdout().is_terminal() {
        bail!("{what} is an SVG document, not for a terminal: write it to a file with {how}");
    }
    Ok(())
}

/// Refuse an output file that is the input (the same path, or the same file through a symlink
/// or a hard link), before anything is read or written.
pub fn check_output(input: Option<&Path>, output: Option<&Path>) -> Result<()> {
    match (input, output) {
        (Some(i), Some(o)) if i.as_os_str() != "-" && o.as_os_str() != "-" => {
            Ok(latscope_trace::check_output_not_input(&[i], o)?)
        }
        _ => Ok(()),
    }
}

/// The output's name for messages.
pub fn shown(p: Option<&Path>) -> String {
    match p {
        Some(p) if p.as_os_str() != "-" => p.display().to_string(),
        _ => "stdout".into(),
    }
}
