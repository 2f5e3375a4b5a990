//! `latscope info`: a trace file's header, counts, span and losses.

use crate::input::Input;
use anyhow::Result;
use latscope_event::units::{fmt_bytes, fmt_ns};
use latscope_event::{dev_major_minor, op_name, EventKind};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

/// Print a trace file's header (machine, kernel, mounts, disks, processes), event counts per
/// type, time span and losses. Corrupt blocks are reported and skipped.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  latscope info -r trace.lst
  latscope info -r trace.lst --json | jq .counts")]
pub struct Args {
    /// Trace file to read.
    #[arg(short = 'r', long = "read", value_name = "FILE")]
    pub file: PathBuf,
    /// Filter expression: count only matching events.
    #[arg(value_name = "FILTER")]
    pub filter: Option<String>,
    /// JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also list the processes and open files of the start snapshot.
    #[arg(short, long)]
    pub verbose: bool,
}

pub fn run(a: Args) -> Result<ExitCode> {
    let mut input = Input::open(&a.file, a.filter.as_deref(), None)?;
    let mut counts: BTreeMap<(u8, u16), u64> = BTreeMap::new();
    let mut kinds: BTreeMap<u8, u64> = BTreeMap::new();
    let (mut first, mut last) = (u64::MAX, 0u64);
    let mut total = 0u64;
    input.for_each(|b, rows, _| {
        for &i in rows {
            let i = i as usize;
            *counts.entry((b.kind[i], b.nr[i])).or_default() += 1;
            *kinds.entry(b.kind[i]).or_default() += 1;
            first = first.min(b.ts[i]);
            last = last.max(b.end(i));
            total += 1;
        }
        Ok(())
    })?;
    let h = input.header().clone();
    let reader = input.reader();
    let summary = reader.summary().copied();
    let stats = reader.stats();
    let warnings: Vec<String> = reader.warnings().iter().map(|w| w.to_string()).collect();
    let lost = summary.map(|s| s.lost).or_else(|| reader.last_block_meta().and_then(|m| m.lost_total)).unwrap_or(0);
    let span = if total > 0 { last - first } else { 0 };
    let file_bytes = std::fs::metadata(&a.file).map(|m| m.len()).unwrap_or(0);

    if a.json {
        let c: Vec<_> = counts
            .iter()
            .map(|((k, nr), n)| {
                serde_json::json!({"kind": EventKind::from_u8(*k).map(|k| k.name()), "type": op_name(*k, *nr), "count": n})
            })
            .collect();
        let mut hj = serde_json::to_value(&h)?;
        if !a.verbose {
            hj["processes"] = serde_json::json!(h.processes.len());
            hj["fds"] = serde_json::json!(h.fds.len());
        }
        let j = serde_json::json!({
            "file": a.file,
            "file_bytes": file_bytes,
            "header": hj,
            "events": total,
            "lost": lost,
            "first_ns": if total > 0 { Some(first) } else { None },
            "span_ns": span,
            "counts": c,
            "closed_cleanly": summary.is_some(),
            "blocks": stats.blocks,
            "warnings": warnings,
        });
        println!("{}", serde_json::to_string_pretty(&j)?);
        return Ok(input.exit_code());
    }

    println!("file:        {} ({})", a.file.display(), fmt_bytes(file_bytes));
    println!("format:      latscope trace v{}, written by latscope {}", h.format_version, h.latscope_version);
    println!("host:        {} ({} {}, {} CPUs)", h.hostname, h.kernel, h.machine, h.cpus);
    println!("recorded:    {}", h.command_line.join(" "));
    println!(
        "syscalls:    {}   block: {}   filter: {}",
        h.syscalls,
        if h.block { "yes" } else { "no" },
        h.filter.as_deref().unwrap_or("(none)")
    );
    println!("events:      {total}{}", if a.filter.is_some() { " matching the filter" } else { "" });
    println!("span:        {} ({} blocks)", fmt_ns(span), stats.blocks);
    match summary {
        Some(s) => println!(
            "lost:        {} events (ring buffer full){}",
            s.lost,
            if s.lost > 0 { "  <-- incomplete recording" } else { "" }
        ),
        None => println!("lost:        at least {lost} events; the recording was not closed cleanly (no summary)"),
    }
    for (k, n) in &kinds {
        println!("  {:8} {n}", EventKind::from_u8(*k).map(|k| k.name()).unwrap_or("?"));
    }
    let mut top: Vec<_> = counts.iter().collect();
    top.sort_by(|a, b| b.1.cmp(a.1));
    println!("by type:");
    for ((k, nr), n) in top.iter().take(if a.verbose { usize::MAX } else { 25 }) {
        let kind =
            if *k == EventKind::Syscall as u8 { "" } else { EventKind::from_u8(*k).map(|k| k.name()).unwrap_or("?") };
        println!("  {:>10}  {}{}{}", n, kind, if kind.is_empty() { "" } else { " " }, op_name(*k, *nr));
    }
    if top.len() > 25 && !a.verbose {
        println!("  ... {} more types (-v lists all)", top.len() - 25);
    }
    println!("block devices:");
    // Unattached loop devices and the like (size 0) are noise here; --json lists them all.
    for d in h.block_devices.iter().filter(|d| d.size_bytes > 0) {
        let (ma, mi) = dev_major_minor(d.dev);
        println!(
            "  {:12} {ma}:{mi}  {:>10}  {}{}",
            d.name,
            fmt_bytes(d.size_bytes),
            d.scheduler.as_deref().map(|s| format!("scheduler {s}")).unwrap_or_default(),
            if d.rotational { " rotational" } else { "" }
        );
    }
    println!("mounts:      {} (file systems: {})", h.mounts.len(), {
        let mut f: Vec<&str> = h.mounts.iter().map(|m| m.fstype.as_str()).collect();
        f.sort();
        f.dedup();
        f.join(", ")
    });
    if a.verbose {
        for m in &h.mounts {
            println!("  {} on {} type {} ({})", m.source, m.mount_point, m.fstype, m.options);
        }
        println!("processes at start: {}", h.processes.len());
        for p in &h.processes {
            println!("  {:>7} {:>7} {:<16} {}", p.pid, p.ppid, p.comm, p.cmdline);
        }
    } else {
        println!("processes:   {} at start, {} open files (-v lists them)", h.processes.len(), h.fds.len());
    }
    for w in &warnings {
        println!("warning:     {w}");
    }
    Ok(input.exit_code())
}
