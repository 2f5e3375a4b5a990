//! `latscope export`: traces -> Parquet (one file, or Hive-style partitions by host, date, hour),
//! or one trace -> a Perfetto trace (`export_perfetto.rs`).

use crate::args::{FilterArg, JsonArg};
use anyhow::{bail, Context, Result};
use latscope_event::units::{fmt_bytes, fmt_count};
use latscope_event::StackTable;
use latscope_export::parquet_export::{
    export_parquet, FrameNamer, Output, ParquetOptions, Progress, DEFAULT_ROW_GROUP_ROWS, DEFAULT_ZSTD_LEVEL,
};
use latscope_view::stacks::StackNames;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Export traces to Parquet for query engines (DuckDB, Spark, Trino, pandas, Polars), or a
/// trace to Perfetto's trace format for ui.perfetto.dev (--perfetto).
///
/// Writes one row per event (typed columns: wall-clock time in UTC microseconds and exact
/// nanoseconds, latency in ns, operation names and numbers, process, file, disk, sizes, host)
/// with the breakdown of calls recorded with `record --why`, and, next to it, the processes,
/// disks, traces and stacks tables (stacks: one row per frame, user frames named from the
/// binaries at hand). OUT ending in `.parquet` is one file (the other tables go to OUT's stem +
/// `.processes.parquet`, `.disks.parquet`, `.traces.parquet`, `.stacks.parquet`); any other OUT is a directory partitioned Hive-style,
/// `OUT/events/host=H/date=YYYY-MM-DD/hour=0..23/part-N.parquet` (and `OUT/processes/host=H/...`):
/// exporting into it again adds parts and never replaces one. zstd-compressed, row groups of
/// 1 Mi events. Columns and fleet-wide SQL queries: docs/EXPORT.md.
///
/// With --perfetto FILE: every thread's calls over time as a Perfetto trace (open it at
/// ui.perfetto.dev): a track per process and thread, each syscall a slice (with its fd, path,
/// bytes, result and the --why breakdown as arguments), each block request a slice on its disk,
/// wake-ups as flows from the waking call to the woken one (and from a block request to the call
/// its completion woke), counters per interval. --from/--to export a window. A file larger than
/// --max-size (512MiB: what the Perfetto UI loads in a browser) is refused, or cut into parts by
/// time with --split. docs/PERFETTO.md says what each track means.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  latscope export -r trace.lst --parquet trace.parquet
  latscope export -r web1.lst -r web2.lst --parquet fleet/        # partitioned by host, date, hour
  latscope export -r traces/ --parquet fleet/                     # every *.lst in traces/
  latscope export -r trace.lst --parquet slow.parquet 'evt.latency > 1ms'
  latscope export -r slow.lst --perfetto slow.pftrace                # then open it at ui.perfetto.dev
  latscope export -r slow.lst --perfetto spike.pftrace --from 10:32:00 --to 10:32:05 'proc.name = app'
  latscope export -r big.lst --perfetto big.pftrace --split          # big.part1.pftrace, big.part2...
  duckdb -c \"SELECT host, kind, op, count(*), quantile_disc(lat, 0.99) / 1e6 AS p99_ms \\
             FROM read_parquet('fleet/events/**/*.parquet', hive_partitioning = true) \\
             GROUP BY ALL ORDER BY p99_ms DESC LIMIT 10\"   # op: write (syscall) or block_write")]
pub struct Args {
    /// Trace file to export; repeat for several (their host names tell them apart). A directory
    /// means every *.lst file in it.
    #[arg(short = 'r', long = "read", value_name = "TRACE", required = true)]
    pub files: Vec<PathBuf>,
    /// Output: a .parquet file, or a directory to partition into.
    #[arg(long, value_name = "OUT", required_unless_present = "perfetto", conflicts_with = "perfetto")]
    pub parquet: Option<PathBuf>,
    #[command(flatten)]
    pub perfetto: super::export_perfetto::PerfettoArgs,
    #[command(flatten)]
    pub filter: FilterArg,
    /// Host name to write instead of each trace's own.
    #[arg(long, value_name = "NAME")]
    pub host: Option<String>,
    /// Events per row group.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_ROW_GROUP_ROWS)]
    pub row_group_rows: usize,
    /// zstd compression level (1 fastest .. 22 smallest).
    #[arg(long, value_name = "LEVEL", default_value_t = DEFAULT_ZSTD_LEVEL)]
    pub zstd_level: i32,
    /// Only the events table (no processes, disks, traces and stacks tables).
    #[arg(long)]
    pub no_tables: bool,
    /// Look up the recorded binaries under DIR (their recorded paths below it, as if DIR were /:
    /// never outside it) to name the user frames of the stacks table; by default their recorded
    /// paths. Only regular files are read; a binary whose build id differs from the recorded one
    /// is not used.
    #[arg(long, value_name = "DIR")]
    pub binaries: Option<PathBuf>,
    /// No progress line.
    #[arg(short, long)]
    pub quiet: bool,
    #[command(flatten)]
    pub json: JsonArg,
}

