//! `latscope top`: a drill-down table by process, syscall, file, directory, disk, operation or
//! client, from a recording ([`file`]) or live ([`live`]).

mod file;
mod live;

use crate::args::{FilterArg, InputArg, JsonArg, LiveArgs, ReadArgs};
use anyhow::{bail, Result};
use latscope_event::units::parse_duration_secs_default;
use latscope_view::group::GroupBy;
use latscope_view::top::{parse_percentiles, SortKey, Top};
use std::path::PathBuf;
use std::process::ExitCode;

/// Drill-down table by process, syscall, file, dir, disk, op or client; from a trace or live.
///
/// Per group: the count, rate, total, mean, p50 and p99 (or --percentiles) and max latency, bytes
/// moved and errors, sorted and limited. Drill down by adding a filter on the group you found
/// (by client, then by operation, then by file).
///
/// The first line says what was counted: idle waits (futex, poll, epoll_wait, nanosleep, wait4,
/// ...: time their caller chose to wait) are left out, as in every view, and a line under the
/// table says how many and how long; --waits ranks them with the work. When nothing but waits
/// matched the filter (evt.type = futex), they are shown. Rates divide by the time covered: the
/// recording, or the part of it a filter's time window (evt.time) selects.
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
  latscope top -r trace.lst 'evt.time >= 2026-11-22T22:30:13Z and evt.time < 2026-11-22T22:30:14Z'
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
    #[command(flatten)]
    pub source: Source,
    #[command(flatten)]
    pub rank: Rank,
    #[command(flatten)]
    pub output: Output,
    #[command(flatten)]
    pub refresh: Refresh,
    #[command(flatten)]
    pub live: LiveArgs,
}

/// What to read: a trace (or perf text), which events.
#[derive(clap::Args, Debug)]
pub struct Source {
    /// Trace file (or perf script text with --input perf); without it, trace live.
    #[arg(short = 'r', long = "read", value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Input format of -r.
    #[arg(long, value_enum, default_value = "trace")]
    pub input: InputArg,
    #[command(flatten)]
    pub filter: FilterArg,
    /// Block requests instead of syscalls.
    #[arg(long)]
    pub block: bool,
}

/// How to group, count, sort and cut the table.
#[derive(clap::Args, Debug)]
#[command(next_help_heading = "Table")]
pub struct Rank {
    /// Group by: proc, pid, syscall, op, file, dir, disk, class, client (the peer address of an
    /// IPv4/IPv6 socket, one row per host, else the process), container, pod, cgroup; or cause:
    /// time by cause (on CPU, run queue, block I/O, lock, ...) with wakers and operations, or
    /// lock: waits by lock (futex address, file and range, semaphore) with their waiters and
    /// holders, from a trace recorded with `record --why`.
    #[arg(long, default_value = "proc", value_parser = TopBy::parse)]
    pub by: TopBy,
    /// Sort by: count, rate, total, avg, a percentile (p50, p99, p99.9, ...; shown as a column
    /// when --percentiles lacks it), max, bytes, errors, name.
    #[arg(long, default_value = "total", value_parser = SortKey::parse)]
    pub sort: SortKey,
    /// Latency percentiles shown, e.g. 50,90,99,99.9.
    #[arg(long, default_value = "50,99", value_name = "LIST")]
    pub percentiles: String,
    /// Rows to show.
    #[arg(short = 'n', long, default_value_t = 20)]
    pub limit: usize,
    /// Rank idle waits (nanosleep, poll, select, futex, epoll_wait, wait4, ...) with the work.
    #[arg(long)]
    pub waits: bool,
}

/// Where the table goes.
#[derive(clap::Args, Debug)]
#[command(next_help_heading = "Output")]
pub struct Output {
    #[command(flatten)]
    pub json: JsonArg,
    /// With --by cause: also draw the breakdown to FILE (SVG): time by cause as a stacked bar
    /// per operation, blocked time by waker, with a legend.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
}

/// Live tables: how often, how many.
#[derive(clap::Args, Debug)]
#[command(next_help_heading = "Live")]
pub struct Refresh {
    /// Live: refresh interval (1s, 500ms; a bare number is seconds).
    #[arg(short = 'i', long, default_value = "1s", value_parser = parse_duration_secs_default, value_name = "DURATION")]
    pub interval: u64,
    /// Live: stop after this many tables.
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
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

impl Args {
    /// An empty table with the options' grouping, percentiles and counting rule.
    fn table(&self, by: GroupBy) -> Result<Top> {
        Ok(Top::new(by)
            .with_percentiles(parse_percentiles(&self.rank.percentiles).map_err(anyhow::Error::msg)?)
            .with_waits(self.rank.waits))
    }

    /// The recording read, when there is one.
    fn read(&self, file: &std::path::Path) -> ReadArgs {
        ReadArgs { file: file.to_path_buf(), input: self.source.input, filter: self.source.filter.clone() }
    }
}

pub fn run(a: Args) -> Result<ExitCode> {
    let by = match a.rank.by {
        TopBy::Group(g) => g,
        TopBy::Cause => return super::top_why::run_cause(&a),
        TopBy::Lock => return super::top_why::run_lock(&a),
    };
    if a.output.svg.is_some() {
        bail!("--svg draws the breakdown of --by cause; for pictures of latency see `latscope heatmap` and `latscope hist --svg`");
    }
    match &a.source.file {
        Some(f) => file::run_file(&a, by, &a.read(f)),
        None if a.source.input != InputArg::Trace => bail!("--input applies to -r FILE"),
        None => live::run_live(&a, by),
    }
}
