//! `latscope events`: trace file -> filter -> one line (or JSON object) per event.

use crate::input::Input;
use anyhow::Result;
use latscope_view::events::{json, line, TimeFormat};
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum TimeArg {
    /// Wall-clock time of day (UTC).
    Wall,
    /// Seconds since the recording started.
    Rel,
    /// Raw CLOCK_MONOTONIC ns.
    Mono,
}

/// Print a trace file's events, one per line: time, latency, process, pid/tid, operation,
/// fd and path, arguments, result (errno names). Block requests and process events too.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  latscope events -r trace.lst
  latscope events -r trace.lst 'evt.latency > 1s'
  latscope events -r trace.lst 'proc.name = httpd and fd.type = file' --time rel
  latscope events -r trace.lst 'evt.kind = block' --json | jq .latency_ns")]
pub struct Args {
    /// Trace file to read.
    #[arg(short = 'r', long = "read", value_name = "FILE")]
    pub file: PathBuf,
    /// Filter expression (see 'latscope fields').
    #[arg(value_name = "FILTER")]
    pub filter: Option<String>,
    /// JSON lines instead of text.
    #[arg(long)]
    pub json: bool,
    /// How to print times.
    #[arg(long, value_enum, default_value = "wall")]
    pub time: TimeArg,
    /// Stop after this many events.
    #[arg(short = 'n', long, value_name = "N")]
    pub limit: Option<u64>,
}

pub fn run(a: Args) -> Result<ExitCode> {
    let mut input = Input::open(&a.file, a.filter.as_deref(), None)?;
    let tf = match a.time {
        TimeArg::Wall => TimeFormat::Wall,
        TimeArg::Rel => TimeFormat::Relative,
        TimeArg::Mono => TimeFormat::Monotonic,
    };
    let out = std::io::stdout();
    let mut out = BufWriter::with_capacity(1 << 16, out.lock());
    let mut n = 0u64;
    let limit = a.limit.unwrap_or(u64::MAX);
    let r = input.for_each(|b, rows, h| {
        for &i in rows {
            if n >= limit {
                return Err(anyhow::anyhow!(Stop));
            }
            if a.json {
                serde_json::to_writer(&mut out, &json(h, b, i as usize))?;
                out.write_all(b"\n")?;
            } else {
                writeln!(out, "{}", line(h, b, i as usize, tf))?;
            }
            n += 1;
        }
        Ok(())
    });
    match r {
        Err(e) if e.downcast_ref::<Stop>().is_some() => {}
        r => r?,
    }
    out.flush()?;
    input.report_warnings();
    Ok(input.exit_code())
}

/// Marker error that ends reading early (`--limit`).
#[derive(Debug)]
struct Stop;
impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("limit reached")
    }
}
impl std::error::Error for Stop {}
