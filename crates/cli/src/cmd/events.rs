//! `latscope events`: a recording -> filter -> one line (or JSON object) per event, in the order
//! of the time shown.

use crate::args::{finish_scan, JsonArg, ReadArgs, TimeFormatArg};
use anyhow::Result;
use latscope_event::units::parse_duration_secs_default;
use latscope_view::events::{json, line, Reorder, SortBy};
use std::io::{BufWriter, Write};
use std::process::ExitCode;

/// Most events held for reordering (a few hundred bytes each).
const MAX_HELD: usize = 1_000_000;

/// Print a trace file's events, one per line: time, latency, process, pid/tid, operation,
/// fd and path, arguments, result (errno names). Block requests and process events too.
///
/// Events are printed in the order of their start time (the time shown); a recording holds them
/// in the order they completed. They are reordered within a window (--window, and at most
/// 1,000,000 events held): a call that began more than about the window before the latest
/// completion already read — a wait or sleep longer than the window — is printed when it is
/// read, after lines that began later, and marked '[late]' ("late": true in JSON).
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  latscope events -r trace.lst
  latscope events -r trace.lst 'evt.latency > 1s'
  latscope events -r trace.lst 'proc.name = httpd and fd.type = file' --time rel
  latscope events -r trace.lst --sort end              # in the order calls completed
  latscope events -r trace.lst --window 60s            # order calls of up to a minute too
  latscope events -r trace.lst 'evt.kind = block' --json | jq .latency_ns
  latscope events -r slow.lst --why 'evt.latency > 10ms'   # each call's causes (record --why)")]
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
    /// Order of the lines: start (when each call began, the time shown) or end (when it
    /// completed).
    #[arg(long, value_name = "TIME", default_value = "start", value_parser = ["start", "end"])]
    pub sort: String,
    /// Reorder window: events are held until reading has gone this far past them (5s, 500ms; a
    /// bare number is seconds). Longer calls are printed late, marked '[late]'.
    #[arg(long, default_value = "5s", value_parser = parse_duration_secs_default, value_name = "DURATION")]
    pub window: u64,
    /// Under each call recorded with `record --why`, its latency split into causes (on CPU, run
    /// queue, block I/O, lock, pipe/socket, timer, page fault, other, unknown) and who woke it.
    /// (JSON always carries it, as "why".)
    #[arg(long)]
    pub why: bool,
}

pub fn run(a: Args) -> Result<ExitCode> {
    let mut scan = a.read.open_all("events")?;
    let tf = a.time.format();
    let header = scan.header().clone();
    let by = if a.sort == "end" { SortBy::End } else { SortBy::Start };
    let mut order = Reorder::new(by, a.window, MAX_HELD);
    let mut out = BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let left = std::cell::Cell::new(a.limit.unwrap_or(u64::MAX));
    let json_lines = a.json.json;
    let mut print = |mut text: String, late: bool| -> std::io::Result<()> {
        if left.get() > 0 {
            left.set(left.get() - 1);
            if late && json_lines {
                text.pop(); // the closing brace
                text.push_str(",\"late\":true}");
            } else if late {
                // After the event's own line (a --why breakdown follows it on the next line).
                let at = text.find('\n').unwrap_or(text.len());
                text.insert_str(at, " [late]");
            }
            text.push('\n');
            out.write_all(text.as_bytes())?;
        }
        Ok(())
    };
    // Syscalls printed, and those with a breakdown: --why says so when none had one.
    let (mut calls, mut explained) = (0u64, 0u64);
    // The calls of every block read (not only those the filter took): chains of waits go
    // through them.
    let mut chains = latscope_view::chain::ChainIndex::new();
    while left.get() > 0 {
        let Some(c) = scan.next_batch() else { break };
        let c = c?;
        let b = c.batch;
        chains.add(b);
        for &i in c.rows {
            let i = i as usize;
            let text = if json_lines {
                let mut v = json(&header, b, i);
                if let Some(ch) =
                    latscope_view::why::chain_json(&header, &chains, b, i).filter(|_| v["why"].is_object())
                {
                    v["why"]["chain"] = ch;
                }
                latscope_event::escape::json_ascii_controls(serde_json::to_string(&v)?)
            } else if a.why {
                let mut t = line(&header, b, i, tf);
                calls += u64::from(b.kind[i] == latscope_event::EventKind::Syscall as u8);
                if let Some(w) = latscope_view::why::line(&header, b, i) {
                    explained += 1;
                    t.push('\n');
                    t.push_str(&w);
                }
                if let Some(ch) = latscope_view::why::chain_line(&header, &chains, b, i) {
                    t.push('\n');
                    t.push_str(&ch);
                }
                t
            } else {
                line(&header, b, i, tf)
            };
            order.push(b.ts[i], b.end(i), text, &mut print)?;
        }
    }
    order.finish(&mut print)?;
    out.flush()?;
    if a.why && calls > 0 && explained == 0 {
        let recorded_with = header.command_line.iter().any(|w| w == "why" || w.starts_with("--why"));
        eprintln!(
            "latscope: --why: none of these {calls} calls carries a breakdown: {}",
            if recorded_with {
                "none was slower than the recording's --why-above"
            } else {
                "the trace was recorded without --why (record with `latscope record --why`, or run `latscope why`)"
            }
        );
    }
    if order.late() > 0 {
        eprintln!(
            "latscope: {} events printed late, out of {} order (a --window longer than the longest call orders them)",
            order.late(),
            a.sort
        );
    }
    Ok(finish_scan(&scan.report()))
}
