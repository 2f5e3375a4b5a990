//! `latscope top`: a drill-down table by process, syscall, file, directory, disk, operation or
//! client, from a trace or live.

use crate::cmd::viewinput::{columns, InputFormat, Kinds, Source};
use crate::input::parse_filter;
use anyhow::{bail, Context, Result};
use latscope_event::units::parse_duration_secs_default;
use latscope_event::{EventBatch, TraceHeader};
use latscope_filter::EvalContext;
use latscope_probe::{snapshot, Probe, ProbeConfig, SyscallSel};
use latscope_view::group::GroupBy;
use latscope_view::top::{SortKey, Top};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Drill-down table by process, syscall, file, dir, disk, op or client; from a trace or live.
///
/// Per group: the count, rate, total, mean, p50, p99 and max latency, bytes
/// moved and errors, sorted and limited. Drill down by adding a filter on the group you found
/// (by client, then by operation, then by file).
///
/// From a trace with -r; live without it (root), refreshing every interval. Groups: proc (process
/// name), pid, syscall, op (syscall name or blk:read ...), file, dir, disk, and client: the peer
/// host of a TCP/UDP socket (named 'local->peer' from connect/accept or from /proc/net at the
/// start of the recording), else the process (name[pid]).
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  latscope top -r trace.lst --by proc
  latscope top -r trace.lst --by file 'proc.name = elinks' --sort count -n 10
  latscope top -r trace.lst --by syscall --sort p99
  latscope top -r trace.lst --block --by disk
  latscope top --by client                              # live, refreshed every second
  latscope top --by file 'fd.type = file' --interval 5s --count 3
  latscope top -r trace.lst --by dir --json | jq '.rows[0]'")]
pub struct Args {
    /// Trace file (or perf script text with --input perf); without it, trace live.
    #[arg(short = 'r', long = "read", value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Filter expression (see 'latscope fields').
    #[arg(value_name = "FILTER")]
    pub filter: Option<String>,
    /// Input format of -r.
    #[arg(long, value_enum, default_value = "trace")]
    pub input: InputFormat,
    /// Group by: proc, pid, syscall, op, file, dir, disk, client (the peer host of an IPv4/IPv6
    /// socket, else the process).
    #[arg(long, default_value = "proc", value_parser = GroupBy::parse)]
    pub by: GroupBy,
    /// Sort by: count, rate, total, avg, p50, p99, max, bytes, errors, name.
    #[arg(long, default_value = "total", value_parser = SortKey::parse)]
    pub sort: SortKey,
    /// Rows to show.
    #[arg(short = 'n', long, default_value_t = 20)]
    pub limit: usize,
    /// Block requests instead of syscalls.
    #[arg(long)]
    pub block: bool,
    /// JSON (one object per table) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Live: refresh interval (1s, 500ms; a bare number is seconds).
    #[arg(short = 'i', long, default_value = "1s", value_parser = parse_duration_secs_default, value_name = "DURATION")]
    pub interval: u64,
    /// Live: stop after this many tables.
    #[arg(short = 'c', long, value_name = "N")]
    pub count: Option<u64>,
    /// Live: only syscalls that take a file descriptor or path (cheaper).
    #[arg(long)]
    pub io_only: bool,
}

pub fn run(a: Args) -> Result<ExitCode> {
    match &a.file {
        Some(f) => run_file(&a, f.clone()),
        None => run_live(&a),
    }
}

fn run_file(a: &Args, file: PathBuf) -> Result<ExitCode> {
    if a.input == InputFormat::Text {
        bail!("top needs events: a trace, or --input perf");
    }
    let kinds = Kinds::new(a.block, a.input);
    let mut cols = vec!["kind", "ts", "lat", "bytes", "nr", "ret"];
    cols.extend(a.by.columns());
    let mut src = Source::open(&file, a.input, a.filter.as_deref(), &columns(&cols))?;
    let mut top = Top::new(a.by);
    src.for_each(|b, rows, h| {
        for &i in rows {
            if kinds.takes(b, i as usize) {
                top.add(b, i as usize, h);
            }
        }
        Ok(())
    })?;
    let secs = src.recorded_secs().unwrap_or_else(|| top.span_secs());
    let mut o = std::io::stdout().lock();
    if a.json {
        let mut j = top.to_json(a.sort, a.limit, secs);
        j["source"] = serde_json::json!(file.display().to_string());
        writeln!(o, "{}", serde_json::to_string(&j)?)?;
    } else {
        writeln!(
            o,
            "{} {} events in {:.3} s from {}{}",
            top.total_count(),
            kinds.noun(),
            secs,
            file.display(),
            src.filter_text().map(|f| format!(" matching '{f}'")).unwrap_or_default()
        )?;
        write!(o, "{}", top.render_text(a.sort, a.limit, secs))?;
    }
    o.flush()?;
    Ok(src.finish())
}

