//! `latscope record`: probes -> (filter) -> trace file.

use crate::input::parse_filter;
use anyhow::{bail, Context, Result};
use latscope_event::units::{fmt_bytes, fmt_count, parse_duration_secs_default, parse_size};
use latscope_event::{EventBatch, EventKind};
use latscope_filter::{EvalContext, Filter};
use latscope_probe::{snapshot, Probe, ProbeConfig, SyscallSel};
use latscope_trace::{Summary, ThreadedTraceWriter};
use std::ffi::CString;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Events per trace block: large enough to compress well, small enough that a crash loses little.
const BLOCK_EVENTS: usize = 65_536;
/// A block is written at least this often, so a kill -9 loses at most this much.
const BLOCK_INTERVAL: Duration = Duration::from_secs(1);

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SysMode {
    /// Every syscall.
    All,
    /// Syscalls that take or return a file descriptor or a path, and syncs.
    Io,
    /// No syscalls (block requests and processes only).
    None,
}

/// Record syscalls (with latency, fd, path, sizes, offsets, flags, result) and block requests
/// (latency, queue time, size, sector, device, op) into a compressed, crash-safe trace file.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  latscope record -w trace.lst                        # everything, for up to 1 h or until Ctrl-C
  latscope record -w trace.lst --duration 30s -c postgres
  latscope record -w trace.lst --syscalls io -p 1234 -p 1240
  latscope record -w trace.lst 'fd.type = file and evt.latency > 100us'
  latscope record -w build.lst -- make -j2            # a command from start to exit, with its children")]
