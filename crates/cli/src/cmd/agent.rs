//! `latscope agent`: named latency series measured unattended, served to Prometheus and pushed to
//! Graphite.

use anyhow::{Context, Result};
use latscope_agent::{Agent, AgentConfig, GraphiteConfig};
use latscope_event::units::fmt_ns;
use latscope_event::EventKind;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// Run unattended: named series (a filter and a grouping each) counted in the kernel, served on
/// /metrics for Prometheus (native histograms over protobuf, classic buckets in text) and pushed
/// to Graphite (count, p50, p90, p99, max per interval) and to an OpenTelemetry collector ([otlp]:
/// exponential histograms over OTLP/HTTP); and flight recorders ([[recorder]]: the
/// last seconds kept in memory, written to a directory when a trigger fires, the oldest dumps
/// deleted, counted on /metrics; `latscope trigger RECORDER/NAME` fires one by hand).
///
/// The configuration (TOML) names the series; SIGHUP reloads it (unchanged series keep their
/// counts; a configuration with an error is logged and the running one kept). Each series keeps
/// at most max_labels label values and counts the rest under `other`. Series counted in the
/// kernel with the same process filter share one set of probes (each event is counted once).
/// Probes that fail are restarted on the next interval. Log lines go to stderr. Reference: docs/AGENT.md.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  latscope agent --config /etc/latscope/agent.toml
  latscope agent --config agent.toml --check              # check the file and exit
  latscope agent --config agent.toml --graphite localhost:2003 --listen 0.0.0.0:9465
  curl -s localhost:9465/metrics | grep latscope_syscall_latency_seconds
  systemctl reload latscope-agent                         # SIGHUP: reload the configuration

A configuration:
  listen = \"127.0.0.1:9465\"
  interval = \"10s\"
  [[series]]
  name = \"db_files\"
  filter = \"proc.name = postgres and fd.type = file\"
  by = \"syscall\"
  [[series]]
  name = \"disks\"
  by = \"disk\"
  [[recorder]]                 # a flight recorder: the last 30 s kept, written when a trigger fires
  name = \"pg\"
  dir = \"/var/lib/latscope/flight/pg\"
  ring = \"30s\"
  why_above = \"50ms\"
  triggers = [\"slow: evt.latency > 150ms and proc.name = postgres\", \"p99 of fsync over 10s > 20ms\"]")]
pub struct Args {
    /// Configuration file (TOML): listen, interval, host, max_labels, [graphite], [otlp],
    /// [[series]], [[recorder]].
    #[arg(short, long, value_name = "FILE")]
    pub config: PathBuf,
    /// Push to this carbon plaintext receiver (HOST:PORT) instead of the configuration's.
    #[arg(long, value_name = "HOST:PORT", value_parser = graphite_address)]
    pub graphite: Option<String>,
    /// Serve /metrics on this address instead of the configuration's (e.g. 0.0.0.0:9465).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    /// Check the configuration, print the series, and exit.
    #[arg(long)]
    pub check: bool,
}

fn graphite_address(s: &str) -> Result<String, String> {
    GraphiteConfig::check_address(s).map(|()| s.to_string())
}

/// The configuration file with the command line's overrides.
fn load(a: &Args) -> Result<AgentConfig> {
    let mut cfg = AgentConfig::load(&a.config)?;
    if let Some(g) = &a.graphite {
        let prefix = cfg.graphite.as_ref().map_or_else(|| "latscope".to_string(), |g| g.prefix.clone());
        cfg.graphite = Some(GraphiteConfig { address: g.clone(), prefix });
    }
    if let Some(l) = a.listen {
        cfg.listen = l;
    }
    Ok(cfg)
}

