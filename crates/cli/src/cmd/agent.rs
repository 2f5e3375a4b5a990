//! `latscope agent`: named latency series measured unattended, served to Prometheus and pushed to
//! Graphite.

use anyhow::{Context, Result};
use latscope_agent::{Agent, AgentConfig, GraphiteConfig};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// Run unattended: named series (a filter and a grouping each) counted in the kernel, served on
/// /metrics for Prometheus (native histograms over protobuf, classic buckets in text) and pushed
/// to Graphite (count, p50, p90, p99, max per interval).
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
  by = \"disk\"")]
pub struct Args {
    /// Configuration file (TOML): listen, interval, host, max_labels, [graphite], [[series]].
    #[arg(short, long, value_name = "FILE")]
    pub config: PathBuf,
    /// Push to this carbon plaintext receiver (HOST:PORT) instead of the configuration's.
    #[arg(long, value_name = "HOST:PORT")]
    pub graphite: Option<String>,
    /// Serve /metrics on this address instead of the configuration's (e.g. 0.0.0.0:9465).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    /// Check the configuration, print the series, and exit.
    #[arg(long)]
    pub check: bool,
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
        println!(
            "{}: {} series, /metrics on {}, every {:?}",
            a.config.display(),
            cfg.series.len(),
            cfg.listen,
            cfg.interval
        );
        for s in &cfg.series {
            println!(
                "  {}: by {:?}, {:?}, filter '{}', max {} label values",
                s.name, s.by, s.kind, s.filter, s.max_labels
            );
        }
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
    eprintln!("latscope agent: {} series, metrics on http://{addr}/metrics", agent.config().series.len());
    for set in agent.probe_sets().iter().filter(|s| s.len() > 1) {
        eprintln!("latscope agent: series {} share one probe set", set.join(", "));
    }
    for (name, why) in agent.streaming() {
        eprintln!("latscope agent: series {name} streams events (not counted in the kernel): {why}");
    }
    // Reloads read the file again, with the command line's overrides.
    let mut reload = || load(&a).map_err(|e| format!("{e:#}"));
    agent.run(&mut reload, &stop, &hup, &mut |line| eprintln!("latscope agent: {line}"));
    if let Some(g) = agent.stop(Duration::from_secs(2)) {
        eprintln!("latscope agent: stopped; Graphite: {} lines sent, {} dropped", g.sent, g.dropped);
    } else {
        eprintln!("latscope agent: stopped");
    }
    Ok(ExitCode::SUCCESS)
}
