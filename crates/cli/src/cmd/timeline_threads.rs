//! `latscope timeline --threads`: a recording -> every thread's calls over a window and who woke
//! whom (`latscope_view::threads`), as text, SVG, HTML or JSON.

use super::timeline::Args;
use crate::args::{finish_scan, refuse_terminal, shown, write_output, ScanPlan};
use anyhow::{bail, Result};
use latscope_view::spectrogram::tui::terminal_width;
use latscope_view::svg::fmt_wall;
use latscope_view::threads::{fmt_at, ThreadTimeline};
use std::process::ExitCode;

/// Most calls a thread timeline holds (the earliest of the window).
const MAX_CALLS: usize = 200_000;

pub fn run(a: &Args) -> Result<ExitCode> {
    if a.read.kind(a.block) != latscope_event::EventKind::Syscall {
        bail!("--threads shows syscalls: drop --block (and --input perf, which has block requests only)");
    }
    if a.rows == 0 {
        bail!("--rows must be at least 1");
    }
    if a.waits {
        bail!("--waits is for the load per interval: --threads draws every call, idle waits included");
    }
    let ext = a.output.as_deref().and_then(|p| p.extension()).map(|e| e.to_string_lossy().to_ascii_lowercase());
    let html = matches!(ext.as_deref(), Some("html" | "htm"));
    if !a.json.json && a.output.is_some() && !html {
        if !matches!(ext.as_deref(), Some("svg")) {
            bail!(
                "-o {}: the thread timeline is written as SVG (-o FILE.svg), HTML (-o FILE.html) or JSON (--json)",
                shown(a.output.as_deref())
            );
        }
        refuse_terminal(a.output.as_deref(), "the thread timeline", "-o FILE.svg or FILE.html (or --json)")?;
    }
    let cols: Vec<&str> = ["kind", "ts", "lat", "pid", "tid", "nr", "comm"]
        .into_iter()
        .chain(latscope_event::WHY_COLUMNS)
        .chain(["wait_start", "wait_end"])
        .chain(latscope_event::OFF_COLUMNS)
        .collect();
    let mut scan = a.read.open("timeline", ScanPlan { columns: &cols, zone: None })?;
    let header = scan.header().clone();
    let (from, to) = a.window.resolve(&header)?;
    let mut tl = ThreadTimeline::new(from.unwrap_or(0), to.unwrap_or(u64::MAX), MAX_CALLS).with_start(header.start_ns);
    scan.for_each(|c| {
        c.rows.iter().for_each(|&i| tl.add(c.batch, i as usize));
        Ok::<(), anyhow::Error>(())
    })?;
    tl.finish(a.rows);
    // A window that begins after the recording ended: said, rather than an empty picture.
    if let (0, Some(f), Some(rec)) = (tl.calls(), from, scan.report().recording_span(&header)) {
        if f >= rec.end_ns {
            bail!(
                "--from {} is {:.3} s into the recording, which ended {:.3} s into it: no call in the window",
                a.window.from.as_deref().unwrap_or(""),
                (f - header.start_ns) as f64 / 1e9,
                rec.secs()
            );
        }
    }
    let out = a.output.as_deref();
    let origin = header.start_ns;
    if a.json.json {
        write_output(out, format!("{}\n", serde_json::to_string(&tl.to_json(origin))?).as_bytes())?;
    } else if out.is_some() {
        let title = a.title.clone().unwrap_or_else(|| "Threads over time: calls and wake-ups".into());
        let (f, t) = tl.window();
        let res = ((t - f) / 1000).max(1);
        let mut sub = format!(
            "{}; {}, {} to {} into the recording",
            a.read.file.display(),
            tl.counts(),
            fmt_at(f, origin, res),
            fmt_at(t, origin, res)
        );
        if header.realtime_offset_ns != 0 {
            sub.push_str(&format!("; t=0 at {}", fmt_wall(header.wall_ns(origin))));
        }
        if !scan.filter().is_match_all() {
            sub.push_str(&format!("; filter: {}", scan.filter().source()));
        }
        let doc = if html { tl.render_html(&title, &sub, origin) } else { tl.render_svg(&title, &sub, origin) };
        write_output(out, doc.as_bytes())?;
        eprintln!("latscope: wrote {} ({} threads, {} wake-ups)", shown(out), tl.rows().len(), tl.wakes().len());
    } else {
        let width = a.width.or_else(terminal_width).unwrap_or(120).max(40);
        write_output(None, tl.render_text(width, origin).as_bytes())?;
    }
    Ok(finish_scan(&scan.report()))
}
