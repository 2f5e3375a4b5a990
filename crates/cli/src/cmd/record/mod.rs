//! `latscope record`: probes -> (filter) -> trace file.

mod summary;

use super::started::{announce, Announce};
use crate::args::{print_warnings, FilterArg, LiveArgs};
use anyhow::{Context, Result};
use latscope_event::units::{fmt_count, parse_duration_ns, parse_duration_secs_default};
use latscope_live::{LiveSession, Recorder, RecorderOptions, WRITER_QUEUE_BLOCKS};
use latscope_trace::ThreadedTraceWriter;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Record syscalls (with latency, fd, path, sizes, offsets, flags, result) and block requests
/// (latency, queue time, size, sector, device, op) into a compressed, crash-safe trace file.
///
/// With a COMMAND, it is started once the probes are attached, recorded with its children until
/// it exits, and `record` exits with its status (128 + N when a signal N ended it). Stopped early
/// (Ctrl-C, SIGTERM, --duration, an error), record stops the command too: the signal to its
/// process group, then SIGKILL after a grace period; --detach leaves it running instead.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  latscope record -w trace.lst                        # everything, for up to 1 h or until Ctrl-C
  latscope record -w trace.lst --duration 30s -c postgres
  latscope record -w trace.lst --syscalls io -p 1234 -p 1240
  latscope record -w svc.lst -p \"$(pgrep -o nginx)\" -f   # nginx, its workers and their children
  latscope record -w svc.lst --cgroup system.slice/nginx.service   # or: --cgroup nginx.service
  latscope record -w trace.lst 'fd.type = file and evt.latency > 100us'
  latscope record -w build.lst -- make -j2            # a command from start to exit, with its children
  latscope record -w slow.lst --why-above 1ms -- ./server   # and why each call over 1 ms took its time
  latscope record -w slow.lst --why-above 10ms --stacks -p 1234   # with the stacks of those calls
  latscope record -w cpu.lst --profile 99 --call-graph fp -p 1234   # on-CPU samples, frame pointers only
  latscope record -w run.lst --json=run.json -- ./bench     # the summary for scripts, apart from its output
  ssh host latscope record -w - -d 10s | latscope hist -r -   # a remote machine, as a stream
  latscope record -w /var/tmp/flight --ring 30s --why-above 50ms \\
      --trigger 'slow: evt.latency > 150ms and evt.wait in (work, on_someone)'
                                                      # a flight recorder: the 30 s before each slow call
                                                      # (evt.wait: not a sleep or a wait for work)
  latscope record -w dumps --ring 1m --trigger 'pg: p99 of fsync on /var/lib/pg over 10s > 20ms' \\
      --trigger 'errs: errors > 100/s' --before 30s --after 10s --min-gap 5m --keep 50
  latscope trigger slow                               # fire it by hand (or: --trigger 'usr: signal USR1')
  latscope record -w /data/capture --rotate 1GiB --keep 24   # days of capture, one complete file per GiB")]
