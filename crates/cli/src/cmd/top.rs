//! `latscope top`: a drill-down table by process, syscall, file, directory, disk, operation or
//! client, from a recording or live.

use crate::args::{finish_scan, print_warnings, FilterArg, InputArg, JsonArg, LiveArgs, ReadArgs, ScanPlan};
use anyhow::{bail, Result};
use latscope_event::units::parse_duration_secs_default;
use latscope_event::EventKind;
use latscope_view::group::GroupBy;
use latscope_view::top::{parse_percentiles, SortKey, Top};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Drill-down table by process, syscall, file, dir, disk, op or client; from a trace or live.
///
/// Per group: the count, rate, total, mean, p50 and p99 (or --percentiles) and max latency, bytes
/// moved and errors, sorted and limited. Drill down by adding a filter on the group you found
/// (by client, then by operation, then by file).
///
/// Blocking waits (futex, poll, epoll_wait, nanosleep, wait4, ...: idle time their caller chose)
/// are left out of the rows, and a line under the table says how many and how long; --waits ranks
/// them with the work. When nothing but waits matched the filter (evt.type = futex), they are shown.
///
/// From a trace with -r; live without it (root), refreshing every interval. Groups: proc (process
/// name), pid, syscall, op (syscall name or block_read ...), file, dir, disk, class (file, net, ipc,
/// other), client: the peer address of a TCP/UDP socket, port dropped (one row per host, all
/// its connections together; the peer is known from connect/accept or from /proc/net at the start
/// of the recording), else the process (name[pid]); container (its name, else its short id; host
/// outside containers), pod (namespace/name) and cgroup (the cgroup v2 path), from the cgroups the
/// recording found.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  latscope top -r trace.lst --by proc
  latscope top -r trace.lst --by file 'proc.name = elinks' --sort count -n 10
  latscope top -r trace.lst --by syscall --sort p99
  latscope top -r trace.lst --by file --percentiles 50,90,99,99.9 --sort p99.9
  latscope top -r trace.lst --block --by disk
  latscope top --by client                              # live, refreshed every second
  latscope top --by file 'fd.type = file' --interval 5s --count 3
  latscope top --by pid -p \"$(pgrep -o postgres)\" -f   # a server and the backends it forks
  latscope top --by syscall --cgroup system.slice/nginx.service
  latscope top -r trace.lst --by container 'k8s.ns.name = shop'
  latscope top -r trace.lst --by dir --json | jq '.rows[0]'
  latscope top -r slow.lst --by cause 'proc.name = nginx'   # time by cause (record --why)
  latscope top -r slow.lst --by cause --svg causes.svg      # the same as stacked bars, by waker too
  latscope top -r slow.lst --by lock 'proc.name = app'      # which lock, who waited, who held it")]
pub struct Args {
    /// Trace file (or perf script text with --input perf); without it, trace live.
    #[arg(short = 'r', long = "read", value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Input format of -r.
    #[arg(long, value_enum, default_value = "trace")]
    pub input: InputArg,
    #[command(flatten)]
    pub filter: FilterArg,
    /// Group by: proc, pid, syscall, op, file, dir, disk, class, client (the peer address of an
    /// IPv4/IPv6 socket, one row per host, else the process), container, pod, cgroup; or cause:
    /// time by cause (on CPU, run queue, block I/O, lock, ...) with wakers and operations, or
    /// lock: waits by lock (futex address, file and range, semaphore) with their waiters and
    /// holders, from a trace recorded with `record --why`.
    #[arg(long, default_value = "proc", value_parser = TopBy::parse)]
    pub by: TopBy,
    /// Sort by: count, rate, total, avg, a percentile (p50, p99, p99.9, ...), max, bytes, errors,
    /// name.
    #[arg(long, default_value = "total", value_parser = SortKey::parse)]
    pub sort: SortKey,
    /// Latency percentiles shown, e.g. 50,90,99,99.9.
    #[arg(long, default_value = "50,99", value_name = "LIST")]
    pub percentiles: String,
    /// Rows to show.
    #[arg(short = 'n', long, default_value_t = 20)]
    pub limit: usize,
    /// Block requests instead of syscalls.
    #[arg(long)]
    pub block: bool,
    /// Rank blocking waits (nanosleep, poll, select, futex, epoll_wait, wait4, ...) with the work.
    #[arg(long)]
    pub waits: bool,
    #[command(flatten)]
    pub json: JsonArg,
    /// Live: refresh interval (1s, 500ms; a bare number is seconds).
    #[arg(short = 'i', long, default_value = "1s", value_parser = parse_duration_secs_default, value_name = "DURATION")]
    pub interval: u64,
    /// Live: stop after this many tables.
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
    #[command(flatten)]
    pub live: LiveArgs,
    /// With --by cause: also draw the breakdown to FILE (SVG): time by cause as a stacked bar
    /// per operation, blocked time by waker, with a legend.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
}

/// What `--by` ranks: groups of events, or time by cause.
#[derive(Debug, Clone, Copy)]
pub enum TopBy {
    /// Events grouped (see [`GroupBy`]).
    Group(GroupBy),
    /// Time by cause, from the attribution of `record --why`.
    Cause,
    /// Waits by lock, from the attribution of `record --why`.
    Lock,
}

