//! `latscope replay`: prepare a plan from a trace, build its starting tree, replay it, compare runs.

use anyhow::{Context, Result};
use latscope_event::units::{fmt_bytes, fmt_ns};
use latscope_replay::{
    describe_plan, read_plan, write_plan, InitOptions, Live, PrepareOptions, RunOptions, SandboxChoice,
};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Replay recorded file I/O in a sandbox: the same operations, threads and dependencies, at
/// the recorded speed or as fast as possible, with statistics.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  latscope replay prepare -r trace.lst -o plan.lsr --root /mnt/test/sb
  latscope replay init plan.lsr
  latscope replay run plan.lsr --speed 1 --stats run.json --json
  latscope replay compare before.json after.json
Steps: prepare (on any machine) -> init (before every run) -> run -> compare; purge empties the trash.")]
pub struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Subcommand, Debug)]
enum Cmd {
    /// Make a replay plan from a trace: operations per thread, dependencies, sandbox paths.
    Prepare(PrepareArgs),
    /// Describe a plan: operations, starting tree, sandbox, what was left out.
    Info(InfoArgs),
    /// Build a plan's starting tree in a fresh sandbox (before every run).
    Init(InitArgs),
    /// Empty the trash where init moves what earlier runs of the test left.
    Purge(PurgeArgs),
    /// Replay a plan in its initialised sandbox and report what happened.
    Run(RunArgs),
}

/// Make a replay plan from a trace: each recorded thread's file operations in order, the
/// dependencies that keep cross-thread causality, every path mapped into a sandbox, every fd
/// resolved, the starting tree. Prints what was left out and why. Refuses traces that are not
/// complete for replay (lost events, corrupt blocks), saying why.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  latscope replay prepare -r trace.lst -o plan.lsr --root /mnt/test/sb
  latscope replay prepare -r trace.lst -o plan.lsr --name nightly        # <mount>/.latscope/nightly/
  latscope replay prepare -r trace.lst -o plan.lsr --root /tmp/sb 'proc.name = postgres'")]
#[command(group(clap::ArgGroup::new("sandbox").required(true).args(["root", "name"])))]
struct PrepareArgs {
    /// Trace file to read.
    #[arg(short = 'r', long = "read", value_name = "TRACE")]
    trace: PathBuf,
    /// Plan file to write.
    #[arg(short = 'o', long = "output", value_name = "PLAN")]
    output: PathBuf,
    /// Replay every recorded path under this directory (recorded /a/b becomes DIR/a/b).
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
    /// Replay under <mount>/.latscope/NAME/ for each recorded mount.
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
    /// Print the plan's description as JSON.
    #[arg(long)]
    json: bool,
    /// Filter expression: the events to replay (see 'latscope fields').
    #[arg(value_name = "FILTER")]
    filter: Option<String>,
}

/// Describe a plan.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  latscope replay info plan.lsr
  latscope replay info plan.lsr --json | jq .counts")]
struct InfoArgs {
    /// Plan file.
    #[arg(value_name = "PLAN")]
    plan: PathBuf,
    /// JSON.
    #[arg(long)]
    json: bool,
}

/// Build a plan's starting tree in a fresh sandbox: every file and directory used before it is
/// created, each file as large as what is read of it before being written, filled with
/// generated non-zero data. What an earlier init of the same test left moves to a trash
/// directory ('latscope replay purge' empties it). Run it before every replay.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  latscope replay init plan.lsr
  latscope replay init plan.lsr --root /mnt/xfs/sb      # elsewhere than the plan says (--root plans)
  latscope replay init plan.lsr --user postgres         # for 'run --user postgres'")]
struct InitArgs {
    /// Plan file.
    #[arg(value_name = "PLAN")]
    plan: PathBuf,
    #[command(flatten)]
    place: Place,
    /// Give the tree to this user (name or uid), for runs as that user.
    #[arg(long, value_name = "USER")]
    user: Option<String>,
    /// No progress line.
    #[arg(short, long)]
    quiet: bool,
    /// Print what was done as JSON.
    #[arg(long)]
    json: bool,
}

/// Where the sandbox is, if not where the plan says.
#[derive(clap::Args, Debug)]
struct Place {
    /// Use this sandbox directory instead of the plan's (plans prepared with --root).
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
}

/// Empty the sandbox's trash (what init moved away).
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  latscope replay purge plan.lsr")]
struct PurgeArgs {
    /// Plan file (says where the sandbox is).
    #[arg(value_name = "PLAN")]
    plan: PathBuf,
    #[command(flatten)]
    place: Place,
}

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
  latscope replay run plan.lsr --init --drop-caches --stats run.json --json
  latscope replay run plan.lsr --user postgres          # after setup, as that user")]
struct RunArgs {
    /// Plan file.
    #[arg(value_name = "PLAN")]
    plan: PathBuf,
    #[command(flatten)]
    place: Place,
    /// Speed: 0 as fast as dependencies allow, 1 the recorded pace, 2 twice as fast, 0.5 half.
    #[arg(short, long, default_value_t = 0.0, value_name = "FACTOR")]
    speed: f64,
    /// Build the starting tree first (what 'latscope replay init' does).
    #[arg(long)]
    init: bool,
    /// Drop the page cache before starting (after a sync; needs root).
    #[arg(long)]
    drop_caches: bool,
    /// Run as this user (name or uid) once the sandbox is open; it must be able to write it.
    #[arg(long, value_name = "USER")]
    user: Option<String>,
    /// Also write the statistics to this file (text, or JSON with --json).
    #[arg(long, value_name = "FILE")]
    stats: Option<PathBuf>,
    /// Statistics as JSON (what 'latscope replay compare' reads).
    #[arg(long)]
    json: bool,
    /// No progress line.
    #[arg(short, long)]
    quiet: bool,
}