pub fn run(a: Args) -> Result<ExitCode> {
    let cfg = load(&a)?;
    if a.check {
        print!("{}", describe(&a.config, &cfg));
        return Ok(ExitCode::SUCCESS);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let hup = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("cannot install signal handlers")?;
    }
    signal_hook::flag::register(signal_hook::consts::SIGHUP, hup.clone()).context("cannot install signal handlers")?;
    let mut agent = Agent::start(cfg)?;
    let addr = agent.local_addr().map_or_else(|| "?".into(), |a| a.to_string());
    eprintln!(
        "latscope agent: {} series, {} flight recorders, metrics on http://{addr}/metrics",
        agent.config().series.len(),
        agent.config().recorders.len()
    );
    for r in &agent.config().recorders {
        eprintln!(
            "latscope agent: recorder {}: keeping in memory {}; dumps in {} (at most {} kept)",
            r.name,
            r.ring.describe(),
            r.dir.display(),
            r.keep
        );
    }
    match agent.trigger_socket() {
        Ok(p) => eprintln!(
            "latscope agent: fire a recorder's trigger by hand: latscope trigger RECORDER/NAME ({})",
            p.display()
        ),
        Err(e) if !agent.config().recorders.is_empty() => eprintln!("latscope agent: warning: no trigger socket: {e}"),
        Err(_) => {}
    }
    for set in agent.probe_sets().iter().filter(|s| s.len() > 1) {
        eprintln!("latscope agent: series {} share one probe set", set.join(", "));
    }
    for (name, why) in agent.streaming() {
        eprintln!("latscope agent: series {name} streams events (not counted in the kernel): {why}");
    }
    // Reloads read the file again, with the command line's overrides.
    let mut reload = || load(&a).map_err(|e| crate::message(&e));
    agent.run(&mut reload, &stop, &hup, &mut |line| eprintln!("latscope agent: {line}"));
    if let Some(g) = agent.stop(Duration::from_secs(2)) {
        eprintln!("latscope agent: stopped; Graphite: {} lines sent, {} dropped", g.sent, g.dropped);
    } else {
        eprintln!("latscope agent: stopped");
    }
    Ok(ExitCode::SUCCESS)
}

/// What `--check` prints: the configuration in its own words, one line per series.
fn describe(file: &std::path::Path, cfg: &AgentConfig) -> String {
    use std::fmt::Write;
    let mut out = format!(
        "{}: {} series, {} recorders, host {}, /metrics on {}, every {}",
        file.display(),
        cfg.series.len(),
        cfg.recorders.len(),
        cfg.host,
        cfg.listen,
        fmt_ns(cfg.interval.as_nanos() as u64)
    );
    match &cfg.graphite {
        Some(g) => _ = write!(out, ", Graphite to {} under {}", g.address, g.prefix),
        None => out.push_str(", no Graphite push"),
    }
    if let Some(o) = &cfg.otlp {
        _ = write!(out, ", OTLP to {} every {}", o.endpoint, fmt_ns(o.interval.as_nanos() as u64));
    }
    out.push('\n');
    for r in &cfg.recorders {
        let _ = writeln!(
            out,
            "  recorder {}: keeps {}{}; dumps to {} ({} after each trigger, at most one per {}, {} kept); triggers: {}",
            r.name,
            r.ring.describe(),
            if r.filter.is_empty() { String::new() } else { format!(" of the events where {}", r.filter) },
            r.dir.display(),
            fmt_ns(r.after.as_nanos() as u64),
            fmt_ns(r.min_gap.as_nanos() as u64),
            r.keep,
            r.triggers.join("; ")
        );
    }
    for s in &cfg.series {
        let what = match s.kind {
            EventKind::Syscall => "syscalls",
            EventKind::Block => "block requests",
            EventKind::Proc => "process events",
        };
        let by = s.by.label().map_or_else(|| "in one histogram".to_string(), |l| format!("by {l}"));
        let filter = if s.filter.is_empty() { "every one".to_string() } else { format!("where {}", s.filter) };
        let _ = writeln!(out, "  {}: {what} {by}, {filter}, at most {} label values", s.name, s.max_labels);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_describes_the_configuration_in_its_own_words() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.toml");
        std::fs::write(
            &f,
            "host = \"db1\"\ninterval = \"15s\"\n[graphite]\naddress = \"carbon:2003\"\n\
             [[series]]\nname = \"disks\"\nby = \"disk\"\n\
             [[series]]\nname = \"files\"\nfilter = \"fd.type = file\"\nby = \"syscall\"\nmax_labels = 50\n",
        )
        .unwrap();
        let text = describe(&f, &AgentConfig::load(&f).unwrap());
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].ends_with(
                ": 2 series, 0 recorders, host db1, /metrics on 127.0.0.1:9465, every 15.0s, Graphite to carbon:2003 under latscope"
            ),
            "{text}"
        );
        assert_eq!(lines[1], "  disks: block requests by disk, every one, at most 1000 label values");
        assert_eq!(lines[2], "  files: syscalls by syscall, where fd.type = file, at most 50 label values");
    }

    #[test]
    fn graphite_addresses_need_a_host_and_a_port() {
        assert!(graphite_address("localhost:2003").is_ok());
        assert!(graphite_address("[::1]:2003").is_ok());
        for bad in ["nohost", ":2003", "host:", "host:0", "host:99999"] {
            let e = graphite_address(bad).unwrap_err();
            assert!(e.contains(bad) && e.contains("HOST:PORT"), "{e}");
        }
    }
}