impl TopBy {
    fn parse(s: &str) -> Result<TopBy, String> {
        match s {
            "cause" | "why" => Ok(TopBy::Cause),
            "lock" | "locks" => Ok(TopBy::Lock),
            _ => GroupBy::parse(s).map(TopBy::Group).map_err(|e| e.replace(" or cgroup)", ", cgroup, cause or lock)")),
        }
    }
}

pub fn run(a: Args) -> Result<ExitCode> {
    let by = match a.by {
        TopBy::Group(g) => g,
        TopBy::Cause => return super::top_why::run_cause(&a),
        TopBy::Lock => return super::top_why::run_lock(&a),
    };
    if a.svg.is_some() {
        bail!("--svg draws the breakdown of --by cause; for pictures of latency see `latscope heatmap` and `latscope hist --svg`");
    }
    match &a.file {
        Some(f) => {
            let read = ReadArgs { file: f.clone(), input: a.input, filter: a.filter.clone() };
            run_file(&a, by, &read)
        }
        None if a.input != InputArg::Trace => bail!("--input applies to -r FILE"),
        None => run_live(&a, by),
    }
}

fn run_file(a: &Args, by: GroupBy, read: &ReadArgs) -> Result<ExitCode> {
    let kind = read.kind(a.block);
    let mut cols = vec!["kind", "ts", "lat", "bytes", "nr", "ret"];
    cols.extend(by.columns());
    cols.extend(latscope_view::waits::columns());
    let mut scan = read.open("top", ScanPlan { columns: &cols, zone: None })?;
    let mut top = Top::new(by)
        .with_percentiles(parse_percentiles(&a.percentiles).map_err(anyhow::Error::msg)?)
        .with_waits(a.waits);
    scan.for_each_with_header(|c, header| {
        top.add_chunk(c, kind, header);
        Ok::<(), anyhow::Error>(())
    })?;
    let report = scan.report();
    let secs = report.recorded_secs().unwrap_or_else(|| top.span_secs());
    let mut o = std::io::stdout().lock();
    if a.json.json {
        let mut j = top.to_json(a.sort, a.limit, secs);
        j["source"] = serde_json::json!(read.file.display().to_string());
        writeln!(o, "{}", latscope_event::escape::json_ascii_controls(serde_json::to_string(&j)?))?;
    } else {
        let f = scan.filter();
        let matching = if f.is_match_all() { String::new() } else { format!(" matching '{}'", f.source()) };
        let noun = if kind == EventKind::Block { "block I/O" } else { "syscall" };
        writeln!(o, "{} {noun} events in {secs:.3} s from {}{matching}", top.total_count(), read.file.display())?;
        write!(o, "{}", top.render_text(a.sort, a.limit, secs))?;
    }
    o.flush()?;
    Ok(finish_scan(&report))
}

fn run_live(a: &Args, by: GroupBy) -> Result<ExitCode> {
    let kind = if a.block { EventKind::Block } else { EventKind::Syscall };
    let mut builder = a.live.session(a.filter.parse()?).need_fd_names(matches!(by, GroupBy::File | GroupBy::Dir));
    builder = if a.block { builder.syscalls(latscope_event::SyscallSet::None) } else { builder.block(false) };
    let mut session = builder.start()?;
    print_warnings(session.warnings());
    let tty = std::io::stdout().is_terminal() && !a.json.json;
    let interval = Duration::from_nanos(a.interval.max(10_000_000));
    let header = session.header().clone();
    let mut top = Top::new(by)
        .with_percentiles(parse_percentiles(&a.percentiles).map_err(anyhow::Error::msg)?)
        .with_waits(a.waits);
    let mut tables = 0u64;
    let (mut next, mut last) = (Instant::now() + interval, Instant::now());
    while !session.stop_requested() {
        let wait = next.saturating_duration_since(Instant::now()).min(Duration::from_millis(100));
        // The session's header: it learns the cgroups of containers started since.
        if let Some((c, h)) = session.next_chunk_and_header(wait).map_err(|e| anyhow::anyhow!("{e}"))? {
            top.add_chunk(c, kind, h);
        }
        if Instant::now() < next {
            continue;
        }
        let secs = last.elapsed().as_secs_f64();
        (last, next) = (Instant::now(), next + interval);
        let stats = session.stats();
        let (lost, not_followed) = (stats.lost, stats.not_followed);
        let mut o = std::io::stdout().lock();
        if a.json.json {
            let mut j = top.to_json(a.sort, a.limit, secs);
            j["lost"] = serde_json::json!(lost);
            j["not_followed"] = serde_json::json!(not_followed);
            writeln!(o, "{}", latscope_event::escape::json_ascii_controls(serde_json::to_string(&j)?))?;
        } else {
            if tty {
                write!(o, "\x1b[H\x1b[2J")?;
            }
            let now = header.wall_ns(latscope_probe::snapshot::monotonic_ns());
            let mut lost = if lost > 0 { format!(" — {lost} events lost so far") } else { String::new() };
            if not_followed > 0 {
                lost.push_str(&format!(" — {not_followed} child processes not followed (pid filter full)"));
            }
            let noun = if a.block { "block I/O" } else { "syscall" };
            let when = latscope_view::svg::fmt_wall(now);
            writeln!(
                o,
                "latscope top — {noun} events by {} — {} events in {secs:.2} s — {when}{lost}",
                by.name(),
                top.total_count()
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