pub fn run(a: Args) -> Result<ExitCode> {
    match a.cmd {
        Cmd::Run(a) => replay(a),
        Cmd::Prepare(a) => prepare(a),
        Cmd::Info(a) => info(a),
        Cmd::Init(a) => init(a),
        Cmd::Purge(a) => purge(a),
    }
}

/// A progress line on stderr (only on a terminal), at most every 100 ms.
fn progress_line(quiet: bool) -> Option<impl Fn(&str)> {
    use std::io::IsTerminal;
    if quiet || !std::io::stderr().is_terminal() {
        return None;
    }
    let last = std::sync::Mutex::new(std::time::Instant::now() - std::time::Duration::from_secs(1));
    Some(move |s: &str| {
        let mut l = last.lock().unwrap_or_else(|e| e.into_inner());
        if l.elapsed() >= std::time::Duration::from_millis(100) {
            *l = std::time::Instant::now();
            eprint!("\r\x1b[K{s}");
        }
    })
}

fn init(a: InitArgs) -> Result<ExitCode> {
    let plan = read_plan(&a.plan)?;
    let owner = a.user.as_deref().map(latscope_replay::sandbox::lookup_user).transpose()?;
    let line = progress_line(a.quiet);
    let progress = |done: u64, total: u64| {
        if let Some(l) = &line {
            l(&format!("init: {} of {} written", fmt_bytes(done), fmt_bytes(total)));
        }
    };
    let opts = InitOptions { root: a.place.root, owner, progress: Some(&progress) };
    let rep = latscope_replay::init(&plan, &opts)?;
    if line.is_some() {
        eprint!("\r\x1b[K");
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rep)?);
        return Ok(ExitCode::SUCCESS);
    }
    for t in &rep.trashed {
        println!("moved the previous tree to {}", t.display());
    }
    println!(
        "created {} directories, {} files ({}), {} symlinks in {} ({})",
        rep.dirs,
        rep.files,
        fmt_bytes(rep.bytes),
        rep.symlinks,
        rep.roots.join(", "),
        fmt_ns(rep.elapsed_ns)
    );
    Ok(ExitCode::SUCCESS)
}

fn replay(a: RunArgs) -> Result<ExitCode> {
    let plan = read_plan(&a.plan)?;
    let user = a.user.as_deref().map(latscope_replay::sandbox::lookup_user).transpose()?;
    if a.init {
        let opts = InitOptions { root: a.place.root.clone(), owner: user, progress: None };
        latscope_replay::init(&plan, &opts)?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("cannot install signal handlers")?;
    }
    let line = progress_line(a.quiet);
    let mut tick = |l: &Live| {
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
        user,
        user_name: a.user,
        stop: Some(&stop),
        on_tick: Some(&mut tick),
        plan_name: a.plan.display().to_string(),
    };
    let stats = latscope_replay::run(&plan, &mut opts)?;
    if line.is_some() {
        eprint!("\r\x1b[K");
    }
    let out = if a.json { serde_json::to_string_pretty(&stats)? + "\n" } else { stats.text() };
    print!("{out}");
    if let Some(f) = &a.stats {
        std::fs::write(f, &out).with_context(|| format!("cannot write {}", f.display()))?;
    }
    Ok(if stats.interrupted { ExitCode::from(130) } else { ExitCode::SUCCESS })
}

fn purge(a: PurgeArgs) -> Result<ExitCode> {
    let plan = read_plan(&a.plan)?;
    let spec = latscope_replay::sandbox_spec(&plan, a.place.root.as_deref())?;
    let removed = latscope_replay::sandbox::purge(&spec)?;
    for r in &removed {
        println!("removed {}", r.display());
    }
    if removed.is_empty() {
        println!("the trash is empty");
    }
    Ok(ExitCode::SUCCESS)
}

fn prepare(a: PrepareArgs) -> Result<ExitCode> {
    let sandbox = match (a.root, a.name) {
        (Some(d), _) => SandboxChoice::Root(latscope_replay::sandbox::absolute(&d)?),
        (None, Some(n)) => SandboxChoice::Name(n),
        (None, None) => unreachable!("clap requires one"),
    };
    let opts = PrepareOptions { sandbox, filter: a.filter };
    let plan = latscope_replay::prepare(&a.trace, &opts)?;
    let bytes = write_plan(&plan, &a.output).context("cannot write the plan")?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&plan.meta)?);
    } else {
        print!("{}", describe_plan(&plan));
        println!("wrote {} ({bytes} bytes)", a.output.display());
    }
    Ok(ExitCode::SUCCESS)
}

fn info(a: InfoArgs) -> Result<ExitCode> {
    let plan = read_plan(&a.plan)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&plan.meta)?);
    } else {
        print!("{}", describe_plan(&plan));
    }
    Ok(ExitCode::SUCCESS)
}