pub struct Args {
    /// Trace file to write (replaced if it exists).
    #[arg(short = 'w', long = "write", value_name = "FILE")]
    pub file: PathBuf,
    /// Stop after this long (e.g. 30s, 5m, 1h; a bare number is seconds).
    #[arg(short = 'd', long, default_value = "1h", value_parser = parse_duration_secs_default, value_name = "DURATION")]
    pub duration: u64,
    /// Only these processes (repeatable). Block requests are recorded for every process (their
    /// issuer is often a kernel thread): narrow them with a filter such as `blk.disk = sda`.
    #[arg(short = 'p', long = "pid", value_name = "PID")]
    pub pids: Vec<u32>,
    /// Only these command names (repeatable; the 15-character comm).
    #[arg(short = 'c', long = "comm", value_name = "COMM")]
    pub comms: Vec<String>,
    /// Which syscalls to record.
    #[arg(long, value_enum, default_value = "all")]
    pub syscalls: SysMode,
    /// Do not record block requests.
    #[arg(long)]
    pub no_block: bool,
    /// Ring buffer size (e.g. 64MiB); larger absorbs longer bursts.
    #[arg(long, default_value = "64MiB", value_parser = parse_size, value_name = "SIZE")]
    pub buffer_size: u64,
    /// No progress line.
    #[arg(short, long)]
    pub quiet: bool,
    /// Print the final summary as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Filter expression (sysdig syntax, see 'latscope fields'); what the kernel can test is tested there.
    #[arg(value_name = "FILTER")]
    pub filter: Option<String>,
    /// Command to run and record from start to exit (with its children).
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// A child process held at a gate until the probes are attached.
struct Gated {
    pid: libc::pid_t,
    gate: libc::c_int,
}

fn spawn_gated(argv: &[String]) -> Result<Gated> {
    let cargs: Vec<CString> = argv
        .iter()
        .map(|a| CString::new(a.as_str()).with_context(|| format!("argument {a:?} contains a NUL byte")))
        .collect::<Result<_>>()?;
    let mut ptrs: Vec<*const libc::c_char> = cargs.iter().map(|c| c.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: plain syscalls; the child only calls async-signal-safe functions before exec.
    unsafe {
        if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            bail!("cannot create a pipe: {}", std::io::Error::last_os_error());
        }
        let pid = libc::fork();
        if pid < 0 {
            bail!("cannot fork: {}", std::io::Error::last_os_error());
        }
        if pid == 0 {
            libc::close(fds[1]);
            let mut b = [0u8; 1];
            if libc::read(fds[0], b.as_mut_ptr() as *mut _, 1) != 1 {
                libc::_exit(126);
            }
            libc::execvp(ptrs[0], ptrs.as_ptr());
            let msg = b"latscope: cannot execute the command (not found or not executable)\n";
            libc::write(2, msg.as_ptr() as *const _, msg.len());
            libc::_exit(127);
        }
        libc::close(fds[0]);
        Ok(Gated { pid, gate: fds[1] })
    }
}

impl Gated {
    fn open(&mut self) {
        // SAFETY: writing one byte to our pipe end, then closing it.
        unsafe {
            libc::write(self.gate, b"g".as_ptr() as *const _, 1);
            libc::close(self.gate);
        }
        self.gate = -1;
    }
    /// Exit status if the child has exited.
    fn try_wait(&self) -> Option<i32> {
        let mut st = 0;
        // SAFETY: waitpid on our own child.
        let r = unsafe { libc::waitpid(self.pid, &mut st, libc::WNOHANG) };
        if r == self.pid {
            Some(if libc::WIFEXITED(st) { libc::WEXITSTATUS(st) } else { 128 + libc::WTERMSIG(st) })
        } else {
            None
        }
    }
}

impl Drop for Gated {
    fn drop(&mut self) {
        if self.gate >= 0 {
            // Setup failed before the gate opened: closing it makes the child exit without running.
            // SAFETY: closing our own fd.
            unsafe { libc::close(self.gate) };
        }
    }
}

pub fn run(a: Args) -> Result<ExitCode> {
    latscope_probe::check_environment()?;
    let filter = parse_filter(a.filter.as_deref())?;
    let argv: Vec<String> = std::env::args().collect();
    let sys_name = match a.syscalls {
        SysMode::All => "all",
        SysMode::Io => "io",
        SysMode::None => "none",
    };
    let header = snapshot::take(argv, sys_name, !a.no_block, a.filter.clone());

    let mut child = if a.command.is_empty() { None } else { Some(spawn_gated(&a.command)?) };
    let mut cfg = ProbeConfig {
        syscalls: match a.syscalls {
            SysMode::All => SyscallSel::All,
            SysMode::Io => SyscallSel::Io,
            SysMode::None => SyscallSel::Off,
        },
        block: !a.no_block,
        pids: a.pids.clone(),
        comms: a.comms.clone(),
        ring_bytes: a.buffer_size as usize,
        ..Default::default()
    };
    if let Some(c) = &child {
        cfg.pids.push(c.pid as u32);
        cfg.follow_children = true;
    }
    crate::pushdown::apply(&mut cfg, &filter, &header, false);
    if matches!(&cfg.syscalls, SyscallSel::Only(v) if v.is_empty()) {
        cfg.syscalls = SyscallSel::Off;
    }
    if cfg.syscalls == SyscallSel::Off && !cfg.block {
        bail!("nothing to record: the filter, --syscalls and --no-block exclude every syscall and block request");
    }

    let mut writer = ThreadedTraceWriter::create(&a.file, &header)
        .with_context(|| format!("cannot create trace file {}", a.file.display()))?;
    let mut probe = Probe::start(&cfg, &header)?;
    if let Some(c) = child.as_mut() {
        c.open();
    }

    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("cannot install signal handlers")?;
    }

