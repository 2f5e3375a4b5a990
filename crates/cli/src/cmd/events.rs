//! `latscope events`: a recording -> filter -> one line (or JSON object) per event.

use crate::args::{finish_scan, JsonArg, ReadArgs, TimeFormatArg};
use anyhow::Result;
use latscope_view::events::{json, line};
use std::io::{BufWriter, Write};
use std::process::ExitCode;

/// Print a trace file's events, one per line: time, latency, process, pid/tid, operation,
/// fd and path, arguments, result (errno names). Block requests and process events too.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  latscope events -r trace.lst
  latscope events -r trace.lst 'evt.latency > 1s'
  latscope events -r trace.lst 'proc.name = httpd and fd.type = file' --time rel
  latscope events -r trace.lst 'evt.kind = block' --json | jq .latency_ns")]
pub struct Args {
    #[command(flatten)]
    pub read: ReadArgs,
    #[command(flatten)]
    pub json: JsonArg,
    #[command(flatten)]
    pub time: TimeFormatArg,
    /// Stop after this many events.
    #[arg(short = 'n', long, value_name = "N")]
    pub limit: Option<u64>,
}

pub fn run(a: Args) -> Result<ExitCode> {
    let mut scan = a.read.open_all("events")?;
    let tf = a.time.format();
    let header = scan.header().clone();
    let mut out = BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let mut left = a.limit.unwrap_or(u64::MAX);
    while left > 0 {
        let Some(c) = scan.next_batch() else { break };
        let c = c?;
        for &i in c.rows.iter().take(usize::try_from(left).unwrap_or(usize::MAX)) {
            if a.json.json {
                serde_json::to_writer(&mut out, &json(&header, c.batch, i as usize))?;
                out.write_all(b"\n")?;
            } else {
                writeln!(out, "{}", line(&header, c.batch, i as usize, tf))?;
            }
            left -= 1;
        }
    }
    out.flush()?;
    Ok(finish_scan(&scan.report()))
}
