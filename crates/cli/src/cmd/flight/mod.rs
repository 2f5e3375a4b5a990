//! `record --ring` (a flight recorder: the last seconds in memory, written when a trigger fires)
//! and `record --rotate` (rotating files): the recording into the sinks of crates/flight.

mod options;

pub use options::KeepArgs;

use super::record::{start_session, Args};
use super::started::{announce, Announce};
use anyhow::{bail, Context, Result};
use latscope_event::units::{fmt_bytes, fmt_count, fmt_ns};
use latscope_flight::{
    default_kernel_buffer, ControlServer, FlightEvent, FlightOptions, FlightRecorder, MemoryBound, RotateEvent,
    Rotator, DEFAULT_KEEP, RING_BLOCK_EVENTS,
};
use latscope_live::{Recorder, RecorderOptions, Recording};
use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

/// One line per event of the flight recorder (JSON with --json).
fn print_event(e: &FlightEvent, offset: i64, json: bool) {
    if json {
        println!("{}", e.to_json());
        return;
    }
    eprintln!("latscope: {}", e.line(offset));
    if let FlightEvent::Done(r) = e {
        if let Some(s) = &r.short {
            eprintln!("latscope: warning: {} holds less than asked: {s}", r.path.display());
        }
    }
}

/// `record --ring` or `record --rotate`.
pub fn run(mut a: Args) -> Result<ExitCode> {
    a.keep.check()?;
    let dir = a.file.clone();
    if dir.as_os_str() == "-" {
        bail!("-w - (standard output) takes one trace: --ring and --rotate write files into a directory");
    }
    if !dir.is_dir() {
        bail!(
            "{} is not a directory: with --ring or --rotate, -w names the directory the files go to (create it first)",
            dir.display()
        );
    }
    let triggers = a.keep.parse_triggers()?;
    let mut fopts = None;
    let mut bound = None;
    if let Some(ring) = a.keep.ring {
        // The kernel's buffer is mapped twice, so record's 64 MiB would weigh more than a small
        // ring: sized from the ring unless given.
        let buffer = *a.live.buffer_size.get_or_insert_with(|| default_kernel_buffer(&ring));
        bound = Some(MemoryBound::new(&ring, buffer));
        let mut o = FlightOptions::new(&dir, ring);
        o.triggers = triggers;
        o.before = a.keep.before.map(Duration::from_nanos);
        o.after = Duration::from_nanos(a.keep.after);
        o.min_gap = Duration::from_nanos(a.keep.min_gap);
        o.keep = Some(a.keep.keep.unwrap_or(DEFAULT_KEEP));
        o.disk_budget = a.keep.disk_budget;
        o.flush_every = Duration::from_nanos(a.flush_every);
        o.check().map_err(anyhow::Error::msg)?;
        fopts = Some(o);
    }
    let session = start_session(&a)?;
    let offset = session.header().realtime_offset_ns;
    let json = a.json.is_some();
    let how = match (json, a.quiet) {
        (true, _) => Announce::JsonStdout,
        (false, true) => Announce::Quiet,
        (false, false) => Announce::Text,
    };
    announce(&session, &dir, how);
    let opts = RecorderOptions {
        flush_every: Duration::from_nanos(a.flush_every),
        duration: a.duration.map(Duration::from_nanos),
        // Smaller batches keep the memory between the kernel's buffer and the ring small.
        block_events: if fopts.is_some() { RING_BLOCK_EVENTS } else { latscope_live::BLOCK_EVENTS },
    };
    let progress = !a.quiet && !json && std::io::stderr().is_terminal();
    let rec = match fopts {
        Some(o) => {
            let describe: Vec<String> = o.triggers.iter().map(|t| format!("{} ({})", t.name, t.condition)).collect();
            let ring = o.ring.describe();
            let sink = FlightRecorder::start(session.header(), o, &dir.display().to_string(), move |e| {
                if progress {
                    // Over the progress line, which the next second redraws.
                    eprint!("\r{:70}\r", "");
                }
                print_event(e, offset, json)
            })?;
            let control = ControlServer::start(a.keep.socket.clone(), "record");
            let socket = match &control {
                Ok(c) => {
                    c.set(vec![sink.handle()]);
                    format!("`latscope trigger NAME` ({})", c.path().display())
                }
                Err(e) => {
                    eprintln!("latscope: warning: no trigger socket: {e}");
                    "no socket".into()
                }
            };
            let bound = bound.expect("set with --ring");
            if json {
                println!(
                    "{}",
                    serde_json::json!({"event": "memory", "memory_bound_bytes": bound.total(),
                        "ring_bytes": bound.ring, "kernel_buffer_bytes": bound.kernel_buffer,
                        "batches_bytes": bound.batches, "process_bytes": bound.process})
                );
            }
            if !a.quiet && !json {
                eprintln!("latscope: flight recorder: keeping in memory {ring}; writing nothing until a trigger fires");
                eprintln!("latscope: memory: {}", bound.describe());
                eprintln!("latscope: triggers: {}; by hand: {socket}", describe.join(", "));
                eprintln!(
                    "latscope: dumps go to {} (at most {} kept)",
                    dir.display(),
                    a.keep.keep.unwrap_or(DEFAULT_KEEP)
                );
            }
            let handle = sink.handle();
            let r = Recorder::new(session, sink, opts).run(|p| {
                if progress {
                    let s = handle.stats();
                    eprint!(
                        "\rring {:>7} {:>9}  {:>8} events  {} dumps  {} lost  ",
                        fmt_ns(s.ring_span_ns),
                        fmt_bytes(s.ring_bytes),
                        fmt_count(p.events as f64),
                        s.dumps,
                        p.lost
                    );
                }
            });
            drop(control);
            let s = handle.stats();
            if progress {
                eprint!("\r{:70}\r", "");
            }
            let r = r.context("the flight recorder stopped")?;
            if !a.quiet && !json {
                eprintln!(
                    "latscope: {}: {} events through the ring in {:.1} s; {} triggers fired, {} dumps written ({}), {} not dumped, {} failed",
                    r.reason.describe(),
                    r.events,
                    r.duration.as_secs_f64(),
                    s.fired,
                    s.dumps,
                    fmt_bytes(s.bytes_written),
                    s.suppressed,
                    s.failed
                );
            } else if json {
                println!(
                    "{}",
                    serde_json::json!({"event": "end", "reason": r.reason.describe(), "events": r.events,
                        "lost": r.stats.lost, "fired": s.fired, "dumps": s.dumps, "suppressed": s.suppressed,
                        "failed": s.failed, "bytes_written": s.bytes_written, "ring_bytes": s.ring_bytes,
                        "ring_span_s": s.ring_span_ns as f64 / 1e9})
                );
            }
            r
        }
        None => {
            let every = a.keep.rotate.expect("--rotate given");
            let quiet = a.quiet;
            let sink = Rotator::start(session.header(), dir.clone(), every, a.keep.keep, move |e| match e {
                RotateEvent::Closed { path, events, bytes } if json => {
                    println!(
                        "{}",
                        serde_json::json!({"event": "closed", "file": path, "events": events, "bytes": bytes})
                    )
                }
                RotateEvent::Closed { path, events, bytes } if !quiet => {
                    eprintln!("latscope: closed {}: {events} events, {}", path.display(), fmt_bytes(*bytes))
                }
                RotateEvent::Deleted { path } if json => {
                    println!("{}", serde_json::json!({"event": "deleted", "file": path}))
                }
                RotateEvent::Deleted { path } if !quiet => eprintln!("latscope: deleted {} (--keep)", path.display()),
                _ => {}
            })
            .map_err(anyhow::Error::msg)?;
            let r = Recorder::new(session, sink, opts).run(|p| {
                if progress {
                    eprint!(
                        "\rrecording {:>6.1}s  {:>8} events  {} lost  ",
                        p.elapsed.as_secs_f64(),
                        fmt_count(p.events as f64),
                        p.lost
                    );
                }
            });
            if progress {
                eprint!("\r{:60}\r", "");
            }
            let r = r.map_err(|e| {
                anyhow::Error::from(e).context(crate::Hint(format!(
                    "the recording stopped; the files already complete in {} stay readable",
                    dir.display()
                )))
            })?;
            if !quiet && !json {
                eprintln!("latscope: {}: recorded {} events to {}", r.reason.describe(), r.events, dir.display());
            }
            r
        }
    };
    finish(&a, &rec)
}

fn finish(a: &Args, rec: &Recording) -> Result<ExitCode> {
    if rec.stats.lost > 0 {
        eprintln!(
            "latscope: LOST {} events: the ring buffer was full (try --buffer-size 256MiB, or a narrower filter)",
            rec.stats.lost
        );
    }
    Ok(match rec.command_status {
        Some(st) if !a.command.is_empty() => ExitCode::from(st.clamp(0, 255) as u8),
        _ => ExitCode::SUCCESS,
    })
}
