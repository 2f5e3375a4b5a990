//! `record --ring` (a flight recorder: the last seconds in memory, written when a trigger fires)
//! and `record --rotate` (rotating files): the recording into the sinks of crates/flight.

use super::record::{start_session, Args};
use anyhow::{bail, Context, Result};
use latscope_event::units::{fmt_bytes, fmt_count, fmt_ns, parse_duration_ns, parse_size};
use latscope_flight::{
    ControlServer, FlightEvent, FlightOptions, FlightRecorder, RingSize, RotateEvent, RotateEvery, Rotator, Trigger,
    DEFAULT_KEEP,
};
use latscope_live::{Recorder, RecorderOptions, Recording};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// The options of the flight recorder and of rotating captures.
#[derive(clap::Args, Debug)]
#[command(next_help_heading = "Flight recorder (--ring) and long captures (--rotate)")]
pub struct KeepArgs {
    /// Keep the last DURATION and/or SIZE of events in memory (30s, 2GiB, 30s,1GiB; a time alone
    /// takes at most 256MiB) and write nothing until a --trigger fires; then the window before it
    /// and --after after it are written to a trace file in -w DIR (a directory), named by time
    /// and trigger: flight-20261122T223013.250Z-NAME.lst.
    #[arg(long, value_name = "DURATION|SIZE", value_parser = RingSize::parse)]
    pub ring: Option<RingSize>,
    /// With --ring: what has a window written, 'NAME: CONDITION' (repeatable): a filter on a call
    /// ('slow: evt.latency > 150ms and proc.name = postgres'), a percentile ('p99 of fsync on
    /// /var/lib/pg over 10s > 20ms'), a rate ('errors > 100/s'), 'signal USR1', 'file PATH'
    /// (appearing or touched), or 'manual'. `latscope trigger NAME` fires any of them by hand.
    #[arg(long = "trigger", value_name = "TRIGGER")]
    pub triggers: Vec<String>,
    /// With --ring: how much before the trigger a dump holds (default: all the ring holds).
    #[arg(long, value_parser = parse_duration_ns, value_name = "DURATION")]
    pub before: Option<u64>,
    /// With --ring: how long after the trigger a dump goes on.
    #[arg(long, default_value = "5s", value_parser = parse_duration_ns, value_name = "DURATION")]
    pub after: u64,
    /// With --ring: at least this long between the starts of two dumps (a trigger firing during
    /// a dump extends it instead; one firing later within the gap is counted, not dumped).
    #[arg(long, default_value = "10s", value_parser = parse_duration_ns, value_name = "DURATION")]
    pub min_gap: u64,
    /// At most N files of ours in DIR, the oldest deleted (--ring: default 20 dumps; --rotate:
    /// default all files kept).
    #[arg(long, value_name = "N")]
    pub keep: Option<usize>,
    /// With --ring: at most this many bytes of dumps in DIR, the oldest deleted to make room.
    #[arg(long, value_parser = parse_size, value_name = "SIZE")]
    pub disk_budget: Option<u64>,
    /// With --ring: the socket `latscope trigger` talks to (default /run/latscope/record-PID.sock).
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Write -w DIR (a directory) as a new complete trace file every SIZE or DURATION (1GiB, 10m,
    /// 10m,1GiB: whichever comes first), named by time: trace-20261122T223013.250Z.lst (sysdig's
    /// -C and -G; --keep N is its -W). No time limit unless --duration.
    #[arg(long, value_name = "SIZE|DURATION", value_parser = RotateEvery::parse, conflicts_with = "ring")]
    pub rotate: Option<RotateEvery>,
}

impl KeepArgs {
    /// Whether the recording goes to a ring or rotating files rather than one file.
    pub fn active(&self) -> bool {
        self.ring.is_some() || self.rotate.is_some()
    }

    /// Refuse the ring's options without --ring.
    pub fn check(&self) -> Result<()> {
        if self.ring.is_none() {
            let given = [
                (!self.triggers.is_empty(), "--trigger"),
                (self.before.is_some(), "--before"),
                (self.disk_budget.is_some(), "--disk-budget"),
                (self.socket.is_some(), "--socket"),
            ];
            if let Some((_, flag)) = given.iter().find(|(on, _)| *on) {
                bail!("{flag} is an option of the flight recorder: add --ring DURATION (e.g. --ring 30s)");
            }
            if self.keep.is_some() && self.rotate.is_none() {
                bail!("--keep applies to --ring's dumps and --rotate's files: add one of them");
            }
        }
        Ok(())
    }

    /// The triggers, parsed; unnamed ones are t1, t2, ...
    fn parse_triggers(&self) -> Result<Vec<Trigger>> {
        let mut v = Vec::new();
        for (i, t) in self.triggers.iter().enumerate() {
            let t =
                Trigger::parse(t, &format!("t{}", i + 1)).map_err(|e| anyhow::anyhow!("invalid --trigger:\n{e}"))?;
            v.push(t);
        }
        Ok(v)
    }
}

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
pub fn run(a: Args) -> Result<ExitCode> {
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
    if let Some(ring) = a.keep.ring {
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
    let opts = RecorderOptions {
        flush_every: Duration::from_nanos(a.flush_every),
        duration: a.duration.map(Duration::from_nanos),
        ..Default::default()
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
            if !a.quiet && !json {
                eprintln!("latscope: flight recorder: keeping in memory {ring}; writing nothing until a trigger fires");
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