pub struct Args {
    /// Trace file to write, '-' for standard output. Created with mode 0600 (a trace holds every
    /// process's paths and command lines) and put in place once the probes are attached; a file
    /// already there is kept as FILE.old; a file another recorder is writing is refused. A FIFO
    /// or pipe gets 5 s to find a reader, and a reader that takes nothing for 5 s once the
    /// recording is over (Ctrl-C, --duration) is given up, with an error.
    #[arg(short = 'w', long = "write", value_name = "FILE")]
    pub file: PathBuf,
    /// Stop after this long (e.g. 30s, 5m, 1h; a bare number is seconds). Default 1h; with
    /// --ring or --rotate, until stopped.
    #[arg(short = 'd', long, value_parser = parse_duration_secs_default, value_name = "DURATION")]
    pub duration: Option<u64>,
    #[command(flatten)]
    pub live: LiveArgs,
    /// Do not record block requests.
    #[arg(long)]
    pub no_block: bool,
    /// Write a block at least this often: after a crash (kill -9, power loss) at most this much
    /// of the recording is lost.
    #[arg(long, default_value = "1s", value_parser = parse_duration_ns, value_name = "DURATION")]
    pub flush_every: u64,
    /// Record why each syscall took its time: its latency split into on CPU, run queue, block
    /// I/O, lock, pipe/socket, timer, page fault, other and unknown, with the waking
    /// thread and the preempting one (see docs/WHY.md; view with `events --why`, `why -r`).
    #[arg(long)]
    pub why: bool,
    /// With --why (implied): only calls at least this slow carry the breakdown (e.g. 1ms).
    #[arg(long, value_parser = parse_duration_ns, value_name = "DURATION")]
    pub why_above: Option<u64>,
    /// With --why (implied): calls that carry a breakdown and blocked also carry the kernel stack
    /// where they blocked longest and their user stack (view with `why --stacks`, `--folded`,
    /// `--flame`). Off by default: a stack costs a walk of the kernel's unwinder (about 1 us);
    /// with --why-above, only calls at or above the threshold take one.
    #[arg(long)]
    pub stacks: bool,
    /// Also sample every traced thread on its CPU HZ times a second (a CPU-clock perf event on
    /// each CPU, as `perf record -F HZ`), with its kernel and user stacks (--why --stacks
    /// implied): where the CPU time went (view with `why --on-cpu`, `--flame`, `--folded`; both
    /// on and off CPU in one graph with `--hot-cold`). 1-1000.
    #[arg(long, value_name = "HZ", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub profile: Option<u32>,
    #[command(flatten)]
    pub call_graph: crate::args::CallGraphArg,
    /// Accepted for scripts written when stacks were on by default: stacks are off unless
    /// --stacks.
    #[arg(long, hide = true, conflicts_with = "stacks")]
    pub no_stacks: bool,
    /// Leave the command running when recording stops before it exits.
    #[arg(long)]
    pub detach: bool,
    /// No progress line and no summary (errors and warnings still go to stderr).
    #[arg(short, long)]
    pub quiet: bool,
    /// The final summary as one JSON object: `--json=FILE` writes it to FILE (what scripts should
    /// use); bare `--json` prints it on stdout when no COMMAND is given, and with a COMMAND (whose
    /// output is on stdout) as the last line of stderr, never mixed with the command's output.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "-", value_name = "FILE")]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub keep: super::flight::KeepArgs,
    #[command(flatten)]
    pub filter: FilterArg,
    /// Command to run and record from start to exit (with its children).
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// The live session of a recording (to a file, a ring or rotating files).
pub fn start_session(a: &Args) -> Result<LiveSession> {
    if a.flush_every < 10_000_000 {
        anyhow::bail!("--flush-every must be at least 10ms");
    }
    let why = a.why_above.or((a.why || a.stacks || a.profile.is_some()).then_some(0));
    let mut session = a
        .live
        .session(a.filter.parse()?)
        .block(!a.no_block)
        .command(a.command.clone())
        .why(why)
        .why_stacks(a.stacks || a.profile.is_some())
        .profile(a.profile)
        .unwind_copy(a.call_graph.call_graph)
        .start()?;
    print_warnings(session.warnings());
    if a.live.follow && !a.quiet && a.json.is_none() {
        let n = session.followed_at_start().len();
        eprintln!("latscope: following {} given process(es) and the {n} running below them", a.live.pids.len());
    }
    if a.detach {
        session.detach_command();
    }
    Ok(session)
}

pub fn run(mut a: Args) -> Result<ExitCode> {
    if a.keep.active() {
        if a.json.as_deref().is_some_and(|j| j.as_os_str() != "-") {
            anyhow::bail!(
                "with --ring or --rotate, --json prints one JSON line per event on standard output: use bare --json"
            );
        }
        return super::flight::run(a);
    }
    a.keep.check()?;
    let duration = *a.duration.get_or_insert(3_600_000_000_000);
    if let Some(j) = a.json.as_deref().filter(|j| j.as_os_str() != "-") {
        crate::args::check_output(Some(&a.file), Some(j))?;
    }
    let session = start_session(&a)?;
    let command_pid = session.command_pid();
    // --duration holds from here, even for a header that waits for a slow reader.
    if let Some(end) = std::time::Instant::now().checked_add(Duration::from_nanos(duration)) {
        latscope_trace::stop_at(end);
    }
    // A recording that fails (a full disk, a reader gone or stalled) has already stopped the
    // command it ran: say so, and that what reached the file is still a readable trace.
    let stopped = |e: anyhow::Error, wrote: bool| {
        let kept = match a.file.to_str() {
            Some("-") => String::new(),
            _ if !wrote => String::new(),
            _ => format!("; the blocks already in {} stay readable", a.file.display()),
        };
        let what = match command_pid {
            Some(pid) if !a.detach => format!(
                "the recording stopped, and with it the recorded command (pid {pid}, SIGTERM to its \
                 process group; --detach leaves it running){kept}"
            ),
            _ if kept.is_empty() => return e,
            _ => format!("the recording stopped{kept}"),
        };
        e.context(crate::Hint(what))
    };
    let writer = ThreadedTraceWriter::create_with(&a.file, session.header(), Default::default(), WRITER_QUEUE_BLOCKS)
        .context("cannot create the trace file")
        .map_err(|e| stopped(e, false))?;
    let opts = RecorderOptions {
        flush_every: Duration::from_nanos(a.flush_every),
        duration: Some(Duration::from_nanos(duration)),
        ..Default::default()
    };
    let how = match (&a.json, a.quiet) {
        (Some(j), _) if j.as_os_str() == "-" => Announce::JsonStderr,
        (_, true) => Announce::Quiet,
        _ => Announce::Text,
    };
    let attach_s = session.start_times().total().as_secs_f64();
    announce(&session, &a.file, how);
    let progress = !a.quiet && std::io::stderr().is_terminal();
    let rec = Recorder::new(session, writer, opts).run(|p| {
        if progress {
            let events = fmt_count(p.events as f64);
            eprint!("\rrecording {:>6.1}s  {events:>8} events  {} lost  ", p.elapsed.as_secs_f64(), p.lost);
        }
    });
    if progress {
        eprint!("\r{:60}\r", "");
    }
    let rec = rec.map_err(|e| stopped(e.into(), true))?;

    summary::report(&a, &rec, attach_s)?;
    if let (true, None, Some(pid)) = (a.detach, rec.command_status, command_pid) {
        eprintln!("latscope: recording stopped; the command (pid {pid}) is left running (--detach)");
    }
    // The command's status, when it ran to its end, is record's: `record -- make && ...` works.
    Ok(match rec.command_status {
        Some(st) if !a.command.is_empty() => ExitCode::from(st.clamp(0, 255) as u8),
        _ => ExitCode::SUCCESS,
    })
}
