//! `latscope load`: the storage test program of the spectrogram write-up, built in: write (or
//! read) buffers of a given size at a given rate or as fast as possible, optionally with O_SYNC
//! or O_DIRECT, and report what it did with the latency it measured itself (to compare with what
//! latscope measures in the kernel). Also a timer workload (`--op nanosleep`) with known latency.

use anyhow::{bail, Context, Result};
use latscope_event::units::{fmt_bytes, fmt_count, fmt_ns, parse_duration_ns, parse_duration_secs_default, parse_size};
use latscope_workload::{set_comm, Load, LoadOp, LoadReport};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// What each operation is.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// write() a buffer (sequentially, wrapping at --file-size).
    Write,
    /// read() a buffer (sequentially, wrapping; the file is filled first if too short).
    Read,
    /// nanosleep() for --sleep (a latency known in advance; no file).
    Nanosleep,
}

/// A test workload: write (or read) buffers of --size to a file at --rate operations per second
/// (or as fast as possible), for --duration, optionally with O_SYNC / O_DIRECT; then print the
/// operations, bytes, achieved rate and the latency percentiles measured around each call.
///
/// The process is named `latscope-load` (its comm), so `proc.name=latscope-load` selects it in
/// filters. Pacing uses clock_nanosleep, so `evt.type=nanosleep` selects only the operations of
/// `--op nanosleep`.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples (the spectrogram write-up's three tests):
  latscope load -f /mnt/test/f --size 1KiB --rate 1000 -d 30s        # moderate activity
  latscope load -f /mnt/test/f --size 100KiB -d 30s                  # as fast as possible
  latscope load -f /mnt/test/f --size 100KiB --sync --direct -d 30s  # caching disabled
Watch them with:
  latscope spectrogram 'proc.name=latscope-load and evt.is_io_write=true and fd.name contains /mnt'
Timer workload with a known latency:
  latscope load --op nanosleep --sleep 100us --rate 2000 -d 10s")]
pub struct Args {
    /// File to write or read (created if missing; never grows beyond --file-size).
    #[arg(short = 'f', long, value_name = "PATH")]
    pub path: Option<PathBuf>,
    /// The operation.
    #[arg(long, value_enum, default_value = "write")]
    pub op: Op,
    /// Bytes per operation.
    #[arg(short, long, default_value = "1KiB", value_parser = parse_size, value_name = "SIZE")]
    pub size: u64,
    /// Operations per second (0: as fast as possible).
    #[arg(long, default_value_t = 0.0, value_name = "OPS")]
    pub rate: f64,
    /// How long to run (e.g. 10s, 2m; a bare number is seconds).
    #[arg(short, long, default_value = "10s", value_parser = parse_duration_secs_default, value_name = "DURATION")]
    pub duration: u64,
    /// Stop after this many operations (whichever of this and --duration comes first).
    #[arg(short = 'n', long, value_name = "N")]
    pub count: Option<u64>,
    /// Open with O_SYNC (each write returns once the data is on the device).
    #[arg(long)]
    pub sync: bool,
    /// Open with O_DIRECT (bypass the page cache; sizes must be multiples of the block size).
    #[arg(long)]
    pub direct: bool,
    /// Offset at which writes and reads wrap around to the start of the file.
    #[arg(long, default_value = "64MiB", value_parser = parse_size, value_name = "SIZE")]
    pub file_size: u64,
    /// --op nanosleep: how long each sleep asks for.
    #[arg(long, default_value = "100us", value_parser = parse_duration_ns, value_name = "DURATION")]
    pub sleep: u64,
    /// Process name (comm) to run under.
    #[arg(long, default_value = "latscope-load", value_name = "NAME")]
    pub name: String,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: Args) -> Result<ExitCode> {
    let op = match (a.op, &a.path) {
        (Op::Nanosleep, _) => LoadOp::Nanosleep { sleep: Duration::from_nanos(a.sleep) },
        (_, None) => bail!("--path is needed for --op write and --op read"),
        (Op::Write, Some(p)) => LoadOp::Write { path: p.clone() },
        (Op::Read, Some(p)) => LoadOp::Read { path: p.clone() },
    };
    let load = Load {
        op,
        size: a.size,
        rate: a.rate,
        duration: Duration::from_nanos(a.duration),
        count: a.count,
        sync: a.sync,
        direct: a.direct,
        file_size: a.file_size,
    };
    set_comm(&a.name);
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("cannot install signal handlers")?;
    }
    let r = load.run(&stop)?;
    print_report(&a, &r);
    if let Some(e) = &r.error {
        eprintln!("latscope load: stopped after {} ops: {e}", r.ops);
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_report(a: &Args, r: &LoadReport) {
    let secs = r.elapsed.as_secs_f64();
    let h = &r.latency;
    let q = |p: f64| h.value_at_quantile(p).unwrap_or(0);
    if a.json {
        let j = serde_json::json!({
            "op": format!("{:?}", a.op).to_lowercase(),
            "path": a.path,
            "size": a.size,
            "sync": a.sync,
            "direct": a.direct,
            "target_rate": a.rate,
            "ops": r.ops,
            "bytes": r.bytes,
            "duration_s": secs,
            "ops_per_s": r.ops as f64 / secs,
            "bytes_per_s": r.bytes as f64 / secs,
            "latency_ns": {
                "min": h.min().unwrap_or(0),
                "mean": h.mean().unwrap_or(0.0).round() as u64,
                "p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "p999": q(0.999),
                "max": h.max().unwrap_or(0),
            },
            "error": r.error,
        });
        println!("{j}");
        return;
    }
    let what = match a.op {
        Op::Write => format!("write {}", fmt_bytes(a.size)),
        Op::Read => format!("read {}", fmt_bytes(a.size)),
        Op::Nanosleep => format!("nanosleep {}", fmt_ns(a.sleep)),
    };
    let modes: Vec<&str> = [(a.sync, "O_SYNC"), (a.direct, "O_DIRECT")].iter().filter(|m| m.0).map(|m| m.1).collect();
    let modes = if modes.is_empty() { String::new() } else { format!(" ({})", modes.join("|")) };
    let target = if a.rate > 0.0 { format!("target {}", fmt_count(a.rate)) } else { "as fast as possible".into() };
    let place = a.path.as_ref().map(|p| format!(" on {}", p.display())).unwrap_or_default();
    let rate = fmt_count((r.ops as f64 / secs).round());
    println!("latscope load: {what}{place}{modes}: {} ops in {secs:.2} s = {rate} ops/s ({target})", r.ops);
    if a.op != Op::Nanosleep {
        println!("  {} transferred, {}/s", fmt_bytes(r.bytes), fmt_bytes((r.bytes as f64 / secs) as u64));
    }
    if let (Some(min), Some(max)) = (h.min(), h.max()) {
        let p = |v: u64| fmt_ns(v);
        println!(
            "  latency (measured around each call): min {}  p50 {}  p90 {}  p99 {}  p99.9 {}  max {}",
            p(min),
            p(q(0.5)),
            p(q(0.9)),
            p(q(0.99)),
            p(q(0.999)),
            p(max)
        );
    }
}
