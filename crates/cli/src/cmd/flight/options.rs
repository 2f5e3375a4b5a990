//! The options of the flight recorder (`--ring`, its triggers and dumps) and of long captures
//! (`--rotate`), and their checks.

use anyhow::{bail, Result};
use latscope_event::units::{parse_duration_ns, parse_size};
use latscope_flight::{RingSize, RotateEvery, Trigger};
use std::path::PathBuf;

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
    /// a dump extends it instead; one firing later within the gap is dumped when the gap ends,
    /// with the window before it as far back as the ring still holds it).
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
    pub(super) fn parse_triggers(&self) -> Result<Vec<Trigger>> {
        let mut v = Vec::new();
        for (i, t) in self.triggers.iter().enumerate() {
            let t =
                Trigger::parse(t, &format!("t{}", i + 1)).map_err(|e| anyhow::anyhow!("invalid --trigger:\n{e}"))?;
            v.push(t);
        }
        Ok(v)
    }
}
