//! `latscope info`: a recording's header, counts, duration and losses.

use crate::args::{finish_scan, JsonArg, ReadArgs};
use anyhow::Result;
use latscope_view::info::{render_text, to_json, Census, FileFacts};
use std::process::ExitCode;

/// Print a trace file's header (machine, kernel, start and end time, mounts, disks, processes),
/// event counts per type, the recording's duration (from the probes attaching to the stop: the
/// time every view's rates divide by) and losses. A file cut short, and corrupt blocks (skipped),
/// are reported on stderr.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  latscope info -r trace.lst
  latscope info -r trace.lst 'proc.name = postgres'   # count only matching events
  latscope info -r trace.lst --json | jq .counts")]
pub struct Args {
    #[command(flatten)]
    pub read: ReadArgs,
    #[command(flatten)]
    pub json: JsonArg,
    /// Also list the processes and open files of the start snapshot.
    #[arg(short, long)]
    pub verbose: bool,
}

pub fn run(a: Args) -> Result<ExitCode> {
    // Every column is read, so every byte of the file is checked.
    let mut scan = a.read.open_all("info")?;
    let mut census = Census::new();
    scan.for_each(|c| {
        census.add(c);
        Ok::<(), anyhow::Error>(())
    })?;
    let report = scan.report();
    let facts = FileFacts {
        path: a.read.file.display().to_string(),
        bytes: std::fs::metadata(&a.read.file).map(|m| m.len()).unwrap_or(0),
        blocks: report.blocks,
        closed_cleanly: report.summary.is_some(),
        lost: report.lost,
        warnings: report.warnings.clone(),
        filtered: !scan.filter().is_match_all(),
        recording: report.recording_span(scan.header()),
        block_completions_without_issue: report.summary.map(|s| s.block_completions_without_issue),
        wakeups_unseen: report.summary.map(|s| s.wakeups_unseen),
        program_runs_skipped: report.summary.and_then(|s| s.program_runs_skipped),
        blocks_truncated: report.summary.map(|s| s.truncated).unwrap_or_default(),
        stacks_missing: report.summary.map_or_else(Vec::new, |s| {
            let mut r: Vec<(String, u64)> =
                s.stacks_missing.reasons().iter().filter(|(_, n)| *n > 0).map(|(k, n)| (k.to_string(), *n)).collect();
            r.sort_by_key(|b| std::cmp::Reverse(b.1));
            r
        }),
    };
    if a.json.json {
        let j = serde_json::to_string_pretty(&to_json(scan.header(), &census, &facts, a.verbose))?;
        println!("{}", latscope_event::escape::json_ascii_controls(j));
    } else {
        print!("{}", render_text(scan.header(), &census, &facts, a.verbose));
    }
    // Warnings (a file cut short), corrupt blocks and notes on stderr, as every reader says them.
    Ok(finish_scan(&report))
}
