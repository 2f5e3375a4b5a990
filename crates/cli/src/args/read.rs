//! Reading a recording: `-r FILE`, `--input`, the FILTER, the scan a view opens, and what the
//! scan met, printed after the output.

use anyhow::{anyhow, bail, Result};
use latscope_event::EventKind;
use latscope_filter::Filter;
use latscope_scan::{InputFormat, Scan, ScanOptions, ScanReport, ZonePlan};
use latscope_trace::Column;
use std::path::PathBuf;
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

/// A recording given where the filter goes, without `-r` (`latscope hist trace.lst`): what to
/// type instead, for every command that reads with `-r` and takes a FILTER. Otherwise clap asks
/// for `--read`, and `top` would start a live session that rejects the file name as a field.
pub fn file_as_filter(root: &clap::Command, args: &[String]) -> Option<String> {
    let mut cmd = root;
    let mut names = Vec::new();
    let mut tokens = args.iter().skip(1).peekable();
    // The subcommand: the leading names that are subcommands (options come after it).
    while let Some(sub) = tokens.peek().and_then(|t| cmd.find_subcommand(t.as_str())) {
        cmd = sub;
        names.push(sub.get_name());
        tokens.next();
    }
    let reads = cmd.get_arguments().any(|a| a.get_long() == Some("read"));
    let takes_filter =
        cmd.get_positionals().any(|a| a.get_value_names().is_some_and(|v| v.iter().any(|n| n.as_str() == "FILTER")));
    if !reads || !takes_filter {
        return None;
    }
    let takes_value = |a: &clap::Arg| a.get_action().takes_values();
    let mut file = None;
    while let Some(t) = tokens.next() {
        if t == "--" {
            break;
        }
        if t == "-r" || t == "--read" || t.starts_with("--read=") || (t.starts_with("-r") && !t.starts_with("--")) {
            return None;
        }
        if let Some(long) = t.strip_prefix("--") {
            // `--svg out.svg`: the option's value is no filter.
            if !long.contains('=') && cmd.get_arguments().any(|a| a.get_long() == Some(long) && takes_value(a)) {
                tokens.next();
            }
        } else if let Some(short) = t.strip_prefix('-').filter(|s| !s.is_empty()) {
            let last = short.chars().last();
            if cmd.get_arguments().any(|a| a.get_short() == last && takes_value(a)) && short.len() == 1 {
                tokens.next();
            }
        } else if file.is_none() && (std::path::Path::new(t).is_file() || t.ends_with(".lst")) {
            file = Some(t.clone());
        }
    }
    let file = file?;
    let what = if std::path::Path::new(&file).is_file() { "is a file" } else { "looks like a recording's name" };
    let quoted =
        if file.contains(|c: char| c.is_whitespace() || c == '\'') { format!("'{file}'") } else { file.clone() };
    Some(format!(
        "latscope: {}: '{file}' stands where the filter goes but {what}: to read a recording, use -r {quoted}",
        names.join(" ")
    ))
}
