//! `latscope serve`: the web dashboard (crates/serve).

use anyhow::{Context, Result};
use latscope_event::units::parse_duration_secs_default;
use latscope_serve::{ServeOptions, Server, DEFAULT_LISTEN};
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

fn duration(s: &str) -> Result<Duration, String> {
    parse_duration_secs_default(s).map(Duration::from_nanos)
}

/// Serve the web dashboard: the hourly histograms of a store with their peaks explained, and the
/// host's latency live (heat map, spectrogram, drill-down by process, syscall, file, disk and
/// client, the events of a cell and, with "why was it slow" ticked, their time by cause, waker
/// and blocking stack).
///
/// Pages: / (every series: latest histogram, p50/p99 by hour), /series?id=N (hour by hour:
/// hoursAgo, hours, buckets, scale=log|linear), /live (needs root; the probes run only while the
/// page is open), /dumps (flight recorders' dumps, each with its heat map, breakdown by cause,
/// slowest calls and processes). Each has a JSON API (docs/DASHBOARD.md). Everything is in the binary: no network
/// access is needed. The URL is printed on standard output.
///
/// It listens on 127.0.0.1 unless told otherwise; any other address needs --token (sent by the
/// browser as a cookie after the login form, or by scripts as 'Authorization: Bearer TOKEN').
/// Without a token it answers only the user who started it and root: other local users are
/// refused (the kernel says who owns each connection); give a token to let them in with it.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  latscope serve --store bench.db                         # http://127.0.0.1:8080/
  latscope serve --store bench.db --listen 127.0.0.1:0    # any free port (printed)
  latscope serve --dumps /var/lib/latscope/flight/pg      # a flight recorder's dumps on /dumps
  LATSCOPE_TOKEN=$(head -c 18 /dev/urandom | base64) latscope serve --listen 0.0.0.0:8080 --store bench.db
  curl -s -H \"Authorization: Bearer $LATSCOPE_TOKEN\" http://host:8080/api/overview | jq '.series[].name'
  ssh -L 8080:127.0.0.1:8080 host   # or keep it on loopback and tunnel")]
pub struct Args {
    /// Address and port to listen on (port 0: a free one). Not loopback: --token is required.
    #[arg(long, default_value = DEFAULT_LISTEN, value_name = "ADDR:PORT")]
    pub listen: SocketAddr,
    /// The store to show (written by 'latscope bench --store'); opened read-only.
    #[arg(long, value_name = "FILE")]
    pub store: Option<PathBuf>,
    /// Access token, at least 16 characters (prefer the environment variable: command lines are
    /// visible to other users).
    #[arg(long, env = "LATSCOPE_TOKEN", hide_env_values = true, value_name = "TOKEN")]
    pub token: Option<String>,
    /// No live page (the probes are never loaded).
    #[arg(long)]
    pub no_live: bool,
    /// A flight recorder's dump directory (record --ring's -w DIR, an agent [[recorder]]'s dir),
    /// listed on /dumps with each dump's views (repeatable). Only the recorders' dump files in it
    /// are read.
    #[arg(long = "dumps", value_name = "DIR")]
    pub dumps: Vec<PathBuf>,
    /// Stop a live session nobody has looked at for this long.
    #[arg(long, default_value = "30s", value_parser = duration, value_name = "DURATION")]
    pub live_idle: Duration,
    /// Connections open at once; at the cap the idlest or slowest is closed to make room (503 only
    /// when every connection is being answered).
    #[arg(long, default_value_t = 64, value_name = "N")]
    pub max_connections: usize,
}

pub fn run(a: Args) -> Result<ExitCode> {
    let mut opts = ServeOptions {
        listen: a.listen,
        store: a.store.clone(),
        token: a.token.clone().filter(|t| !t.is_empty()),
        live_enabled: !a.no_live,
        dumps: a.dumps.clone(),
        ..ServeOptions::default()
    };
    opts.limits.max_connections = a.max_connections.max(1);
    opts.live.idle = a.live_idle.max(Duration::from_secs(1));
    for d in &a.dumps {
        if !d.is_dir() {
            anyhow::bail!("--dumps {}: not a directory (a flight recorder's -w DIR)", d.display());
        }
    }
    let server = Server::bind(opts)?;
    let stop = server.stop_flag();
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("cannot install signal handlers")?;
    }
    let url = server.url();
    let mut out = std::io::stdout().lock();
    writeln!(out, "{url}")?;
    out.flush()?;
    drop(out);
    let store = a.store.as_ref().map_or("no store (--store FILE)".to_string(), |p| p.display().to_string());
    eprintln!("latscope: dashboard at {url} ({store}; Ctrl-C stops)");
    eprintln!("latscope: {}", server.notice());
    server.run()?;
    eprintln!("latscope: stopped");
    Ok(ExitCode::SUCCESS)
}