/// The traces named: files as given, directories as their `*.lst` files, sorted.
fn trace_files(args: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in args {
        if p.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(p)
                .with_context(|| format!("cannot list {}", p.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.is_file() && f.extension().is_some_and(|e| e == "lst"))
                .collect();
            if found.is_empty() {
                bail!("{} holds no trace (*.lst) file", p.display());
            }
            found.sort();
            out.extend(found);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

pub fn run(a: Args) -> Result<ExitCode> {
    let files = trace_files(&a.files)?;
    let Some(parquet) = a.parquet.clone() else {
        return super::export_perfetto::run(&files, &a.perfetto, &a.filter, a.quiet, a.json.json);
    };
    a.perfetto.refuse_without_perfetto()?;
    // An output that is one of the traces (a path, a symlink, a hard link) is refused up front.
    latscope_trace::check_output_not_input(&files, &parquet)?;
    let mut opts = ParquetOptions::new(Output::from_path(&parquet));
    opts.filter = a.filter.parse()?;
    opts.host = a.host.clone();
    opts.row_group_rows = a.row_group_rows;
    opts.zstd_level = a.zstd_level;
    opts.tables = !a.no_tables;
    // User frames named as the views name them (blazesym, from the binaries at hand).
    let root = a.binaries.clone();
    opts.frame_names = Some(FrameNamer(std::sync::Arc::new(move |table: &StackTable| {
        let mut names = StackNames::new(table.clone(), root.as_deref());
        table.iter().map(|e| (e.id, names.frame_names(e.id, e.kind))).collect()
    })));

    let show = !a.quiet && std::io::stderr().is_terminal();
    let started = Instant::now();
    let mut last = Instant::now();
    let mut shown = false;
    let mut progress = |p: &Progress<'_>| {
        if show && last.elapsed() >= Duration::from_millis(500) {
            let pct = 100.0 * p.bytes_read as f64 / p.file_size.max(1) as f64;
            eprint!(
                "\rexporting trace {}/{} {}: {pct:>3.0} %, {} events  ",
                p.trace_index + 1,
                p.traces,
                p.path.display(),
                fmt_count(p.events_exported as f64)
            );
            last = Instant::now();
            shown = true;
        }
    };
    let s = export_parquet(&files, &opts, &mut progress)?;
    if shown {
        eprint!("\r{:100}\r", "");
    }
    let secs = started.elapsed().as_secs_f64().max(1e-9);
    let read: u64 = s.traces.iter().map(|t| t.events_read).sum();
    let corrupt: u64 = s.traces.iter().map(|t| t.corrupt_blocks).sum();
    for t in &s.traces {
        // Each warning is a sentence that names its file.
        for w in &t.warnings {
            eprintln!("latscope: warning: {w}");
        }
        if t.events_lost > 0 {
            eprintln!(
                "latscope: warning: {}: the recording lost {} events (ring buffer full): they are not in the export",
                t.path.display(),
                t.events_lost
            );
        }
    }
    if a.json.json {
        let mut j = serde_json::to_value(&s)?;
        j["seconds"] = serde_json::json!(secs);
        j["events_per_second"] = serde_json::json!(read as f64 / secs);
        println!("{j}");
    } else {
        let hosts: std::collections::BTreeSet<&str> = s.traces.iter().map(|t| t.host.as_str()).collect();
        println!(
            "exported {} of {} events from {} trace(s) ({} host(s): {}) in {secs:.2} s ({} events/s read)",
            s.events_exported,
            read,
            s.traces.len(),
            hosts.len(),
            hosts.into_iter().collect::<Vec<_>>().join(", "),
            fmt_count(read as f64 / secs),
        );
        let events: Vec<_> = s.files.iter().filter(|f| f.table == "events").collect();
        let ev_bytes: u64 = events.iter().map(|f| f.bytes).sum();
        println!(
            "events: {} file(s), {} ({:.1} bytes/event){}",
            events.len(),
            fmt_bytes(ev_bytes),
            ev_bytes as f64 / s.events_exported.max(1) as f64,
            match events.as_slice() {
                [one] => format!(": {}", one.path.display()),
                _ => format!(" under {}", parquet.join("events").display()),
            }
        );
        for f in s.files.iter().filter(|f| f.table != "events") {
            println!("{}: {} rows, {}: {}", f.table, f.rows, fmt_bytes(f.bytes), f.path.display());
        }
    }
    if corrupt > 0 {
        eprintln!("latscope: {corrupt} corrupt block(s) skipped; their events are not in the export");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
