//! `latscope replay run`.

use super::push::Push;
use super::{progress_line, Place, Xattrs};
use anyhow::{Context, Result};
use latscope_event::units::{fmt_ns, parse_duration_ns};
use latscope_live::{Recorder, RecorderOptions, SessionBuilder, SyscallSet};
use latscope_replay::{read_plan, InitOptions, Live, RunOptions};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Replay a plan in its initialised sandbox: one worker per recorded thread (threads that never
/// ran at the same time share one), each result compared with the recorded one. Prints the
/// statistics: operations by kind with latency percentiles, bytes, divergences (succeeded when
/// recorded and failed in the replay, or the reverse, or another size) by operation and errno
/// with the first few shown, skipped and refused operations, wall time, ops/s, the highest load
/// average, and for timed runs the lateness of operations against their schedule. Ctrl-C stops
/// cleanly with the statistics so far.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  latscope replay run plan.lsr                          # as fast as dependencies allow
  latscope replay run plan.lsr --speed 1                # at the recorded pace (2: twice as fast)
  latscope replay run plan.lsr --speed 1 --realtime     # on time on a busy machine (SCHED_FIFO, root)
  latscope replay run plan.lsr --init --drop-caches --stats run.json --json
  latscope replay run plan.lsr --user postgres          # after setup, as that user
  latscope replay run plan.lsr --speed 1 --graphite graphite.example.com:2003 --graphite-interval 5s")]
pub struct RunArgs {
    /// Plan file.
    #[arg(value_name = "PLAN")]
    plan: PathBuf,
    #[command(flatten)]
    place: Place,
    #[command(flatten)]
    xattrs: Xattrs,
    /// Speed: 0 as fast as dependencies allow, 1 the recorded pace, 2 twice as fast, 0.5 half.
    #[arg(short, long, default_value_t = 0.0, value_name = "FACTOR")]
    speed: f64,
    /// Build the starting tree first (what 'latscope replay init' does).
    #[arg(long)]
    init: bool,
    /// Drop the page cache before starting (after a sync; needs root).
    #[arg(long)]
    drop_caches: bool,
    /// Run the workers under the real-time policy SCHED_FIFO, so that other load on the
    /// machine does not make operations late (timed runs: --speed above 0; needs root).
    #[arg(long)]
    realtime: bool,
    /// Run as this user (name or uid) once the sandbox is open; it must be able to write it.
    #[arg(long, value_name = "USER")]
    user: Option<String>,
    /// Also write the statistics to this file (text, or JSON with --json).
    #[arg(long, value_name = "FILE")]
    stats: Option<PathBuf>,
    /// Also record the replay with latscope's probes into this trace file (its syscalls and
    /// every block request); the replay's workers are the threads named replay-N.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Push live counters of the run to this Graphite server (carbon's plaintext protocol,
    /// HOST:PORT, usually port 2003): ops/s, operations done, lateness p50/p99/max of the
    /// interval, divergences and errors, every --graphite-interval and at the end.
    #[arg(long, value_name = "HOST:PORT")]
    graphite: Option<String>,
    /// Interval of the --graphite pushes (1s or more).
    #[arg(long, default_value = "10s", value_parser = parse_duration_ns, value_name = "DURATION")]
    graphite_interval: u64,
    /// Metric path prefix of --graphite [default: latscope.replay.TEST, TEST the plan's test
    /// name (prepare --name) or its file name without extension].
    #[arg(long, value_name = "PREFIX")]
    graphite_prefix: Option<String>,
    /// Statistics as JSON (what 'latscope replay compare' reads).
    #[arg(long)]
    json: bool,
    /// No progress line.
    #[arg(short, long)]
    quiet: bool,
}

pub fn replay(a: RunArgs) -> Result<ExitCode> {
    if let Some(t) = &a.trace {
        return record_replay(t);
    }
    crate::args::check_output(Some(&a.plan), a.stats.as_deref())?;
    let plan = read_plan(&a.plan)?;
    let user = a.user.as_deref().map(latscope_replay::sandbox::lookup_user).transpose()?;
    if a.init {
        let opts = InitOptions {
            root: a.place.root.clone(),
            owner: user,
            xattrs: a.xattrs.xattr_namespaces,
            ..Default::default()
        };
        let rep = latscope_replay::init(&plan, &opts)?;
        super::tree::warn_xattrs(&rep);
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("cannot install signal handlers")?;
    }
    let mut push = match &a.graphite {
        Some(addr) => {
            let stem = a.plan.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
            let name = plan.meta.sandbox.name.clone().unwrap_or(stem);
            Some(Push::new(addr, a.graphite_interval, a.graphite_prefix.as_deref(), &name)?)
        }
        None => None,
    };
    let line = progress_line(a.quiet);
    let mut tick = |l: &Live| {
        if let Some(p) = &mut push {
            p.tick(l);
        }
        if let Some(p) = &line {
            let pct = if l.total > 0 { 100.0 * l.done as f64 / l.total as f64 } else { 100.0 };
            p(&format!(
                "replay: {pct:5.1}%  {} of {} operations  {} divergences  {}",
                l.done,
                l.total,
                l.divergences,
                fmt_ns(l.elapsed_ns)
            ));
        }
    };
    let mut opts = RunOptions {
        root: a.place.root,
        speed: a.speed,
        drop_caches: a.drop_caches,
        realtime: a.realtime,
        user,
        user_name: a.user,
        stop: Some(&stop),
        on_tick: Some(&mut tick),
        plan_name: a.plan.display().to_string(),
        xattrs: a.xattrs.xattr_namespaces,
        ..Default::default()
    };
    let stats = latscope_replay::run(&plan, &mut opts);
    drop(opts);
    if let Some(p) = push {
        p.finish();
    }
    let stats = stats?;
    if line.is_some() {
        eprint!("\r\x1b[K");
    }
    let out = if a.json { serde_json::to_string_pretty(&stats)? + "\n" } else { stats.text() };
    print!("{out}");
    if let Some(f) = &a.stats {
        crate::args::write_output(Some(f), out.as_bytes())?;
    }
    Ok(if stats.interrupted { ExitCode::from(130) } else { ExitCode::SUCCESS })
}

/// The replay, run by a child (this command without --trace) that latscope's probes record
/// into `file` (the probes never record the process that runs them): every syscall (munmap
/// and msync name no file) and every block request. The child's output is the replay's.
fn record_replay(file: &std::path::Path) -> Result<ExitCode> {
    let mut argv: Vec<String> = std::env::args().collect();
    argv[0] = std::env::current_exe().context("cannot find the latscope executable")?.display().to_string();
    let i = argv.iter().position(|a| a == "--trace" || a.starts_with("--trace=")).unwrap_or(argv.len());
    let n = if argv.get(i).is_some_and(|a| a == "--trace") { 2 } else { 1 };
    argv.drain(i..(i + n).min(argv.len()));
    let session = SessionBuilder::new()
        .syscalls(SyscallSet::All)
        .ring_bytes(256 << 20)
        .command(argv)
        .start()
        .context("cannot record the replay (--trace)")?;
    let writer = latscope_trace::ThreadedTraceWriter::create(file, session.header())
        .with_context(|| format!("cannot create {}", file.display()))?;
    let rec = Recorder::new(session, writer, RecorderOptions::default()).run(|_| {})?;
    eprintln!("latscope: recorded {} events of the replay to {} ({} lost)", rec.events, file.display(), rec.stats.lost);
    Ok(ExitCode::from(rec.command_status.unwrap_or(1).clamp(0, 255) as u8))
}