fn run_live(a: &Args) -> Result<ExitCode> {
    if a.input != InputFormat::Trace {
        bail!("--input applies to -r FILE");
    }
    latscope_probe::check_environment()?;
    let filter = parse_filter(a.filter.as_deref())?;
    let kinds = Kinds::new(a.block, a.input);
    let argv: Vec<String> = std::env::args().collect();
    let block = kinds == Kinds::Block;
    let header: TraceHeader = snapshot::take(
        argv,
        if block {
            "none"
        } else if a.io_only {
            "io"
        } else {
            "all"
        },
        block,
        a.filter.clone(),
    );
    let mut cfg = ProbeConfig {
        syscalls: if block {
            SyscallSel::Off
        } else if a.io_only {
            SyscallSel::Io
        } else {
            SyscallSel::All
        },
        block,
        ..Default::default()
    };
    let names = matches!(a.by, GroupBy::File | GroupBy::Dir);
    crate::pushdown::apply(&mut cfg, &filter, &header, names);
    if matches!(&cfg.syscalls, SyscallSel::Only(v) if v.is_empty()) {
        cfg.syscalls = SyscallSel::Off;
    }
    if (block && !cfg.block) || (!block && cfg.syscalls == SyscallSel::Off) {
        bail!("the filter excludes every {} event", kinds.noun());
    }
    let mut probe = Probe::start(&cfg, &header).context("cannot start the probes")?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("cannot install signal handlers")?;
    }
    let tty = std::io::stdout().is_terminal() && !a.json;
    let interval = Duration::from_nanos(a.interval.max(10_000_000));
    let mut ctx = EvalContext::new(&header);
    let mut top = Top::new(a.by);
    let mut tables = 0u64;
    let mut next = Instant::now() + interval;
    let mut last = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let wait = next.saturating_duration_since(Instant::now()).min(Duration::from_millis(100));
        let batch: EventBatch = probe.poll(wait)?;
        ctx.observe(&batch);
        for i in 0..batch.len() {
            if kinds.takes(&batch, i) && filter.matches(&batch, i, &ctx) {
                top.add(&batch, i, &header);
            }
        }
        if Instant::now() < next {
            continue;
        }
        let secs = last.elapsed().as_secs_f64();
        last = Instant::now();
        next += interval;
        let stats = probe.stats();
        let mut o = std::io::stdout().lock();
        if a.json {
            let mut j = top.to_json(a.sort, a.limit, secs);
            j["lost"] = serde_json::json!(stats.lost);
            writeln!(o, "{}", serde_json::to_string(&j)?)?;
        } else {
            if tty {
                write!(o, "\x1b[H\x1b[2J")?;
            }
            let now = snapshot::monotonic_ns();
            writeln!(
                o,
                "latscope top — {} events by {} — {} events in {:.2} s — {}{}",
                kinds.noun(),
                a.by.name(),
                top.total_count(),
                secs,
                latscope_view::svg::fmt_wall(header.wall_ns(now)),
                if stats.lost > 0 { format!(" — {} events lost so far", stats.lost) } else { String::new() }
            )?;
            write!(o, "{}", top.render_text(a.sort, a.limit, secs))?;
            if !tty {
                writeln!(o)?;
            }
        }
        o.flush()?;
        top.reset();
        tables += 1;
        if a.count.is_some_and(|c| tables >= c) {
            break;
        }
    }
    Ok(ExitCode::SUCCESS)
}
