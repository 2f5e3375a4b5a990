//! `latscope export --perfetto FILE`: one trace -> a Perfetto trace (wiring only: the export is
//! `latscope_export::perfetto`).

use crate::args::{parse_filter, FilterArg, WindowArgs};
use anyhow::{anyhow, bail, Result};
use latscope_event::units::{fmt_bytes, fmt_count, parse_duration_secs_default, parse_size};
use latscope_export::perfetto::{export_perfetto, PerfettoOptions, Progress, DEFAULT_MAX_BYTES};
use latscope_export::ExportError;
use latscope_scan::{InputFormat, Scan, ScanOptions};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// The options of `export --perfetto`.
#[derive(clap::Args, Debug)]
pub struct PerfettoArgs {
    /// Write a Perfetto trace (protobuf) to FILE instead of Parquet: open it at ui.perfetto.dev or
    /// with trace_processor. One trace (-r) at a time.
    #[arg(long, value_name = "FILE")]
    pub perfetto: Option<PathBuf>,
    // Perfetto: a window (--from TIME --to TIME).
    #[command(flatten)]
    pub window: WindowArgs,
    /// Perfetto: largest file (the Perfetto UI in a browser holds about 2 GB, and a trace takes
    /// two to four times its size there; trace_processor reads up to 4 GiB). A larger export is
    /// refused, saying which window fits, or cut into parts with --split.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub max_size: Option<u64>,
    /// Perfetto: cut an export larger than --max-size into parts by time: FILE's stem + .part1,
    /// .part2, ... (each a trace of its own).
    #[arg(long)]
    pub split: bool,
    /// Perfetto: interval of the counter tracks (calls/s, p50/p99 latency, bytes/s, lost).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_secs_default)]
    pub counter_interval: Option<u64>,
}

impl PerfettoArgs {
    /// Refuses the options of `--perfetto` without it (a Parquet export takes none of them).
    pub fn refuse_without_perfetto(&self) -> Result<()> {
        let given = [
            ("--from", self.window.from.is_some()),
            ("--to", self.window.to.is_some()),
            ("--max-size", self.max_size.is_some()),
            ("--split", self.split),
            ("--counter-interval", self.counter_interval.is_some()),
        ];
        if let Some((flag, _)) = given.iter().find(|g| g.1) {
            bail!("{flag} goes with --perfetto FILE (a Parquet export takes a filter: 'evt.reltime >= 10s')");
        }
        Ok(())
    }
}

pub fn run(files: &[PathBuf], p: &PerfettoArgs, filter: &FilterArg, quiet: bool, json: bool) -> Result<ExitCode> {
    let out = p.perfetto.clone().ok_or_else(|| anyhow!("name the output: --parquet OUT or --perfetto FILE"))?;
    let [trace] = files else {
        bail!("--perfetto exports one trace at a time ({} given): give one -r", files.len());
    };
    latscope_trace::check_output_not_input(files, &out)?;
    let mut clauses: Vec<String> = Vec::new();
    if let Some(f) = filter.filter.as_deref().filter(|f| !f.trim().is_empty()) {
        clauses.push(format!("({f})"));
    }
    if p.window.is_set() {
        let header = Scan::open(trace, InputFormat::Trace, ScanOptions::default())?.header().clone();
        clauses.extend(p.window.clause(&header)?);
    }
    let mut opts = PerfettoOptions::new(&out);
    opts.filter = parse_filter(&clauses.join(" and "))?;
    opts.max_bytes = p.max_size.unwrap_or(DEFAULT_MAX_BYTES);
    opts.split = p.split;
    if let Some(i) = p.counter_interval {
        if i == 0 {
            bail!("--counter-interval must be positive");
        }
        opts.interval_ns = i;
    }

    let show = !quiet && std::io::stderr().is_terminal();
    let started = Instant::now();
    let mut last = Instant::now();
    let mut shown = false;
    let mut progress = |pr: &Progress| {
        if show && last.elapsed() >= Duration::from_millis(500) {
            let pct = 100.0 * pr.bytes_read as f64 / pr.file_size.max(1) as f64;
            eprint!(
                "\rexporting {}: {pct:>3.0} %, {} events, {} written  ",
                trace.display(),
                fmt_count(pr.events_exported as f64),
                fmt_bytes(pr.bytes_written)
            );
            last = Instant::now();
            shown = true;
        }
    };
    let r = export_perfetto(trace, &opts, &mut progress);
    if shown {
        eprint!("\r{:100}\r", "");
    }
    let s = match r {
        Ok(s) => s,
        Err(ExportError::TooLarge { limit, at_ns }) => {
            let secs = at_ns as f64 / 1e9;
            bail!(
                "the Perfetto trace would pass --max-size {} at {secs:.3} s into the recording (the Perfetto UI \
                 in a browser holds about 2 GB, and a trace takes two to four times its size there): nothing was \
                 written. Export a window of it (--to {}s: the events before that time into the recording fit; \
                 then --from there), narrow the filter, or cut it into parts with --split",
                fmt_bytes(limit),
                secs.floor().max(1.0),
            );
        }
        Err(e) => return Err(e.into()),
    };
    let secs = started.elapsed().as_secs_f64().max(1e-9);
    for w in &s.warnings {
        eprintln!("latscope: warning: {w}");
    }
    if s.events_lost > 0 {
        eprintln!(
            "latscope: warning: {}: the recording lost {} events (ring buffer full): they are not in the export",
            trace.display(),
            s.events_lost
        );
    }
    if json {
        let mut j = serde_json::to_value(&s)?;
        j["seconds"] = serde_json::json!(secs);
        j["events_per_second"] = serde_json::json!(s.events_read as f64 / secs);
        println!("{j}");
    } else {
        let l = &s.links;
        println!(
            "exported {} of {} events as slices ({} threads of {} process(es), {} disk(s)) in {secs:.2} s",
            s.events_exported, s.events_read, s.threads, s.processes, s.disks
        );
        println!(
            "flows: {} wake-ups from the waking call, {} from the block request; {} wake-ups by a thread and {} by \
             a request whose waking call or request is not in the export",
            l.wakeups_linked, l.requests_linked, l.wakeups_not_linked, l.requests_not_linked
        );
        if s.part_slices > 0 {
            println!(
                "parts: {} calls' time split into {} slices inside them, in time order: on CPU, run queue, blocked \
                 (category latscope)",
                s.part_calls, s.part_slices
            );
        }
        if s.files.len() > 1 {
            println!(
                "files: {} parts by time; {} flows cut between files (each end marked in its file)",
                s.files.len(),
                s.flows_cut_between_files
            );
        }
        for f in &s.files {
            println!(
                "wrote {} ({}, {} slices): open it at https://ui.perfetto.dev",
                f.path.display(),
                fmt_bytes(f.bytes),
                f.slices
            );
        }
    }
    if s.corrupt_blocks > 0 {
        eprintln!("latscope: {} corrupt block(s) skipped; their events are not in the export", s.corrupt_blocks);
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
