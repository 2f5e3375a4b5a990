//! `latscope events`: a recording -> filter -> one line (or JSON object) per event, in the order
//! of the time shown.

use crate::args::{finish_scan, JsonArg, ReadArgs, ScanPlan, TimeFormatArg};
use anyhow::Result;
use latscope_event::units::parse_duration_secs_default;
use latscope_trace::Column;
use latscope_view::eventlist::{EventList, Options, Summary};
use latscope_view::events::{SortBy, LINE_COLUMNS};
use latscope_view::reorder::Lookahead;
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
/// read, after lines that began later, and marked '[late]' ("late": true in JSON). From a
/// trace file, an event goes out as soon as the blocks still to read (their time ranges are in
/// their metadata) hold nothing earlier but calls longer than the window, so little is held;
/// from a stream, at the window.
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
    /// queue, block I/O, lock, pipe/socket, timer, page fault, other, unknown), who woke it, and,
    /// for a call that left its CPU more than once, its parts in the order they happened. (JSON
    /// always carries it, as "why".)
    #[arg(long)]
    pub why: bool,
}

pub fn run(a: Args) -> Result<ExitCode> {
    let json = a.json.json;
    // Plain lines read a third of the columns: the others (attribution, stacks) stay undecoded.
    let mut scan = if json || a.why {
        a.read.open_all("events")?
    } else {
        a.read.open("events", ScanPlan { columns: LINE_COLUMNS, zone: None })?
    };
    if json {
        let deferred = latscope_view::eventlist::WHY_ONLY_COLUMNS.iter().chain(latscope_event::OFF_COLUMNS.iter());
        scan.set_deferred(
            deferred.filter_map(|c| Column::from_name(c)).collect(),
            latscope_view::eventlist::needs_why_columns,
        );
    }
    let header = scan.header().clone();
    let o = Options {
        json,
        why: a.why,
        time: a.time.format(),
        sort: if a.sort == "end" { SortBy::End } else { SortBy::Start },
        window_ns: a.window,
        max_held: MAX_HELD,
        limit: a.limit.unwrap_or(u64::MAX),
    };
    // A trace file's zone maps say where the blocks still to come begin: what precedes them
    // goes out at once instead of waiting out the window (the same output, far less held).
    // Read once the first block says the file's blocks can be read ahead cheaply.
    let (sort, window, mut lookahead, mut looked) = (o.sort, o.window_ns, None, false);
    let mut list = EventList::new(header.clone(), o, Box::new(std::io::stdout().lock()));
    while !list.full() {
        let Some(c) = scan.next_batch() else { break };
        let c = c?;
        list.batch(c.batch, c.rows)?;
        if !looked {
            looked = true;
            lookahead = scan.reread(&[Column::Ts, Column::Lat]).map(|r| Lookahead::read(r, sort, window));
        }
        if let Some(bound) = lookahead.as_ref().zip(scan.last_block()).and_then(|(l, seq)| l.after(seq)) {
            list.release_before(bound)?;
        }
    }
    let Summary { late, calls, explained, .. } = list.finish()?;
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
    if late > 0 {
        eprintln!(
            "latscope: {late} events printed late, out of {} order (a --window longer than the longest call orders them)",
            a.sort
        );
    }
    Ok(finish_scan(&scan.report()))
}
