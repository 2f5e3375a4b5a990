//! `latscope bench`: micro-benchmark probes run continuously, summarised live, optionally stored
//! as hourly histograms.

use anyhow::{bail, Context, Result};
use latscope_event::units::parse_duration_secs_default;
use latscope_micro::{
    check_unique_names, load_config, parse_probe, render_text, summarize, BenchConfig, Event, ProbeSpec, RunOptions,
    Runner, StoreSink, PROBE_SYNTAX,
};
use serde_json::json;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

fn duration(s: &str) -> Result<Duration, String> {
    parse_duration_secs_default(s).map(Duration::from_nanos)
}

/// Run micro-benchmark probes continuously: clocks, an empty call, loops, file reads, fsync'd
/// writes, commands. Every sample goes into a high-resolution histogram; the live summary shows
/// count, p50/p99/max and what the histogram reveals: a clock's granularity, peaks labelled as
/// cache tiers, the share of reads served by the page cache and the cache size it implies.
/// With --store, hourly histograms are written to a SQLite store (flushed every --flush).
#[derive(clap::Args, Debug)]
#[command(after_help = format!("Probes (PROBE, or [[probe]] tables with the same keys in --config):\n{}\n
Examples:
  latscope bench clock -d 5s                          # every clock: granularity and read cost
  latscope bench call:monotonic_coarse -d 2s          # an empty call timed with a coarse clock
  latscope bench muladd sin --every 10ms -d 30s
  latscope bench read:/data/f,file_size=8GiB read:/data/f,region=512KiB --every 10s --store b.db
  latscope bench read:/data/f,direct fsync:/data/probe.fsync --every 1s -d 1h --json
  latscope bench 'command:curl -s http://localhost/' --every 5s --store bench.db
  latscope bench --config bench.toml                  # probes, store, intervals from a file",
    PROBE_SYNTAX.iter().map(|(s, d)| format!("  {s}\n      {d}")).collect::<Vec<_>>().join("\n")))]
pub struct Args {
    /// Probes to run (see below).
    #[arg(value_name = "PROBE")]
    pub probes: Vec<String>,
    /// TOML file with probes ([[probe]]) and the settings below (every, duration, flush, store, retention_days).
    #[arg(short, long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Pause between samples of each probe (0: back to back, in batches of ~10 ms).
    #[arg(long, value_parser = duration, value_name = "DURATION")]
    pub every: Option<Duration>,
    /// How long to run (default: until Ctrl-C).
    #[arg(short, long, value_parser = duration, value_name = "DURATION")]
    pub duration: Option<Duration>,
    /// Live summary every DURATION (0: only at the end).
    #[arg(long, default_value = "1s", value_parser = duration, value_name = "DURATION")]
    pub report: Duration,
    /// Write hourly histograms to this store (created if missing).
    #[arg(long, value_name = "FILE")]
    pub store: Option<PathBuf>,
    /// Store flush interval: at most this much is lost if latscope is killed.
    #[arg(long, value_parser = duration, value_name = "DURATION")]
    pub flush: Option<Duration>,
    /// Keep this many days in the store (older hours are dropped).
    #[arg(long, value_name = "DAYS")]
    pub retention_days: Option<u32>,
    /// Host name of the stored series (default: this machine's).
    #[arg(long, value_name = "NAME")]
    pub host: Option<String>,
    /// JSON lines (one per summary) instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: Args) -> Result<ExitCode> {
    let cfg = match &a.config {
        Some(p) => load_config(p)?,
        None => BenchConfig::default(),
    };
    let mut specs: Vec<ProbeSpec> = cfg.probes.clone();
    for p in &a.probes {
        specs.extend(parse_probe(p)?);
    }
    if specs.is_empty() {
        let kinds: Vec<&str> = PROBE_SYNTAX.iter().map(|(s, _)| *s).collect();
        bail!("no probe to run: name probes ({}) or give --config FILE", kinds.join(", "));
    }
    check_unique_names(&specs)?;
    let mut probes = Vec::new();
    for s in &specs {
        let p = s
            .build(&mut |note| eprintln!("latscope: {note}"))
            .with_context(|| "cannot start the probes".to_string())?;
        probes.push((p, s.every));
    }
    let flush = a.flush.or(cfg.flush).unwrap_or(latscope_store::DEFAULT_FLUSH_INTERVAL).max(Duration::from_millis(100));
    let opts = RunOptions {
        every: a.every.or(cfg.every).unwrap_or_default(),
        duration: a.duration.or(cfg.duration),
        report_every: (!a.report.is_zero()).then_some(a.report),
        interval: flush,
        ..RunOptions::default()
    };
    let mut runner = Runner::new(probes, opts);
    let infos: Vec<_> = runner.probes().iter().map(|s| s.info.clone()).collect();
    let store_path = a.store.clone().or(cfg.store.clone());
    let host = a.host.clone().unwrap_or_else(latscope_store::local_host);
    let mut sink = match &store_path {
        Some(p) => Some(StoreSink::open(p, &host, a.retention_days.or(cfg.retention_days), &infos, flush)?),
        None => None,
    };
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("cannot install signal handlers")?;
    }
    if !a.json {
        let names: Vec<&str> = infos.iter().map(|i| i.name.as_str()).collect();
        let until = opts_text(a.duration.or(cfg.duration));
        eprintln!("latscope: running {} probe(s) {until}: {}", names.len(), names.join(", "));
    }
    let mut out = std::io::stdout().lock();
    let ran = runner.run(&stop, |e| -> Result<()> {
        match e {
            Event::Interval { start, deltas, .. } => {
                if let Some(s) = sink.as_mut() {
                    // A failed flush keeps its values for the next: warn and go on.
                    if let Err(err) = s.interval(start, deltas) {
                        eprintln!("latscope: warning: {err} ({} values wait for the next flush)", s.pending());
                    }
                }
            }
            Event::Report { elapsed, probes, last } => {
                let summaries = summarize(probes);
                if a.json {
                    let store = sink.as_ref().map(|s| json!({"path": s.path(), "values_written": s.written()}));
                    let line =
                        json!({"elapsed_s": elapsed.as_secs_f64(), "final": last, "probes": summaries, "store": store});
                    writeln!(out, "{line}")?;
                } else {
                    let what = if last { "final" } else { "so far" };
                    writeln!(out, "after {:.1} s ({what}):\n{}", elapsed.as_secs_f64(), render_text(&summaries))?;
                }
                out.flush()?;
            }
        }
        Ok(())
    });
    // Whatever stopped the run (a closed output pipe included), what was measured is stored.
    if let Some(s) = sink.as_mut() {
        s.flush().with_context(|| format!("{} values could not be written", s.pending()))?;
        if !a.json {
            eprintln!("latscope: {} values in hourly histograms in {}", s.written(), s.path().display());
        }
    }
    ran?;
    let failed = runner.probes().iter().filter(|p| p.error.is_some()).count();
    if failed > 0 {
        eprintln!("latscope: {failed} probe(s) stopped with an error (see STOPPED above)");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

fn opts_text(d: Option<Duration>) -> String {
    match d {
        Some(d) => format!("for {:.1} s", d.as_secs_f64()),
        None => "until Ctrl-C".to_string(),
    }
}