    let started = Instant::now();
    let deadline = started + Duration::from_nanos(a.duration);
    let progress = !a.quiet && std::io::stderr().is_terminal();
    let mut ctx = EvalContext::new(&header);
    // Syscalls and the other kinds (block requests, process events) are written in separate
    // blocks: a reader after one kind then skips the other's blocks whole and never decodes the
    // `kind` column (the blocks' zone maps say what they hold).
    let mut pending = EventBatch::with_capacity(BLOCK_EVENTS);
    let mut pending_other = EventBatch::default();
    let mut last_block = Instant::now();
    let mut last_progress = Instant::now();
    let mut written: u64 = 0;
    let mut child_status = None;
    let mut lost = 0;
    let reason;
    // Events are decoded straight into the block being filled; with a filter, into a recycled
    // scratch batch first.
    let mut scratch = EventBatch::with_capacity(8192);
    loop {
        if filter.is_match_all() {
            probe.poll_into_split(&mut pending, &mut pending_other, Duration::from_millis(50))?;
        } else {
            scratch.clear();
            probe.poll_into(&mut scratch, Duration::from_millis(50))?;
            ctx.observe(&scratch);
            keep_matching(&scratch, &filter, &ctx, &mut pending, &mut pending_other);
        }
        if pending.len() + pending_other.len() >= BLOCK_EVENTS || last_block.elapsed() >= BLOCK_INTERVAL {
            lost = probe.stats().lost;
            for p in [&mut pending_other, &mut pending] {
                written += p.len() as u64;
                let full = std::mem::replace(p, writer.spare_batch());
                if !full.is_empty() {
                    writer.write_batch(full, lost)?;
                }
            }
            last_block = Instant::now();
        }
        if progress && last_progress.elapsed() >= Duration::from_secs(1) {
            eprint!(
                "\rrecording {:>6.1}s  {:>8} events  {} lost  ",
                started.elapsed().as_secs_f64(),
                fmt_count((written + pending.len() as u64 + pending_other.len() as u64) as f64),
                lost
            );
            last_progress = Instant::now();
        }
        if stop.load(Ordering::Relaxed) {
            reason = "interrupted";
            break;
        }
        if Instant::now() >= deadline {
            reason = "duration reached";
            break;
        }
        if let Some(c) = &child {
            if let Some(st) = c.try_wait() {
                child_status = Some(st);
                reason = "command exited";
                break;
            }
        }
    }
    // Whatever is still in the ring buffer belongs to the recording.
    for _ in 0..4 {
        let b = probe.drain()?;
        if b.is_empty() {
            break;
        }
        ctx.observe(&b);
        keep_matching(&b, &filter, &ctx, &mut pending, &mut pending_other);
    }
    let stats = probe.stats();
    let malformed = probe.malformed();
    drop(probe);
    for p in [pending_other, pending] {
        written += p.len() as u64;
        if !p.is_empty() {
            writer.write_batch(p, stats.lost)?;
        }
    }
    let elapsed = started.elapsed();
    let end_ns = snapshot::monotonic_ns();
    let summary = writer.finish(Summary {
        events: written,
        lost: stats.lost,
        duration_ns: elapsed.as_nanos() as u64,
        end_ns,
        ..Default::default()
    })?;
    if progress {
        eprint!("\r{:60}\r", "");
    }
    let secs = elapsed.as_secs_f64().max(1e-9);
    let bytes = std::fs::metadata(&a.file).map(|m| m.len()).unwrap_or(summary.bytes);
    if a.json {
        let j = serde_json::json!({
            "file": a.file,
            "reason": reason,
            "events": written,
            "ring_events": stats.events,
            "lost": stats.lost,
            "path_faults": stats.path_faults,
            "block_unpaired": stats.blk_unpaired,
            "malformed": malformed,
            "bytes": bytes,
            "duration_s": secs,
            "events_per_s": written as f64 / secs,
            "command_status": child_status,
        });
        println!("{j}");
    } else {
        eprintln!(
            "latscope: {reason}: recorded {written} events in {secs:.2} s ({} events/s) to {} ({}, {:.1} B/event)",
            fmt_count(written as f64 / secs),
            a.file.display(),
            fmt_bytes(bytes),
            bytes as f64 / written.max(1) as f64
        );
        if stats.lost > 0 {
            eprintln!(
                "latscope: LOST {} events: the ring buffer was full (try --buffer-size 256MiB, or a narrower filter)",
                stats.lost
            );
        } else {
            eprintln!("latscope: lost 0 events");
        }
        if stats.path_faults > 0 {
            eprintln!("latscope: {} path arguments could not be read from user memory", stats.path_faults);
        }
        if let Some(st) = child_status {
            eprintln!("latscope: the command exited with status {st}");
        }
    }
    let _ = std::io::stderr().flush();
    Ok(ExitCode::SUCCESS)
}

/// Append the events of `b` that `filter` keeps: syscalls to `syscalls`, other kinds to `other`.
fn keep_matching(
    b: &EventBatch,
    filter: &Filter,
    ctx: &EvalContext,
    syscalls: &mut EventBatch,
    other: &mut EventBatch,
) {
    let all = filter.is_match_all();
    for i in 0..b.len() {
        if all || filter.matches(b, i, ctx) {
            let to = if b.kind[i] == EventKind::Syscall as u8 { &mut *syscalls } else { &mut *other };
            to.push_from(b, i);
        }
    }
}
